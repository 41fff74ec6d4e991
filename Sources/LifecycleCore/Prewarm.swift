// Prewarming (issue 31): an app's process started ahead of use and held,
// frozen, just before its first event, so that a use delivers the launch
// events to a process that has already started (docs/lifecycle.md,
// "Prewarming").
//
//   which apps   the manifest's `prewarm`: `always` (kept prewarmed while
//                it does not run), `predicted` (a library app's default:
//                from `prewarmLead` before the usage history's next
//                predicted use, `predictedUse`), `never` (a plain
//                program's default; one that says it can be is held at
//                READY=1, so it must await readiness)
//   within       the daemon's budget (`prewarmBudget`, bytes; 0: none),
//                each prewarm counted at what it holds, measured once it
//                is frozen (`.measured`), before that at what the app's
//                last one held (`prewarmGuess` if none was ever measured),
//                and only while memory is normal
//   held         a library app told LIFECYCLE_PREWARM=1 says when it is
//                at its first event (AppMessage.prewarmed), a plain
//                program says READY=1: then it is frozen. Not there within
//                its launch timeout: given up, and not tried again until
//                its manifest changes (its library may not know prewarming)
//   taken over   by any use: a launch, an activation, a wake-up, a URL
//                (`start`): thawed, it launches as if just spawned, with
//                the use's own reason
//   given up     first under memory pressure (dropped at the warning
//                level, first in the kill order), a predicted prewarm not
//                used within `prewarmKeep` of its use, a manifest changed,
//                a daemon killed before it was held. Never a launch the
//                user made: no use is recorded, and its end is not a crash
//                the restart policy counts.

extension Supervisor {
    /// A predicted use is prewarmed this long before it...
    static let prewarmLead: Duration = .seconds(1800)
    /// ...and kept this long after it, unused.
    static let prewarmKeep: Duration = .seconds(1800)
    /// What a prewarm is taken to cost before one was ever measured.
    public static let prewarmGuess: UInt64 = 32 << 20

    /// A new budget (at start, at a reload): every app is planned again at
    /// the next step.
    /// A smaller one keeps what is prewarmed, and starts nothing beyond it.
    public mutating func setPrewarmBudget(_ bytes: UInt64) {
        guard bytes != prewarmBudget else { return }
        prewarmBudget = bytes
        unplanned = Set(apps.keys)
    }

    /// Why a prewarm the user stopped is not made again until the user
    /// launches the app (or its manifest changes).
    static let prewarmStopped = "the user stopped its prewarm"

    /// The app may be prewarmed at all, whatever the time and the budget.
    /// A user's quit keeps a predicted prewarm away (as it keeps wake-ups
    /// away) until a user launch; an `always` app is prewarmed again.
    func prewarmable(_ app: AppRecord) -> Bool {
        app.policy.prewarm != .never && app.history.prewarmRefusal == nil
            && (app.policy.prewarm == .always || !app.history.quit) && app.restarts?.due == nil
            && app.restarts?.failed == nil && !app.removing
            && (app.policy.delivery == .library || app.policy.awaitsReadiness)
    }

    /// What the app's prewarm is taken to hold: what it, or its last one,
    /// held once frozen (`prewarmMeasured`; never a memory sample's live
    /// footprint: the room in the budget then changes only when a prewarm
    /// starts, is measured, is used or ends, each of which plans again, so
    /// that an app waiting for room is never overlooked).
    func prewarmEstimate(_ id: AppID) -> UInt64 {
        apps[id]!.history.prewarmFootprint ?? Self.prewarmGuess
    }

    /// What the prewarmed processes hold now, by estimate.
    func prewarmSpend() -> UInt64 {
        var spend: UInt64 = 0
        for (id, app) in apps where app.phase.isPrewarm { spend += prewarmEstimate(id) }
        return spend
    }

    /// Prewarms those of `ids` that want it now and fit the budget (`always`
    /// first, then the nearest predicted use); one that does not fit waits
    /// for room (`prewarmWaiting`); a predicted use further off arms the
    /// timer of its window.
    mutating func planPrewarm(_ ids: [AppID]) {
        guard prewarmBudget > 0, !shuttingDown, memoryLevel == .normal else { return }
        var wanted: [(id: AppID, use: Instant?)] = []
        for id in ids {
            guard let app = apps[id], app.phase == .notRunning else { continue }
            guard prewarmable(app) else {
                timers.cancel(id, .prewarm)
                stopWaiting(id)
                continue
            }
            switch app.policy.prewarm {
            case .never: continue
            case .always: wanted.append((id, nil))
            case .predicted:
                guard let use = predictedUse(app.history.uses, after: now) else {
                    timers.cancel(id, .prewarm)
                    stopWaiting(id)
                    continue
                }
                if use - Self.prewarmLead <= now {
                    wanted.append((id, use))
                } else {
                    timers.arm(id, .prewarm, at: use - Self.prewarmLead)
                    stopWaiting(id)
                }
            }
        }
        guard !wanted.isEmpty else { return }
        wanted.sort { a, b in
            (a.use == nil ? 0 : 1, a.use?.nanoseconds ?? 0, a.id) < (
                b.use == nil ? 0 : 1, b.use?.nanoseconds ?? 0, b.id
            )
        }
        var spend = prewarmSpend()
        for (id, use) in wanted {
            let cost = prewarmEstimate(id)
            guard spend + cost <= prewarmBudget else {
                if prewarmWaiting?.contains(id) != true { prewarmWaiting = (prewarmWaiting ?? []).union([id]) }
                continue
            }
            spend += cost
            stopWaiting(id)
            prewarm(id, until: use.map { $0 + Self.prewarmKeep })
        }
    }

    /// Room was made in the budget (a prewarm taken over or given up):
    /// the apps that waited for it are planned again.
    mutating func prewarmRoomMade() {
        guard let waiting = prewarmWaiting, !waiting.isEmpty else { return }
        planPrewarm(waiting.sorted())
    }

    private mutating func stopWaiting(_ id: AppID) {
        guard prewarmWaiting?.contains(id) == true else { return }
        prewarmWaiting!.remove(id)
        if prewarmWaiting!.isEmpty { prewarmWaiting = nil }
    }

    /// Starts the app's process ahead of use; `until`: a predicted use's
    /// prewarm is given up then, unused.
    mutating func prewarm(_ id: AppID, until: Instant?) {
        let app = apps[id]!
        let generation = max(app.generation, app.generationFloor) + 1
        effects.append(.prewarm(id, generation: generation))
        update(id) {
            $0.generation = generation
            $0.phase = .prewarming
            $0.launchMode = .background
            $0.launchReason = .prewarm
            $0.launchURL = nil
            $0.launchPush = nil
            $0.wakes = Wakes()
            $0.prewarmUntil = until
        }
        timers.arm(id, .prewarm, at: now + app.policy.launchTimeout)
    }

    /// The app is at its first event (its library said so, or READY=1):
    /// held there, frozen.
    mutating func prewarmHeld(_ id: AppID) {
        let app = apps[id]!
        guard app.phase == .prewarming, app.stop == nil, app.killing == nil else { return }
        effects.append(.freeze(id))
        update(id) { $0.phase = .prewarmed }
        timers.cancel(id, .prewarm)
        timers.arm(id, .freeze, at: now + Self.freezeDeadline)
        if let until = app.prewarmUntil { timers.arm(id, .prewarm, at: until) }
    }

    /// What a held prewarm holds, measured: its footprint, and the cost of
    /// its next prewarms. The room in the budget changed: planned again.
    mutating func prewarmMeasured(_ id: AppID, _ footprint: UInt64) {
        guard apps[id]!.phase == .prewarmed else { return }
        if footprints[id] != footprint {
            footprints[id] = footprint
            apps.markChanged(id)
        }
        if apps[id]!.history.prewarmFootprint != footprint { update(id) { $0.history.prewarmFootprint = footprint } }
        prewarmRoomMade()
    }

    /// The `.prewarm` timer: a predicted use's window opened, a prewarm
    /// never got to its first event, or a predicted one went unused.
    mutating func prewarmTimer(_ id: AppID) {
        let app = apps[id]!
        switch app.phase {
        case .notRunning: planPrewarm([id])
        case .prewarming:
            let why =
                "it was not at its first event within \(app.policy.launchTimeout.formattedSeconds)"
                + (app.policy.delivery == .library
                    ? " (a client library that does not prewarm never says so)" : " (no READY=1)")
            update(id) { $0.history.prewarmRefusal = why }
            kill(id, .prewarmDropped(why: why))
        case .prewarmed:
            kill(id, .prewarmDropped(why: "not used within \(Self.prewarmKeep.formattedSeconds) of the use predicted"))
        default: break
        }
    }

    /// A use takes the prewarmed process over (`start`): thawed when held,
    /// its prewarm's timers gone, what it held remembered for the next
    /// estimate. False when the app has none.
    mutating func takeOverPrewarm(_ id: AppID) -> Bool {
        let app = apps[id]!
        guard app.phase.isPrewarm else { return false }
        if app.phase == .prewarmed {
            effects.append(.thaw(id))
            timers.cancel(id, .freeze)
        }
        timers.cancel(id, .prewarm)
        let held = app.phase == .prewarmed ? footprints[id] : nil
        update(id) {
            $0.prewarmUntil = nil
            $0.freezeRefusal = nil
            if let held { $0.history.prewarmFootprint = held }
        }
        return true
    }

    /// Every prewarm given up, for `why` (memory short, a shutdown).
    mutating func dropPrewarms(_ why: String) {
        for id in appIDs where apps[id]!.phase.isPrewarm && apps[id]!.killing == nil && apps[id]!.stop == nil {
            kill(id, .prewarmDropped(why: why))
        }
    }

    /// After the end of a run that was a prewarm: what it held remembered
    /// (when it was held), and an end of its own while it got there keeps
    /// it from being prewarmed again until its manifest changes.
    mutating func prewarmEnded(_ id: AppID, held: Bool, footprint: UInt64?, _ reason: TerminationReason) {
        guard apps[id] != nil else { return }
        if held, let footprint { update(id) { $0.history.prewarmFootprint = footprint } }
        if !held, reason.isCrash, apps[id]!.history.prewarmRefusal == nil {
            update(id) { $0.history.prewarmRefusal = "it ended while it was prewarming (\(reason))" }
        }
    }
}

extension AppRecord {
    /// A use may start it: it has no process, or a prewarmed one that is
    /// not on its way out.
    var startable: Bool { phase == .notRunning || (phase.isPrewarm && stop == nil && killing == nil) }
}
