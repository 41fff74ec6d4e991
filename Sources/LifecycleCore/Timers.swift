// Every deadline of the core lives in one table, keyed by app and kind; this
// file is the only code that reads or writes it, and says what each timer
// does when it fires. A timer always ends in progress or a kill.

enum TimerKind: Int, CaseIterable, Comparable, Sendable, Codable {
    /// An event's acknowledgement is due (launch, event or background watchdog).
    case ack
    /// A plain program's background grace ends: it is suspended.
    case grace
    /// The background budget is about to end: expiration handlers run.
    case expiration
    /// The background budget ended with tasks open: killed.
    case budget
    /// willTerminate (or SIGTERM) was sent; the process must be gone.
    case terminate
    /// The last notice before a kill for memory ran out.
    case notice
    /// A plain program with `readiness = "notify"` must have said READY=1.
    case ready
    /// A crashed app's relaunch is due (Restarts.swift).
    case restart
    /// The latest moment of the app's next fetch window: it and every app
    /// whose window has opened are fetched (Wakeups.swift).
    case fetch
    /// The budget frees a wake-up for the push held for the app.
    case push
    /// A suspended app's freeze is not yet confirmed by the kernel: at
    /// this deadline it is killed (`freeze-failed`), as for a missed
    /// deadline.
    case freeze
    /// Prewarming (Prewarm.swift): a predicted use's window opens (not
    /// running), the app must be held by now (prewarming), or a predicted
    /// prewarm unused is given up (prewarmed). (Last: timer kinds are
    /// saved by number.)
    case prewarm

    static func < (a: TimerKind, b: TimerKind) -> Bool { a.rawValue < b.rawValue }
}

extension TimerKind {
    /// The timer that waits on what an event awaits.
    init(awaiting event: LifecycleEvent) {
        switch event.awaited {
        case .acknowledgement: self = .ack
        case .exit: self = .terminate
        case .notice: self = .notice
        }
    }
}

struct TimerKey: Hashable, Comparable, Sendable, Codable {
    var app: AppID
    var kind: TimerKind
    init(_ app: AppID, _ kind: TimerKind) { self.app = app; self.kind = kind }
    static func < (a: TimerKey, b: TimerKey) -> Bool { (a.app, a.kind) < (b.app, b.kind) }
}

/// The core's deadlines, at most one per app and kind.
struct TimerTable: Sendable, Codable {
    private var deadlines: [TimerKey: Instant] = [:]

    mutating func arm(_ app: AppID, _ kind: TimerKind, at deadline: Instant) {
        deadlines[TimerKey(app, kind)] = deadline
    }

    /// Moves the deadline to `deadline` if that is later (or arms it).
    mutating func extend(_ app: AppID, _ kind: TimerKind, to deadline: Instant) {
        let key = TimerKey(app, kind)
        deadlines[key] = max(deadlines[key] ?? deadline, deadline)
    }

    mutating func cancel(_ app: AppID, _ kinds: TimerKind...) {
        for kind in kinds { deadlines[TimerKey(app, kind)] = nil }
    }

    /// Every timer of the app's run: not its fetch schedule and held push,
    /// which outlive runs (`includingWakeups`: those too, for an app that goes).
    mutating func cancelAll(_ app: AppID, includingWakeups: Bool = false) {
        for kind in TimerKind.allCases where includingWakeups || (kind != .fetch && kind != .push) {
            deadlines[TimerKey(app, kind)] = nil
        }
    }

    func deadline(_ app: AppID, _ kind: TimerKind) -> Instant? { deadlines[TimerKey(app, kind)] }

    /// The earliest deadline, if any.
    var next: Instant? { deadlines.values.min() }

    /// The apps with a deadline due at `now`, by name.
    func apps(dueAt now: Instant) -> [AppID] {
        Set(deadlines.filter { $0.value <= now }.map(\.key.app)).sorted()
    }

    /// The earliest deadline of a run (not a fetch schedule or a held push).
    var nextOfRuns: Instant? { deadlines.filter { $0.key.kind != .fetch && $0.key.kind != .push }.values.min() }

    /// Removes and returns the earliest timer due at `now`; ties go by app
    /// name, then kind, so that a run replays exactly.
    mutating func popDue(now: Instant) -> TimerKey? {
        guard
            let (key, _) = deadlines.filter({ $0.value <= now })
                .min(by: { ($0.value, $0.key) < ($1.value, $1.key) })
        else { return nil }
        deadlines[key] = nil
        return key
    }
}

// As synthesized, by hand (LifecycleModel/JSONWriting.swift): the clock
// part of every save. A dictionary whose keys are not strings is an array
// of key, value, key, value.
extension TimerTable: JSONWritable {
    func write(json w: inout JSONWriter) throws {
        w.openObject()
        w.key("deadlines")
        w.openArray()
        for (key, deadline) in deadlines {
            w.element()
            w.openObject()
            try w.field("app", key.app)
            try w.field("kind", key.kind.rawValue)
            w.closeObject()
            w.element()
            deadline.write(json: &w)
        }
        w.closeArray()
        w.closeObject()
    }
}

extension Supervisor {
    mutating func fireDueTimers() {
        while let key = timers.popDue(now: now) { fire(key) }
    }

    private mutating func fire(_ key: TimerKey) {
        let id = key.app
        guard let app = apps[id] else { return }
        switch key.kind {
        case .ack:
            switch app.awaiting?.event {
            case .willFinishLaunching?, .didFinishLaunching?: kill(id, .launchWatchdog)
            case .didEnterBackground?: kill(id, .backgroundWatchdog)
            case let event?: kill(id, .eventWatchdog(event: event))
            case nil: break
            }
        case .grace: advance(id)
        case .expiration:
            let open = app.tasks.keys.filter { !app.expired.contains($0) }.sorted()
            guard !open.isEmpty else { return }
            update(id) { $0.expired.formUnion(open) }
            effects.append(.expireBackgroundTasks(id, open))
        case .budget:
            if !app.tasks.isEmpty { kill(id, .backgroundTaskExpired) }
        case .terminate:
            kill(id, (app.stop ?? .user).reason(killedAfterDeadline: true))
        case .notice:
            if let reason = app.lastNotice { kill(id, reason) }
        case .ready:
            if app.phase == .awaitingReady { kill(id, .launchWatchdog) }
        case .restart: relaunch(id)
        case .fetch: fetchBatch()
        case .push: retryHeldPush(id)
        case .prewarm: prewarmTimer(id)
        case .freeze:
            guard app.phase == .suspended || app.phase == .prewarmed else { return }
            let why = app.freezeRefusal.map { "the kernel refused: \($0)" } ?? "not frozen after 5 s"
            kill(id, .freezeFailed(why: why))
        }
    }

    /// Arms the expiration notice and the end of the background budget, when
    /// the app is in the background with open tasks and the budget applies.
    mutating func armBudget(_ id: AppID) {
        let app = apps[id]!
        guard let end = app.budgetEnd, !app.policy.continuousBackground, !app.tasks.isEmpty else { return }
        timers.arm(id, .budget, at: end)
        if app.tasks.keys.contains(where: { !app.expired.contains($0) }) {
            timers.arm(id, .expiration, at: max(now, end - app.policy.expirationWarning))
        }
    }
}
