import Foundation
import LifecycleControl
import LifecycleTestKit
import Testing

// Issue 13, part 3: `restart` relaunches an app that ended on its own, with
// growing delays, gives up after too many ends in a window, and keeps
// counting across a daemon restart.

@Suite struct CrashPolicyTests {
    /// A program that fails at once, every time.
    static let failing = """
        command = ["sh", "-c", "exit 3"]
        delivery = "signals"
        restart = "on-failure"

        [backoff]
        delay = 0.05
        limit = 3
        window = 60

        """

    @Test func aFailingAppIsRelaunchedThenLeftFailedUntilLaunched() throws {
        let d = try DaemonUnderTest(apps: ["flaky": Self.failing])
        let f = try d.follow(["flaky"])
        try d.command(ControlRequest(.launch, app: "flaky", background: true))
        var relaunching: [String] = []
        for _ in 0..<3 {
            #expect(try f.terminated("flaky").reason == "exited")
            relaunching.append(try f.wait("relaunching") { $0.kind == .relaunching }.detail ?? "")
        }
        #expect(relaunching.map { $0.contains("attempt") } == [true, true, true], "\(relaunching)")
        #expect(relaunching.last?.contains("attempt 3 of 3") == true, "\(relaunching)")
        let failed = try f.wait("failed") { $0.kind == .failed }
        #expect(failed.reason == "exited")
        #expect(failed.detail?.contains("ended 4 times within 1 min") == true, "\(failed.detail ?? "")")

        let status = try d.status("flaky")
        #expect(status.state == .notRunning && status.failed?.ends == 4 && status.relaunchIn == nil)
        let (code, out, _) = try d.ctl(["status", "flaky"])
        #expect(code == 6, "status APP of a failed app exits 6")
        #expect(out.contains("failed") && out.contains("down until launched"), "\(out)")
        #expect(try d.ctl(["status"]).0 == 0, "status of all apps says, and succeeds")

        // A user's launch clears it, and counting starts again.
        try d.command(ControlRequest(.launch, app: "flaky", background: true))
        _ = try f.terminated("flaky")
        #expect(try f.wait("relaunching") { $0.kind == .relaunching }.detail?.contains("attempt 1 of 3") == true)
        try d.command(ControlRequest(.stop, app: "flaky"))  // cancels the relaunch due
        #expect(try d.status("flaky").relaunchIn == nil)
        #expect(try d.status("flaky").failed == nil)
        #expect(try d.stop() == 0)
    }

    /// A crash in front comes back in front; the relaunch due is kept by a
    /// daemon that was killed before it.
    @Test func aRelaunchDueSurvivesKillNineOfTheDaemon() throws {
        let app = """
            command = ["sleep", "100000"]
            delivery = "signals"
            restart = "on-failure"

            [backoff]
            delay = 3

            """
        let d = try DaemonUnderTest(apps: ["kiosk": app])
        let f = try d.follow(["kiosk"])
        try d.command(ControlRequest(.activate, app: "kiosk"))
        try f.state("kiosk", "active")
        let first = try #require(try d.status("kiosk").pid)
        kill(first, SIGSEGV)
        #expect(try f.terminated("kiosk").reason == "signaled")
        _ = try f.wait("relaunching") { $0.kind == .relaunching }
        #expect(try d.crash(with: SIGKILL) == (true, SIGKILL))

        let d2 = try DaemonUnderTest(after: d)
        let f2 = try d2.follow(["kiosk"])
        let waiting = try d2.status("kiosk")
        #expect(waiting.state == .notRunning && waiting.relaunchIn != nil && waiting.recentEnds == 1, "\(waiting)")
        try f2.state("kiosk", "active")  // relaunched by the new daemon, in front again
        let second = try #require(try d2.status("kiosk").pid)
        #expect(second != first)
        #expect(try d2.status("kiosk").recentEnds == 1, "the count survived")
        #expect(try d2.stop() == 0)
    }

    /// A program that ends every 10 ms, relaunched forever: the daemon keeps
    /// answering, and another app's events keep flowing.
    @Test func aCrashLoopDoesNotTakeTheDaemonWithIt() throws {
        let loop = """
            command = ["true"]
            delivery = "signals"
            restart = "always"

            [backoff]
            delay = 0.01
            max_delay = 0.01
            limit = 0

            """
        let s = scratch()
        let d = try DaemonUnderTest(apps: ["loop": loop, "rec": recorder(s + "/rec", client: .swift)])
        let f = try d.follow()
        try d.command(ControlRequest(.launch, app: "loop", background: true))
        for _ in 0..<20 { _ = try f.wait("relaunching") { $0.kind == .relaunching } }
        for _ in 0..<5 {
            try d.command(ControlRequest(.activate, app: "rec"))
            try f.acknowledged("rec", "didBecomeActive")
            try d.command(ControlRequest(.home))
            try f.acknowledged("rec", "didEnterBackground")
        }
        #expect(try d.status("loop").failed == nil, "limit = 0: never gives up")
        try d.command(ControlRequest(.stop, app: "loop"))
        #expect(try d.stop() == 0)
    }
}
