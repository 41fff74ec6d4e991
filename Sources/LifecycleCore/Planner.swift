// The planner: where each app should be (its target, from the facts), and
// the next step from where it has been told it is. The table in `step` is
// checked by the compiler for exhaustiveness: every (told, target) pair has
// exactly one answer.

extension Supervisor {
    enum Target: Equatable { case active, inactive, background, suspended, terminated }

    func target(_ id: AppID) -> Target {
        let app = apps[id]!
        if app.stop != nil { return .terminated }
        switch placement(of: id) {
        case .front?: return .active
        case .interrupted?: return .inactive
        case nil: break
        }
        // On its way to another display: through the background, not frozen.
        if moving(id) { return .background }
        if app.policy.continuousBackground || !app.tasks.isEmpty || app.wakes.holdsRunning || !app.holds.isEmpty {
            return .background
        }
        if let grace = timers.deadline(id, .grace), now < grace { return .background }
        return .suspended
    }

    /// Moves the app one event (or, for plain programs, as many as it takes)
    /// towards its target.
    mutating func advance(_ id: AppID) {
        while let app = apps[id], app.killing == nil, app.lastNotice == nil {
            // (Not `||`: its autoclosure copied the record, counted.)
            if app.awaiting != nil, !together(app) { return }
            settleMove(id)
            if app.warningPending, app.awaiting == nil, case .running = app.phase {  // not behind launch events
                deliver(id, .didReceiveMemoryWarning)
                continue
            }
            let goal = target(id)
            switch app.phase {
            case .notRunning, .terminating:
                return
            case .prewarming, .prewarmed:
                // Told nothing yet: a stop ends it at once.
                if let stop = app.stop { kill(id, stop.reason(killedAfterDeadline: false)) }
                return
            case .awaitingReady:
                // Nothing to tell it before it is ready, but that it must go.
                if app.stop != nil { deliver(id, .willTerminate); continue }
                return
            case .launching(let step):
                if app.stop != nil { deliver(id, .willTerminate); continue }
                switch step {
                case 0: deliver(id, .willFinishLaunching)
                case 1: deliver(id, .didFinishLaunching)
                default: update(id) { $0.phase = .running(.launched) }
                }
            case .suspended:
                switch goal {
                case .suspended: return
                case .terminated: kill(id, app.stop!.reason(killedAfterDeadline: false)); return
                case .active, .inactive, .background:
                    thaw(id)
                }
            case .running(let told):
                if app.policy.scenes {
                    if !app.discarded.isEmpty, app.stop == nil {
                        update(id) { $0.discarded = [] }
                        deliver(id, .didDiscardSceneSessions, discarded: app.discarded)
                        continue
                    }
                    switch sceneTurn(id, told: told, goal: goal) {
                    case .delivered: continue
                    case .wait: return
                    case .appMay: break
                    }
                }
                if step(id, told: told, goal: goal) { continue }
                // Settled where it belongs: the wake-ups it is owed, one at a time.
                // (None behind launch events that went together: nothing was
                // sent in this turn of the loop, so `app` still says so.)
                guard app.awaiting == nil, case .running(let settled) = apps[id]!.phase, deliverWake(id, told: settled)
                else { return }
            }
        }
    }

    /// One step from `told` towards `goal`; false when there is nothing to do.
    private mutating func step(_ id: AppID, told: Told, goal: Target) -> Bool {
        // A plain program reaches its first position after launch silently,
        // as it gets no launch events: a signal microseconds after exec would
        // arrive before it could install a handler, and kill it.
        let silent = told == .launched && apps[id]!.policy.delivery == .signals
        switch (told, goal) {
        case (.active, .active), (.inactive, .inactive), (.background, .background):
            return false
        case (.active, _):
            deliver(id, .willResignActive)
        case (.inactive, .active), (.launched, .active):
            // Never more active apps than slots: wait until the app this one
            // displaced has resigned (it may still owe an acknowledgement).
            // (A scene app's scenes wait for their slots instead: Scenes.swift.)
            if !apps[id]!.policy.scenes {
                let d = apps[id]!.scenes[SceneNames.main]?.display ?? defaultDisplay(id)
                let ref = SceneRef(id, SceneNames.main)
                if activeScenes(on: d, except: ref) >= displays[d]!.slots { return false }
            }
            deliver(id, .didBecomeActive, silent: silent)
        case (.launched, .inactive):
            update(id) { $0.phase = .running(.inactive) }
        case (.launched, .terminated):
            deliver(id, .willTerminate)
        case (.inactive, _), (.launched, _):
            deliver(id, .didEnterBackground, silent: silent)
        case (.background, .active), (.background, .inactive):
            deliver(id, .willEnterForeground)
        case (.background, .suspended) where apps[id]!.policy.exitsOnSuspend:
            displays.remove(app: id)  // ending, like a user quit: it gives its slot up (held under the lock)
            update(id) { $0.stop = .exitsOnSuspend }
            deliver(id, .willTerminate)
        case (.background, .suspended):
            effects.append(.freeze(id))
            update(id) {
                $0.phase = .suspended
                $0.warningPending = false  // running apps only
            }
            timers.arm(id, .freeze, at: now + Self.freezeDeadline)
            return false
        case (.background, .terminated):
            deliver(id, .willTerminate)
        }
        return true
    }
}

// The freezer's deadline: a freeze asked for is confirmed by the kernel
// within `freezeDeadline`, or the app is killed (Timers.swift).
extension Supervisor {
    /// Thaws a suspended app: it runs in the background again.
    mutating func thaw(_ id: AppID) {
        effects.append(.thaw(id))
        timers.cancel(id, .freeze)
        update(id) {
            $0.phase = .running(.background)
            $0.freezeRefusal = nil
        }
    }

    /// The kernel confirmed the freeze.
    mutating func frozen(_ id: AppID) {
        timers.cancel(id, .freeze)
        if apps[id]!.freezeRefusal != nil { update(id) { $0.freezeRefusal = nil } }
    }
}
