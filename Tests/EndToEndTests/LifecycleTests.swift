import Foundation
@preconcurrency import Glibc
import CLifecycleShim
import LifecycleControl
import LifecycleTestKit
import LifecycleOS
import Testing

/// A fresh directory for one test's app logs (removed at the test process's exit).
func scratch() -> String { scratchDirectory("lifecycled-apps") }

let repositoryRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

/// The three client libraries, each with its recording app: the lifecycle
/// tests run against every one (`make test` builds the C library first).
enum Client: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case swift, c, python

    var testDescription: String { rawValue }

    func command(_ log: String, _ arguments: [String]) -> [String] {
        switch self {
        case .swift: ["example-recorder", "--log", log] + arguments
        case .c: [repositoryRoot + "/.build/clib/c-recorder", "--log", log] + arguments
        case .python:
            ["/usr/bin/env", "python3", repositoryRoot + "/Examples/python-recorder/recorder.py", "--log", log]
                + arguments
        }
    }
}

/// A recorder manifest writing to `log`, with optional extra lines.
func recorder(_ log: String, _ extra: String = "", client: Client = .swift, arguments: [String] = []) -> String {
    "command = [\(client.command(log, arguments).map { "\"\($0)\"" }.joined(separator: ", "))]\n\(extra)\n"
}

/// An interruption begins and ends: `app`, active, acknowledges
/// willResignActive, then didBecomeActive.
func interruptAndResume(_ d: DaemonUnderTest, _ f: Follower, _ app: String) throws {
    try d.command(ControlRequest(.interruptionBegin))
    try f.acknowledged(app, "willResignActive")
    try d.command(ControlRequest(.interruptionEnd))
    try f.acknowledged(app, "didBecomeActive")
}

/// Every event order of docs/lifecycle.md, observed by a real app through a real
/// daemon. The recorder writes each event before acknowledging it, so once
/// the daemon reports the acknowledgement, the line is in the file.
@Suite struct EventOrderEndToEndTests {
    @Test(arguments: Client.allCases) func foregroundLaunchHomeReturnAndQuit(client: Client) throws {
        let s = scratch(), log = s + "/a.events"
        let d = try DaemonUnderTest(apps: ["a": recorder(log, client: client)])
        let f = try d.follow(["a"])

        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")
        #expect(lines(log) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
        #expect(try d.status("a").state == .active)

        try d.command(ControlRequest(.home))
        try f.state("a", "suspended")
        #expect(lines(log).suffix(2) == ["willResignActive", "didEnterBackground"])

        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")
        #expect(lines(log).suffix(2) == ["willEnterForeground", "didBecomeActive"])

        try d.command(ControlRequest(.stop, app: "a"))
        #expect(try f.terminated("a").reason == "stopped-by-user")
        #expect(lines(log).suffix(3) == ["willResignActive", "didEnterBackground", "willTerminate"])
        #expect(try d.stop() == 0)
        #expect(!FileManager.default.fileExists(atPath: d.cgroupPath), "cgroup subtree left behind")
    }

    @Test(arguments: Client.allCases) func interruptionLockAndAnotherApp(client: Client) throws {
        let s = scratch(), a = s + "/a.events", b = s + "/b.events"
        let d = try DaemonUnderTest(apps: ["a": recorder(a, client: client), "b": recorder(b, client: client)])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")

        try interruptAndResume(d, f, "a")
        #expect(lines(a).suffix(2) == ["willResignActive", "didBecomeActive"])

        // Interrupted, then sent home: only didEnterBackground.
        try d.command(ControlRequest(.interruptionBegin))
        try f.acknowledged("a", "willResignActive")
        try d.command(ControlRequest(.home))
        try f.state("a", "suspended")
        try d.command(ControlRequest(.interruptionEnd))
        #expect(lines(a).suffix(2) == ["willResignActive", "didEnterBackground"])

        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")
        try d.command(ControlRequest(.lock))
        try f.state("a", "suspended")
        try d.command(ControlRequest(.unlock))
        try f.acknowledged("a", "didBecomeActive")
        #expect(
            lines(a).suffix(4) == ["willResignActive", "didEnterBackground", "willEnterForeground", "didBecomeActive"])

        // Another app takes the one foreground slot.
        try d.command(ControlRequest(.activate, app: "b"))
        try f.acknowledged("b", "didBecomeActive")
        try f.state("a", "suspended")
        #expect(lines(a).suffix(2) == ["willResignActive", "didEnterBackground"])
        #expect(lines(b) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
        #expect(try d.stop() == 0)
    }

    @Test(arguments: Client.allCases) func backgroundLaunchAndStops(client: Client) throws {
        let s = scratch(), a = s + "/a.events", b = s + "/b.events"
        let d = try DaemonUnderTest(apps: [
            "a": recorder(a, client: client), "b": recorder(b, "background_modes = [\"audio\"]", client: client),
        ])
        let f = try d.follow()
        try d.command(ControlRequest(.launch, app: "a", background: true))
        try f.state("a", "suspended")
        #expect(lines(a) == ["willFinishLaunching", "didFinishLaunching", "didEnterBackground"])

        // Stopped while suspended: no event, just the kill.
        try d.command(ControlRequest(.stop, app: "a"))
        #expect(try f.terminated("a").reason == "stopped-by-user")
        #expect(lines(a).count == 3)

        // A continuous background mode keeps b running; stopped there it gets willTerminate.
        try d.command(ControlRequest(.launch, app: "b", background: true))
        try f.acknowledged("b", "didEnterBackground")
        #expect(try d.status("b").state == .background)
        try d.command(ControlRequest(.stop, app: "b"))
        try f.terminated("b")
        #expect(lines(b) == ["willFinishLaunching", "didFinishLaunching", "didEnterBackground", "willTerminate"])
        #expect(try d.stop() == 0)
    }

    @Test(arguments: Client.allCases) func nextLaunchIsToldWhyThePreviousRunEnded(client: Client) throws {
        let s = scratch(), a = s + "/a.events"
        let d = try DaemonUnderTest(apps: ["a": recorder(a, client: client)])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")
        try d.command(ControlRequest(.kill, app: "a"))
        #expect(try f.terminated("a").reason == "killed-by-user")
        #expect(try d.status("a").lastTermination?.reason == .killedByUser)
        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")
        #expect(lines(a).contains("# previous: killed-by-user"))
        #expect(try d.stop() == 0)
    }
}

@Suite struct DeadlineEndToEndTests {
    @Test(arguments: Client.allCases) func appHangingInDidEnterBackgroundIsKilledAtItsDeadline(client: Client) throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: [
            "h": recorder(
                s + "/h", "[timeouts]\nbackground = 0.5", client: client, arguments: ["--hang", "didEnterBackground"])
        ])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "h"))
        try f.acknowledged("h", "didBecomeActive")
        try d.command(ControlRequest(.home))
        let sent = try f.wait("didEnterBackground delivered") {
            $0.kind == .delivered && $0.event == .didEnterBackground
        }
        let killed = try f.wait("the kill") { $0.kind == .killed }
        #expect(killed.reason == "background-watchdog")
        let waited = Double(killed.monotonic - sent.monotonic) / 1e9
        #expect(waited >= 0.5, "killed before its deadline (\(waited) s)")
        #expect(try f.terminated("h").reason == "background-watchdog")
        #expect(try d.status("h").state == .notRunning)
        #expect(try d.stop() == 0)
    }

    @Test func launchWatchdog() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: [
            "h":
                "command = [\"example-recorder\", \"--log\", \"\(s)/h\", \"--hang\", \"didFinishLaunching\"]\n[timeouts]\nlaunch = 0.3\n"
        ])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "h"))
        #expect(try f.terminated("h").reason == "launch-watchdog")
        #expect(try d.stop() == 0)
    }

    @Test func launchFailureIsReported() throws {
        let d = try DaemonUnderTest(apps: ["missing": "command = [\"/nonexistent/program\"]\n"])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "missing"))
        let end = try f.terminated("missing")
        #expect(end.reason == "launch-failed")
        #expect(end.detail?.contains("/nonexistent/program") == true)
        #expect(try d.stop() == 0)
    }
}

@Suite struct BackgroundTaskEndToEndTests {
    func worker(_ log: String, _ args: String, _ timeouts: String = "") -> String {
        "command = [\"example-worker\", \"--log\", \"\(log)\", \(args)]\n[timeouts]\n\(timeouts)\n"
    }

    @Test func taskKeepsTheAppRunningUntilItEnds() throws {
        let s = scratch(), log = s + "/w"
        let d = try DaemonUnderTest(apps: ["w": worker(log, "\"--work-ms\", \"600\"")])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "w"))
        try f.acknowledged("w", "didBecomeActive")
        try d.command(ControlRequest(.home))
        try f.acknowledged("w", "didEnterBackground")
        let st = try d.status("w")
        #expect(st.state == .background)
        #expect(st.backgroundTasks.map(\.name) == ["finish-work"])
        #expect((st.backgroundTimeRemaining ?? 0) > 20)
        try f.state("w", "suspended")
        #expect(lines(log).contains("task ended"))
        #expect(!lines(log).contains("task expired"))
        #expect(try d.stop() == 0)
    }

    @Test func budgetRunsOutExpirationThenKill() throws {
        let s = scratch(), log = s + "/w"
        let d = try DaemonUnderTest(apps: [
            "w": worker(
                log, "\"--work-ms\", \"60000\", \"--ignore-expiration\"",
                "background_task_budget = 1.0\nexpiration_warning = 0.5")
        ])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "w"))
        try f.acknowledged("w", "didBecomeActive")
        try d.command(ControlRequest(.home))
        let background = try f.state("w", "background")
        try f.wait("expiration") { $0.kind == .expiring }
        let killed = try f.wait("kill") { $0.kind == .killed }
        #expect(killed.reason == "background-task-expired")
        #expect(Double(killed.monotonic - background.monotonic) / 1e9 >= 1.0)
        try f.terminated("w")
        #expect(lines(log).contains("task expired"))
        #expect(try d.stop() == 0)
    }
}

@Suite struct ClientLibraryEndToEndTests {
    @Test func asyncSequenceSeesTheSameOrders() throws {
        let s = scratch(), log = s + "/a.events"
        // A continuous mode keeps it running in the background, so the stop
        // reaches it (a suspended app would be killed without notice).
        let d = try DaemonUnderTest(apps: [
            "a":
                "command = [\"example-recorder\", \"--log\", \"\(log)\", \"--async\"]\nbackground_modes = [\"audio\"]\n"
        ])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "willFinishLaunching")
        try f.acknowledged("a", "didFinishLaunching")
        try d.command(ControlRequest(.home))
        // The last event of a stay is acknowledged when the loop asks for the next.
        try f.state("a", "background")
        try d.command(ControlRequest(.stop, app: "a"))
        #expect(try f.terminated("a").reason == "stopped-by-user")
        #expect(
            lines(log) == [
                "willFinishLaunching", "didFinishLaunching", "didBecomeActive",
                "willResignActive", "didEnterBackground", "willTerminate",
            ])
        #expect(try d.stop() == 0)
    }

    @Test func outsideTheSupervisorTheAppSaysSoAndRuns() throws {
        let s = scratch(), log = s + "/standalone.events"
        let err = open(s + "/stderr", O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        var env = ProcessInfo.processInfo.environment
        env["LIFECYCLE_FD"] = nil
        let p = try Spawner.spawn(
            SpawnRequest(
                executable: binary("example-recorder"), arguments: ["--log", log],
                environment: env, workingDirectory: s, group: AppProcessGroup(),
                inherit: [(err, 2)]))
        close(err)
        try waitForLine(log, "didBecomeActive")
        kill(p.pid, SIGTERM)
        var pfd = pollfd(fd: p.pidfd, events: Int16(POLLIN), revents: 0)
        #expect(poll(&pfd, 1, 20_000) == 1)
        var st = lc_child_status()
        lc_reap(p.pid, &st)
        close(p.pidfd)
        #expect(st.exited == 1 && st.value == 0)
        #expect(
            lines(log) == [
                "willFinishLaunching", "didFinishLaunching", "didBecomeActive",
                "willResignActive", "didEnterBackground", "willTerminate",
            ])
        #expect(lines(s + "/stderr").joined().contains("not started by lifecycled"))
    }

    @Test func saverKeepsItsStateAcrossRuns() throws {
        let s = scratch(), state = s + "/count"
        let d = try DaemonUnderTest(apps: ["saver": "command = [\"example-saver\", \"--state\", \"\(state)\"]\n"])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "saver"))
        try f.acknowledged("saver", "didBecomeActive")
        try d.command(ControlRequest(.home))
        // Saved inside didEnterBackground, so written once it is acknowledged.
        try f.acknowledged("saver", "didEnterBackground")
        let saved = try #require(lines(state).first.flatMap { Int($0) })
        #expect(saved >= 1)
        try d.command(ControlRequest(.stop, app: "saver"))  // suspended: killed without notice
        try f.terminated("saver")
        #expect(lines(state).first.flatMap { Int($0) } == saved, "the saved state survives the kill")
        #expect(try d.stop() == 0)
    }

    @Test func shutdownStopsEveryAppAsTheReferenceSays() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: [
            "front": recorder(s + "/front"),
            "frozen": recorder(s + "/frozen"),
            "music": recorder(s + "/music", "background_modes = [\"audio\"]"),
        ])
        let f = try d.follow()
        try d.command(ControlRequest(.launch, app: "frozen", background: true))
        try f.state("frozen", "suspended")
        try d.command(ControlRequest(.launch, app: "music", background: true))
        try f.acknowledged("music", "didEnterBackground")
        try d.command(ControlRequest(.activate, app: "front"))
        try f.acknowledged("front", "didBecomeActive")
        #expect(try d.stop() == 0)
        #expect(lines(s + "/front").suffix(3) == ["willResignActive", "didEnterBackground", "willTerminate"])
        #expect(lines(s + "/music").last == "willTerminate")
        #expect(lines(s + "/frozen").last == "didEnterBackground", "a suspended app is killed without notice")
        #expect(try d.notify.waitFor("STOPPING=1", seconds: 5))
        #expect(!FileManager.default.fileExists(atPath: d.cgroupPath))
        #expect(d.daemonLog.contains("frozen ended: daemon shutdown"))
    }
}
