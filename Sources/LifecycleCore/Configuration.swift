// What the configuration says, read again (a reload): apps appear, change
// and go, each on its own, and a reload that changes nothing changes nothing.
//
//   new app          appears not running (the shell autostarts it if its manifest says so)
//   changed app      not running: the new policy at once; running: it keeps the
//                    policy it was launched with, the new one waits for its next launch
//   removed app      not running: gone at once; running: stopped as if the user
//                    quit it, and gone when it has ended (`.forgotten`)
//   app put back     before it ended: no longer removed; its policy is pending as above

extension Supervisor {
    mutating func reconfigure(_ policies: [AppID: AppPolicy]) {
        for (id, policy) in policies.sorted(by: { $0.key < $1.key }) {
            guard let app = apps[id] else {
                apps[id] = AppRecord(policy: policy)
                scheduleFetch(id)
                unplanned.insert(id)
                continue
            }
            var updated = app
            updated.removing = false
            // A changed manifest may prewarm where the last one could not.
            if policy != app.policy { updated.history.prewarmRefusal = nil }
            if app.phase == .notRunning {
                updated.policy = policy
                if policy.restart != app.policy.restart { updated.restarts = nil }  // counted anew
            } else {
                updated.pending = policy != app.policy ? policy : nil
            }
            if updated.restarts == nil { timers.cancel(id, .restart) }
            if updated != app { update(id) { $0 = updated } }
            if app.phase == .notRunning, policy != app.policy {
                scheduleFetch(id)
                unplanned.insert(id)
            }
            // A prewarm of the old manifest is given up; its end plans the next.
            if app.phase.isPrewarm, policy != app.policy, app.killing == nil, app.stop == nil {
                kill(id, .prewarmDropped(why: "its manifest changed"))
            }
        }
        for id in appIDs where policies[id] == nil && apps[id]?.removing != true {
            if apps[id]!.phase == .notRunning {
                forget(id)
            } else {
                update(id) { $0.removing = true }
                stop(id, cause: .user)
                scheduleFetch(id)
            }
        }
        refreshLimited()
    }

    /// An app that ended: a pending policy takes over, and a removed app goes.
    mutating func afterEnd(_ id: AppID) {
        guard let app = apps[id] else { return }
        if app.removing { return forget(id) }
        if let pending = app.pending {
            update(id) {
                $0.policy = pending
                $0.pending = nil
            }
            refreshLimited()
            scheduleFetch(id)
        }
    }

    private mutating func forget(_ id: AppID) {
        timers.cancelAll(id, includingWakeups: true)
        displays.remove(app: id)
        footprints[id] = nil
        swapped[id] = nil
        apps[id] = nil
        effects.append(.forgotten(id))
    }

    mutating func refreshLimited() {
        limited = apps.keys.filter { apps[$0]!.policy.memory.limit != nil }.sorted()
    }
}
