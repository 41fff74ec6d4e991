@preconcurrency import Glibc
import Foundation
@testable import LifecycleDaemon
import LifecycleControl
import LifecycleCore
import LifecycleOS
import LifecycleWire
import Testing

let root = Caller(pid: nil, uid: 0, gid: 0)
let someone = Caller(pid: nil, uid: 1000, gid: 1000)

/// The command front against a fake target: permission, names, refusals
/// and results, decided once for every transport.
@Suite struct CommandFrontTests {
    final class Target: CommandTarget {
        var submitted: [Input] = []
        var answer: [Effect] = []
        func knows(_ app: AppID) -> Bool { app == "a" }
        func submit(_ input: Input) -> [Effect] {
            submitted.append(input)
            return answer
        }
        func statusReport(_ apps: [AppID]?) -> StatusReport {
            StatusReport(
                daemon: DaemonStatus(
                    pid: 1, foregroundSlots: 1, foreground: [], locked: false,
                    interruptions: 0, confinement: "fake", shuttingDown: false), apps: [])
        }
        func recentRecords(apps: Set<AppID>) -> [EventRecord] { [] }
        func kills(limit: Int?) -> [KillRecord] { [] }
        func simulateMemoryLevel(_ level: MemoryLevel) -> [Effect] {
            submit(.simulateMemoryLevel(level, MemoryReport()))
        }
        var reexecs = 0
        var reexecProblem: String?
        func scheduleReexec() -> String? {
            reexecs += 1
            return reexecProblem
        }
        func reload(dryRun: Bool, restartChanged: Bool) -> Result<ReloadReport, ConfigError> {
            .success(ReloadReport(dryRun: dryRun))
        }
        var signals: [Int32] = []
        func sendSignal(_ id: AppID, _ signal: Int32) -> Refusal? {
            signals.append(signal)
            return nil
        }
        func available() -> Result<[AvailableApp], ConfigError> { .success([]) }
        func tail(_ id: AppID, lines: Int, offset: UInt64?) -> Result<TailReport, CommandFailure> {
            .success(TailReport(journal: true))
        }
        func shown(_ report: ShownReport, fresh: Bool, reporter: String?) -> [Effect] { [] }
        func raise(_ id: AppID, display: DisplayID?, scene: SceneID?) {}
        func home(_ display: DisplayID?) {}
    }

    @Test func changesNeedPermissionReadingDoesNot() {
        let target = Target()
        let front = CommandFront(target: target, permissions: Permissions(controlGroup: nil))
        guard case .failure(let f) = front.execute(.activate("a"), from: someone) else {
            Issue.record("allowed"); return
        }
        #expect(f.code == .permissionDenied && f.message.contains("'activate'"))
        #expect(target.submitted.isEmpty, "nothing reaches the core")
        guard case .success(.status) = front.execute(.status(apps: nil), from: someone) else {
            Issue.record("refused"); return
        }
        guard case .failure(let unknown) = front.execute(.status(apps: ["zz"]), from: .unknown) else { return }
        #expect(unknown.code == .unknownApp && unknown.message == "unknown app 'zz'")
        let commands: [Command] = [
            .display(nil, .home), .pressure(.critical), .stop("a"), .display("tv", .interruptionBegan), .daemonReexec,
        ]
        for command in commands {
            guard case .failure(let f) = front.execute(command, from: .unknown) else {
                Issue.record("\(command)"); continue
            }
            #expect(f.code == .permissionDenied, "no credentials, no changes")
        }
    }

    @Test func daemonReexecNeedsPermissionAndSaysWhyItCannot() {
        let target = Target()
        let front = CommandFront(target: target, permissions: Permissions(controlGroup: nil))
        guard case .failure = front.execute(.daemonReexec, from: someone) else { Issue.record("allowed"); return }
        #expect(target.reexecs == 0)
        guard case .success(.done) = front.execute(.daemonReexec, from: root) else { Issue.record("refused"); return }
        target.reexecProblem = "shutting down"
        guard case .failure(let f) = front.execute(.daemonReexec, from: root) else { Issue.record("done"); return }
        #expect(f.code == .refused && f.refusal == "cannot-reexec" && f.message == "shutting down")
        #expect(target.reexecs == 2)
    }

    @Test func refusalsCarryTheirCode() {
        let target = Target()
        target.answer = [.refused(.screenLocked)]
        let front = CommandFront(target: target, permissions: Permissions(controlGroup: nil))
        guard case .failure(let f) = front.execute(.activate("a"), from: root) else {
            Issue.record("not refused"); return
        }
        #expect(f == CommandFailure(code: .refused, message: "the screen is locked", refusal: "screen-locked"))
        #expect(target.submitted == [.activate("a")])
    }

    @Test func followingAndLimits() {
        let target = Target()
        let front = CommandFront(target: target, permissions: Permissions(controlGroup: nil))
        defer { withExtendedLifetime(target) {} }
        guard case .success(.follow(let filter)) = front.execute(.events(apps: ["a"], follow: true), from: someone)
        else {
            Issue.record("not following"); return
        }
        #expect(filter == ["a"])
        guard case .failure(let f) = front.execute(.jetsam(limit: -1), from: someone) else { return }
        #expect(f.code == .badRequest)
    }

    /// The JSON transport turns requests into commands and names what is missing.
    @Test func jsonRequestsBecomeCommands() throws {
        #expect(
            try ControlServer.command(ControlRequest(.launch, app: "a", background: true)).get()
                == .launch("a", .background))
        #expect(try ControlServer.command(ControlRequest(.pressure, level: "warning")).get() == .pressure(.warning))
        guard case .failure(let f) = ControlServer.command(ControlRequest(.stop)) else {
            Issue.record("accepted"); return
        }
        #expect(f.message == "'stop' needs an app")
        guard case .failure(let g) = ControlServer.command(ControlRequest(.pressure, level: "dire")) else { return }
        #expect(g.message == "'pressure' needs a level: normal, warning or critical (got 'dire')")
    }
}

/// The effect performer against a fake confinement and process table: what
/// the shell does with each effect, with no process, cgroup or signal.
@Suite struct EffectPerformerTests {
    func received(_ fd: Int32) -> [DaemonMessage] { receivedByApp(fd) }

    func acknowledge(_ shell: Daemon, _ fd: Int32, _ messages: [DaemonMessage]) {
        for case .event(let e) in messages {
            _ = AppMessage.acknowledge(sequence: e.sequence).encoded().withUnsafeBytes {
                send(fd, $0.baseAddress, $0.count, 0)
            }
        }
        shell.readChannel("a", shell.runs["a"]!)
        shell.saveState()  // the loop's save, after which what the step decided goes out
    }

    /// An event that leaves late (the daemon stalled between its decision
    /// and the save) carries a deadline moved by as much, and the core's moves too.
    @Test func anEventThatLeavesLateMovesItsDeadline() throws {
        let (shell, _, starter) = try shellUnderTest(["a": "command = [\"/bin/true\"]\n"])
        _ = shell.front!.execute(.activate("a"), from: root)
        let spawn = try #require(starter.spawned.first)
        for _ in 0..<3 { acknowledge(shell, spawn.channel, received(spawn.channel)) }
        #expect(shell.supervisor.snapshot("a")?.state == .active)
        _ = shell.front!.execute(.display(nil, .home), from: root)
        let decided = try #require(shell.supervisor.nextDeadline())
        shell.loop.stall(by: .milliseconds(100))  // the stall itself, between the decision and the save
        shell.saveState()
        guard case .event(let event)? = received(spawn.channel).first else {
            Issue.record("willResignActive did not leave")
            return
        }
        #expect(event.event == .willResignActive)
        #expect(event.deadline == decided.nanoseconds + 100_000_000, "the app is told its whole time, exactly")
        #expect(shell.supervisor.nextDeadline() == decided + .milliseconds(100))
    }

    /// Nothing leaves before it is durable (State/Outbox.swift): what a step
    /// sends, signals, freezes or kills waits for the save after it.
    @Test func nothingLeavesBeforeTheSave() throws {
        let (shell, confinement, starter) = try shellUnderTest([
            "a": "command = [\"/bin/true\"]\n[timeouts]\nbackground_grace = 0.01\n"
        ])
        _ = shell.front!.execute(.activate("a"), from: root)
        let spawn = try #require(starter.spawned.first)
        let group = try #require(confinement.groups["a.1"])
        // A spawn is saved before its step returns: its first event follows.
        let first = received(spawn.channel)
        #expect(first.count == 1)
        acknowledge(shell, spawn.channel, first)
        for _ in 0..<2 { acknowledge(shell, spawn.channel, received(spawn.channel)) }
        #expect(shell.supervisor.snapshot("a")?.state == .active)
        _ = shell.front!.execute(.display(nil, .home), from: root)
        #expect(received(spawn.channel).isEmpty, "willResignActive waits for the save")
        shell.saveState()
        let resign = received(spawn.channel)
        #expect(resign.count == 1)
        acknowledge(shell, spawn.channel, resign)
        _ = shell.front!.execute(.kill("a"), from: root)
        #expect(!group.calls.contains("killAll"), "the kill waits for the save")
        shell.saveState()
        #expect(group.calls.contains("killAll"))
    }

    @Test func aLaunchFreezeAndKillOverFakes() throws {
        let (shell, confinement, starter) = try shellUnderTest([
            "a": "command = [\"/bin/true\"]\nmemory.limit = \"64M\"\n"
        ])
        guard case .success = shell.front!.execute(.activate("a"), from: root) else { Issue.record("refused"); return }
        shell.saveState()
        let spawn = try #require(starter.spawned.first)
        #expect(spawn.request.executable == "/bin/true")
        #expect(spawn.request.environment[Wire.socketEnvironmentKey] == "3")
        #expect(spawn.request.environment[Wire.appNameEnvironmentKey] == "a")
        let group = try #require(confinement.groups["a.1"])
        // Launched for the foreground: the kernel's OOM killer is told it comes last
        // (by the child, before exec: the transition writes nothing more);
        // it is protected from reclaim, weighted first for the CPU, and left alone by oomd.
        #expect(spawn.request.credentials?.oomScoreAdjust == 150)
        #expect(
            group.calls == [
                "limit \(64 << 20)", "spawned", "memory.low max", "cpu.weight 1000", "oomd omit",
            ])

        // The launch events arrive one at a time, each after the last was acknowledged.
        var events: [LifecycleEvent] = []
        for _ in 0..<3 {
            let got = received(spawn.channel)
            for case .event(let e) in got { events.append(e.event) }
            acknowledge(shell, spawn.channel, got)
        }
        #expect(events == [.willFinishLaunching, .didFinishLaunching, .didBecomeActive])
        #expect(shell.supervisor.snapshot("a")?.state == .active)

        // Home: resign, enter the background, and with no task: frozen.
        _ = shell.front!.execute(.display(nil, .home), from: root)
        shell.saveState()
        for _ in 0..<2 { acknowledge(shell, spawn.channel, received(spawn.channel)) }
        #expect(shell.supervisor.snapshot("a")?.state == .suspended)
        #expect(
            group.calls.suffix(7) == [
                "oom_score_adj 550", "memory.low 0", "cpu.weight 50", "oomd avoid", "freeze", "oom_score_adj 850",
                "oomd none",
            ],
            "in the background, then frozen: the OOM killer's (and oomd's) first choice, as the core's")
        #expect(shell.records.history.contains { $0.app == "a" && $0.kind == .frozen })

        // A kill reaches the whole group; the exit report completes it.
        _ = shell.front!.execute(.kill("a"), from: root)
        shell.saveState()
        #expect(group.calls.suffix(1) == ["killAll"])
        shell.processEnded(pid: spawn.pid, .signaled(SIGKILL))
        #expect(group.calls.suffix(2) == ["killAll", "remove"], "what it left is killed, its group removed")
        #expect(shell.supervisor.snapshot("a")?.state == .notRunning)
        #expect(shell.terminations["a"]?.reason == .killedByUser)
    }

    @Test func aFailedSpawnIsReportedAndTheGroupRemoved() throws {
        let (shell, confinement, starter) = try shellUnderTest(["a": "command = [\"/bin/true\"]\n"])
        starter.failWith = SpawnError(step: "execve", errno: .noSuchFileOrDirectory)
        _ = shell.front!.execute(.launch("a", .background), from: root)
        #expect(confinement.groups["a.1"]?.calls.last == "remove")
        #expect(shell.supervisor.snapshot("a")?.state == .notRunning)
        #expect(shell.terminations["a"]?.reason == .launchFailed)
        #expect(shell.terminations["a"]?.description.contains("execve") == true)
    }

    @Test func theKernelsOOMKillIsReportedAsAFactAndTheCoreNamesTheLimit() throws {
        let (shell, confinement, starter) = try shellUnderTest([
            "a": "command = [\"/bin/true\"]\nmemory.limit = \"64M\"\n", "b": "command = [\"/bin/true\"]\n",
        ])
        _ = shell.front!.execute(.launch("a", .background), from: root)
        let spawn = try #require(starter.spawned.first)
        // At its own limit (memory.events `oom` rose): the run's peak is its footprint.
        confinement.groups["a.1"]!.oom = OutOfMemory(limit: 64 << 20, peak: 64 << 20)
        shell.processEnded(pid: spawn.pid, .signaled(SIGKILL))
        shell.saveState()  // the kill record leaves with the save
        #expect(shell.terminations["a"]?.reason == .perAppLimit)
        let record = try #require(shell.killLog.records(limit: nil).last)
        #expect(record.reason == .perAppLimit && record.killer == .kernel && record.limit == 64 << 20)
        #expect(record.footprint == 64 << 20 && record.pid == spawn.pid, "the peak, and the pid of the run that ended")

        // Not at its own limit: the whole machine ran out (a global OOM kill).
        _ = shell.front!.execute(.launch("b", .background), from: root)
        let b = try #require(starter.spawned.last)
        confinement.groups["b.1"]!.oom = OutOfMemory(limit: nil, peak: 121 << 20)
        shell.processEnded(pid: b.pid, .signaled(SIGKILL))
        shell.saveState()
        #expect(shell.terminations["b"]?.reason == .kernelOOM)
        let global = try #require(shell.killLog.records(limit: nil).last)
        #expect(
            global.app == "b" && global.reason == .kernelOOM && global.killer == .kernel && global.peak == 121 << 20)
        #expect(global.limit == nil && global.pid == b.pid)
        // systemd-oomd's kill (it marks the group): recorded as its own.
        _ = shell.front!.execute(.launch("b", .background), from: root)
        let oomd = try #require(starter.spawned.last)
        confinement.groups["b.2"]!.oom = OutOfMemory(limit: nil, peak: nil, killer: .systemdOOMD)
        shell.processEnded(pid: oomd.pid, .signaled(SIGKILL))
        shell.saveState()
        #expect(shell.terminations["b"]?.reason == .systemdOOMD)
        #expect(shell.killLog.records(limit: nil).last?.killer == .systemdOOMD)
        // A SIGKILL no OOM killer sent stays what it was.
        _ = shell.front!.execute(.launch("a", .background), from: root)
        let again = try #require(starter.spawned.last)
        shell.processEnded(pid: again.pid, .signaled(SIGKILL))
        #expect(shell.terminations["a"]?.reason == .signaled)
    }

    @Test func eachTransitionSetsTheGroupsStandingForTheKernelAndOomd() throws {
        let (shell, confinement, _) = try shellUnderTest([
            "a": "command = [\"/bin/true\"]\ndelivery = \"signals\"\n[timeouts]\nbackground_grace = 0.01\n"
        ])
        _ = shell.front!.execute(.activate("a"), from: root)
        shell.saveState()
        let a = try #require(confinement.groups["a.1"])
        #expect(
            a.calls.contains("memory.low max") && a.calls.contains("cpu.weight 1000") && a.calls.contains("oomd omit"))
        a.calls = []
        _ = shell.front!.execute(.display(nil, .home), from: root)
        shell.saveState()
        #expect(a.calls.contains("memory.low 0") && a.calls.contains("cpu.weight 50") && a.calls.contains("oomd avoid"))
        // Without the controllers nothing is written.
        confinement.standings = []
        a.calls = []
        _ = shell.front!.execute(.activate("a"), from: root)
        shell.saveState()
        #expect(!a.calls.contains { $0.hasPrefix("memory.low") || $0.hasPrefix("cpu.weight") || $0.hasPrefix("oomd") })
    }

    @Test func simulatedPressureKillsTheBackgroundAppThroughItsGroup() throws {
        let (shell, confinement, starter) = try shellUnderTest([
            "a": "command = [\"/bin/true\"]\n", "b": "command = [\"/bin/true\"]\ndelivery = \"signals\"\n",
        ])
        _ = shell.front!.execute(.launch("b", .background), from: root)
        shell.submit(.tick)
        _ = starter
        _ = shell.front!.execute(.pressure(.critical), from: root)
        shell.saveState()
        let b = try #require(confinement.groups["b.1"])
        #expect(b.calls.contains("killAll"))
        #expect(shell.killLog.records(limit: 1).first?.app == "b")
        #expect(shell.records.history.contains { $0.kind == .memoryLevel && $0.to == "critical" })
    }
}
