@preconcurrency import Glibc
import Foundation
@testable import LifecycleDaemon
import LifecycleCore
import LifecycleOS
import LifecycleWire
import Testing

/// The shell's timed behaviour on a loop and clock driven by hand
/// (`EventLoop.manual()`): no process, no sleep, no wall time. Each timer
/// fires at its own instant as the test moves the clock, and what apps
/// send over their (real) channels is read at each turn, as the loop does.
@Suite struct HandDrivenShellTests {
    static func received(_ fd: Int32) -> [DaemonMessage] { receivedByApp(fd) }

    /// The app acknowledges every event it was sent; the loop turns.
    static func answer(_ shell: Daemon, _ fd: Int32) -> [LifecycleEvent] {
        var events: [LifecycleEvent] = []
        for case .event(let e) in received(fd) {
            events.append(e.event)
            _ = AppMessage.acknowledge(sequence: e.sequence).encoded().withUnsafeBytes {
                send(fd, $0.baseAddress, $0.count, 0)
            }
        }
        shell.loop.turn()
        return events
    }

    /// A shell with app `a` launched into the foreground and active (and
    /// the apps `besides`, never launched).
    static func activeApp(_ manifest: String = "", besides: [String: String] = [:]) throws -> (
        Daemon, FakeGroup, Int32
    ) {
        let (shell, confinement, starter) = try shellUnderTest(
            besides.merging(["a": "command = [\"/bin/true\"]\n" + manifest]) { $1 })
        _ = shell.front!.execute(.activate("a"), from: root)
        shell.loop.turn()
        let spawn = try #require(starter.spawned.first)
        var told: [LifecycleEvent] = []
        for _ in 0..<3 { told += answer(shell, spawn.channel) }
        #expect(told == [.willFinishLaunching, .didFinishLaunching, .didBecomeActive])
        #expect(shell.supervisor.snapshot("a")?.state == .active)
        return (shell, try #require(confinement.groups["a.1"]), spawn.channel)
    }

    @Test func anUnansweredEventIsKilledAtItsDeadlineToTheNanosecond() throws {
        let (shell, group, channel) = try Self.activeApp()
        _ = shell.front!.execute(.display(nil, .home), from: root)
        shell.loop.turn()  // the save, then willResignActive leaves
        let sent = Self.received(channel)
        guard case .event(let resign)? = sent.first else {
            Issue.record("nothing sent: \(sent)")
            return
        }
        #expect(resign.event == .willResignActive)
        let deadline = try #require(resign.deadline)
        shell.loop.advance(to: deadline - 1)
        #expect(!group.calls.contains("killAll"), "a nanosecond before its deadline it lives")
        shell.loop.advance(to: deadline)
        #expect(group.calls.contains("killAll"), "at its deadline it is killed")
        #expect(shell.supervisor.snapshot("a")?.state != .active)
    }

    /// What `status` shows of an app's memory is read a moment after it
    /// arrives in the freezer or in front, not in the turn that decides
    /// it (whose event would wait for the reads); a `status` asked before
    /// then reads it at once.
    @Test func anArrivalsFootprintIsReadAMomentLaterOrWhenStatusAsks() throws {
        let (shell, group, channel) = try Self.activeApp()
        shell.loop.advance(by: .milliseconds(20))
        #expect(shell.sweep.shown["a"] == 64 << 20, "read after its arrival in front")
        group.footprint = 32 << 20
        _ = shell.front!.execute(.display(nil, .home), from: root)
        shell.loop.turn()
        #expect(Self.answer(shell, channel) == [.willResignActive])
        #expect(Self.answer(shell, channel) == [.didEnterBackground])
        #expect(shell.supervisor.snapshot("a")?.state == .suspended)
        #expect(shell.sweep.shown["a"] == 64 << 20, "not in the turn that froze it")
        shell.loop.advance(by: .milliseconds(19))
        #expect(shell.sweep.shown["a"] == 64 << 20)
        shell.loop.advance(by: .milliseconds(1))
        #expect(shell.sweep.shown["a"] == 32 << 20, "20 ms after its arrival in the freezer")

        group.footprint = 16 << 20
        _ = shell.front!.execute(.activate("a"), from: root)
        shell.loop.turn()
        #expect(Self.answer(shell, channel) == [.willEnterForeground])
        #expect(Self.answer(shell, channel) == [.didBecomeActive])
        #expect(shell.sweep.shown["a"] == 32 << 20)
        #expect(shell.statusReport(["a"]).apps.first?.footprint == 16 << 20, "status reads what arrived")
    }

    /// An app's durable history (its uses, here) is written a second after
    /// the change, not in the turn that sends its event; restoration data
    /// at the end of the turn that brought it.
    @Test func theHistoryIsWrittenASecondLaterAndRestorationDataAtOnce() throws {
        let (shell, _, channel) = try Self.activeApp()
        #expect(shell.history.hasPending, "the use is queued, not written in the activation's turns")
        shell.loop.advance(by: .milliseconds(999))
        #expect(shell.history.hasPending)
        shell.loop.advance(by: .milliseconds(1))
        #expect(!shell.history.hasPending, "written a second after the change")

        _ = AppMessage.saveRestoration([1, 2, 3]).encoded().withUnsafeBytes {
            send(channel, $0.baseAddress, $0.count, 0)
        }
        shell.loop.turn()
        #expect(!shell.history.hasPending, "restoration data is written in its turn")
        _ = shell.front!.execute(.display(nil, .home), from: root)
        shell.loop.turn()
        #expect(Self.answer(shell, channel) == [.willResignActive])
        #expect(Self.answer(shell, channel) == [.didEnterBackground])
        let (apps, problem) = Self.historyFile(shell, ["a"])
        #expect(problem == nil && apps["a"]?.history.uses.count == 1, "\(apps)")
    }

    /// An app nobody has used and that never ended has no row in the
    /// history: a missing row reads as that.
    @Test func anAppWithNothingToKeepHasNoHistoryRow() throws {
        let (shell, _, _) = try Self.activeApp(besides: ["b": "command = [\"/bin/true\"]\n"])
        shell.loop.advance(by: .seconds(1))
        #expect(!shell.history.hasPending)
        let apps = Self.historyFile(shell, ["a", "b"]).apps
        #expect(apps["a"]?.history.uses.count == 1 && apps["b"] == nil, "\(apps)")
    }

    /// An earlier boot's last termination (the history's, handed to the
    /// core at start) shows in `status` without a pid, and the time the
    /// app has been down counts from it, never from after now: that boot's
    /// wall clock may have been ahead of this one's.
    @Test func anEarlierBootsLastTerminationShowsAndItsTimeCountsFromIt() throws {
        let (shell, _, _) = try shellUnderTest([
            "a": "command = [\"/bin/true\"]\n", "ahead": "command = [\"/bin/true\"]\n",
            "never": "command = [\"/bin/true\"]\n",
        ])
        shell.loop.advance(by: .seconds(100))
        let now = shell.now()
        shell.supervisor.restoreHistory([
            "a": (AppHistory(), TerminationRecord(reason: .killedByUser, generation: 3, at: now - .seconds(90))),
            "ahead": (AppHistory(), TerminationRecord(reason: .killedByUser, generation: 1, at: now + .seconds(3600))),
        ])
        let apps = Dictionary(
            uniqueKeysWithValues: shell.statusReport(["a", "ahead", "never"]).apps.map { ($0.name, $0) })
        let a = try #require(apps["a"])
        #expect(a.lastTermination?.reason == .killedByUser && a.lastTermination?.pid == nil, "\(a)")
        #expect(a.secondsInState == 90)
        let ahead = try #require(apps["ahead"])
        #expect(ahead.lastTermination?.reason == .killedByUser && ahead.secondsInState == 0, "\(ahead)")
        #expect(apps["never"]?.lastTermination == nil && apps["never"]?.secondsInState == 0)
    }

    /// What the shell's history file holds for `configured`, once the
    /// shell has let it go (writing what waited).
    static func historyFile(_ shell: Daemon, _ configured: Set<AppID>) -> (
        apps: [AppID: DurableApp], problem: String?
    ) {
        shell.history.close()
        return HistoryStore(directory: shell.config.stateDirectory).load(configured: configured)
    }

    /// A full disk under the history (a real one: a tmpfs of 256 KiB): the
    /// write fails and says so, what waits stays queued, and once there is
    /// room the retry writes it.
    @Test(.enabled(if: getuid() == 0, "mounts a tmpfs"))
    func theHistoryWaitsOutAFullDisk() throws {
        let (shell, _, channel) = try Self.activeApp()
        let dir = shell.config.stateDirectory
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try #require(mount("tmpfs", dir, "tmpfs", 0, "size=256k") == 0)
        defer { umount2(dir, Int32(MNT_DETACH)) }
        shell.loop.advance(by: .seconds(1))
        #expect(!shell.history.hasPending && shell.history.problem == nil, "the first use, written")
        let filler = dir + "/filler"
        let fd = open(filler, O_WRONLY | O_CREAT, 0o600)
        let block = [UInt8](repeating: 1, count: 4096)
        while write(fd, block, block.count) > 0 {}
        close(fd)
        _ = shell.front!.execute(.display(nil, .home), from: root)
        shell.loop.turn()
        for _ in 0..<2 { _ = Self.answer(shell, channel) }
        _ = shell.front!.execute(.activate("a"), from: root)
        shell.loop.turn()
        for _ in 0..<2 { _ = Self.answer(shell, channel) }
        #expect(shell.supervisor.snapshot("a")?.state == .active)
        shell.loop.advance(by: .seconds(1))
        #expect(shell.history.hasPending, "the second use waits")
        #expect(shell.history.problem?.contains("cannot write the history to \(dir)/history.db") == true)
        unlink(filler)
        shell.loop.advance(by: .seconds(1))
        #expect(!shell.history.hasPending && shell.history.problem == nil, "written once there is room")
        let apps = Self.historyFile(shell, ["a"]).apps
        #expect(apps["a"]?.history.uses.count == 2, "\(apps)")
    }

    @Test func aFreezeIsLookedAtOnABackoffAndConfirmedWhenTheKernelSaysSo() throws {
        let (shell, group, channel) = try Self.activeApp()
        group.freezesAtOnce = false
        _ = shell.front!.execute(.display(nil, .home), from: root)
        shell.loop.turn()
        #expect(Self.answer(shell, channel) == [.willResignActive])
        #expect(Self.answer(shell, channel) == [.didEnterBackground])
        #expect(shell.supervisor.snapshot("a")?.state == .suspended && group.calls.contains("freeze"))
        let asked = shell.loop.now
        shell.loop.advance(by: .seconds(2))
        #expect(!shell.records.history.contains { $0.kind == .frozen }, "the kernel has not said so")
        group.frozen = true  // the kernel finishes the freeze
        shell.loop.advance(by: .milliseconds(16))  // the longest wait between two looks
        let frozen = try #require(shell.records.history.last { $0.kind == .frozen })
        let latency = try #require(frozen.latencyMicroseconds)
        #expect(latency >= 2_000_000 && latency <= 2_016_000, "\(latency) µs after \(asked)")
        // Confirmed: the core's freeze deadline is over.
        shell.loop.advance(by: .seconds(10))
        #expect(!group.calls.contains("killAll") && shell.supervisor.snapshot("a")?.state == .suspended)
    }

    @Test func aFreezeNeverConfirmedIsKilledAtTheCoresDeadline() throws {
        let (shell, group, channel) = try Self.activeApp()
        group.freezesAtOnce = false
        _ = shell.front!.execute(.display(nil, .home), from: root)
        shell.loop.turn()
        _ = Self.answer(shell, channel)
        _ = Self.answer(shell, channel)
        #expect(shell.supervisor.snapshot("a")?.state == .suspended)
        let asked = shell.loop.now
        shell.loop.advance(to: asked + Supervisor.freezeDeadline.nanoseconds - 1)
        #expect(!group.calls.contains("killAll"))
        shell.loop.advance(to: asked + Supervisor.freezeDeadline.nanoseconds)
        #expect(group.calls.contains("killAll"))
        shell.processEnded(pid: group.pid, .signaled(SIGKILL))
        #expect(shell.terminations["a"]?.reason == .freezeFailed)
        #expect(shell.terminations["a"]?.description.contains("not frozen after 5 s") == true)
    }

    /// A shell that is not the child subreaper (one sharing its process
    /// with a test runner, or embedded) reaps its apps' processes only:
    /// another child of the process stays for its own parent to wait for.
    /// (Reaping any child here once stole Swift Testing's exit-test child,
    /// and the whole test run waited for it for ever.)
    @Test func aShellThatIsNotTheSubreaperLeavesOtherChildrenToTheirWaiter() throws {
        let (shell, _, _) = try shellUnderTest(["a": "command = [\"/bin/true\"]\n"])
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
        defer { for a in argv { free(a) } }
        #expect(posix_spawn(&pid, "/bin/true", nil, nil, argv, environ) == 0)
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR {}  // ended, not reaped
        shell.reapChildren()
        shell.loop.advance(by: .seconds(1))
        var status: Int32 = -1
        #expect(waitpid(pid, &status, WNOHANG) == pid, "the child was still there for its parent")
        #expect(status == 0)
    }
}
