// What the core knows of one app: its policy, where it has been told it is
// (Phase), what it owes (an acknowledgement), what it holds (background
// tasks), and how it is ending (a stop, a kill, a last notice).

enum Told: Equatable, Sendable, Codable {
    /// Launch events done; not yet told it is active or in the background.
    case launched
    case inactive
    case active
    case background
}

enum Phase: Equatable, Sendable, Codable {
    case notRunning
    case launching(step: Int)
    /// A plain program started, not yet READY=1 (sd_notify readiness).
    case awaitingReady
    case running(Told)
    case suspended
    /// willTerminate sent (or SIGTERM); waiting for the exit.
    case terminating
}

enum StopCause: Sendable, Equatable, Codable {
    case user, shutdown, exitsOnSuspend

    func reason(killedAfterDeadline k: Bool) -> TerminationReason {
        switch self {
        case .user: .stoppedByUser(killedAfterDeadline: k)
        case .shutdown: .shutdown(killedAfterDeadline: k)
        case .exitsOnSuspend: .exitedOnSuspend(killedAfterDeadline: k)
        }
    }
}

struct Awaiting: Equatable, Sendable, Codable {
    var event: LifecycleEvent
    var sequence: UInt32
}

struct AppRecord: Sendable, Equatable, Codable {
    /// Not saved: a restored core takes each app's policy from the
    /// configuration it runs under.
    var policy: AppPolicy = AppPolicy()
    var phase: Phase = .notRunning
    var state: LifecycleState = .notRunning
    var since: Instant = .zero
    var generation: UInt64 = 0
    var launchMode: LaunchMode = .foreground
    var sequence: UInt32 = 0
    var awaiting: Awaiting?
    var tasks: [TaskID: String] = [:]
    var nextTask: TaskID = 1
    var expired: Set<TaskID> = []
    var budgetEnd: Instant?
    var graceEnd: Instant?
    var stop: StopCause?
    var killing: TerminationReason?
    var last: TerminationRecord?
    /// didReceiveMemoryWarning is owed, once the app is idle.
    var warningPending = false
    /// When it was last active (or launched): least recently used dies first.
    var lastUsed: Instant = .zero
    /// Told willBeKilledForMemory; killed with this reason at ack or deadline.
    var lastNotice: TerminationReason?
    /// A reload changed the app's policy while it ran: in force at its
    /// next launch. Not saved, like the policy (a restored core takes
    /// today's configuration).
    var pending: AppPolicy?
    /// A reload removed the app while it ran: it is stopping, and goes when
    /// it has ended. Not saved: a restarted daemon does not configure it.
    var removing = false
    /// Ends it was not asked for, lately: a relaunch due, or failed
    /// (Restarts.swift). Saved: a restarted daemon keeps counting.
    var restarts: Restarts?
    /// `restart`: launched again into this place once the stop has ended it.
    var restartTo: LaunchMode?

    private enum CodingKeys: String, CodingKey {
        case phase, state, since, generation, launchMode, sequence, awaiting, tasks, nextTask, expired, budgetEnd
        case graceEnd, stop, killing, last, warningPending, lastUsed, lastNotice, restarts, restartTo
    }
}

extension AppPolicy {
    func timeout(for event: LifecycleEvent) -> Duration {
        switch event {
        case .willFinishLaunching, .didFinishLaunching: launchTimeout
        case .didEnterBackground: backgroundTimeout
        case .willTerminate: terminateTimeout
        case .willBeKilledForMemory: memory.lastNoticeTimeout
        default: eventTimeout
        }
    }
}

/// Every app's record, by app, and which records were written since the
/// shell last saved: a save then costs the apps a step changed, not all of
/// them. Every write goes through the subscript, so none can be missed (the
/// seeded simulation restores from saves made this way and would diverge).
struct AppTable: Sendable, Sequence {
    private(set) var records: [AppID: AppRecord] = [:]
    private(set) var changed: Set<AppID> = []

    subscript(id: AppID) -> AppRecord? {
        get { records[id] }
        set {
            changed.insert(id)
            records[id] = newValue
        }
        _modify {
            changed.insert(id)
            yield &records[id]
        }
    }

    /// A change that is saved with the app's record (its footprint).
    mutating func markChanged(_ id: AppID) { changed.insert(id) }

    mutating func takeChanged() -> Set<AppID> {
        defer { changed = [] }
        return changed
    }

    var keys: Dictionary<AppID, AppRecord>.Keys { records.keys }
    var values: Dictionary<AppID, AppRecord>.Values { records.values }
    func makeIterator() -> Dictionary<AppID, AppRecord>.Iterator { records.makeIterator() }
}
