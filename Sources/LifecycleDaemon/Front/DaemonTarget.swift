@preconcurrency import Glibc
import LifecycleControl
import LifecycleCore
import LifecycleOS
import Logging

// What the command front asks of the daemon: the daemon as a CommandTarget.

extension Daemon: CommandTarget {
    func knows(_ app: AppID) -> Bool { manifests[app] != nil }

    func recentRecords(apps filter: Set<AppID>) -> [EventRecord] { records.recent(apps: filter) }

    func kills(limit: Int?) -> [KillRecord] { killLog.records(limit: limit) }

    func simulateMemoryLevel(_ level: MemoryLevel) -> [Effect] {
        let report = memory.simulated(groups: runs.groups)
        memoryWatch?.loud()  // the next sample, in Swift, ends the simulation
        noteLevelChange(to: level, simulated: true, report.measurements)
        return submit(.simulateMemoryLevel(level, report))
    }

    /// To the main process, through its pidfd. A suspended app takes it
    /// when it is next thawed (SIGKILL at once).
    func sendSignal(_ id: AppID, _ signal: Int32) -> Refusal? {
        guard let run = runs[id], Posix.signal(pidfd: run.pidfd, signal) else { return .notRunning(id) }
        let name = SignalNames.name(signal)
        logger.notice("sent \(name) to \(id)", metadata: metadata(id, ["signal": "\(name)"]))
        record(id, .signal, detail: name)
        return nil
    }

    func tail(_ id: AppID, lines: Int, offset: UInt64?) -> Result<TailReport, CommandFailure> {
        guard let output else {
            return .failure(CommandFailure(code: .refused, message: "output is not captured", refusal: "no-output"))
        }
        return output.tail(id, lines: lines, offset: offset)
    }

    /// One app as `status` shows it (looking does not start a footprint sweep).
    func appStatus(_ id: AppID, now: Instant, outputProblems: [AppID: String]) -> AppStatus {
        appStatus(id, supervisor.snapshot(id)!, now: now, outputProblems: outputProblems)
    }

    /// `snapshot`: the core's view of the app (`Supervisor.eachSnapshot`, for
    /// a whole report at once). Each table is looked up once: a
    /// status of 1,000 apps hashes every name at each lookup.
    func appStatus(_ id: AppID, _ s: AppSnapshot, now: Instant, outputProblems: [AppID: String]) -> AppStatus {
        let run = runs[id]
        let configured = settings.manifests[id]
        // An app whose last end came before a clean stop or in an earlier
        // boot: the durable history's record of it (the core's `last`),
        // without the pid, which names no process of this run; while the
        // app stays down, its time in that state counts from it.
        var ended = terminations[id]
        var since = s.since
        if ended == nil, let last = s.last {
            ended = TerminationInfo(
                reason: last.reason.code, description: last.reason.description, time: wallTime(last.at), pid: nil)
            // (Not after now: an earlier boot's wall clock may have been ahead of this one's.)
            if s.state == .notRunning && since == .zero { since = min(last.at, now) }
        }
        var status = AppStatus(
            name: id, state: s.state, pid: run?.pid,
            secondsInState: s.state == .notRunning && since == .zero
                ? 0 : Double((now - since).nanoseconds) / 1e9,
            delivery: manifests[id]!.policy.delivery,
            backgroundTasks: s.tasks,
            backgroundTimeRemaining: s.budgetEnd.map { max(0, Double(($0 - now).nanoseconds) / 1e9) },
            awaiting: s.awaiting, lastTermination: ended,
            footprint: run != nil ? sweep.shown[id] : nil, band: s.band, memoryLimit: limits[id],
            statusLine: run?.statusLine)
        status.launching = s.launching
        status.frozen = run?.frozen
        status.freezeProblem = run?.freezeProblem
        if let run, let launched = run.fingerprint, let configured, launched != configured.fingerprint {
            status.changePending = true
        }
        if configured == nil { status.removing = true }
        status.outputProblem = outputProblems[id]
        status.relaunchIn = s.relaunchAt.map { max(0, Double(($0 - now).nanoseconds) / 1e9) }
        status.recentEnds = s.recentEnds > 0 ? s.recentEnds : nil
        status.nextFetchIn = s.nextFetch.map { max(0, Double(($0.earliest - now).nanoseconds) / 1e9) }
        status.quit = s.quit ? true : nil
        status.heldPush = s.heldPush ? true : nil
        status.waking = s.waking
        status.restorationBytes = history.blobs[id]?.count
        if !s.scenes.isEmpty { status.scenes = s.scenes }
        status.held = s.holds.isEmpty ? nil : s.holds.map(\.rawValue)
        status.window = windowSummary(id)
        if s.state == .notRunning {
            if let why = s.prewarmRefusal {
                status.prewarm = "refused: \(why)"
            } else if s.prewarmWaiting {
                status.prewarm = "waiting for room"
            } else if let at = s.prewarmAt {
                status.prewarm = "in \(Int(max(0, Double((at - now).nanoseconds) / 1e9))) s"
            }
        }
        status.failed = s.failure.map {
            FailureInfo(
                reason: $0.reason.code.rawValue, description: $0.description, ends: $0.ends,
                windowSeconds: Double($0.window.nanoseconds) / 1e9, time: wallTime($0.at))
        }
        return status
    }

    func statusReport(_ names: [String]?) -> StatusReport { statusReport(names, shown: true) }

    /// `shown`: to a user, whose look starts a footprint sweep when the
    /// last one is old; the daemon's own looks (judging D-Bus operations) do not.
    func statusReport(_ names: [String]?, shown: Bool) -> StatusReport {
        if shown, !sweep.arrived.isEmpty { measureArrivals() }
        let now = now()
        let outputProblems = output?.files?.problems ?? [:]
        let ids = names ?? appIDsInOrder
        var apps: [AppStatus] = []
        apps.reserveCapacity(ids.count)
        supervisor.eachSnapshot(ids) { id, snapshot in
            apps.append(appStatus(id, snapshot, now: now, outputProblems: outputProblems))
        }
        let watch = memoryWatch?.state
        let daemon = DaemonStatus(
            pid: getpid(), foregroundSlots: supervisor.foregroundSlots, foreground: supervisor.foreground,
            locked: supervisor.locked, interruptions: supervisor.interruptions, confinement: confinement.summary,
            shuttingDown: supervisor.shuttingDown,
            memory: MemoryStatus(
                level: supervisor.memoryLevel, simulated: supervisor.memorySimulated,
                accounting: confinement.memoryAccounting.rawValue, trigger: memory.triggerDescription,
                reading: watch.map(memory.latest) ?? memory.reading, quiet: watch?.quiet,
                quietSamples: watch?.quietSamples))
        if shown { footprintsShown() }
        var report = StatusReport(daemon: daemon, apps: apps)
        let problems = (confinement as? Cgroups)?.problems ?? []
        report.daemon.memory?.problems = problems.isEmpty ? nil : problems
        report.daemon.memory?.reclaim = supervisor.reclaimEnabled && (memory.reading.swapTotal ?? 0) > 0
        report.daemon.started = startedAt
        report.daemon.start = startKind
        report.daemon.logLinesDropped = LogOutput.standardError.droppedTotal
        report.daemon.killRecordsUnsaved = killLog.unsaved.count
        report.daemon.stateUnsaved = store?.failing ?? false
        report.daemon.follower = follower?.status
        report.daemon.displays = supervisor.displays.all.map {
            DisplayStatus(
                name: $0.name, slots: $0.slots, front: $0.scenes.map(\.description), locked: $0.isLocked,
                interruptions: $0.interruptions, overlay: $0.overlaid ? true : nil,
                sessionLocked: $0.sessionLocked ? true : nil)
        }
        return report
    }
}
