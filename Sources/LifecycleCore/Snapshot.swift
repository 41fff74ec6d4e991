// What `status` shows of one app: a copy of the core's view, taken on demand.

extension Supervisor {
    /// The app's scene sessions (not being discarded), the most recently
    /// activated first: the shell binds a scene app's new window to the
    /// first that no window shows (docs/focus.md).
    public func scenesByRecency(_ id: AppID) -> [SceneID] {
        guard let app = apps[id] else { return [] }
        return app.scenes.filter { !$0.value.discarding }
            .sorted { ($0.value.lastUsed, $1.key) > ($1.value.lastUsed, $0.key) }.map(\.key)
    }

    public func snapshot(_ id: AppID) -> AppSnapshot? {
        guard let app = apps[id] else { return nil }
        return snapshot(id, app)
    }

    /// Each of `ids`' snapshots in turn, in their order (an app the core does
    /// not know is passed over): `status` of every app in one call, so that
    /// the daemon lends its supervisor once rather than copying it for each
    /// app, and no array of snapshots is made and destroyed.
    public func eachSnapshot(_ ids: [AppID], _ body: (AppID, AppSnapshot) throws -> Void) rethrows {
        for id in ids {
            guard let app = apps[id] else { continue }
            try body(id, snapshot(id, app))
        }
    }

    private func snapshot(_ id: AppID, _ app: AppRecord) -> AppSnapshot {
        AppSnapshot(
            id: id, state: app.state, since: app.since, generation: app.generation,
            tasks: app.tasks.sorted { $0.key < $1.key }.map { BackgroundTask(id: $0.key, name: $0.value) },
            budgetEnd: app.phase == .running(.background) ? app.budgetEnd : nil,
            awaiting: app.awaiting?.event, stopping: app.ending,
            last: app.last, footprint: footprints[id], band: app.policy.memory.band,
            launching: app.phase == .awaitingReady || { if case .launching = app.phase { true } else { false } }(),
            changePending: app.pending != nil, removing: app.removing,
            relaunchAt: app.restarts?.due != nil ? timers.deadline(id, .restart) : nil,
            recentEnds: app.restarts?.ends.count ?? 0, failure: app.restarts?.failed,
            nextFetch: app.history.window, quit: app.history.quit, heldPush: app.history.held != nil,
            waking: app.wakes.inFlight?.event, scenes: sceneSnapshots(id, app), holds: app.holds.sorted(),
            prewarmRefusal: app.policy.prewarm == .never ? nil : app.history.prewarmRefusal,
            prewarmWaiting: prewarmWaiting?.contains(id) == true,
            prewarmAt: app.phase == .notRunning ? timers.deadline(id, .prewarm) : nil)
    }

    /// Its scenes, by name; for an app without scenes, its main scene (if
    /// it has been shown), in the app's state.
    private func sceneSnapshots(_ id: AppID, _ app: AppRecord) -> [SceneStatus] {
        app.scenes.keys.sorted().map { name in
            let scene = app.scenes[name]!
            let state: SceneState
            if app.policy.scenes {
                state = scene.told
            } else {
                switch app.state {
                case .active: state = .active
                case .inactive: state = .inactive
                case .background, .suspended: state = .background
                case .notRunning, .prewarmed: state = .unattached
                }
            }
            return SceneStatus(
                name: name, display: scene.display, state: state,
                inFront: displays[scene.display]?.holds(SceneRef(id, name)) == true,
                discarding: scene.discarding ? true : nil, shed: scene.shed ? true : nil)
        }
    }

    /// What the next boot must know of the app (the shell keeps it durably).
    public func history(_ id: AppID) -> (history: AppHistory, last: TerminationRecord?)? {
        apps[id].map { ($0.history, $0.last) }
    }

    /// A fresh core takes what an earlier boot left (instants already on
    /// this boot's clock): before its first step. Only for apps that have
    /// not run yet in this core.
    public mutating func restoreHistory(_ saved: [AppID: (history: AppHistory, last: TerminationRecord?)]) {
        for (id, entry) in saved.sorted(by: { $0.key < $1.key }) {
            guard apps[id]?.phase == .notRunning, apps[id]?.generation == 0 else { continue }
            apps[id]!.history = entry.history
            if apps[id]!.last == nil { apps[id]!.last = entry.last }
            if let window = entry.history.window { timers.arm(id, .fetch, at: window.latest) }
            unscheduled.insert(id)
        }
    }

    /// What a resumed app channel must be told again: the sequence numbers
    /// of the events awaiting their acknowledgement, oldest first (more
    /// than one only for launch events that went together), the tasks the
    /// app holds, and those already warned of their expiration.
    public func channelState(_ id: AppID) -> (awaiting: [UInt32], tasks: [TaskID], warned: [TaskID])? {
        guard let app = apps[id] else { return nil }
        let owed = app.awaiting.map { [$0] + app.queued.elements(after: $0) }?.map(\.sequence) ?? []
        return (owed, app.tasks.keys.sorted(), app.expired.intersection(app.tasks.keys).sorted())
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
    /// When its next background fetch may come, and must.
    public var nextFetch: FetchWindow?
    /// The user quit it: no wake-ups until it is launched.
    public var quit = false
    /// A push waits for it (held or coalesced).
    public var heldPush = false
    /// The wake-up it is working on (performFetch, didReceiveRemoteNotification).
    public var waking: LifecycleEvent?
    /// Its scenes (an app without scenes: `main`, once shown).
    public var scenes: [SceneStatus] = []
    /// What holds it from freezing (Inputs.swift, `hold`).
    public var holds: [Hold] = []
    /// Why it is not prewarmed again until its manifest changes (or, the
    /// user having stopped a prewarm, until a user launch); nil: no refusal.
    public var prewarmRefusal: String?
    /// It wants a prewarm the budget has no room for yet.
    public var prewarmWaiting = false
    /// When a predicted use's prewarm is due (not running, Prewarm.swift).
    public var prewarmAt: Instant?
}
