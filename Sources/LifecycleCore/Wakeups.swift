// Wake-ups: the moments of background work an app is given while the user
// is elsewhere, and the launches that open a URL.
//
//   fetch     (fetch mode) a suspended app is thawed, a not-running one is
//             launched into the background (launch.reason "fetch"), and sent
//             performFetch; its answer (new data, no data, failed) or its
//             deadline ends the wake, and it is suspended again
//   push      (remote-notification mode) a running app gets
//             didReceiveRemoteNotification at once; a suspended or not-running
//             one is woken, within its budget of background wake-ups per hour;
//             beyond the budget, without the mode, or after a user quit, the
//             newest payload is held (coalesced) and handed over later
//   open URL  the app listing the scheme comes to the front and gets openURL;
//             a not-running one is launched with the URL in its launch options
//
// Scheduling fetches (`scheduleFetch`): each app's next fetch has a window,
// [earliest, latest]. The earliest is its last fetch plus its minimum interval
// stretched by what the app has shown: never used by the user for days, no
// data answer after answer, deadlines missed. A user who opens the app at a
// regular time of day moves it to shortly before that time. The latest is the
// earliest plus the daemon's batching window, and the app's one `.fetch`
// timer is armed there: when any such timer fires, every app whose window has
// opened is fetched with it, so the machine wakes once for all of them (as
// Android batches inexact alarms), and none waits past its latest.
//
// A user quit (`stop`, `kill`) ends every wake-up of the app until a user
// launches it again, as iOS does after a force-quit; it also discards the
// app's restoration data, as does a crash during launch.
//
// What the next boot must know (uses, fetch statistics, budgets, a held
// payload, the quit) is the app's `AppHistory`, which the shell keeps
// durably; the rest lives and dies with the daemon's runtime state.

/// The manifest's `[fetch]`.
public struct FetchPolicy: Sendable, Equatable, Codable {
    /// No fetch comes sooner after the previous one (iOS's minimum interval).
    public var interval: Duration = .seconds(900)
    /// To answer performFetch.
    public var timeout: Duration = .seconds(30)
    public init() {}
}

/// The manifest's `[push]`.
public struct PushPolicy: Sendable, Equatable, Codable {
    /// Background wake-ups for remote notifications per hour.
    public var budget: Int = 12
    /// To answer didReceiveRemoteNotification.
    public var timeout: Duration = .seconds(30)
    public init() {}
}

/// A remote notification's payload, and when it came.
public struct Push: Sendable, Equatable, Codable {
    public var payload: String
    public var at: Instant
    public init(payload: String, at: Instant) {
        self.payload = payload
        self.at = at
    }
}

/// When the next fetch may come, and when it must.
public struct FetchWindow: Sendable, Equatable, Codable {
    public var earliest: Instant
    public var latest: Instant
}

/// What an app's wake-ups leave behind that the next boot needs: kept
/// durably by the shell (instants shifted to the next boot's clock).
public struct AppHistory: Sendable, Equatable, Codable {
    /// The user quit it: no wake-up until a user launches it.
    public var quit = false
    public var lastFetch: Instant?
    public var window: FetchWindow?
    /// Answers in a row without new data (failures count too).
    public var noData = 0
    /// Wake-ups not answered in time; one is forgiven per answer.
    public var strikes = 0
    /// When the user brought it to the front, oldest first (at most `maxUses`).
    public var uses: [Instant] = []
    /// Background wake-ups spent on pushes within the last hour.
    public var pushWakes: [Instant] = []
    /// The newest push that could not be delivered yet.
    public var held: Push?

    public static let maxUses = 32

    public init() {}

    /// The same history on a clock whose origin is `offset` later.
    public func shifted(by offset: Duration) -> AppHistory {
        var h = self
        h.lastFetch = lastFetch.map { $0 - offset }
        h.window = window.map { FetchWindow(earliest: $0.earliest - offset, latest: $0.latest - offset) }
        h.uses = uses.map { $0 - offset }
        h.pushWakes = pushWakes.map { $0 - offset }
        h.held = held.map { Push(payload: $0.payload, at: $0.at - offset) }
        return h
    }
}

/// Wake-ups of the current run: owed, or delivered and not yet answered.
struct Wakes: Sendable, Equatable, Codable {
    /// A fetch fell due: delivered once the app is settled in the background.
    var fetch: Bool = false
    /// Pushes for the running app, oldest first: each delivered in turn.
    var pushes: [Push] = []
    /// A URL to open, once the app is in front.
    var url: String?
    /// Delivered, not yet answered: the event and when it was sent.
    var inFlight: InFlight?

    struct InFlight: Sendable, Equatable, Codable {
        var event: LifecycleEvent
        var since: Instant
    }

    /// A fetch is owed or under way.
    var fetching: Bool { fetch || inFlight?.event == .performFetch }

    /// Something keeps the app out of suspension.
    var holdsRunning: Bool { fetch || !pushes.isEmpty || inFlight != nil }

    /// Pushes a running app has not been given yet, at most: past it the
    /// oldest goes (a flood of pushes to one app costs it the oldest).
    static let maxQueuedPushes = 16
}

extension AppRecord {
    /// On its way out: stopped, killed, or given its last notice.
    var ending: Bool { stop != nil || killing != nil || lastNotice != nil }

    /// Its next fetch should be scheduled: it declares the mode, the user did
    /// not quit it, it is not failed or being removed, and no fetch is under way.
    var wantsFetchScheduled: Bool {
        policy.declares(.fetch) && !history.quit && !removing && restarts?.failed == nil && !wakes.fetching
    }
}

/// What happened to a wake-up, for the record (`events`) and the journal.
public enum WakeNote: Sendable, Equatable, CustomStringConvertible {
    case fetchStarted(launched: Bool, manual: Bool)
    case fetchSkipped(why: String)
    case pushQueued
    case pushWoke(launched: Bool)
    case pushHeld(why: String, replaced: Bool)
    case pushHandedOver
    case answered(LifecycleEvent, WakeResult, after: Duration)
    case unanswered(LifecycleEvent, TerminationReason)
    case urlOpened(String, launched: Bool)
    case urlDropped(String, why: String)

    /// "2.2 ms", to a tenth.
    static func milliseconds(_ d: Duration) -> String {
        let tenths = max(0, d.nanoseconds) / 100_000
        return "\(tenths / 10).\(tenths % 10) ms"
    }

    /// A stable code for `events`.
    public var code: String {
        switch self {
        case .fetchStarted: "fetch"
        case .fetchSkipped: "fetch-skipped"
        case .pushQueued, .pushWoke: "push"
        case .pushHeld: "push-held"
        case .pushHandedOver: "push-handed-over"
        case .answered: "answered"
        case .unanswered: "unanswered"
        case .urlOpened: "open-url"
        case .urlDropped: "url-dropped"
        }
    }

    public var description: String {
        switch self {
        case .fetchStarted(let launched, let manual):
            (manual ? "fetch asked for" : "fetch due") + (launched ? ": launched into the background" : "")
        case .fetchSkipped(let why): "fetch skipped: \(why)"
        case .pushQueued: "push for the running app"
        case .pushWoke(let launched): launched ? "push: launched into the background" : "push: woken"
        case .pushHeld(let why, let replaced): "push held (\(why))" + (replaced ? ", replacing the one held" : "")
        case .pushHandedOver: "held push handed over in the launch options"
        case .answered(let event, let result, let after):
            "\(event.rawValue) answered \(result.rawValue) after \(Self.milliseconds(after))"
        case .unanswered(let event, let reason): "\(event.rawValue) not answered: \(reason)"
        case .urlOpened(let url, let launched): "open \(url)" + (launched ? ": launched" : "")
        case .urlDropped(let url, let why): "\(url) not opened: \(why)"
        }
    }
}

extension Supervisor {
    /// Usage, answers and misses stretch the minimum interval at most this much.
    static let maxFetchStretch = 64
    /// A regular use is fetched for this long before.
    static let fetchLead: Duration = .seconds(600)
    static let day: Duration = .seconds(86_400)
    static let hour: Duration = .seconds(3600)

    mutating func note(_ id: AppID, _ note: WakeNote) { effects.append(.wake(id, note)) }

    // MARK: - Scheduling

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
    /// an hour of each other. nil when there is no such habit.
    func predictedUse(_ uses: [Instant]) -> Instant? {
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
        while next - Self.fetchLead <= now { next = next + Self.day }
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

    // MARK: - Fetch

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
        case .notRunning:
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

    // MARK: - Push

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
        case .suspended, .notRunning:
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

    // MARK: - Open URL

    /// The app that opens `url`: the first, by name, listing its scheme.
    func route(_ url: String) -> Result<AppID, Refusal> {
        guard let colon = url.firstIndex(of: ":"), colon != url.startIndex else { return .failure(.badURL(url)) }
        let scheme = url[..<colon].lowercased()
        let valid =
            scheme.first!.isASCII && scheme.first!.isLetter
            && scheme.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }
        guard valid else { return .failure(.badURL(url)) }
        guard let id = appIDs.first(where: { apps[$0]!.policy.urlSchemes.contains(scheme) }) else {
            return .failure(.unknownScheme(scheme))
        }
        return .success(id)
    }

    mutating func openURL(_ url: String) {
        let id: AppID
        switch route(url) {
        case .failure(let refusal): return refuse(refusal)
        case .success(let found): id = found
        }
        let app = apps[id]!
        if displays[displayOf(id)]!.locked { return refuse(.screenLocked) }
        if app.phase == .notRunning {
            forgetEnds(id)
            recordUse(id)
            userLaunched(id)
            note(id, .urlOpened(url, launched: true))
            return start(id, .foreground, reason: .url, setUp: { $0.launchURL = url })
        }
        if app.ending { return refuse(.stopping(id)) }
        note(id, .urlOpened(url, launched: false))
        update(id) { $0.wakes.url = url }
        recordUse(id)
        takeForegroundSlot(id)
        advance(id)
    }

    // MARK: - Delivery and answers

    /// Called by the planner when the app is settled: the next wake-up it
    /// owes, if any. True when one was delivered.
    mutating func deliverWake(_ id: AppID, told: Told) -> Bool {
        let now = now
        var app = apps[id]!
        // A held push rides along with any moment the app runs anyway.
        if app.wakes.pushes.isEmpty, let held = app.history.held, app.policy.declares(.remoteNotification),
            !app.history.quit
        {
            update(id) {
                $0.wakes.pushes = [held]
                $0.history.held = nil
            }
            timers.cancel(id, .push)
            app = apps[id]!
        }
        if let url = app.wakes.url {
            update(id) { $0.wakes.url = nil }
            // A scene app opens it in its most recent scene.
            let scene = defaultSceneContext(id)
            deliver(id, .openURL, url: url, scene: scene)
            return true
        }
        if let push = app.wakes.pushes.first {
            update(id) {
                $0.wakes.pushes.removeFirst()
                $0.wakes.inFlight = .init(event: .didReceiveRemoteNotification, since: now)
            }
            deliver(id, .didReceiveRemoteNotification, payload: push.payload)
            return true
        }
        if app.wakes.fetch {
            update(id) { $0.wakes.fetch = false }
            guard told == .background else {
                note(id, .fetchSkipped(why: "it is in front"))
                scheduleFetch(id, from: now)
                return false
            }
            update(id) { $0.wakes.inFlight = .init(event: .performFetch, since: now) }
            deliver(id, .performFetch)
            return true
        }
        return false
    }

    /// The answer to a wake-up (an acknowledgement of one is "no data").
    mutating func answered(_ id: AppID, _ event: LifecycleEvent, _ result: WakeResult) {
        let now = now
        let since = apps[id]!.wakes.inFlight?.since ?? now
        update(id) {
            $0.wakes.inFlight = nil
            $0.history.strikes = max(0, $0.history.strikes - 1)
            $0.history.noData = result == .newData ? 0 : $0.history.noData + 1
            if event == .performFetch { $0.history.lastFetch = now }
        }
        note(id, .answered(event, result, after: now - since))
        if event == .performFetch { scheduleFetch(id) }
    }

    /// What an ended run leaves of its wake-ups: one in flight was missed
    /// (a strike when its deadline passed); a push not yet delivered is held
    /// for the next launch (the newest, if several waited); a fetch owed, or a URL, is dropped.
    mutating func wakesEnded(_ id: AppID, _ wakes: Wakes, _ reason: TerminationReason) {
        if let inFlight = wakes.inFlight {
            let now = now
            update(id) {
                if case .eventWatchdog = reason { $0.history.strikes += 1 }
                if inFlight.event == .performFetch { $0.history.lastFetch = now }
            }
            note(id, .unanswered(inFlight.event, reason))
            if inFlight.event == .performFetch { scheduleFetch(id) }
        }
        if let push = wakes.pushes.last, apps[id]!.history.held == nil {
            update(id) { $0.history.held = push }
            armHeldPush(id)
        }
        if let url = wakes.url { note(id, .urlDropped(url, why: "the app ended first")) }
        if wakes.fetch { scheduleFetch(id, from: now) }
    }
}
