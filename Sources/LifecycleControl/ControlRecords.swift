#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
// The fuzzers compile this module's files together with LifecycleModel's
// into one module, where there is nothing to import.
#if canImport(LifecycleModel)
    import LifecycleModel
#endif

// The record the control protocol reads out of the event history
// (`events`, `--follow`). Kill records are LifecycleModel's (Records.swift).

/// One entry of `supervisorctl events`: a transition, a delivered event, its
/// acknowledgement, or a termination.
public struct EventRecord: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable, CaseIterable {
        case launched, transition, delivered, acknowledged, expiring, frozen, thawed, killed, terminated
        /// A kill for memory was decided (`kill` holds the record).
        case jetsam
        /// The memory level changed (app is "*"; `to` holds the level).
        case memoryLevel = "memory-level"
        /// A plain program said something on its NOTIFY_SOCKET (`detail`: READY=1, STATUS=..., STOPPING=1).
        case notified
        /// A restarted daemon took the app's process back (`detail`: pid and group).
        case adopted
        /// A library app took its channel back after the daemon restarted.
        case resumed
        /// It ended on its own and its `restart` policy relaunches it (`detail`: when, which attempt).
        case relaunching
        /// It ended too often: down until a user launches it (`reason`, `detail`).
        case failed
        /// An operator sent it a signal (`supervisorctl signal`; `detail`: its name).
        case signal
        /// A fetch, push or URL moved on (`reason`: fetch, fetch-skipped, push,
        /// push-held, push-handed-over, answered, unanswered, open-url,
        /// url-dropped; `detail` says more; `to`: an answer's result).
        case wake
        /// Its restoration data was saved, forgotten or discarded (`detail`).
        case restoration
        /// A scene was disconnected for memory (`reason`: shed; `detail`).
        case scene
        /// A suspended app's memory was pushed to swap before any kill
        /// (`detail`: how much, in how long, and why it stopped short).
        case reclaimed
        /// What the compositor's follower says of its windows changed (`from`,
        /// `to`: focused, shown, hidden; none when it has no window; unknown
        /// while the follower is lost): the status field `window`.
        case window
    }

    /// The `app` of records about no app in particular (memory levels).
    public static let daemonWide = "*"

    /// Wall-clock time, seconds since the epoch.
    public var time: Double
    /// CLOCK_MONOTONIC nanoseconds (for latency measurements).
    public var monotonic: Int64
    public var app: String
    public var kind: Kind
    public var pid: Int32?
    public var from: String?
    public var to: String?
    public var event: LifecycleEvent?
    public var sequence: UInt32?
    /// For `acknowledged`: how long the app took, in microseconds. For
    /// `frozen`: from the freeze decision to the kernel's confirmation.
    public var latencyMicroseconds: Double?
    public var reason: String?
    public var detail: String?
    /// For `jetsam`: the whole kill record.
    public var kill: KillRecord?

    public init(
        time: Double, monotonic: Int64, app: String, kind: Kind, pid: Int32? = nil,
        from: String? = nil, to: String? = nil, event: LifecycleEvent? = nil, sequence: UInt32? = nil,
        latencyMicroseconds: Double? = nil, reason: String? = nil, detail: String? = nil,
        kill: KillRecord? = nil
    ) {
        self.kill = kill
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

    private enum CodingKeys: String, CodingKey {
        case time, monotonic, app, kind, pid, from, to, event, sequence, latencyMicroseconds, reason, detail, kill
    }

    /// Every record a follower reads and every one kept: what the
    /// synthesized encoder wrote, with a nil field costing a comparison
    /// (LifecycleModel/Encoding.swift). The decoder is the synthesized one.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(time, forKey: .time)
        try c.encode(monotonic, forKey: .monotonic)
        try c.encode(app, forKey: .app)
        try c.encode(kind, forKey: .kind)
        try c.encode(ifPresent: pid, forKey: .pid)
        try c.encode(ifPresent: from, forKey: .from)
        try c.encode(ifPresent: to, forKey: .to)
        try c.encode(ifPresent: event, forKey: .event)
        try c.encode(ifPresent: sequence, forKey: .sequence)
        try c.encode(ifPresent: latencyMicroseconds, forKey: .latencyMicroseconds)
        try c.encode(ifPresent: reason, forKey: .reason)
        try c.encode(ifPresent: detail, forKey: .detail)
        try c.encode(ifPresent: kill, forKey: .kill)
    }
}

// What `encode(to:)` writes, by hand (LifecycleModel/JSONWriting.swift):
// every record goes to every follower as it happens, and through Codable
// it cost more than a save's row. A field added there goes here too;
// JSONStreamEncoderTests holds the two to the same bytes.
extension EventRecord: JSONWritable {
    public func write(json w: inout JSONWriter) throws {
        w.openObject()
        try w.field("time", time)
        try w.field("monotonic", monotonic)
        try w.field("app", app)
        try w.field("kind", kind)
        try w.field("pid", ifPresent: pid)
        try w.field("from", ifPresent: from)
        try w.field("to", ifPresent: to)
        try w.field("event", ifPresent: event)
        try w.field("sequence", ifPresent: sequence)
        try w.field("latencyMicroseconds", ifPresent: latencyMicroseconds)
        try w.field("reason", ifPresent: reason)
        try w.field("detail", ifPresent: detail)
        try w.field("kill", otherIfPresent: kill)
        w.closeObject()
    }
}

extension EventRecord.Kind: JSONWritableWord {}
