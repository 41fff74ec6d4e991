// The fuzzers compile this module's files together with LifecycleModel's
// into one module, where there is nothing to import.
#if canImport(LifecycleModel)
    @_exported import LifecycleModel
#endif

// The app channel's wire format: the one definition, used by the daemon, the
// Swift client and (through its golden vectors) every other client.
//
// Transport: a SOCK_SEQPACKET Unix socket pair; one datagram is one message,
// so the transport frames messages. Every message starts with an 8-byte
// header, little-endian:
//
//   offset 0  u8   version (1)
//          1  u8   type
//          2  u16  flags (0; reserved)
//          4  u32  id: the sequence number, request id or task id the type names
//
// followed by the type's payload (docs/protocol.md lists each byte).
// Timestamps are CLOCK_MONOTONIC nanoseconds as i64; -1 means "none".

public enum Wire {
    public static let version: UInt8 = 1
    /// Most restoration data an app may save (and is handed back).
    public static let maxRestorationSize = 65536
    /// Largest remote-notification payload, in UTF-8 bytes (as APNs).
    public static let maxPushPayload = 4096
    /// No message is larger; a larger datagram is a protocol violation.
    /// Room for the largest restoration data and its header.
    public static let maxMessageSize = maxRestorationSize + 1024
    /// Longest background task name, in UTF-8 bytes.
    public static let maxTaskName = 256
    /// Most messages a client keeps while it waits for a background task
    /// reply; one more is a channel error (LIFECYCLE_MAX_QUEUED in C).
    public static let maxQueuedWhileWaiting = 64
    /// The environment variable naming the inherited, connected socket.
    public static let socketEnvironmentKey = "LIFECYCLE_FD"
    /// The environment variable naming the app, for logs.
    public static let appNameEnvironmentKey = "LIFECYCLE_APP"
    /// The environment variable with the version the daemon speaks on the
    /// channel: a client that does not speak it refuses to start, before
    /// the first message, rather than failing on it.
    public static let protocolEnvironmentKey = "LIFECYCLE_PROTOCOL"
    /// The environment variable naming the socket where a client takes its
    /// channel back after the daemon restarts (docs/protocol.md).
    public static let resumeSocketEnvironmentKey = "LIFECYCLE_RESUME_SOCKET"
    /// Set to 1 for a process started ahead of use (prewarmed): the client
    /// sends `prewarmed` once it waits for its first event, and is frozen
    /// there until a use (docs/protocol.md).
    public static let prewarmEnvironmentKey = "LIFECYCLE_PREWARM"
    /// How long a client tries to resume before the broken channel is final
    /// (LIFECYCLE_RESUME_WAIT_MS in C).
    public static let resumeWaitMilliseconds = 60_000
    /// The longest pause between a library's tries to reach the resume
    /// socket (the first is 100 ms, then doubling; the C library's
    /// RESUME_LONGEST_PAUSE_MS): how long after a new daemon starts an app
    /// may take to come back to it.
    public static let resumeLongestPauseMilliseconds = 1000
    /// Most open tasks a resume names: the daemon's limit per app.
    public static let maxResumeTasks = 64
}

/// One lifecycle event, as the daemon sends it.
public struct EventMessage: Sendable, Equatable, Codable {
    public var sequence: UInt32
    public var event: LifecycleEvent
    /// 0 = launched into the foreground, 1 = into the background.
    public var launchedInBackground: Bool
    /// When the app must have acknowledged it (monotonic ns).
    public var deadline: Int64?
    /// In the background: when the background-task budget ends.
    public var budgetEnd: Int64?
    /// Launch options (launch events only): ordered key/value pairs.
    public var options: [KeyValue]

    public init(
        sequence: UInt32, event: LifecycleEvent, launchedInBackground: Bool = false,
        deadline: Int64?, budgetEnd: Int64?, options: [KeyValue] = []
    ) {
        self.sequence = sequence
        self.event = event
        self.launchedInBackground = launchedInBackground
        self.deadline = deadline
        self.budgetEnd = budgetEnd
        self.options = options
    }
}

extension EventMessage: JSONWritable {
    /// What the synthesized encoder writes, by hand (LifecycleModel/
    /// JSONWriting.swift): the daemon saves the last event of each app
    /// with its row. A field added above goes here too.
    public func write(json w: inout JSONWriter) throws {
        w.openObject()
        try w.field("sequence", sequence)
        try w.field("event", event)
        try w.field("launchedInBackground", launchedInBackground)
        try w.field("deadline", ifPresent: deadline)
        try w.field("budgetEnd", ifPresent: budgetEnd)
        w.key("options")
        try w.array(options)
        w.closeObject()
    }
}

extension KeyValue: JSONWritable {
    public func write(json w: inout JSONWriter) throws {
        w.openObject()
        try w.field("key", key)
        try w.field("value", value)
        w.closeObject()
    }
}

extension EventMessage {
    /// The value of the first option with this key.
    public func option(_ key: String) -> String? { options.first { $0.key == key }?.value }
}

public struct KeyValue: Sendable, Equatable, Codable {
    public var key: String
    public var value: String
    public init(_ key: String, _ value: String) { self.key = key; self.value = value }
}

/// Daemon to app.
public enum DaemonMessage: Sendable, Equatable {
    case event(EventMessage)
    /// The answer to beginBackgroundTask: `task == nil` is the invalid id.
    case backgroundTaskReply(request: UInt32, task: UInt32?, budgetEnd: Int64?)
    /// Run the expiration handlers of these tasks now.
    case backgroundTasksExpiring([UInt32])
    /// The daemon took the channel back: what was owed follows.
    case resumed
    /// The restoration data the app saved in an earlier run: sent just
    /// before willFinishLaunching, whose options say its size.
    case restoration([UInt8])
}

/// App to daemon.
public enum AppMessage: Sendable, Equatable {
    case acknowledge(sequence: UInt32)
    case beginBackgroundTask(request: UInt32, name: String)
    case endBackgroundTask(task: UInt32)
    /// First message on a resumed channel: the last event the app
    /// acknowledged, its name, and the tasks it holds open.
    case resume(lastAcknowledged: UInt32, app: String, tasks: [UInt32])
    /// The answer to performFetch or didReceiveRemoteNotification: it
    /// acknowledges that event and says what the work found.
    case complete(sequence: UInt32, result: WakeResult)
    /// Keep these bytes (at most Wire.maxRestorationSize) and hand them
    /// back at the next launch; empty: forget what was kept.
    case saveRestoration([UInt8])
    /// A prewarmed app (LIFECYCLE_PREWARM=1) waits for its first event.
    case prewarmed
}

/// Message type codes: daemon-to-app below 0x80, app-to-daemon above.
enum MessageType: UInt8 {
    case event = 0x01
    case backgroundTaskReply = 0x02
    case backgroundTasksExpiring = 0x03
    case resumed = 0x04
    case restoration = 0x05
    case acknowledge = 0x81
    case beginBackgroundTask = 0x82
    case endBackgroundTask = 0x83
    case resume = 0x84
    case complete = 0x85
    case saveRestoration = 0x86
    case prewarmed = 0x87
}

/// Why a message could not be decoded. Each names what was wrong.
public struct WireError: Error, Equatable, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ d: String) { description = d }
}

// MARK: - Encoding

struct Writer {
    var bytes: [UInt8] = []
    init(type: MessageType, id: UInt32) {
        bytes.reserveCapacity(32)
        bytes.append(Wire.version)
        bytes.append(type.rawValue)
        u16(0)
        u32(id)
    }
    mutating func u8(_ v: UInt8) { bytes.append(v) }
    mutating func u16(_ v: UInt16) { withUnsafeBytes(of: v.littleEndian) { bytes += $0 } }
    mutating func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { bytes += $0 } }
    mutating func i64(_ v: Int64?) { withUnsafeBytes(of: (v ?? -1).littleEndian) { bytes += $0 } }
    mutating func blob(_ b: [UInt8]) {
        u32(UInt32(b.count))
        bytes += b
    }
    mutating func string(_ s: String) {
        let fitting =
            s.utf8.count <= Int(UInt16.max) ? s : DaemonMessage.shortened(s, by: s.utf8.count - Int(UInt16.max))
        let utf8 = Array(fitting.utf8)
        u16(UInt16(utf8.count))
        bytes += utf8
    }
}

struct Reader {
    let bytes: [UInt8]
    var offset = 0
    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func take(_ n: Int, _ what: String) throws(WireError) -> ArraySlice<UInt8> {
        guard bytes.count - offset >= n else {
            throw WireError("truncated: \(what) needs \(n) bytes at offset \(offset), \(bytes.count - offset) left")
        }
        defer { offset += n }
        return bytes[offset..<offset + n]
    }
    mutating func u8(_ what: String) throws(WireError) -> UInt8 { try take(1, what).first! }
    mutating func u16(_ what: String) throws(WireError) -> UInt16 {
        let s = try take(2, what)
        return UInt16(s[s.startIndex]) | UInt16(s[s.startIndex + 1]) << 8
    }
    mutating func u32(_ what: String) throws(WireError) -> UInt32 {
        var v: UInt32 = 0
        for (i, b) in try take(4, what).enumerated() { v |= UInt32(b) << (8 * i) }
        return v
    }
    mutating func i64(_ what: String) throws(WireError) -> Int64? {
        var v: UInt64 = 0
        for (i, b) in try take(8, what).enumerated() { v |= UInt64(b) << (8 * i) }
        let s = Int64(bitPattern: v)
        if s == -1 { return nil }
        guard s >= 0 else { throw WireError("\(what): negative time \(s)") }
        return s
    }
    mutating func string(_ what: String, max: Int) throws(WireError) -> String {
        let n = Int(try u16("\(what) length"))
        guard n <= max else { throw WireError("\(what): \(n) bytes, more than \(max)") }
        let raw = try take(n, what)
        guard let s = String(validating: raw, as: UTF8.self) else { throw WireError("\(what): not UTF-8") }
        return s
    }
    mutating func blob(_ what: String, max: Int) throws(WireError) -> [UInt8] {
        let n = Int(try u32("\(what) length"))
        guard n <= max else { throw WireError("\(what): \(n) bytes, more than \(max)") }
        return Array(try take(n, what))
    }
    func end() throws(WireError) {
        guard offset == bytes.count else { throw WireError("\(bytes.count - offset) unexpected trailing bytes") }
    }
}

/// Reads the header; returns the type and id.
func readHeader(_ r: inout Reader, size: Int) throws(WireError) -> (MessageType, UInt32) {
    guard size <= Wire.maxMessageSize else {
        throw WireError("message of \(size) bytes exceeds \(Wire.maxMessageSize)")
    }
    let version = try r.u8("version")
    guard version == Wire.version else {
        throw WireError("unsupported protocol version \(version) (this side speaks \(Wire.version))")
    }
    let raw = try r.u8("type")
    guard let type = MessageType(rawValue: raw) else {
        throw WireError("unknown message type 0x\(String(raw, radix: 16))")
    }
    let flags = try r.u16("flags")
    guard flags == 0 else { throw WireError("unknown flags 0x\(String(flags, radix: 16))") }
    return (type, try r.u32("id"))
}

extension DaemonMessage {
    public func encoded() -> [UInt8] {
        switch self {
        case .event(let m):
            // Every client rejects a datagram over maxMessageSize, so the
            // encoder never makes one: the longest option value (a long
            // launch-failure description, say) is cut short, marked with
            // an ellipsis, until the event fits; options that still do not
            // fit are left out, last first.
            var options = m.options
            var bytes = Self.encodeEvent(m, options)
            while bytes.count > Wire.maxMessageSize, !options.isEmpty {
                let excess = bytes.count - Wire.maxMessageSize
                let i = options.indices.max { options[$0].value.utf8.count < options[$1].value.utf8.count }!
                if options[i].value.utf8.count > excess + Self.ellipsis.utf8.count {
                    options[i].value =
                        Self.shortened(options[i].value, by: excess + Self.ellipsis.utf8.count)
                        + Self.ellipsis
                } else {
                    options.removeLast()
                }
                bytes = Self.encodeEvent(m, options)
            }
            return bytes
        case .backgroundTaskReply(let request, let task, let budgetEnd):
            var w = Writer(type: .backgroundTaskReply, id: request)
            w.u32(task ?? 0)
            w.i64(budgetEnd)
            return w.bytes
        case .backgroundTasksExpiring(let tasks):
            // At most as many as fit (the core allows 64 open tasks; 1,021 fit).
            let fitting = tasks.prefix((Wire.maxMessageSize - 10) / 4)
            var w = Writer(type: .backgroundTasksExpiring, id: 0)
            w.u16(UInt16(fitting.count))
            for t in fitting { w.u32(t) }
            return w.bytes
        case .resumed:
            return Writer(type: .resumed, id: 0).bytes
        case .restoration(let data):
            var w = Writer(type: .restoration, id: 0)
            w.blob(Array(data.prefix(Wire.maxRestorationSize)))
            return w.bytes
        }
    }

    static let ellipsis = "\u{2026}"

    static func encodeEvent(_ m: EventMessage, _ options: [KeyValue]) -> [UInt8] {
        var w = Writer(type: .event, id: m.sequence)
        w.u8(m.event.wireCode)
        w.u8(m.launchedInBackground ? 1 : 0)
        w.u16(UInt16(min(options.count, Int(UInt16.max))))
        w.i64(m.deadline)
        w.i64(m.budgetEnd)
        for kv in options.prefix(Int(UInt16.max)) { w.string(kv.key); w.string(kv.value) }
        return w.bytes
    }

    /// `s` less at least `bytes` UTF-8 bytes from its end, cut between
    /// characters so that what is left is still valid UTF-8.
    static func shortened(_ s: String, by bytes: Int) -> String {
        var out = Substring(s)
        var removed = 0
        while removed < bytes, let last = out.last {
            removed += String(last).utf8.count
            out.removeLast()
        }
        return String(out)
    }

    public static func decode(_ bytes: [UInt8]) throws(WireError) -> DaemonMessage {
        var r = Reader(bytes)
        let (type, id) = try readHeader(&r, size: bytes.count)
        let message: DaemonMessage
        switch type {
        case .event:
            let raw = try r.u8("event")
            guard let event = LifecycleEvent(wireCode: raw) else { throw WireError("unknown event \(raw)") }
            let mode = try r.u8("launch mode")
            guard mode <= 1 else { throw WireError("unknown launch mode \(mode)") }
            let count = try r.u16("option count")
            let deadline = try r.i64("deadline")
            let budgetEnd = try r.i64("budget end")
            var options: [KeyValue] = []
            for _ in 0..<count {
                let k = try r.string("option key", max: Wire.maxMessageSize)
                options.append(KeyValue(k, try r.string("option value", max: Wire.maxMessageSize)))
            }
            message = .event(
                EventMessage(
                    sequence: id, event: event, launchedInBackground: mode == 1,
                    deadline: deadline, budgetEnd: budgetEnd, options: options))
        case .backgroundTaskReply:
            let task = try r.u32("task")
            message = .backgroundTaskReply(
                request: id, task: task == 0 ? nil : task, budgetEnd: try r.i64("budget end"))
        case .backgroundTasksExpiring:
            // One way to write each message: its id is 0, so that decoding
            // then encoding gives back the same bytes.
            guard id == 0 else { throw WireError("backgroundTasksExpiring: id must be 0, got \(id)") }
            let count = try r.u16("task count")
            var tasks: [UInt32] = []
            for _ in 0..<count { tasks.append(try r.u32("task")) }
            message = .backgroundTasksExpiring(tasks)
        case .resumed:
            guard id == 0 else { throw WireError("resumed: id must be 0, got \(id)") }
            message = .resumed
        case .restoration:
            guard id == 0 else { throw WireError("restoration: id must be 0, got \(id)") }
            message = .restoration(try r.blob("restoration data", max: Wire.maxRestorationSize))
        default:
            throw WireError("message type 0x\(String(type.rawValue, radix: 16)) is sent by apps, not the daemon")
        }
        try r.end()
        return message
    }
}

extension AppMessage {
    public func encoded() -> [UInt8] {
        switch self {
        case .acknowledge(let sequence):
            return Writer(type: .acknowledge, id: sequence).bytes
        case .beginBackgroundTask(let request, let name):
            var w = Writer(type: .beginBackgroundTask, id: request)
            var n = name
            while n.utf8.count > Wire.maxTaskName { n.removeLast() }
            w.string(n)
            return w.bytes
        case .endBackgroundTask(let task):
            return Writer(type: .endBackgroundTask, id: task).bytes
        case .resume(let last, let app, let tasks):
            var w = Writer(type: .resume, id: last)
            var n = app
            while n.utf8.count > Wire.maxTaskName { n.removeLast() }
            w.string(n)
            let fitting = tasks.prefix(Wire.maxResumeTasks)
            w.u16(UInt16(fitting.count))
            for t in fitting { w.u32(t) }
            return w.bytes
        case .complete(let sequence, let result):
            var w = Writer(type: .complete, id: sequence)
            w.u8(result.wireCode)
            return w.bytes
        case .saveRestoration(let data):
            var w = Writer(type: .saveRestoration, id: 0)
            w.blob(Array(data.prefix(Wire.maxRestorationSize)))
            return w.bytes
        case .prewarmed:
            return Writer(type: .prewarmed, id: 0).bytes
        }
    }

    public static func decode(_ bytes: [UInt8]) throws(WireError) -> AppMessage {
        var r = Reader(bytes)
        let (type, id) = try readHeader(&r, size: bytes.count)
        let message: AppMessage
        switch type {
        case .acknowledge: message = .acknowledge(sequence: id)
        case .beginBackgroundTask:
            message = .beginBackgroundTask(request: id, name: try r.string("task name", max: Wire.maxTaskName))
        case .endBackgroundTask: message = .endBackgroundTask(task: id)
        case .resume:
            let app = try r.string("app name", max: Wire.maxTaskName)
            let count = Int(try r.u16("task count"))
            guard count <= Wire.maxResumeTasks else {
                throw WireError("resume: \(count) tasks, more than \(Wire.maxResumeTasks)")
            }
            var tasks: [UInt32] = []
            for _ in 0..<count { tasks.append(try r.u32("task")) }
            message = .resume(lastAcknowledged: id, app: app, tasks: tasks)
        case .complete:
            let raw = try r.u8("result")
            guard let result = WakeResult(wireCode: raw) else { throw WireError("unknown fetch result \(raw)") }
            message = .complete(sequence: id, result: result)
        case .saveRestoration:
            guard id == 0 else { throw WireError("saveRestoration: id must be 0, got \(id)") }
            message = .saveRestoration(try r.blob("restoration data", max: Wire.maxRestorationSize))
        case .prewarmed:
            guard id == 0 else { throw WireError("prewarmed: id must be 0, got \(id)") }
            message = .prewarmed
        default:
            throw WireError("message type 0x\(String(type.rawValue, radix: 16)) is sent by the daemon, not apps")
        }
        try r.end()
        return message
    }
}

extension EventMessage {
    /// Most scenes a client keeps connected (the daemon's `max_scenes` is at most this).
    public static let maxScenes = 64

    /// What is wrong with a scene event's options (nil: nothing, or not a
    /// scene event), in the words both client libraries use after
    /// "protocol violation by the daemon: ".
    public func sceneProblem() -> String? {
        if event == .didDiscardSceneSessions {
            guard let list = option(SceneOptionKey.scenes) else { return "\(event.rawValue): option scenes missing" }
            if list.split(separator: ",", omittingEmptySubsequences: false).contains(where: {
                !SceneNames.valid(String($0))
            }) {
                return
                    "\(event.rawValue): option scenes: not scene names separated by commas (\(SceneNames.rule))"
            }
            return nil
        }
        guard event.isSceneEvent else { return nil }
        guard let scene = option(SceneOptionKey.scene) else { return "\(event.rawValue): option scene missing" }
        guard SceneNames.valid(scene) else {
            return
                "\(event.rawValue): option scene: not a scene name (\(SceneNames.rule))"
        }
        return nil
    }

    /// didDiscardSceneSessions: the scenes named.
    public var discardedScenes: [String] {
        option(SceneOptionKey.scenes).map { $0.split(separator: ",").map(String.init) } ?? []
    }
}
