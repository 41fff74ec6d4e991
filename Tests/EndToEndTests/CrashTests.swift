import Foundation
@preconcurrency import Glibc
import LifecycleControl
import LifecycleOS
import LifecycleTestKit
import Testing

/// The daemon is the one process every app depends on: it dies properly
/// when it must, and tells the kernel which apps to sacrifice first.
@Suite struct CrashTests {
    /// The signals a crash or a watchdog sends. The Swift runtime's handler
    /// would print a backtrace and leave the daemon running (it cannot
    /// suspend the memory sentinel's C thread); the daemon's own handler
    /// ends it with the signal.
    @Test(arguments: [SIGABRT, SIGQUIT, SIGSEGV, SIGBUS])
    func aFatalSignalEndsTheDaemon(signal: Int32) throws {
        let d = try DaemonUnderTest(apps: ["a": recorder("/dev/null")])
        let f = try d.follow(["a"])
        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")

        let end = try d.crash(with: signal)
        #expect(end.signaled && end.value == signal, "died of the signal: \(end)")
        let name = [SIGABRT: "SIGABRT", SIGQUIT: "SIGQUIT", SIGSEGV: "SIGSEGV", SIGBUS: "SIGBUS"][signal]!
        #expect(d.daemonLog.contains("lifecycled: fatal signal \(name) sent by pid \(getpid())"), "\(d.daemonLog)")
    }

    @Test func eachAppsOOMScoreFollowsItsStateAndBand() throws {
        let d = try DaemonUnderTest(apps: [
            "a": recorder("/dev/null"),
            "low": recorder("/dev/null", "[memory]\nband = \"low\""),
        ])
        let f = try d.follow()
        try d.command(ControlRequest(.launch, app: "low", background: true))
        try f.state("low", "suspended")
        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")
        #expect(try score(d, "a") == 150)
        #expect(try score(d, "low") == 900)

        try d.command(ControlRequest(.home))
        try f.state("a", "suspended")
        #expect(try score(d, "a") == 850)
        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")
        #expect(try score(d, "a") == 150, "lowered again when it comes back")
        #expect(try d.stop() == 0)
    }

    func score(_ d: DaemonUnderTest, _ app: String) throws -> Int? {
        let pid = try #require(try d.status(app).pid)
        let text = try String(contentsOfFile: "/proc/\(pid)/oom_score_adj", encoding: .utf8)
        return Int(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
