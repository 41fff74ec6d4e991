/// The name of an app, as given by its manifest's file name.
public typealias AppID = String

/// The five states of LIFECYCLE.md.
public enum LifecycleState: String, Sendable, CaseIterable, Codable {
    case notRunning = "not-running"
    case inactive
    case active
    case background
    case suspended
}

/// A lifecycle event, spelled as LIFECYCLE.md spells it.
public enum LifecycleEvent: String, Sendable, CaseIterable, Codable {
    case willFinishLaunching
    case didFinishLaunching
    case didBecomeActive
    case willResignActive
    case didEnterBackground
    case willEnterForeground
    case willTerminate
    /// Memory runs short (running apps only). Not a transition.
    case didReceiveMemoryWarning
    /// The app is about to be killed for memory (only apps whose manifest
    /// asks for a last notice). Not in the reference: see docs/architecture.md.
    case willBeKilledForMemory

    /// Events that move an app between states (the rest only inform it).
    public var isTransition: Bool { self != .didReceiveMemoryWarning && self != .willBeKilledForMemory }
}

/// Whether an app was launched for the user (into the foreground) or not.
public enum LaunchMode: String, Sendable, Codable {
    case foreground
    case background
}

/// How an app hears of its transitions.
public enum Delivery: String, Sendable, Codable {
    /// It links the client library: events as messages, each acknowledged.
    case library
    /// It knows nothing of us: signals from its manifest, no acknowledgements.
    case signals
}

/// Everything the core needs to know about one app. Parsed from its manifest.
public struct AppPolicy: Sendable, Equatable {
    public var delivery: Delivery = .library
    /// Return from willFinishLaunching / didFinishLaunching.
    public var launchTimeout: Duration = .seconds(5)
    /// Return from any other callback.
    public var eventTimeout: Duration = .seconds(5)
    /// Return from didEnterBackground unless a background task was begun.
    public var backgroundTimeout: Duration = .seconds(5)
    /// Exit after willTerminate, before SIGKILL.
    public var terminateTimeout: Duration = .seconds(5)
    /// One budget per stay in the background, shared by all background tasks.
    public var backgroundTaskBudget: Duration = .seconds(30)
    /// Expiration handlers run this long before the budget ends.
    public var expirationWarning: Duration = .seconds(5)
    /// Plain programs only: how long they run in the background before being frozen.
    public var backgroundGrace: Duration = .seconds(5)
    /// A continuous background mode (audio, location, voip) keeps it running.
    public var continuousBackground: Bool = false
    /// Terminated instead of suspended.
    public var exitsOnSuspend: Bool = false
    /// Band, limit and last notice under memory pressure.
    public var memory = MemoryPolicy()
    /// Plain programs only: the launch completes when the program says
    /// READY=1 (sd_notify), within the launch timeout, not at exec.
    public var awaitsReadiness = false

    public init() {}
}

/// Why a run of an app ended. Every termination has exactly one.
public enum TerminationReason: Sendable, Equatable, Codable, CustomStringConvertible {
    /// It exited on its own.
    case exited(code: Int32)
    /// It died of a signal nobody here sent.
    case signaled(signal: Int32)
    /// Its process could not be started.
    case launchFailed(message: String)
    /// It did not return from a launch callback in time.
    case launchWatchdog
    /// It did not return from a lifecycle callback in time.
    case eventWatchdog(event: LifecycleEvent)
    /// It did not return from didEnterBackground in time.
    case backgroundWatchdog
    /// Background tasks were still open when the budget ran out.
    case backgroundTaskExpired
    /// The user quit it (`stop`); `killedAfterDeadline` if it had to be SIGKILLed.
    case stoppedByUser(killedAfterDeadline: Bool)
    /// The user killed it (`kill`).
    case killedByUser
    /// Its manifest says exits-on-suspend.
    case exitedOnSuspend(killedAfterDeadline: Bool)
    /// The daemon shut down.
    case shutdown(killedAfterDeadline: Bool)
    /// It broke the protocol.
    case protocolViolation(message: String)
    /// Killed to free memory when the level was critical.
    case memoryPressure(footprint: UInt64?, simulated: Bool)
    /// Its footprint exceeded the limit of its manifest.
    case memoryLimit(footprint: UInt64, limit: UInt64)

    /// A short stable identifier, used in logs, journal fields and JSON.
    public var code: String {
        switch self {
        case .exited: "exited"
        case .signaled: "signaled"
        case .launchFailed: "launch-failed"
        case .launchWatchdog: "launch-watchdog"
        case .eventWatchdog: "event-watchdog"
        case .backgroundWatchdog: "background-watchdog"
        case .backgroundTaskExpired: "background-task-expired"
        case .stoppedByUser: "stopped-by-user"
        case .killedByUser: "killed-by-user"
        case .exitedOnSuspend: "exits-on-suspend"
        case .shutdown: "shutdown"
        case .protocolViolation: "protocol-violation"
        case .memoryPressure: "memory-pressure"
        case .memoryLimit: "per-app-limit"
        }
    }

    public var description: String {
        switch self {
        case .exited(let code): "exited with code \(code)"
        case .signaled(let signal): "killed by signal \(signal)"
        case .launchFailed(let message): "launch failed: \(message)"
        case .launchWatchdog: "launch watchdog: did not finish launching in time"
        case .eventWatchdog(let event): "event watchdog: did not return from \(event.rawValue) in time"
        case .backgroundWatchdog: "background watchdog: did not return from didEnterBackground in time"
        case .backgroundTaskExpired: "background task expired: tasks still open when the budget ran out"
        case .stoppedByUser(let k): "stopped by user" + (k ? " (killed after the terminate deadline)" : "")
        case .killedByUser: "killed by user"
        case .exitedOnSuspend(let k): "exits on suspend" + (k ? " (killed after the terminate deadline)" : "")
        case .shutdown(let k): "daemon shutdown" + (k ? " (killed after the terminate deadline)" : "")
        case .protocolViolation(let message): "protocol violation: \(message)"
        case .memoryPressure(let footprint, let simulated):
            "killed for memory" + (footprint.map { " (footprint \(formatBytes($0)))" } ?? "")
                + (simulated ? " under simulated pressure" : "")
        case .memoryLimit(let footprint, let limit):
            "over its memory limit: footprint \(formatBytes(footprint)), limit \(formatBytes(limit))"
        }
    }
}

/// How a process ended, as the kernel reports it.
public enum ExitStatus: Sendable, Equatable {
    case exited(Int32)
    case signaled(Int32)
    /// SIGKILLed by the kernel's OOM killer at the app's own limit
    /// (cgroup v2 memory.max, set from the manifest's memory.limit).
    case outOfMemory
}

/// One background task as the core tracks it.
public typealias TaskID = UInt32

/// Bytes for people: "512 B", "3.2 MiB", "1.5 GiB".
public func formatBytes(_ bytes: UInt64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"]
    var value = Double(bytes)
    var unit = 0
    while value >= 1024 && unit < units.count - 1 {
        value /= 1024
        unit += 1
    }
    if unit == 0 { return "\(bytes) B" }
    let rounded = (value * 10).rounded() / 10
    return rounded == rounded.rounded() ? "\(Int(rounded)) \(units[unit])" : "\(rounded) \(units[unit])"
}
