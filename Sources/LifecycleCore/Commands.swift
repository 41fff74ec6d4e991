// What users ask (supervisorctl, or any other front): each command either
// changes the facts the planner works from, or is refused with a reason.

extension Supervisor {
    mutating func refuse(_ why: Refusal) { effects.append(.refused(why)) }

    mutating func unlessShuttingDown(_ body: (inout Supervisor) -> Void) {
        if shuttingDown { return refuse(.shuttingDown) }
        body(&self)
    }

    mutating func command(_ id: AppID, _ body: (inout Supervisor) -> Void) {
        guard apps[id] != nil else { return refuse(.unknownApp(id)) }
        unlessShuttingDown(body)
    }

    /// A user's launch: a failed app, or one waiting to be relaunched,
    /// starts counting its ends again.
    mutating func launch(_ id: AppID, _ mode: LaunchMode) {
        let app = apps[id]!
        guard app.startable else { return refuse(.alreadyRunning(id, app.state)) }
        if mode == .foreground && displays[displayOf(id)]!.isLocked { return refuse(.screenLocked) }
        forgetEnds(id)
        if mode == .foreground { recordUse(id) }
        userLaunched(id)
        start(id, mode)
    }

    /// A new run, by a user, a relaunch or a wake-up; `setUp` adds what
    /// the run is for (Wakeups.swift). A push held for the app goes in its
    /// launch options.
    mutating func start(
        _ id: AppID, _ mode: LaunchMode, reason: LaunchReason = .user, setUp: (inout AppRecord) -> Void = { _ in }
    ) {
        let app = apps[id]!
        if mode == .foreground { takeForegroundSlot(id) }
        // A prewarmed process is taken over (Prewarm.swift): no spawn, the
        // same run; a plain program held at READY=1 is ready already.
        let held = app.phase == .prewarmed
        let warm = takeOverPrewarm(id)
        let generation = warm ? app.generation : max(app.generation, app.generationFloor) + 1
        if !warm { effects.append(.spawn(id, generation: generation, mode: mode)) }
        let now = now
        update(id) {
            $0.generation = generation
            $0.phase =
                $0.policy.delivery == .library
                ? .launching(step: 0)
                : $0.policy.awaitsReadiness && !held ? .awaitingReady : .running(.launched)
            $0.launchMode = mode
            $0.together = held && $0.policy.delivery == .library
            $0.lastUsed = now
            $0.launchReason = reason
            $0.launchURL = nil
            $0.launchPush = nil
            $0.wakes = Wakes()
            setUp(&$0)
        }
        if apps[id]!.launchPush == nil, let held = apps[id]!.history.held {
            update(id) {
                $0.launchPush = held
                $0.history.held = nil
            }
            timers.cancel(id, .push)
            note(id, .pushHandedOver)
        }
        if apps[id]!.phase == .awaitingReady { timers.arm(id, .ready, at: now + apps[id]!.policy.launchTimeout) }
        advance(id)
        if warm { prewarmRoomMade() }
    }

    /// Its most recent scene (Scenes.swift) comes to the front.
    mutating func activate(_ id: AppID) { activateScene(id, scene: nil, display: nil) }

    /// The app's most recent scene, made ready by `activateScene`, to the front.
    mutating func bringToFront(_ id: AppID) {
        recordUse(id)
        takeForegroundSlot(id)
        advance(id)
    }

    /// Puts the app's most recent scene in the most recent slot of its
    /// display, sending the least recently activated scene there to the
    /// background when the slots are full.
    mutating func takeForegroundSlot(_ id: AppID) {
        guard let ref = defaultScene(id), let d = apps[id]!.scenes[ref.scene]?.display else { return }
        let focus = displays[d]!.focus
        var evicted = displays.with(d) { $0.take(ref) }
        // Followed (Follow.swift), the scene that had the focus loses it: it resigns.
        if let focus, focus != ref, displays[d]!.holds(focus) { evicted.append(focus) }
        sync(id)
        for other in evicted {
            sync(other.app)
            advance(other.app)
        }
    }

    /// A display command on every display: home and an interruption's
    /// beginning on each; an interruption's end on every display that has
    /// one (refused when none has); the lock on every display not already
    /// so (refused when every display already was).
    mutating func everyDisplay(_ command: DisplayCommand) {
        let on: [DisplayID]
        switch command {
        case .home, .interruptionBegan: on = displays.names
        case .interruptionEnded:
            on = displays.all.filter { $0.interruptions > 0 }.map(\.name)
            if on.isEmpty { return refuse(.noInterruption) }
        case .lock, .unlock:
            on = displays.all.filter { $0.locked != (command == .lock) }.map(\.name)
            if on.isEmpty {
                if command == .unlock && displays.all.contains(where: \.sessionLocked) { return refuse(.sessionLocked) }
                return refuse(command == .lock ? .alreadyLocked : .notLocked)
            }
        }
        for d in on { displayCommand(d, command) }
    }

    /// A stop (or kill) of an app waiting to be relaunched cancels the relaunch.
    mutating func stop(_ id: AppID, cause: StopCause) {
        guard apps[id]!.phase != .notRunning else {
            if cancelRelaunch(id) { return }
            return refuse(.notRunning(id))
        }
        if apps[id]!.stop == nil { update(id) { $0.stop = cause } }
        displays.remove(app: id)
        sync(id)
        advance(id)
    }

    /// A user's stop: also of a restart under way (it is not launched again).
    mutating func userStop(_ id: AppID) {
        if apps[id]!.restartTo != nil { update(id) { $0.restartTo = nil } }
        if apps[id]!.phase.isPrewarm { update(id) { $0.history.prewarmRefusal = Self.prewarmStopped } }
        let running = apps[id]!.phase != .notRunning
        stop(id, cause: .user)
        if running {
            userQuit(id)
            discardAllScenes(id)
        }
    }

    /// Stopped as the user would, then, once it has ended, launched again
    /// in front if it held a slot (and no `home` of its display came
    /// meanwhile), else in the background. Saved with the record, so a
    /// daemon restarted meanwhile carries it out.
    mutating func restart(_ id: AppID) {
        let app = apps[id]!
        if app.startable { return launch(id, .foreground) }
        if app.stop != nil || app.killing != nil { return refuse(.stopping(id)) }
        let place: LaunchMode = displays.holds(app: id) ? .foreground : .background
        update(id) { $0.restartTo = place }
        stop(id, cause: .user)
    }

    /// A user's kill: also of a restart under way (it is not launched again).
    mutating func userKill(_ id: AppID) {
        guard apps[id]!.phase != .notRunning else {
            if cancelRelaunch(id) { return }
            return refuse(.notRunning(id))
        }
        if apps[id]!.restartTo != nil { update(id) { $0.restartTo = nil } }
        if apps[id]!.phase.isPrewarm { update(id) { $0.history.prewarmRefusal = Self.prewarmStopped } }
        kill(id, .killedByUser)
        userQuit(id)
        discardAllScenes(id)
    }

    mutating func shutdown() {
        shuttingDown = true
        prewarmWaiting = nil
        for id in appIDs { _ = cancelRelaunch(id) }
        for id in appIDs where apps[id]!.phase != .notRunning {
            if apps[id]!.stop == nil { update(id) { $0.stop = .shutdown } }
            displays.remove(app: id)
            sync(id)
            advance(id)
        }
    }
}
