import Foundation
@preconcurrency import Glibc
import LifecycleControl
import LifecycleOS
import LifecycleTestKit
import Testing

/// Prewarming (docs/lifecycle.md, "Prewarming"): real apps started ahead of
/// use, held frozen at their first event, launched by a use.
@Suite struct PrewarmTests {
    /// A daemon that prewarms nothing until the test follows it, then is
    /// given a budget by a reload (so that the prewarms come after the
    /// follower: every wait is on a record).
    func daemon(_ apps: [String: String], budget: String = "256M") throws -> (DaemonUnderTest, Follower) {
        let d = try DaemonUnderTest(apps: apps, daemon: "prewarm_budget = \"off\"")
        let f = try d.follow()
        let file = try String(contentsOfFile: d.path("lifecycled.toml"), encoding: .utf8)
        try file.replacingOccurrences(of: "prewarm_budget = \"off\"", with: "prewarm_budget = \"\(budget)\"")
            .write(toFile: d.path("lifecycled.toml"), atomically: true, encoding: .utf8)
        let (code, _, err) = try d.ctl(["reload"])
        #expect(code == 0, "\(err)")
        return (d, f)
    }

    /// The app's current cgroup (its only one).
    func group(_ d: DaemonUnderTest, _ app: String) throws -> String {
        let apps = d.cgroupPath + "/apps"
        let name = try FileManager.default.contentsOfDirectory(atPath: apps).first { $0.hasPrefix(app + ".") }
        return apps + "/" + (try #require(name))
    }

    /// Waits until the app is prewarmed and its freeze confirmed.
    func held(_ f: Follower, _ app: String) throws {
        try f.state(app, "prewarmed")
        try f.wait("\(app) frozen") { $0.app == app && $0.kind == .frozen }
    }

    @Test(arguments: [Client.swift, .c])
    func aPrewarmedAppIsHeldFrozenAndAnActivationOnlyDeliversTheLaunchEvents(client: Client) throws {
        let s = scratch()
        let (d, f) = try daemon(["a": recorder(s + "/a", "prewarm = \"always\"", client: client)])
        let launched = try f.wait("the prewarm") { $0.app == "a" && $0.kind == .launched }
        #expect(launched.detail?.hasPrefix("prewarm ") == true, "\(launched.detail ?? "")")
        try held(f, "a")
        let before = try d.status("a")
        #expect(before.state == .prewarmed && before.frozen == true)
        #expect(try Posix.readFile(try group(d, "a") + "/cgroup.freeze").hasPrefix("1"))
        #expect(lines(s + "/a").isEmpty, "told nothing yet")

        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")
        #expect(try d.status("a").pid == before.pid, "the same process, taken over")
        #expect(f.seen.filter { $0.app == "a" && $0.kind == .launched }.count == 1, "no second launch")
        #expect(lines(s + "/a").prefix(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
        #expect(try d.stop() == 0)
    }

    /// The held process outlives a kill -9 of the daemon: the next one
    /// finds it frozen, still prewarmed, and its activation goes through
    /// the resumed channel.
    @Test func aPrewarmedAppOutlivesADaemonKill() throws {
        let s = scratch()
        let (d, f) = try daemon(["a": recorder(s + "/a", "prewarm = \"always\"")])
        try held(f, "a")
        let pid = try d.status("a").pid
        _ = try d.crash(with: SIGKILL)
        let d2 = try DaemonUnderTest(after: d)
        let st = try d2.status("a")
        #expect(st.state == .prewarmed && st.pid == pid && st.frozen == true)
        let f2 = try d2.follow()
        try d2.command(ControlRequest(.activate, app: "a"))
        try f2.acknowledged("a", "didBecomeActive")
        #expect(try d2.status("a").pid == pid)
        #expect(lines(s + "/a").prefix(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
        #expect(try d2.stop() == 0)
    }

    /// A held prewarm's launch events go together: all three are out
    /// before the app answers the first. A kill -9 of the daemon with the
    /// three unanswered (the app stopped until then): the next daemon takes
    /// back the answers the app's resume names and sends the rest again;
    /// each event is handled once.
    @Test(arguments: [Client.swift, .c])
    func theLaunchEventsGoTogetherAndSurviveADaemonKillUnanswered(client: Client) throws {
        let s = scratch()
        let (d, f) = try daemon(["a": recorder(s + "/a", "prewarm = \"always\"", client: client)])
        try held(f, "a")
        let pid = try #require(try d.status("a").pid)
        kill(pid, SIGSTOP)  // frozen: it stops as the activation thaws it, before it reads
        defer { kill(pid, SIGCONT) }  // never left stopped, should the test end early
        try d.command(ControlRequest(.activate, app: "a"))
        for event in ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"] {
            try f.wait("\(event) sent") { $0.app == "a" && $0.kind == .delivered && $0.event?.rawValue == event }
        }
        #expect(!f.seen.contains { $0.app == "a" && $0.kind == .acknowledged }, "nothing answered: all three went out")
        #expect(try d.crash(with: SIGKILL) == (true, SIGKILL))
        let d2 = try DaemonUnderTest(after: d)
        let f2 = try d2.follow()
        kill(pid, SIGCONT)
        let resumed = try f2.wait("a resumed") { $0.app == "a" && $0.kind == .resumed }
        // The answers its resume names (the last event it handled from its
        // old socket) are taken as given, in the same turn; the rest are
        // sent again, and answered. How many it read before it found the
        // break is the kernel's and the library's (the Swift library reads
        // what the old socket holds first; the C one's prewarm wait may meet
        // the reset first).
        let named = try #require(resumed.sequence)
        #expect(named <= 3, "\(resumed)")
        if named < 3 { try f2.acknowledged("a", "didBecomeActive") }
        let st = try d2.status("a")
        #expect(st.pid == pid && st.state == .active, "\(st)")
        #expect(lines(s + "/a") == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"], "each once")
        #expect(!f2.seen.contains { $0.app == "a" && $0.kind == .terminated }, "\(f2.seen)")
        #expect(try d2.stop() == 0)
    }

    /// daemon-reexec carries a held prewarm across (its channel handed over).
    @Test func aPrewarmedAppIsCarriedAcrossADaemonReexec() throws {
        let s = scratch()
        let (d, f) = try daemon(["a": recorder(s + "/a", "prewarm = \"always\"", client: .c)])
        try held(f, "a")
        let pid = try d.status("a").pid
        let (code, _, err) = try d.ctl(["daemon-reexec"])
        #expect(code == 0, "\(err)")
        let st = try d.status("a")
        #expect(st.state == .prewarmed && st.pid == pid && st.frozen == true)
        let f2 = try d.follow()
        try d.command(ControlRequest(.activate, app: "a"))
        try f2.acknowledged("a", "didBecomeActive")
        #expect(lines(s + "/a").prefix(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
        #expect(try d.stop() == 0)
    }

    /// The budget counts a prewarm never measured at 32 MiB, and one held
    /// at what it holds (measured once frozen): with room for one guess,
    /// the second app waits until the first is measured, then both fit.
    /// (Run in the pure cgroup v2 machine too: Tests/vm/run.sh.)
    @Test func aHeldPrewarmCostsWhatItHolds() throws {
        let s = scratch()
        let (d, f) = try daemon(
            [
                "a": recorder(s + "/a", "prewarm = \"always\"", client: .c),
                "b": recorder(s + "/b", "prewarm = \"always\"", client: .c),
            ], budget: "40M")
        let first = try f.wait("a prewarm") { $0.kind == .launched }
        #expect(first.app == "a", "by name, the first to fit")
        try held(f, "a")
        let footprint = try #require(try d.status("a").footprint, "measured once frozen")
        #expect(footprint < 8 << 20, "a C recorder holds little: \(footprint)")
        try held(f, "b")  // two guesses (64 MiB) would not fit in 40
        // a used and ended: prewarmed again beside b, at what it held.
        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")
        try d.command(ControlRequest(.kill, app: "a"))
        try f.terminated("a")
        try held(f, "a")
        #expect(try d.stop() == 0)
    }

    /// supervisorctl's stop of an `always` app returns once its running
    /// process ended, though a new one is prewarmed at once (it waited for
    /// "not running", which an `always` app may never show, and timed out).
    @Test func aStopOfAnAlwaysAppReturnsThoughItIsPrewarmedAgain() throws {
        let s = scratch()
        let (d, f) = try daemon(["a": recorder(s + "/a", "prewarm = \"always\"", client: .c)])
        try held(f, "a")
        for _ in 0..<2 {
            let (activated, _, err) = try d.ctl(["activate", "a"])
            #expect(activated == 0, "\(err)")
            let pid = try d.status("a").pid
            let (code, _, why) = try d.ctl(["stop", "a", "--timeout", "30"])
            #expect(code == 0, "\(why)")
            let after = try d.status("a")
            #expect(after.pid != pid, "the process it found has ended")
            #expect(after.state == .notRunning || after.state == .prewarmed)
            try held(f, "a")
        }
        #expect(try d.stop() == 0)
    }

    /// A library app whose client does not prewarm never says it is at
    /// its first event: given up at its launch timeout, and not tried again.
    @Test func anAppThatNeverSaysItIsHeldIsGivenUp() throws {
        let (d, f) = try daemon([
            "old": "command = [\"sleep\", \"1000\"]\nprewarm = \"always\"\n[timeouts]\nlaunch = 0.5\n"
        ])
        let end = try f.terminated("old")
        #expect(end.reason == "prewarm-dropped")
        #expect(end.detail?.contains("not at its first event") == true, "\(end.detail ?? "")")
        #expect(try d.status("old").state == .notRunning, "not tried again")
        let said = try d.status("old").prewarm ?? ""
        #expect(said.hasPrefix("refused: it was not at its first event"), "\(said)")
        let (_, table, _) = try d.ctl(["status", "old"])
        #expect(table.contains("prewarm refused: it was not at its first event"), "\(table)")
        // A use launches it as any app (and its launch timeout ends it: it is no app).
        #expect(try d.command(ControlRequest(.launch, app: "old", background: true)).ok)
        #expect(try d.stop() == 0)
    }

    /// A plain program that says it can be prewarmed is held at READY=1.
    @Test func aPlainProgramIsHeldAtReady() throws {
        let script = "systemd-notify --ready; while true; do sleep 100 & wait $!; done"
        let (d, f) = try daemon(["p": "prewarm = \"always\"\n" + notifying(["/bin/sh", "-c", script], launch: 20)])
        try held(f, "p")
        let pid = try d.status("p").pid
        try d.command(ControlRequest(.activate, app: "p"))
        try f.state("p", "active")
        #expect(try d.status("p").pid == pid)
        #expect(try d.stop() == 0)
    }

    /// Memory short: the prewarmed process goes first, the suspended app
    /// stays; back to normal, it is prewarmed again.
    @Test func memoryShortDropsThePrewarmFirst() throws {
        let s = scratch()
        let (d, f) = try daemon(["a": recorder(s + "/a", "prewarm = \"always\""), "s": recorder(s + "/s")])
        try held(f, "a")
        try d.command(ControlRequest(.launch, app: "s", background: true))
        try f.state("s", "suspended")
        try d.command(ControlRequest(.pressure, level: "warning"))
        let end = try f.terminated("a")
        #expect(end.reason == "prewarm-dropped" && end.detail?.contains("warning") == true, "\(end.detail ?? "")")
        #expect(try d.status("s").state == .suspended)
        try d.command(ControlRequest(.pressure, level: "normal"))
        try held(f, "a")
        #expect(try d.stop() == 0)
    }
}
