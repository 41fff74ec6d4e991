// Background fetch (Wakeups.swift has the overview): when each app's next
// fetch may come (its window, stretched by what the app has shown, moved
// before a regular use), the batch that wakes the machine once for every
// window open, and a fetch started.

extension Supervisor {
    /// Arms (or re-arms) the app's next fetch, or takes it away when it has
    /// no fetch mode, was quit, failed, or is going. `from`: counted from
    /// then rather than from the last fetch (a fetch skipped or lost: the
    /// next comes an interval later, never at once again).
    mutating func scheduleFetch(_ id: AppID, from: Instant? = nil) {
        guard let app = apps[id] else { return }
        let h = app.history
        guard app.wantsFetchScheduled else {
            if h.window != nil { apps[id]!.history.window = nil }
            timers.cancel(id, .fetch)
            return
        }
        let interval = app.policy.fetch.interval
        let base = from ?? h.lastFetch ?? now
        var earliest = base + interval * fetchStretch(h)
        if let use = predictedUse(h.uses) {
            // Shortly before a regular use, the minimum interval allowing.
            earliest = min(earliest, max(use - Self.fetchLead - fetchWindow, base + interval))
        }
        earliest = max(earliest, now)
        let window = FetchWindow(earliest: earliest, latest: earliest + fetchWindow)
        if h.window != window { apps[id]!.history.window = window }
        timers.arm(id, .fetch, at: window.latest)
    }

    /// The app's schedule agrees with its policy: a window exactly when it
    /// has the mode, was not quit and has no fetch under way (a restored core
    /// under a changed configuration schedules the others again).
    func fetchScheduleHolds(_ id: AppID) -> Bool {
        let app = apps[id]!
        return (app.history.window != nil) == app.wantsFetchScheduled
    }

    /// How much longer than its minimum interval the app waits: 4x unused
    /// for a day, 16x for three; doubled for every three answers in a row
    /// without data (up to 8x); doubled for every miss (up to 16x).
    func fetchStretch(_ h: AppHistory) -> Int {
        var stretch = 1
        if let last = h.uses.last, now - last <= Self.day * 3 {
            if now - last > Self.day { stretch = 4 }
        } else {
            stretch = 16  // never used, or not for three days
        }
        stretch *= 1 << min(h.noData / 3, 3)
        stretch *= 1 << min(h.strikes, 4)
        return min(stretch, Self.maxFetchStretch)
    }

    /// The next time the user is expected, from a regular time of day: at
    /// least three uses on different days of the last two weeks within half
    /// an hour of each other. nil when there is no such habit. The first
    /// such time after `after` (by default a fetch's lead from now).
    func predictedUse(_ uses: [Instant], after: Instant? = nil) -> Instant? {
        let day = Self.day.nanoseconds
        let recent = uses.filter { now - $0 < Self.day * 14 }
        var best: (count: Int, phase: Int64)?
        for u in recent {
            let phase = ((u.nanoseconds % day) + day) % day
            var days: Set<Int64> = []
            for v in recent {
                let other = ((v.nanoseconds % day) + day) % day
                let apart = abs(phase - other)
                if min(apart, day - apart) <= 1_800_000_000_000 { days.insert(v.nanoseconds / day) }
            }
            if days.count >= 3, days.count >= (best?.count ?? 0) { best = (days.count, phase) }
        }
        guard let phase = best?.phase else { return nil }
        let today = now.nanoseconds - ((now.nanoseconds % day) + day) % day
        var next = Instant(nanoseconds: today + phase)
        let floor = after ?? now + Self.fetchLead
        while next <= floor { next = next + Self.day }
        return next
    }

    /// The user brought the app to the front: remembered, and its next
    /// fetch scheduled by it.
    mutating func recordUse(_ id: AppID) {
        let now = now
        update(id) {
            $0.history.uses.append(now)
            if $0.history.uses.count > AppHistory.maxUses { $0.history.uses.removeFirst() }
        }
        scheduleFetch(id)
    }

    /// A user's launch: wake-ups are back, and the fetch is scheduled anew.
    mutating func userLaunched(_ id: AppID) {
        if apps[id]!.history.quit { update(id) { $0.history.quit = false } }
        if apps[id]!.history.prewarmRefusal == Self.prewarmStopped { update(id) { $0.history.prewarmRefusal = nil } }
        scheduleFetch(id)
    }

    /// A user's stop or kill: no wake-up until a user launch. (Its
    /// restoration data is discarded when the run has ended: what the app
    /// saves on its way out goes too.)
    mutating func userQuit(_ id: AppID) {
        update(id) { $0.history.quit = true }
        scheduleFetch(id)
        timers.cancel(id, .push)
        if apps[id]!.wakes.fetch { update(id) { $0.wakes.fetch = false } }
    }

    /// A `.fetch` timer fired: every app whose window has opened goes with it.
    mutating func fetchBatch() {
        for id in appIDs {
            guard let window = apps[id]!.history.window, window.earliest <= now else { continue }
            timers.cancel(id, .fetch)
            update(id) { $0.history.window = nil }
            startFetch(id, manual: false)
        }
    }

    /// `supervisorctl fetch`: one now.
    mutating func fetchNow(_ id: AppID) {
        let app = apps[id]!
        guard app.policy.declares(.fetch) else { return refuse(.modeNotDeclared(id, "fetch")) }
        if app.history.quit { return refuse(.quitByUser(id)) }
        if displays.holds(app: id) { return refuse(.inFront(id)) }
        if app.wakes.fetching { return refuse(.fetchInProgress(id)) }
        // This one takes the place of the scheduled one; the next is counted from its answer.
        timers.cancel(id, .fetch)
        if app.history.window != nil { update(id) { $0.history.window = nil } }
        startFetch(id, manual: true)
    }

    /// Delivers (or launches for) one fetch; when it cannot be, skipped and
    /// scheduled again.
    private mutating func startFetch(_ id: AppID, manual: Bool) {
        let app = apps[id]!
        func skip(_ why: String) {
            note(id, .fetchSkipped(why: why))
            scheduleFetch(id, from: now)
        }
        if !manual, memoryLevel == .critical { return skip("memory is critical") }
        switch app.phase {
        case _ where app.startable:  // not running, or prewarmed: taken over
            if app.restarts?.due != nil { return skip("a relaunch is due") }
            if app.restarts?.failed != nil { return skip("it failed") }
            note(id, .fetchStarted(launched: true, manual: manual))
            start(id, .background, reason: .fetch, setUp: { $0.wakes.fetch = true })
        case _ where app.ending:
            skip("it is ending")
        case _ where displays.holds(app: id):
            skip("it is in front")
        case _ where app.wakes.fetching:
            skip("a fetch is in progress")
        default:
            note(id, .fetchStarted(launched: false, manual: manual))
            update(id) { $0.wakes.fetch = true }
            advance(id)
        }
    }
}
