// The crash policy: what happens when a run ends that nobody asked to end.
//
//   restart = "no"          (the default, as on a phone) it stays down
//   restart = "on-failure"  relaunched after a failure: a non-zero exit, a signal
//                           nobody here sent (but SIGHUP, SIGINT, SIGTERM, SIGPIPE,
//                           as systemd), a watchdog, a protocol violation, its own
//                           memory limit, a failed launch or freeze, an end unknown
//   restart = "always"      relaunched after any end of its own, a clean exit too
//
// Never relaunched, whatever the policy: a user's stop or kill, a daemon
// shutdown, exits-on-suspend, a reload's removal, and a kill for memory
// pressure (relaunching would undo the kill that freed the memory).
//
// Delays grow geometrically: `delay`, then doubled for every end within
// `window`, up to `maxDelay`, plus up to 10 % of jitter (derived from the app,
// its run and the time, so a replay is exact and apps that crash together do
// not come back together). The end that would be relaunched more than
// `limit` times within `window` leaves the app failed, with its reason,
// until a user launches it (which clears the count). Everything here is part
// of the app's saved record, and its timer of the saved timers: a restarted
// daemon keeps counting, and relaunches when the timer says.
//
// Where a relaunch goes: an app that ended in the background comes back in
// the background. One that ended in front comes back in front when a slot is
// free and the screen is unlocked when its relaunch is due; otherwise (the
// user has moved on) in the background. It never takes a slot from an app
// the user put there.

public enum RestartWhen: String, Sendable, Equatable, Codable, CaseIterable {
    case no
    case onFailure = "on-failure"
    case always
}

/// The manifest's `restart` and `[backoff]`.
public struct RestartPolicy: Sendable, Equatable, Codable {
    public var when: RestartWhen = .no
    /// The first relaunch's delay; each further end within `window` doubles it.
    public var delay: Duration = .seconds(1)
    public var maxDelay: Duration = .seconds(300)
    /// Relaunches within `window` before the app is left failed; 0: never.
    public var limit: Int = 5
    public var window: Duration = .seconds(600)

    public init() {}

    /// Whether a run that ended this way is relaunched.
    public func relaunches(after reason: TerminationReason) -> Bool {
        switch reason {
        case .stoppedByUser, .killedByUser, .shutdown, .exitedOnSuspend, .memoryPressure, .oomKilled: return false
        default: return reason.isCrash ? when != .no : when == .always
        }
    }

    /// Deaths by these signals count as clean, as systemd's default
    /// SuccessExitStatus (SIGHUP, SIGINT, SIGTERM, SIGPIPE).
    static let cleanSignals: Set<Int32> = [1, 2, 15, 13]

    /// The delay before the `n`th relaunch within the window (n ≥ 1), before jitter.
    public func step(_ n: Int) -> Duration {
        var d = delay
        for _ in 1..<max(n, 1) {
            if d >= maxDelay { break }
            d = d * 2
        }
        return min(d, maxDelay)
    }
}

extension TerminationReason {
    /// It failed, in systemd's sense: a non-zero exit, a signal nobody here
    /// sent but SIGHUP, SIGINT, SIGTERM and SIGPIPE, a watchdog, a protocol
    /// violation, its own memory limit, a failed launch or freeze, an end
    /// unknown. Ends someone asked for, or a kill for memory pressure (ours or
    /// another OOM killer's), are not.
    public var isCrash: Bool {
        switch self {
        case .stoppedByUser, .killedByUser, .shutdown, .exitedOnSuspend, .memoryPressure, .oomKilled, .prewarmDropped:
            false
        case .exited(let code): code != 0
        case .signaled(let s): !RestartPolicy.cleanSignals.contains(s)
        default: true
        }
    }
}

/// What the core keeps of an app's unasked ends: when they happened (within
/// the window), the relaunch that is due, or why it gave up. Saved with the
/// app's record; nil for an app that has not ended on its own lately.
struct Restarts: Sendable, Equatable, Codable {
    /// Ends that were (or are to be) relaunched, within the window, oldest first.
    var ends: [Instant] = []
    /// A relaunch is due (the `.restart` timer): whether it ended in front.
    var due: Due?
    var failed: AppFailure?

    struct Due: Sendable, Equatable, Codable {
        var inFront: Bool
        var attempt: Int
    }
}

/// An app that ended too often: left down until a user launches it.
public struct AppFailure: Sendable, Equatable, Codable {
    /// The end that made it give up.
    public var reason: TerminationReason
    /// Ends within the window, that one included.
    public var ends: Int
    public var window: Duration
    public var at: Instant

    public var description: String {
        "failed: ended \(ends) times within \(window.formattedSeconds) (last: \(reason))"
    }
}

extension Supervisor {
    /// After `ended`: relaunch later, give up, or nothing.
    mutating func afterUnaskedEnd(_ id: AppID, _ reason: TerminationReason, inFront: Bool) {
        guard !shuttingDown, let app = apps[id], app.policy.restart.relaunches(after: reason) else { return }
        let policy = app.policy.restart
        var restarts = app.restarts ?? Restarts()
        restarts.ends = restarts.ends.filter { now - $0 < policy.window } + [now]
        restarts.failed = nil
        let attempt = restarts.ends.count
        if policy.limit > 0, attempt > policy.limit {
            let failure = AppFailure(reason: reason, ends: attempt, window: policy.window, at: now)
            update(id) { $0.restarts = Restarts(failed: failure) }
            effects.append(.failed(id, failure))
            scheduleFetch(id)  // none while failed
            return
        }
        let step = policy.step(attempt)
        let at = now + step + jitter(step, id, app.generation)
        restarts.due = .init(inFront: inFront, attempt: attempt)
        update(id) { $0.restarts = restarts }
        timers.arm(id, .restart, at: at)
        effects.append(.relaunchScheduled(id, at: at, attempt: attempt))
    }

    /// Up to a tenth of `step`, from a hash of the app, its run and now.
    private func jitter(_ step: Duration, _ id: AppID, _ generation: UInt64) -> Duration {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in id.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        for v in [generation, UInt64(bitPattern: now.nanoseconds)] { h = (h ^ v) &* 0x100_0000_01b3 }
        h ^= h >> 29
        return .nanoseconds(Int64(h % UInt64(max(1, step.nanoseconds / 10))))
    }

    /// The `.restart` timer fired: launch it where it belongs now.
    mutating func relaunch(_ id: AppID) {
        guard let app = apps[id], app.phase == .notRunning, let due = app.restarts?.due else { return }
        update(id) { $0.restarts?.due = nil }
        let front = displays[displayOf(id)]!
        let slotFree = front.scenes.count < front.slots && !front.isLocked
        start(id, due.inFront && slotFree ? .foreground : .background, reason: .relaunch)
    }

    /// A user launched it (or a reload stopped it restarting): the count
    /// starts again and a failed app is no longer failed.
    mutating func forgetEnds(_ id: AppID) {
        guard apps[id]?.restarts != nil else { return }
        timers.cancel(id, .restart)
        update(id) { $0.restarts = nil }
    }

    /// A user's stop or kill of an app waiting to be relaunched: it is not.
    /// True when there was one to cancel.
    mutating func cancelRelaunch(_ id: AppID) -> Bool {
        guard apps[id]?.restarts?.due != nil else { return false }
        timers.cancel(id, .restart)
        update(id) { $0.restarts?.due = nil }
        return true
    }
}
