// Remote notifications (Wakeups.swift has the overview): delivered to a
// running app at once, woken within the app's budget, otherwise held (the
// newest payload kept) and handed over later.

extension Supervisor {
    mutating func push(_ id: AppID, _ payload: String) {
        let app = apps[id]!
        let push = Push(payload: payload, at: now)
        guard app.policy.declares(.remoteNotification) else {
            return hold(id, push, why: "no remote-notification mode: handed over at its next launch")
        }
        if app.history.quit { return hold(id, push, why: "quit by the user: handed over at its next launch") }
        if app.ending {
            return hold(id, push, why: "it is ending: handed over at its next launch")
        }
        switch app.phase {
        case .launching, .awaitingReady, .running:
            let full = app.wakes.pushes.count >= Wakes.maxQueuedPushes
            update(id) {
                if full { $0.wakes.pushes.removeFirst() }
                $0.wakes.pushes.append(push)
            }
            note(
                id,
                full
                    ? .pushHeld(why: "\(Wakes.maxQueuedPushes) wait for the app", replaced: true) : .pushQueued)
            advance(id)
        case .terminating:
            hold(id, push, why: "it is ending: handed over at its next launch")
        case .suspended, .notRunning, .prewarming, .prewarmed:  // a prewarmed app is taken over
            if app.phase == .notRunning, app.restarts?.failed != nil {
                return hold(id, push, why: "it failed: handed over at its next launch")
            }
            if app.phase == .notRunning, app.restarts?.due != nil {
                return hold(id, push, why: "a relaunch is due: handed over then")
            }
            guard spendPushWake(id) else {
                return hold(id, push, why: "over its budget of \(app.policy.push.budget) wake-ups an hour")
            }
            if app.phase == .suspended {
                note(id, .pushWoke(launched: false))
                update(id) { $0.wakes.pushes = [push] }
                advance(id)
            } else {
                note(id, .pushWoke(launched: true))
                start(
                    id, .background, reason: .remoteNotification,
                    setUp: {
                        $0.wakes.pushes = [push]; $0.launchPush = push
                    })
            }
        }
    }

    /// Takes one background wake-up from the app's hourly budget; nil when none is left.
    private mutating func spendPushWake(_ id: AppID) -> Bool {
        let now = now
        let app = apps[id]!
        let recent = app.history.pushWakes.filter { now - $0 < Self.hour }
        guard recent.count < app.policy.push.budget else { return false }
        update(id) { $0.history.pushWakes = recent + [now] }
        return true
    }

    /// Keeps the newest payload for later: a retry when the budget allows
    /// (an app that has the mode and was not quit), else the next launch.
    private mutating func hold(_ id: AppID, _ push: Push, why: String) {
        let replaced = apps[id]!.history.held != nil
        update(id) { $0.history.held = push }
        note(id, .pushHeld(why: why, replaced: replaced))
        armHeldPush(id)
    }

    /// The `.push` timer: when the next wake-up of the budget frees, for a
    /// push held because the budget was spent.
    mutating func armHeldPush(_ id: AppID) {
        let app = apps[id]!
        let budget = app.policy.push.budget
        guard app.history.held != nil, app.policy.declares(.remoteNotification), !app.history.quit,
            budget > 0
        else { return timers.cancel(id, .push) }
        // Only a push held for the budget is retried; one held for another
        // reason (the app ending, failed, a relaunch due) goes with the next launch.
        let recent = app.history.pushWakes.filter { now - $0 < Self.hour }
        guard recent.count >= budget else { return timers.cancel(id, .push) }
        timers.arm(id, .push, at: recent[recent.count - budget] + Self.hour)
    }

    /// The `.push` timer fired: try the held payload again.
    mutating func retryHeldPush(_ id: AppID) {
        guard let held = apps[id]?.history.held else { return }
        let app = apps[id]!
        // Still nowhere to go: it waits for the next launch.
        if app.phase == .terminating || app.ending || app.restarts?.failed != nil {
            return
        }
        update(id) { $0.history.held = nil }
        push(id, held.payload)
    }
}
