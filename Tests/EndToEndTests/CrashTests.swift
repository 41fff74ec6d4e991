import Foundation
@preconcurrency import Glibc
import CLifecycleShim
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

/// kill -9 of the daemon, then a new one on the same config: every app is
/// taken back with the same pid, in its state, and carries on as
/// docs/lifecycle.md says, with no second copy and no orphan.
@Suite struct ReadoptionTests {
    @Test(arguments: Client.allCases)
    func appsInEveryStateAreTakenBackAndCarryOn(client: Client) throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: [
            "front": recorder(s + "/front", client: client),
            "frozen": recorder(s + "/frozen", client: client),
            "worker": "command = [\"example-worker\", \"--log\", \"\(s)/worker\", \"--work-ms\", \"60000\"]\n",
            "plain": "command = [\"sleep\", \"1000\"]\ndelivery = \"signals\"\n",
        ])
        let f = try d.follow()
        try d.command(ControlRequest(.launch, app: "frozen", background: true))
        try f.state("frozen", "suspended")
        try d.command(ControlRequest(.activate, app: "worker"))
        try f.acknowledged("worker", "didBecomeActive")
        try d.command(ControlRequest(.launch, app: "plain", background: true))
        try d.command(ControlRequest(.activate, app: "front"))
        try f.acknowledged("front", "didBecomeActive")
        try f.acknowledged("worker", "didEnterBackground")
        let before = try ["front", "frozen", "worker", "plain"].map { try d.status($0) }
        #expect(before.map(\.state) == [.active, .suspended, .background, .background])
        #expect(before[2].backgroundTasks.map(\.name) == ["finish-work"])

        #expect(try d.crash(with: SIGKILL) == (true, SIGKILL))
        let d2 = try DaemonUnderTest(after: d)
        let after = try ["front", "frozen", "worker", "plain"].map { try d2.status($0) }
        #expect(after.map(\.state) == before.map(\.state), "every app in its state")
        #expect(after.map(\.pid) == before.map(\.pid), "the same processes")
        #expect(after[2].backgroundTasks.map(\.id) == before[2].backgroundTasks.map(\.id), "the task, with its budget")
        #expect(
            abs((after[2].backgroundTimeRemaining ?? 0) - (before[2].backgroundTimeRemaining ?? 0)) < 10,
            "the budget's end was kept, not restarted")

        // They carry on: the suspended app comes to the front (thawed, it
        // finds its channel broken and resumes it), the front app leaves.
        let f2 = try d2.follow()
        try d2.command(ControlRequest(.activate, app: "frozen"))
        try f2.acknowledged("frozen", "didBecomeActive")
        try f2.acknowledged("front", "didEnterBackground")
        try f2.state("front", "suspended")
        #expect(
            lines(s + "/front") == [
                "willFinishLaunching", "didFinishLaunching", "didBecomeActive",
                "willResignActive", "didEnterBackground",
            ], "each event once")
        #expect(
            lines(s + "/frozen") == [
                "willFinishLaunching", "didFinishLaunching", "didEnterBackground",
                "willEnterForeground", "didBecomeActive",
            ])
        #expect(try d2.status("frozen").pid == before[1].pid, "no second copy")
        #expect(!d2.daemonLog.contains("File exists"))
        #expect(try d2.stop() == 0)
    }

    /// The waits in progress at the crash end as they would have: under an
    /// interruption the app stays inactive until it ends; a plain program
    /// that never says READY=1 meets its launch watchdog; an app that hangs
    /// in willTerminate meets its terminate deadline.
    @Test func waitsInProgressAtTheCrashEndAsTheyWouldHave() throws {
        let s = scratch()
        let d = try DaemonUnderTest(
            apps: [
                "interrupted": recorder(s + "/i"),
                "silent": "command = [\"sleep\", \"1000\"]\ndelivery = \"signals\"\nreadiness = \"notify\"\n"
                    + "[timeouts]\nlaunch = 2\n",
                "stopping": recorder(s + "/s", "[timeouts]\nterminate = 2", arguments: ["--hang", "willTerminate"]),
            ], daemon: "foreground_slots = 2")
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "interrupted"))
        try f.acknowledged("interrupted", "didBecomeActive")
        try d.command(ControlRequest(.activate, app: "stopping"))
        try f.acknowledged("stopping", "didBecomeActive")
        try d.command(ControlRequest(.stop, app: "stopping"))
        try f.wait("willTerminate sent") {
            $0.app == "stopping" && $0.kind == .delivered && $0.event == .willTerminate
        }
        try d.command(ControlRequest(.interruptionBegin))
        try f.acknowledged("interrupted", "willResignActive")
        try d.command(ControlRequest(.launch, app: "silent", background: true))
        try f.wait("silent launched") { $0.app == "silent" && $0.kind == .launched }

        #expect(try d.crash(with: SIGKILL) == (true, SIGKILL))
        let d2 = try DaemonUnderTest(after: d)
        let f2 = try d2.follow()
        #expect(try d2.status("interrupted").state == .inactive)
        let ends = try [f2.terminated("silent"), f2.terminated("stopping")]
        #expect(ends.map(\.reason) == ["launch-watchdog", "stopped-by-user"])
        #expect(ends[1].detail?.contains("killed after the terminate deadline") == true)
        try d2.command(ControlRequest(.interruptionEnd))
        try f2.acknowledged("interrupted", "didBecomeActive")
        #expect(lines(s + "/i").filter { $0 == "didBecomeActive" }.count == 2)
        #expect(try d2.stop() == 0)
    }

    /// An adopted app is not the daemon's child: its end comes through its
    /// pidfd. Killed while the daemon is stopped, after an event was sent
    /// and before its deadline, then found with that deadline passed and a
    /// command waiting: its end is read first, so it ended by SIGKILL, not
    /// by the event watchdog (chaos seed 364856 found this).
    @Test func anAdoptedAppKilledDuringAStallEndsByItsSignalNotItsDeadline() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: [
            "a": recorder(s + "/a", "[timeouts]\nevent = 1", arguments: ["--hang", "willEnterForeground"]),
            "b": recorder("/dev/null"),
        ])
        let f = try d.follow()
        try d.command(ControlRequest(.launch, app: "a", background: true))
        try f.state("a", "suspended")
        #expect(try d.crash(with: SIGKILL) == (true, SIGKILL))
        let d2 = try DaemonUnderTest(after: d)
        let f2 = try d2.follow()
        let pid = try #require(try d2.status("a").pid)
        let pidfd = try #require(Processes.pidfd(pid))
        defer { Posix.close(pidfd) }
        try d2.command(ControlRequest(.activate, app: "a"))
        try f2.wait("willEnterForeground sent") {
            $0.app == "a" && $0.kind == .delivered && $0.event == .willEnterForeground
        }
        kill(d2.pid, SIGSTOP)
        let c = try d2.client()
        try c.write(ControlRequest(.launch, app: "b", background: true))
        kill(pid, SIGKILL)
        var p = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        #expect(poll(&p, 1, 10_000) == 1, "a ended")
        usleep(1_200_000)  // the stall itself, past a's 1 s deadline
        kill(d2.pid, SIGCONT)
        _ = try c.readResponse()
        let end = try f2.terminated("a")
        #expect(end.reason == "signaled", "\(end)")
        #expect(try d2.stop() == 0)
    }

    /// An event owed to an app when the daemon died, with the daemon away
    /// longer than the event's timeout: the app could not answer a daemon
    /// that was not there, nor before its library's next try to resume
    /// (at most a second away), so the new daemon does not end it at its
    /// start: it has its whole time from then. The app is stopped while
    /// the event is sent, so that it reads it only once the new daemon runs
    /// (chaos seeds 454908 and 558818 found this under load: two crashes in
    /// a row, and a resume try still a second off).
    @Test func anEventOwedAcrossACrashIsJudgedFromTheNewDaemonsStart() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: ["a": recorder(s + "/a", "[timeouts]\nevent = 1")])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")
        let pid = try #require(try d.status("a").pid)
        kill(pid, SIGSTOP)
        try d.command(ControlRequest(.interruptionBegin))  // answered after its save: willResignActive is out
        #expect(try d.crash(with: SIGKILL) == (true, SIGKILL))
        usleep(1_500_000)  // no daemon, past a's 1 s deadline
        let d2 = try DaemonUnderTest(after: d)
        let f2 = try d2.follow()
        kill(pid, SIGCONT)
        try f2.wait("a resumed") { $0.app == "a" && $0.kind == .resumed }
        try d2.command(ControlRequest(.interruptionEnd))
        try f2.acknowledged("a", "didBecomeActive")
        let st = try d2.status("a")
        #expect(st.pid == pid && st.state == .active, "\(st)")
        #expect(!f2.seen.contains { $0.app == "a" && $0.kind == .terminated }, "\(f2.seen)")
        #expect(lines(s + "/a").suffix(2) == ["willResignActive", "didBecomeActive"])
        #expect(try d2.stop() == 0)
    }

    /// A client from before the resume extension ignores the resume socket:
    /// its app ends with the daemon, and the next daemon records that.
    @Test func anOldClientEndsWithTheDaemonAndIsRecorded() throws {
        let old = repositoryRoot + "/Tests/rogue/old-client.py"
        let d = try DaemonUnderTest(apps: ["old": "command = [\"/usr/bin/env\", \"python3\", \"\(old)\"]\n"])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "old"))
        try f.acknowledged("old", "didBecomeActive")
        let pid = try #require(try d.status("old").pid)
        // Opened before the crash: once it ends, its new parent may reap it
        // before a pidfd could be opened.
        let pidfd = lc_pidfd_open(pid)
        try #require(pidfd >= 0)
        #expect(try d.crash(with: SIGKILL) == (true, SIGKILL))
        // It ends on its own when its channel does (the bound is the failure).
        var p = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        #expect(poll(&p, 1, 10_000) == 1, "the old client exited")
        close(pidfd)
        let d2 = try DaemonUnderTest(after: d)
        let st = try d2.status("old")
        #expect(st.state == .notRunning)
        #expect(st.lastTermination?.reason == .exitUnknown)
        #expect(try d2.stop() == 0)
    }

    /// A daemon with app "a" (a recorder) active, then killed with SIGKILL.
    private func activeAppThenCrash() throws -> (DaemonUnderTest, Int32) {
        let d = try DaemonUnderTest(apps: ["a": recorder("/dev/null")])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")
        let pid = try #require(try d.status("a").pid)
        #expect(try d.crash(with: SIGKILL) == (true, SIGKILL))
        return (d, pid)
    }

    /// The same process (pid and start time) found outside its cgroup, where
    /// the new daemon could neither freeze nor account it: killed, never
    /// left running unseen, and the reason kept for its next launch.
    @Test func anAppFoundOutsideItsGroupIsKilledAndRecorded() throws {
        let (d, pid) = try activeAppThenCrash()
        let elsewhere = d.cgroupPath + "/elsewhere"
        mkdir(elsewhere, 0o755)
        defer { rmdir(elsewhere) }
        try Posix.writeFile(elsewhere + "/cgroup.procs", "\(pid)")
        let pidfd = lc_pidfd_open(pid)
        defer { close(pidfd) }
        let d2 = try DaemonUnderTest(after: d)
        var p = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        #expect(poll(&p, 1, 10_000) == 1, "the orphan was killed")
        let st = try d2.status("a")
        #expect(st.state == .notRunning)
        #expect(st.lastTermination?.reason == .notAdopted)
        #expect(st.lastTermination?.description.contains("not in its group") == true)
        #expect(try d2.stop() == 0)
    }

    /// A crash between a freeze and the save after it: the app is found
    /// frozen though the state says it runs. It is thawed, so that it can
    /// resume its channel and answer, instead of dying of a watchdog.
    @Test func aGroupFrozenAfterTheLastSaveIsThawed() throws {
        let (d, _) = try activeAppThenCrash()
        let apps = d.cgroupPath + "/apps"
        let name = try FileManager.default.contentsOfDirectory(atPath: apps).first { $0.hasPrefix("a.") }
        let group = apps + "/" + (try #require(name))
        try Posix.writeFile(group + "/cgroup.freeze", "1")
        let d2 = try DaemonUnderTest(after: d)
        #expect(try Posix.readFile(group + "/cgroup.freeze").hasPrefix("0"))
        #expect(try d2.status("a").state == .active)
        let f = try d2.follow()
        try d2.command(ControlRequest(.home))
        try f.acknowledged("a", "didEnterBackground")
        #expect(try d2.stop() == 0)
    }

    @Test func anAppThatEndedWhileNoDaemonRanIsRecordedSo() throws {
        let (d, pid) = try activeAppThenCrash()
        kill(pid, SIGKILL)
        let pidfd = lc_pidfd_open(pid)
        if pidfd >= 0 {
            var p = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
            poll(&p, 1, 10_000)
            close(pidfd)
        }
        let d2 = try DaemonUnderTest(after: d)
        let st = try d2.status("a")
        #expect(st.state == .notRunning)
        #expect(st.lastTermination?.reason == .exitUnknown)
        // And it launches again, in a fresh cgroup beside nothing left over.
        let f2 = try d2.follow()
        try d2.command(ControlRequest(.activate, app: "a"))
        try f2.acknowledged("a", "didBecomeActive")
        #expect(try d2.stop() == 0)
    }
}

/// supervisorctl daemon-reexec: the binary at the daemon's path replaces the
/// running one in the same process; every app keeps its channel (nothing
/// resumes), an event in flight completes in the new image.
@Suite struct DaemonReexecTests {
    @Test func everyAppCarriesOnAcrossTheExecWithAnEventInFlight() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: [
            "front": recorder(s + "/front"),
            "frozen": recorder(s + "/frozen", client: .c),
            "plain": "command = [\"sleep\", \"1000\"]\ndelivery = \"signals\"\n",
        ])
        let f = try d.follow()
        try d.command(ControlRequest(.launch, app: "frozen", background: true))
        try f.state("frozen", "suspended")
        try d.command(ControlRequest(.launch, app: "plain", background: true))
        try d.command(ControlRequest(.activate, app: "front"))
        try f.acknowledged("front", "didBecomeActive")
        let before = try ["front", "frozen", "plain"].map { try d.status($0).pid }

        // The activation's events are in flight while the daemon execs.
        let c = try d.client()
        #expect(try c.send(ControlRequest(.activate, app: "frozen")).ok)
        let (code, out, err) = try d.ctl(["daemon-reexec"])
        #expect(code == 0, "\(err)")
        #expect(out.contains("lifecycled re-executed (pid \(d.pid), reexec)"), "\(out)")

        let f2 = try d.follow()
        if try d.status("frozen").state != .active { try f2.state("frozen", "active") }
        if try d.status("front").state != .suspended { try f2.state("front", "suspended") }
        #expect(try ["front", "frozen", "plain"].map { try d.status($0).pid } == before, "the same processes")
        let report = try #require(try d.command(ControlRequest(.status)).status)
        #expect(report.daemon.pid == d.pid && report.daemon.start == "reexec")
        #expect(lines(s + "/frozen").suffix(2) == ["willEnterForeground", "didBecomeActive"])
        #expect(
            lines(s + "/front") == [
                "willFinishLaunching", "didFinishLaunching", "didBecomeActive", "willResignActive",
                "didEnterBackground",
            ], "each event once")
        #expect(!d.daemonLog.contains("resumed its channel"), "the channels were kept, not resumed")
        // Still the apps' parent: a stop ends them with their own exit status.
        try d2Stop(d)
    }

    func d2Stop(_ d: DaemonUnderTest) throws {
        let f = try d.follow(["plain"])
        try d.command(ControlRequest(.stop, app: "plain"))
        let end = try f.terminated("plain")
        #expect(end.reason == "stopped-by-user")
        #expect(try d.stop() == 0)
        #expect(!FileManager.default.fileExists(atPath: d.cgroupPath), "the daemon's tree is gone: \(d.cgroupPath)")
    }
}

extension DaemonReexecTests {
    /// Processes taken back after a crash are not the daemon's children: a
    /// daemon-reexec keeps them, and their end still comes through their pidfd.
    @Test func adoptedAppsSurviveAReexecAndTheirEndIsSeen() throws {
        let d = try DaemonUnderTest(apps: ["a": recorder("/dev/null"), "b": recorder("/dev/null")])
        let f = try d.follow()
        try d.command(ControlRequest(.launch, app: "b", background: true))
        try f.state("b", "suspended")
        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")
        #expect(try d.crash(with: SIGKILL) == (true, SIGKILL))
        let d2 = try DaemonUnderTest(after: d)
        let (code, out, err) = try d2.ctl(["daemon-reexec"])
        #expect(code == 0 && out.contains("reexec"), "\(out) \(err)")
        let pid = try #require(try d2.status("a").pid)
        let f2 = try d2.follow(["a"])
        kill(pid, SIGKILL)
        let end = try f2.terminated("a")
        #expect(["signaled", "exit-unknown"].contains(end.reason), "\(end)")
        #expect(try d2.ctl(["activate", "b"]).0 == 0, "b carries on in the new image")
        #expect(try d2.stop() == 0)
    }
}
