// What `status` shows of one app: a copy of the core's view, taken on demand.

extension Supervisor {
    public func snapshot(_ id: AppID) -> AppSnapshot? {
        guard let app = apps[id] else { return nil }
        return AppSnapshot(
            id: id, state: app.state, since: app.since, generation: app.generation,
            tasks: app.tasks.sorted { $0.key < $1.key }.map { BackgroundTask(id: $0.key, name: $0.value) },
            budgetEnd: app.phase == .running(.background) ? app.budgetEnd : nil,
            awaiting: app.awaiting?.event, stopping: app.stop != nil || app.killing != nil || app.lastNotice != nil,
            last: app.last, footprint: footprints[id], band: app.policy.memory.band,
            launching: app.phase == .awaitingReady || { if case .launching = app.phase { true } else { false } }(),
            changePending: app.pending != nil, removing: app.removing,
            relaunchAt: app.restarts?.due != nil ? timers.deadline(id, .restart) : nil,
            recentEnds: app.restarts?.ends.count ?? 0, failure: app.restarts?.failed)
    }

    /// What a resumed app channel must be told again: the sequence number
    /// of the event awaiting its acknowledgement, the tasks the app holds,
    /// and those already warned of their expiration.
    public func channelState(_ id: AppID) -> (awaiting: UInt32?, tasks: [TaskID], warned: [TaskID])? {
        guard let app = apps[id] else { return nil }
        return (app.awaiting?.sequence, app.tasks.keys.sorted(), app.expired.intersection(app.tasks.keys).sorted())
    }
}

/// What `supervisorctl status` shows of one app.
public struct AppSnapshot: Sendable, Equatable {
    public var id: AppID
    public var state: LifecycleState
    public var since: Instant
    public var generation: UInt64
    public var tasks: [BackgroundTask]
    /// In the background with the budget running: when it ends.
    public var budgetEnd: Instant?
    /// The event the app has not acknowledged yet.
    public var awaiting: LifecycleEvent?
    public var stopping: Bool
    public var last: TerminationRecord?
    /// Last measured footprint, bytes.
    public var footprint: UInt64?
    public var band: MemoryBand
    /// Launch events not yet all acknowledged, or not yet READY=1.
    public var launching = false
    /// A reload changed its policy; in force at its next launch.
    public var changePending = false
    /// A reload removed it: stopping, then gone.
    public var removing = false
    /// It ended on its own and is relaunched then (its `restart` policy).
    public var relaunchAt: Instant?
    /// Ends relaunched within its restart window.
    public var recentEnds = 0
    /// It ended too often: down until a user launches it.
    public var failure: AppFailure?
}

public struct BackgroundTask: Sendable, Equatable, Codable {
    public var id: TaskID
    public var name: String
}
