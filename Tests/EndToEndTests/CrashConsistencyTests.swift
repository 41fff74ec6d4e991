import Foundation
@preconcurrency import Glibc
import CLifecycleShim
import LifecycleControl
import LifecycleOS
import LifecycleTestKit
import Testing

/// What the daemon told an app or a client survives a kill -9 a
/// microsecond later (docs/architecture.md, "Nothing leaves before it is
/// durable"), and a stalled daemon judges deadlines on what the app did.
/// Each test here failed before its fix (issue 27).
@Suite struct CrashConsistencyTests {
    /// A kill -9 between a spawn and the save after it leaves the unsaved
    /// run's group (`x.2`); the next daemon clears it, and a launch it then
    /// makes must not land in that group or be killed by its cleanup.
    @Test func aLaunchAfterACrashIsNeverKilledByTheCleanupOfAnUnsavedRun() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: ["x": recorder(s + "/x")])
        let f = try d.follow(["x"])
        try d.command(ControlRequest(.launch, app: "x", background: true))
        try f.state("x", "background")
        let first = try #require(try d.status("x").pid)
        #expect(try d.crash(with: SIGKILL) == (true, SIGKILL))
        // What the crash left: the saved run gone (a restart had ended it),
        // the next generation's group made and still busy (a child group
        // keeps rmdir failing, so the cleanup retries, as it does while a
        // killed process is still exiting).
        try killAndWait(first)
        let leftover = d.cgroupPath + "/apps/x.2"
        #expect(mkdir(leftover, 0o755) == 0)
        #expect(mkdir(leftover + "/busy", 0o755) == 0)

        let d2 = try DaemonUnderTest(after: d)
        let f2 = try d2.follow(["x"])
        try d2.command(ControlRequest(.launch, app: "x", background: true))
        try f2.state("x", "background")
        let second = try #require(try d2.status("x").pid)
        #expect(rmdir(leftover + "/busy") == 0)
        try waitUntil("the leftover group is removed") { access(leftover, F_OK) != 0 }
        // The retry that removed it had every chance to kill by path.
        try d2.command(ControlRequest(.activate, app: "x"))
        try f2.acknowledged("x", "didBecomeActive")
        #expect(try d2.status("x").pid == second, "the new run lives on")
        #expect(kill(second, 0) == 0)
        #expect(!f2.seen.contains { $0.kind == .terminated }, "\(f2.seen.map(\.kind))")
        #expect(try d2.stop() == 0)
    }

    /// The transition an app was told of is the one the next daemon
    /// carries on from, however soon after the telling the daemon dies:
    /// killed the instant a follower sees `willResignActive` sent, or the
    /// instant `home` is answered.
    @Test func whatAnAppWasToldSurvivesAKillNineTheInstantAfter() throws {
        let s = scratch(), log = s + "/a"
        var d = try DaemonUnderTest(apps: ["a": recorder(log)])
        var f = try d.follow(["a"])
        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")
        for round in 0..<8 {
            if round % 2 == 0 {
                try d.command(ControlRequest(.home))
                kill(d.pid, SIGKILL)
            } else {
                let c = try d.client()
                try c.write(ControlRequest(.home))
                _ = try f.wait("willResignActive sent") { $0.kind == .delivered && $0.event == .willResignActive }
                kill(d.pid, SIGKILL)
                _ = c
            }
            _ = try d.crash(with: SIGKILL)
            let told = lines(log).filter { !$0.hasPrefix("#") }
            let d2 = try DaemonUnderTest(after: d)
            let state = try d2.status("a").state
            if told.last == "willResignActive" || told.last == "didEnterBackground" {
                #expect(state != .active, "round \(round): told \(told.last!), carried on as \(state)")
            }
            d = d2
            f = try d.follow(["a"])
            try d.command(ControlRequest(.activate, app: "a"))
            if try d.status("a").state != .active { try f.acknowledged("a", "didBecomeActive") }
            #expect(legalOrder(lines(log)) == nil, "round \(round): \(legalOrder(lines(log)) ?? "")")
        }
        #expect(try d.stop() == 0)
    }

    /// SIGSTOP the daemon just after it sent `willResignActive`, longer
    /// than the event's deadline: the app answered within microseconds,
    /// so at SIGCONT the answer is read before the deadline is judged.
    @Test func aStalledDaemonJudgesTheDeadlineOnWhatTheAppDid() throws {
        let s = scratch(), log = s + "/a"
        let d = try DaemonUnderTest(apps: ["a": recorder(log, "[timeouts]\nevent = 1")])
        let f = try d.follow(["a"])
        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")
        // The app held still until the daemon is stopped, so that its
        // answer arrives during the stall, never before it.
        let app = try #require(try d.status("a").pid)
        kill(app, SIGSTOP)
        let c = try d.client()
        try c.write(ControlRequest(.home))
        _ = try f.wait("willResignActive sent") { $0.kind == .delivered && $0.event == .willResignActive }
        kill(d.pid, SIGSTOP)
        kill(app, SIGCONT)
        try waitForLine(log, "willResignActive")
        // The stall itself, longer than the 1 s deadline (not a wait for anything).
        usleep(1_500_000)
        kill(d.pid, SIGCONT)
        try f.acknowledged("a", "willResignActive")
        try f.state("a", "background")
        #expect(!f.seen.contains { $0.kind == .terminated || $0.kind == .killed }, "\(f.seen.map(\.kind))")
        _ = c
        #expect(try d.stop() == 0)
    }
}

extension CrashConsistencyTests {
    /// What waits for a save gets one: a daemon whose first turn nothing
    /// else saves (the memory monitor off, a fresh start that took the
    /// durable history) answers at once. (Found in the virtual machine:
    /// every answer waited for ever.)
    @Test func answersNeverWaitForASaveThatDoesNotCome() throws {
        let d = try DaemonUnderTest(
            apps: ["a": "command = [\"sleep\", \"1000\"]\ndelivery = \"signals\"\n"],
            daemon: "[memory]\nmonitor = false")
        let c = try d.client()
        c.setReadTimeout(seconds: 10)
        #expect(try c.send(ControlRequest(.status)).ok)
        let f = try d.follow(["a"])
        #expect(try c.send(ControlRequest(.launch, app: "a", background: true)).ok)
        try f.state("a", "background")
        #expect(try d.stop() == 0)
    }
}

/// SIGKILLs a process not ours and waits until it is gone.
func killAndWait(_ pid: Int32) throws {
    let fd = lc_pidfd_open(pid)
    guard fd >= 0 else { return }
    defer { close(fd) }
    kill(pid, SIGKILL)
    var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    guard poll(&p, 1, 10_000) == 1 else { throw TestFailure("pid \(pid) did not end") }
}

/// Waits for a condition the kernel offers no event for (a cgroup's
/// removal), looking every 10 ms for at most `seconds`.
func waitUntil(_ what: String, seconds: Double = 20, _ condition: () throws -> Bool) throws {
    let deadline = Date().addingTimeInterval(seconds)
    while try !condition() {
        guard Date() < deadline else { throw TestFailure("never: \(what)") }
        usleep(10_000)
    }
}

/// Nil when a recorder's log is a legal sequence of runs (docs/lifecycle.md):
/// each run opens with willFinishLaunching, and no callback comes twice
/// where the lifecycle allows it once. Else what broke, and where.
func legalOrder(_ log: [String]) -> String? {
    enum Stage { case none, launching, launched, active, inactive, background, terminating }
    var stage = Stage.none
    for (n, line) in log.enumerated() where !line.hasPrefix("#") {
        let event = line.split(separator: " ").first.map(String.init) ?? line
        let allowed: [Stage]
        let next: Stage
        switch event {
        case "willFinishLaunching": (allowed, next) = ([], .launching)
        case "didFinishLaunching": (allowed, next) = ([.launching], .launched)
        case "didBecomeActive": (allowed, next) = ([.launched, .inactive], .active)
        case "willResignActive": (allowed, next) = ([.active], .inactive)
        case "didEnterBackground": (allowed, next) = ([.launched, .inactive], .background)
        case "willEnterForeground": (allowed, next) = ([.background], .inactive)
        case "willTerminate":
            (allowed, next) = ([.launching, .launched, .active, .inactive, .background], .terminating)
        default: continue  // wake-ups, scenes: not part of this order
        }
        // A new run may begin after any stage: its predecessor can die unannounced.
        if event == "willFinishLaunching" {
            stage = next
            continue
        }
        guard allowed.contains(stage) else { return "line \(n + 1): \(event) after \(stage) in \(log)" }
        stage = next
    }
    return nil
}
