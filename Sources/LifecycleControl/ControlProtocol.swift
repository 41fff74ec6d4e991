#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
// The fuzzers compile this module's files together with LifecycleModel's
// into one module, where there is nothing to import.
#if canImport(LifecycleModel)
    @_exported import LifecycleModel
#endif

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
    /// `pressure`: normal, warning or critical.
    public var level: String?
    /// `jetsam`: at most this many records, the most recent.
    public var limit: Int?
    /// `reload`: say what would change without applying it.
    public var dryRun: Bool?
    /// `reload`: relaunch the running apps whose manifest changed, into the
    /// state they were in.
    public var restartChanged: Bool?
    /// `signal`: a name (TERM, SIGUSR1, RTMIN+3) or a number.
    public var signal: String?
    /// `tail`: the output that follows this byte of the log file (from an earlier answer).
    public var offset: UInt64?
    /// `push`: the remote notification's JSON payload (an object, at most 4 KiB).
    public var payload: String?
    /// `open`: the URL.
    public var url: String?
    /// `activate`, `home`, `lock`, `unlock`, `interruption-*`: one display
    /// (without it: `activate` the app's own, the others every display).
    public var display: String?
    /// `activate`, `discard`: the scene.
    public var scene: String?
    /// `shown`: what the compositor shows (lifecycled-follow).
    public var shown: ShownReport?

    public init(
        _ command: Command, app: String? = nil, apps: [String]? = nil,
        background: Bool? = nil, follow: Bool? = nil, level: String? = nil, limit: Int? = nil
    ) {
        self.command = command
        self.app = app
        self.apps = apps
        self.background = background
        self.follow = follow
        self.level = level
        self.limit = limit
    }

    public enum Command: String, Codable, Sendable, CaseIterable {
        case status, launch, activate, home, stop, kill, lock, unlock, events, jetsam, pressure
        case interruptionBegin = "interruption-begin"
        case interruptionEnd = "interruption-end"
        case daemonReexec = "daemon-reexec"
        case reload, restart, signal, avail, tail, fetch, push, open, discard, shown
    }
}

public struct ControlResponse: Codable, Sendable {
    public var ok: Bool
    public var error: ControlError?
    public var status: StatusReport?
    public var events: [EventRecord]?
    public var event: EventRecord?
    /// `jetsam`: kill records, oldest first.
    public var kills: [KillRecord]?
    /// `reload`: what was (or, with dryRun, would be) added, removed, changed.
    public var reload: ReloadReport?
    /// `avail`: every manifest, in force or not, by name.
    public var avail: [AvailableApp]?
    /// `tail`: an app's recent output.
    public var tail: TailReport?
    /// To a compositor's follower: a window to show (docs/focus.md).
    public var raise: RaiseRequest?
    /// To a compositor's follower: a display's home command to run.
    public var run: CompositorCommand?

    public init(
        ok: Bool, error: ControlError? = nil, status: StatusReport? = nil,
        events: [EventRecord]? = nil, event: EventRecord? = nil, kills: [KillRecord]? = nil
    ) {
        self.ok = ok
        self.error = error
        self.status = status
        self.events = events
        self.event = event
        self.kills = kills
    }

    public static func failure(_ code: ControlError.Code, _ message: String) -> ControlResponse {
        ControlResponse(ok: false, error: ControlError(code: code, message: message))
    }

    private enum CodingKeys: String, CodingKey {
        case ok, error, status, events, event, kills, reload, avail, tail, raise, run
    }

    /// Every answer and every followed record: its ten optional fields
    /// without the runtime's generic `encodeIfPresent`
    /// (LifecycleModel/Encoding.swift). The decoder is the synthesized one.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(ok, forKey: .ok)
        try c.encode(ifPresent: error, forKey: .error)
        try c.encode(ifPresent: status, forKey: .status)
        try c.encode(ifPresent: events, forKey: .events)
        try c.encode(ifPresent: event, forKey: .event)
        try c.encode(ifPresent: kills, forKey: .kills)
        try c.encode(ifPresent: reload, forKey: .reload)
        try c.encode(ifPresent: avail, forKey: .avail)
        try c.encode(ifPresent: tail, forKey: .tail)
        try c.encode(ifPresent: raise, forKey: .raise)
        try c.encode(ifPresent: run, forKey: .run)
    }
}

// The same, by hand (LifecycleModel/JSONWriting.swift) for the parts every
// followed record and most answers carry; the rarer parts go through
// Codable into the same buffer. JSONStreamEncoderTests holds the two to
// the same bytes.
extension ControlResponse: JSONWritable {
    public func write(json w: inout JSONWriter) throws {
        w.openObject()
        try w.field("ok", ok)
        try w.field("error", ifPresent: error)
        try w.field("status", otherIfPresent: status)
        if let events {
            w.key("events")
            try w.array(events)
        }
        try w.field("event", ifPresent: event)
        try w.field("kills", otherIfPresent: kills)
        try w.field("reload", otherIfPresent: reload)
        try w.field("avail", otherIfPresent: avail)
        try w.field("tail", otherIfPresent: tail)
        try w.field("raise", otherIfPresent: raise)
        try w.field("run", otherIfPresent: run)
        w.closeObject()
    }
}

extension ControlError: JSONWritable {
    /// What the synthesized encoder writes: `refusal` only when present.
    public func write(json w: inout JSONWriter) throws {
        w.openObject()
        try w.field("code", code)
        try w.field("message", message)
        try w.field("refusal", ifPresent: refusal)
        w.closeObject()
    }
}

extension ControlError.Code: JSONWritableWord {}

public struct ControlError: Codable, Sendable, Error, CustomStringConvertible {
    public var code: Code
    public var message: String
    /// With `refused`: the daemon's stable refusal code (screen-locked,
    /// not-running, already-running, ...), for scripts.
    public var refusal: String?
    public var description: String { message }

    public init(code: Code, message: String, refusal: String? = nil) {
        self.code = code
        self.message = message
        self.refusal = refusal
    }

    public enum Code: String, Codable, Sendable {
        case badRequest = "bad-request"
        case unknownApp = "unknown-app"
        case refused
        case permissionDenied = "permission-denied"
    }
}

public enum ControlDefaults {
    public static let socketPath = "/run/lifecycled/control.sock"
    public static let socketEnvironmentKey = "LIFECYCLED_SOCKET"
    /// Beside the control socket, one only the daemon's own user (root)
    /// may open (mode 0600), as systemd keeps /run/systemd/private: its
    /// connections wait in a backlog of their own, never behind another
    /// user's flood of connections to the shared one.
    public static func privatePath(for controlSocket: String) -> String { controlSocket + ".private" }
}
