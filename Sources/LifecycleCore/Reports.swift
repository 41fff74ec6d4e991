// What the world reports about an app's current run: acknowledgements,
// background-task requests, readiness, protocol violations, and how its
// process ended. Reports about an earlier run never reach here (the
// generation check in Supervisor.apply).

extension Supervisor {
    mutating func acknowledged(_ id: AppID, _ seq: UInt32) {
        let app = apps[id]!
        if app.killing != nil { return }
        guard let awaiting = app.awaiting, awaiting.sequence == seq else {
            return kill(
                id,
                .protocolViolation(
                    message: "acknowledged event \(seq), which was not awaiting an acknowledgement"))
        }
        answeredHead(id)
        if awaiting.event.isWake { answered(id, awaiting.event, .noData) }
        switch awaiting.event.awaited {
        case .exit: break  // the exit completes it
        case .notice: kill(id, app.lastNotice!)
        case .acknowledgement: advance(id)
        }
    }

    /// The answer to a wake-up: it acknowledges the event and says what the work found.
    mutating func completed(_ id: AppID, _ seq: UInt32, _ result: WakeResult) {
        let app = apps[id]!
        if app.killing != nil { return }
        guard let awaiting = app.awaiting, awaiting.sequence == seq, awaiting.event.isWake else {
            return kill(
                id,
                .protocolViolation(
                    message: "completed event \(seq), which is not a fetch or push awaiting its answer"))
        }
        answeredHead(id)
        answered(id, awaiting.event, result)
        advance(id)
    }

    mutating func beginTask(_ id: AppID, request: UInt32, name: String) {
        let app = apps[id]!
        let inBackground = app.phase == .running(.background)
        let budgetEnd = inBackground && !app.policy.continuousBackground ? app.budgetEnd : nil
        let running: Bool
        switch app.phase {
        case .launching, .running: running = app.stop == nil && app.killing == nil
        default: running = false
        }
        let exhausted = budgetEnd.map { now >= $0 } ?? false
        guard running, !exhausted, app.tasks.count < Self.maxBackgroundTasks else {
            effects.append(.backgroundTaskReply(id, request: request, task: nil, budgetEnd: budgetEnd))
            return
        }
        let task = app.nextTask
        update(id) {
            $0.tasks[task] = name
            $0.nextTask &+= 1
        }
        effects.append(.backgroundTaskReply(id, request: request, task: task, budgetEnd: budgetEnd))
        if inBackground {
            armBudget(id)
            // A task begun inside didEnterBackground lifts its 5 s watchdog:
            // the budget bounds the app from now on.
            if app.awaiting?.event == .didEnterBackground, let end = budgetEnd {
                timers.extend(id, .ack, to: end)
            }
        }
    }

    mutating func endTask(_ id: AppID, _ task: TaskID) {
        guard apps[id]!.tasks[task] != nil else { return }  // like iOS: ending an unknown task is ignored
        update(id) {
            $0.tasks[task] = nil
            $0.expired.remove(task)
        }
        if apps[id]!.tasks.isEmpty { timers.cancel(id, .expiration, .budget) }
        advance(id)
    }

    /// A plain program said READY=1: its launch is complete.
    mutating func ready(_ id: AppID) {
        if apps[id]!.phase == .prewarming { return prewarmHeld(id) }  // held at READY=1
        guard apps[id]!.phase == .awaitingReady else { return }
        timers.cancel(id, .ready)
        update(id) { $0.phase = .running(.launched) }
        advance(id)
    }

    // MARK: - Process ends

    /// Classifies how the run ended: the reason of a kill or stop in
    /// progress wins; otherwise the exit status, with another OOM killer's
    /// kill counted as a kill at the app's limit when the kernel's was at
    /// its group's memory.max, else as that killer's own (kernel-oom,
    /// systemd-oomd).
    mutating func exited(_ id: AppID, _ status: ExitStatus) {
        let app = apps[id]!
        let reason: TerminationReason
        if let killing = app.killing {
            reason = killing
        } else if app.phase == .terminating, let stop = app.stop {
            reason = stop.reason(killedAfterDeadline: false)
        } else {
            switch status {
            case .exited(let code): reason = .exited(code: code)
            case .signaled(let signal): reason = .signaled(signal: signal)
            case .outOfMemory(let oom):
                // Recorded like a kill of ours, with what the kernel said.
                let cause: TerminationCode =
                    oom.limit != nil ? .perAppLimit : oom.killer == .kernel ? .kernelOOM : .systemdOOMD
                effects.append(
                    .memoryKill(killRecord(id, cause, lastSample, candidates: [id], notice: false, by: oom)))
                if let limit = oom.limit {
                    reason = .memoryLimit(footprint: oom.peak ?? footprints[id] ?? limit, limit: limit)
                } else {
                    reason = .oomKilled(by: oom.killer, peak: oom.peak)
                }
            case .unknown(let away): reason = .exitUnknown(whileAway: away)
            case .notAdopted(let why): reason = .notAdopted(why: why)
            }
        }
        ended(id, reason: reason)
    }

    mutating func ended(_ id: AppID, reason: TerminationReason) {
        let record = TerminationRecord(reason: reason, generation: apps[id]!.generation, at: now)
        let inFront = displays.holds(app: id)
        let scenes = apps[id]!.scenes
        let discarded = apps[id]!.discarded
        let restartTo = apps[id]!.restartTo
        let wakes = apps[id]!.wakes
        let prewarm = apps[id]!.phase.isPrewarm ? (held: apps[id]!.phase == .prewarmed, footprint: footprints[id]) : nil
        let duringLaunch: Bool
        switch apps[id]!.phase {
        case .launching, .awaitingReady: duringLaunch = true
        default: duringLaunch = false
        }
        timers.cancelAll(id)
        displays.remove(app: id)
        if footprints.removeValue(forKey: id) != nil { apps.markChanged(id) }
        swapped[id] = nil
        update(id) {
            var fresh = AppRecord(policy: $0.policy)
            fresh.pending = $0.pending
            fresh.removing = $0.removing
            fresh.generation = $0.generation
            fresh.generationFloor = $0.generationFloor
            fresh.state = $0.state  // so that sync() publishes the change
            fresh.since = $0.since
            fresh.last = record
            fresh.restarts = $0.restarts
            fresh.history = $0.history
            $0 = fresh
        }
        scenesEnded(id, scenes, discarded: discarded)
        effects.append(.terminated(id, record))
        wakesEnded(id, wakes, reason)
        if duringLaunch, reason.isCrash {
            effects.append(.discardRestoration(id, why: "it crashed during launch (\(reason.code.rawValue))"))
        }
        switch reason {
        case .stoppedByUser where restartTo == nil, .killedByUser:
            effects.append(.discardRestoration(id, why: "the user quit it"))
        default: break
        }
        if pressureVictim == id {
            pressureVictim = nil
            effects.append(.remeasure)
        }
        if reclaiming == id { reclaiming = nil }
        afterEnd(id)
        if let prewarm {
            // Never a launch the user made: no relaunch, no crash counted.
            prewarmEnded(id, held: prewarm.held, footprint: prewarm.footprint, reason)
        } else if let place = restartTo, case .stoppedByUser = reason, !shuttingDown, apps[id] != nil {
            forgetEnds(id)
            start(id, place == .foreground && !displays[displayOf(id)]!.isLocked ? .foreground : .background)
        } else {
            afterUnaskedEnd(id, reason, inFront: inFront)
        }
        if prewarm != nil { prewarmRoomMade() }  // its end is planned with the step's other apps
    }

    /// SIGKILL the app; the process exit report completes the termination.
    mutating func kill(_ id: AppID, _ reason: TerminationReason) {
        guard apps[id]!.killing == nil else { return }
        timers.cancelAll(id)
        update(id) {
            $0.killing = reason
            $0.awaiting = nil
            $0.queued = Behind()
        }
        effects.append(.kill(id, reason))
    }
}
