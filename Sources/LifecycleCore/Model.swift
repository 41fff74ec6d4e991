// The fuzzers compile this module's files together with LifecycleModel's
// into one module, where there is nothing to import.
#if canImport(LifecycleModel)
    @_exported import LifecycleModel
#endif

/// Everything the core needs to know about one app. Parsed from its manifest.
public struct AppPolicy: Sendable, Equatable, Codable {
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
    /// Declared background modes; a continuous one (audio, location, voip)
    /// keeps the app running in the background.
    public var backgroundModes: BackgroundModes = []
    /// Terminated instead of suspended.
    public var exitsOnSuspend: Bool = false
    /// Band, limit and last notice under memory pressure.
    public var memory = MemoryPolicy()
    /// Plain programs only: the launch completes when the program says
    /// READY=1 (sd_notify), within the launch timeout, not at exec.
    public var awaitsReadiness = false
    /// Relaunched after it ends on its own? (Restarts.swift)
    public var restart = RestartPolicy()
    /// fetch mode: the minimum interval, and the time to answer (Wakeups.swift).
    public var fetch = FetchPolicy()
    /// remote-notification mode: the hourly budget, and the time to answer.
    public var push = PushPolicy()
    /// URL schemes it opens, lowercase (`supervisorctl open`).
    public var urlSchemes: [String] = []
    /// Opted in to scenes (`scenes = true`): several, each with its own
    /// events (Scenes.swift); otherwise one implicit scene, `main`.
    public var scenes = false
    /// Most scenes it may have at once (`max_scenes`).
    public var maxScenes = 8
    /// The display it goes to when none is named (nil: the first declared).
    public var display: DisplayID?
    /// Started ahead of use? (Prewarm.swift.) A plain program only when
    /// its manifest says so (the manifest's default for one is `never`),
    /// and it awaits readiness (it is held at READY=1).
    public var prewarm: PrewarmPolicy = .predicted

    public init() {}

    /// The mode is declared, and the app can be told of it (a library app).
    public func declares(_ mode: BackgroundModes) -> Bool {
        delivery == .library && backgroundModes.contains(mode)
    }

    /// A continuous background mode keeps it running instead of suspended.
    public var continuousBackground: Bool { backgroundModes.isContinuous }
}

extension TerminationReason: JSONWritable {
    /// As synthesized, by hand (LifecycleModel/JSONWriting.swift): a case
    /// is `{"case":{...}}` with its payload's labels as keys, an optional
    /// left out when nil. A case added below goes here too (the compiler
    /// says so); JSONStreamEncoderTests writes one of each both ways.
    public func write(json w: inout JSONWriter) throws {
        switch self {
        case .exited(let code): try w.enumCase("exited") { try $0.field("code", code) }
        case .signaled(let signal): try w.enumCase("signaled") { try $0.field("signal", signal) }
        case .launchFailed(let message): try w.enumCase("launchFailed") { try $0.field("message", message) }
        case .launchWatchdog: w.enumCase("launchWatchdog")
        case .eventWatchdog(let event): try w.enumCase("eventWatchdog") { try $0.field("event", event) }
        case .backgroundWatchdog: w.enumCase("backgroundWatchdog")
        case .backgroundTaskExpired: w.enumCase("backgroundTaskExpired")
        case .stoppedByUser(let k): try w.enumCase("stoppedByUser") { try $0.field("killedAfterDeadline", k) }
        case .killedByUser: w.enumCase("killedByUser")
        case .exitedOnSuspend(let k): try w.enumCase("exitedOnSuspend") { try $0.field("killedAfterDeadline", k) }
        case .shutdown(let k): try w.enumCase("shutdown") { try $0.field("killedAfterDeadline", k) }
        case .protocolViolation(let message):
            try w.enumCase("protocolViolation") { try $0.field("message", message) }
        case .memoryPressure(let footprint, let simulated):
            try w.enumCase("memoryPressure") {
                try $0.field("footprint", ifPresent: footprint)
                try $0.field("simulated", simulated)
            }
        case .memoryLimit(let footprint, let limit):
            try w.enumCase("memoryLimit") {
                try $0.field("footprint", footprint)
                try $0.field("limit", limit)
            }
        case .oomKilled(let by, let peak):
            try w.enumCase("oomKilled") {
                try $0.field("by", by)
                try $0.field("peak", ifPresent: peak)
            }
        case .exitUnknown(let whileAway): try w.enumCase("exitUnknown") { try $0.field("whileAway", whileAway) }
        case .notAdopted(let why): try w.enumCase("notAdopted") { try $0.field("why", why) }
        case .freezeFailed(let why): try w.enumCase("freezeFailed") { try $0.field("why", why) }
        case .prewarmDropped(let why): try w.enumCase("prewarmDropped") { try $0.field("why", why) }
        }
    }
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
    /// Its footprint exceeded the limit of its manifest (the daemon saw it,
    /// or the kernel enforced it at the group's memory.max).
    case memoryLimit(footprint: UInt64, limit: UInt64)
    /// Another OOM killer killed it, not at its own limit: the kernel's,
    /// when the whole machine (or a group above the app's) ran out of memory
    /// first, or systemd-oomd. `peak`: the most the run used (memory.peak).
    case oomKilled(by: OOMKiller, peak: UInt64?)
    /// It ended, and how is not known: it was found gone when lifecycled
    /// restarted (`whileAway`), or it ended after a restart, not a child of
    /// this daemon, on a kernel that did not say (docs/lifecycle.md).
    case exitUnknown(whileAway: Bool)
    /// lifecycled restarted and could not take it back: killed.
    case notAdopted(why: String)
    /// It was to be suspended and the kernel did not freeze it in time
    /// (a refused write, retried; or a freeze that never completed).
    case freezeFailed(why: String)
    /// A prewarmed process given up (Prewarm.swift says why).
    case prewarmDropped(why: String)

    /// A short stable identifier, used in logs, journal fields and JSON.
    public var code: TerminationCode {
        switch self {
        case .exited: .exited
        case .signaled: .signaled
        case .launchFailed: .launchFailed
        case .launchWatchdog: .launchWatchdog
        case .eventWatchdog: .eventWatchdog
        case .backgroundWatchdog: .backgroundWatchdog
        case .backgroundTaskExpired: .backgroundTaskExpired
        case .stoppedByUser: .stoppedByUser
        case .killedByUser: .killedByUser
        case .exitedOnSuspend: .exitsOnSuspend
        case .shutdown: .shutdown
        case .protocolViolation: .protocolViolation
        case .memoryPressure: .memoryPressure
        case .memoryLimit: .perAppLimit
        case .oomKilled(let killer, _): killer == .kernel ? .kernelOOM : .systemdOOMD
        case .exitUnknown: .exitUnknown
        case .notAdopted: .notAdopted
        case .freezeFailed: .freezeFailed
        case .prewarmDropped: .prewarmDropped
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
        case .oomKilled(let killer, let peak):
            (killer == .kernel
                ? "killed by the kernel's OOM killer: the machine ran out of memory"
                : "killed by systemd-oomd: the machine's memory pressure or swap use")
                + (peak.map { " (its peak \(formatBytes($0)))" } ?? "")
        case .exitUnknown(let away):
            away
                ? "ended while lifecycled was not running (exit status unknown)"
                : "ended (exit status unknown: not a child of this lifecycled, and the kernel did not say)"
        case .notAdopted(let why): "not re-adopted after lifecycled restarted: \(why)"
        case .freezeFailed(let why): "could not be frozen: \(why)"
        case .prewarmDropped(let why): "prewarmed, given up: \(why)"
        }
    }
}

/// How a process ended, as the kernel reports it.
public enum ExitStatus: Sendable, Equatable {
    case exited(Int32)
    case signaled(Int32)
    /// SIGKILLed by another OOM killer: the kernel's (its group's
    /// memory.events say so) or systemd-oomd (its mark on the group).
    case outOfMemory(OutOfMemory)
    /// It ended, and how is not known (see TerminationReason.exitUnknown).
    case unknown(whileAway: Bool)
    /// A restarted daemon found it alive but could not take it back, and
    /// killed it (see TerminationReason.notAdopted).
    case notAdopted(why: String)
}
