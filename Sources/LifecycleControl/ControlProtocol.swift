import Foundation

// The control socket's protocol: one JSON object per line, each way.
// A request names a command; the daemon answers with one response line,
// except `events` with follow=true, which answers {"ok":true} and then
// streams one {"event":{...}} line per record until the client hangs up.
// docs/protocol.md describes every field.

public struct ControlRequest: Codable, Sendable, Equatable {
    public var command: Command
    public var app: String?
    public var apps: [String]?
    public var background: Bool?
    public var follow: Bool?

    public init(_ command: Command, app: String? = nil, apps: [String]? = nil,
                background: Bool? = nil, follow: Bool? = nil) {
        self.command = command
        self.app = app
        self.apps = apps
        self.background = background
        self.follow = follow
    }

    public enum Command: String, Codable, Sendable, CaseIterable {
        case status, launch, activate, home, stop, kill, lock, unlock, events
        case interruptionBegin = "interruption-begin"
        case interruptionEnd = "interruption-end"

        /// Commands that change something need permission; the rest only read.
        public var changes: Bool { self != .status && self != .events }
    }
}

public struct ControlResponse: Codable, Sendable {
    public var ok: Bool
    public var error: ControlError?
    public var status: StatusReport?
    public var events: [EventRecord]?
    public var event: EventRecord?

    public init(ok: Bool, error: ControlError? = nil, status: StatusReport? = nil,
                events: [EventRecord]? = nil, event: EventRecord? = nil) {
        self.ok = ok
        self.error = error
        self.status = status
        self.events = events
        self.event = event
    }

    public static func failure(_ code: ControlError.Code, _ message: String) -> ControlResponse {
        ControlResponse(ok: false, error: ControlError(code: code, message: message))
    }
}

public struct ControlError: Codable, Sendable, Error, CustomStringConvertible {
    public var code: Code
    public var message: String
    public var description: String { message }

    public enum Code: String, Codable, Sendable {
        case badRequest = "bad-request"
        case unknownApp = "unknown-app"
        case refused
        case permissionDenied = "permission-denied"
    }
}

public struct StatusReport: Codable, Sendable {
    public var daemon: DaemonStatus
    public var apps: [AppStatus]
    public init(daemon: DaemonStatus, apps: [AppStatus]) { self.daemon = daemon; self.apps = apps }
}

public struct DaemonStatus: Codable, Sendable {
    public var pid: Int32
    public var foregroundSlots: Int
    public var foreground: [String]
    public var locked: Bool
    public var interruptions: Int
    /// "cgroup-v2 /sys/fs/cgroup/unified/lifecycled" or "process-groups (...)".
    public var confinement: String
    public var shuttingDown: Bool

    public init(pid: Int32, foregroundSlots: Int, foreground: [String], locked: Bool,
                interruptions: Int, confinement: String, shuttingDown: Bool) {
        self.pid = pid
        self.foregroundSlots = foregroundSlots
        self.foreground = foreground
        self.locked = locked
        self.interruptions = interruptions
        self.confinement = confinement
        self.shuttingDown = shuttingDown
    }
}

public struct AppStatus: Codable, Sendable {
    public var name: String
    public var state: String
    public var pid: Int32?
    /// Seconds since the app entered its state.
    public var secondsInState: Double
    public var delivery: String
    public var backgroundTasks: [TaskStatus]
    /// Seconds of background-task budget left, while it runs.
    public var backgroundTimeRemaining: Double?
    /// The event sent and not yet acknowledged.
    public var awaiting: String?
    public var lastTermination: TerminationInfo?

    public init(name: String, state: String, pid: Int32?, secondsInState: Double, delivery: String,
                backgroundTasks: [TaskStatus], backgroundTimeRemaining: Double?, awaiting: String?,
                lastTermination: TerminationInfo?) {
        self.name = name
        self.state = state
        self.pid = pid
        self.secondsInState = secondsInState
        self.delivery = delivery
        self.backgroundTasks = backgroundTasks
        self.backgroundTimeRemaining = backgroundTimeRemaining
        self.awaiting = awaiting
        self.lastTermination = lastTermination
    }
}

public struct TaskStatus: Codable, Sendable {
    public var id: UInt32
    public var name: String
    public init(id: UInt32, name: String) { self.id = id; self.name = name }
}

public struct TerminationInfo: Codable, Sendable, Equatable {
    /// A stable code: exited, signaled, launch-watchdog, stopped-by-user, ...
    public var reason: String
    public var description: String
    /// Wall-clock time, seconds since the epoch.
    public var time: Double
    public var pid: Int32?

    public init(reason: String, description: String, time: Double, pid: Int32?) {
        self.reason = reason
        self.description = description
        self.time = time
        self.pid = pid
    }
}

/// One entry of `supervisorctl events`: a transition, a delivered event, its
/// acknowledgement, or a termination.
public struct EventRecord: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable {
        case launched, transition, delivered, acknowledged, expiring, frozen, thawed, killed, terminated
    }

    /// Wall-clock time, seconds since the epoch.
    public var time: Double
    /// CLOCK_MONOTONIC nanoseconds (for latency measurements).
    public var monotonic: Int64
    public var app: String
    public var kind: Kind
    public var pid: Int32?
    public var from: String?
    public var to: String?
    public var event: String?
    public var sequence: UInt32?
    /// For `acknowledged`: how long the app took, in microseconds. For
    /// `frozen`: from the freeze decision to the kernel's confirmation.
    public var latencyMicroseconds: Double?
    public var reason: String?
    public var detail: String?

    public init(time: Double, monotonic: Int64, app: String, kind: Kind, pid: Int32? = nil,
                from: String? = nil, to: String? = nil, event: String? = nil, sequence: UInt32? = nil,
                latencyMicroseconds: Double? = nil, reason: String? = nil, detail: String? = nil) {
        self.time = time
        self.monotonic = monotonic
        self.app = app
        self.kind = kind
        self.pid = pid
        self.from = from
        self.to = to
        self.event = event
        self.sequence = sequence
        self.latencyMicroseconds = latencyMicroseconds
        self.reason = reason
        self.detail = detail
    }
}

public enum ControlDefaults {
    public static let socketPath = "/run/lifecycled/control.sock"
    public static let socketEnvironmentKey = "LIFECYCLED_SOCKET"
}
