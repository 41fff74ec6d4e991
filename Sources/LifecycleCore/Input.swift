/// Everything that can happen to the supervisor. Commands come from the user
/// (supervisorctl); the rest is reported by the daemon shell from the kernel
/// and the app channels. `generation` names one run of an app, so that a late
/// report about an earlier run can never touch the current one.
public enum Input: Sendable, Equatable {
    // Commands.
    case launch(AppID, LaunchMode)
    case activate(AppID)
    case home
    case interruptionBegan
    case interruptionEnded
    case lock
    case unlock
    case stop(AppID)
    case kill(AppID)
    case shutdown

    // Reports about processes and channels.
    case launchFailed(AppID, generation: UInt64, message: String)
    case exited(AppID, generation: UInt64, ExitStatus)
    case acknowledged(AppID, generation: UInt64, sequence: UInt32)
    case beginBackgroundTask(AppID, generation: UInt64, request: UInt32, name: String)
    case endBackgroundTask(AppID, generation: UInt64, task: TaskID)
    case protocolViolation(AppID, generation: UInt64, message: String)
    /// A plain program said READY=1 on its notification socket.
    case ready(AppID, generation: UInt64)

    /// A memory measurement (or a simulated level): warnings, per-app
    /// limits and, at critical, one kill.
    case memory(MemorySample)

    /// Time has passed: fire every timer that is due.
    case tick
}

/// What the shell must do. Effects are data: the core decides, the shell acts.
public enum Effect: Sendable, Equatable {
    /// Start a new process for the app (in a fresh cgroup). Report `.exited`
    /// or `.launchFailed` with this generation.
    case spawn(AppID, generation: UInt64, mode: LaunchMode)
    /// Tell the app of an event: a message for library apps (with its
    /// absolute deadline and, in the background, the end of the background
    /// budget), the manifest's signal for plain programs.
    case deliver(AppID, Delivered)
    /// Answer a beginBackgroundTask request; `task == nil` is the invalid id.
    case backgroundTaskReply(AppID, request: UInt32, task: TaskID?, budgetEnd: Instant?)
    /// Run the expiration handlers of these tasks.
    case expireBackgroundTasks(AppID, [TaskID])
    case freeze(AppID)
    case thaw(AppID)
    /// SIGKILL every process of the app (its whole cgroup).
    case kill(AppID, TerminationReason)
    /// The public state changed.
    case transition(AppID, from: LifecycleState, to: LifecycleState)
    /// A run ended; the record says why.
    case terminated(AppID, TerminationRecord)
    /// A command was refused; nothing else happened.
    case refused(String)
    /// The app is killed for memory: the record of why, emitted right after its
    /// `.kill` (the shell signals and frees first), or with the last notice.
    case memoryKill(MemoryKill)
    /// The victim of a pressure kill is gone: measure again now, and report
    /// with `.memory`, so the next kill (if any) is decided on fresh numbers.
    case remeasure
}

/// One event on its way to an app.
public struct Delivered: Sendable, Equatable {
    public var event: LifecycleEvent
    public var sequence: UInt32
    /// When the app must have acknowledged it (`nil` for plain programs,
    /// which do not acknowledge).
    public var deadline: Instant?
    /// In the background: when the background budget ends.
    public var budgetEnd: Instant?
    public var mode: LaunchMode
    public var previous: TerminationRecord?
}

/// How and when one run of an app ended.
public struct TerminationRecord: Sendable, Equatable, Codable {
    public var reason: TerminationReason
    public var generation: UInt64
    public var at: Instant

    public init(reason: TerminationReason, generation: UInt64, at: Instant) {
        self.reason = reason
        self.generation = generation
        self.at = at
    }
}

extension Instant: Codable {
    public init(from decoder: any Decoder) throws {
        nanoseconds = try decoder.singleValueContainer().decode(Int64.self)
    }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(nanoseconds)
    }
}
