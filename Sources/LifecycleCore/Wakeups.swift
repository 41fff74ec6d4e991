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
// Each kind has its own file: FetchWakeups.swift (the schedule and the
// batch), PushWakeups.swift, OpenURL.swift. This one holds their data, and
// the delivery of whichever wake-up an app owes and its answer.
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
public struct AppHistory: Sendable, Equatable, Codable, JSONWritable {
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
    /// What the app's last prewarm used once it was held (its footprint):
    /// the estimate against the prewarm budget (Prewarm.swift).
    public var prewarmFootprint: UInt64?
    /// Why it is not prewarmed again until its manifest changes: it did
    /// not reach its first event, or ended there on its own.
    public var prewarmRefusal: String?

    public static let maxUses = 32

    public init() {}

    private enum CodingKeys: String, CodingKey {
        case quit, lastFetch, window, noData, strikes, uses, pushWakes, held, prewarmFootprint, prewarmRefusal
    }

    /// What the synthesized encoder wrote, without the runtime's generic
    /// `encodeIfPresent` (LifecycleModel/Encoding.swift): part of every save
    /// of an app the user has used. The decoder is the synthesized one.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(quit, forKey: .quit)
        try c.encode(ifPresent: lastFetch, forKey: .lastFetch)
        try c.encode(ifPresent: window, forKey: .window)
        try c.encode(noData, forKey: .noData)
        try c.encode(strikes, forKey: .strikes)
        try c.encode(uses, forKey: .uses)
        try c.encode(pushWakes, forKey: .pushWakes)
        try c.encode(ifPresent: held, forKey: .held)
        try c.encode(ifPresent: prewarmFootprint, forKey: .prewarmFootprint)
        try c.encode(ifPresent: prewarmRefusal, forKey: .prewarmRefusal)
    }

    /// The same, by hand (LifecycleModel/JSONWriting.swift): kept in step
    /// with `encode(to:)` just above.
    public func write(json w: inout JSONWriter) throws {
        w.openObject()
        try w.field("quit", quit)
        try w.field("lastFetch", ifPresent: lastFetch)
        try w.field("window", otherIfPresent: window)
        try w.field("noData", noData)
        try w.field("strikes", strikes)
        w.key("uses")
        try w.array(uses)
        w.key("pushWakes")
        try w.array(pushWakes)
        try w.field("held", otherIfPresent: held)
        try w.field("prewarmFootprint", ifPresent: prewarmFootprint)
        try w.field("prewarmRefusal", ifPresent: prewarmRefusal)
        w.closeObject()
    }

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
