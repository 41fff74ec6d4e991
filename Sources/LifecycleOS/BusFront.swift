@preconcurrency import Glibc
import CSystemd
import CSystemdBus
import SystemPackage

/// The D-Bus interface's bus half (Sources/CSystemdBus/front.c): the
/// connection, the objects and their vtables, credentials, signals. Typed
/// here, decided in the daemon (Front/BusService.swift). Lives on the loop's
/// thread; every callback comes from the loop.
public final class BusFront {
    /// A method call, parsed, with who made it (as the bus daemon says).
    public struct Request: Sendable, Equatable {
        public var verb: String
        public var app: String?
        public var scene: String?
        public var display: String?
        public var background: Bool?
        /// Push's payload, Signal's signal, OpenURL's URL.
        public var argument: String?
        public var sender: String
        public var uid: UInt32
        public var pid: Int32?
        public var groups: [UInt32]
        /// polkit said yes to this very call.
        public var authorized: Bool

        public init(
            verb: String, app: String?, scene: String?, display: String?, background: Bool?, argument: String?,
            sender: String, uid: UInt32, pid: Int32?, groups: [UInt32], authorized: Bool = false
        ) {
            self.authorized = authorized
            self.verb = verb
            self.app = app
            self.scene = scene
            self.display = display
            self.background = background
            self.argument = argument
            self.sender = sender
            self.uid = uid
            self.pid = pid
            self.groups = groups
        }
    }

    public enum Answer: Sendable, Equatable {
        case done
        case operation(UInt64)
        /// A descriptor the caller gets (a copy): the front closes this one.
        case descriptor(Int32)
        case error(name: String, message: String)
    }

    /// One app's properties, as the bus shows them.
    public struct AppProperties: Sendable {
        public var state = "not-running"
        public var pid: UInt32 = 0
        public var launching = false
        public var frozen = false
        public var awaiting = ""
        public var band = "normal"
        public var display = ""
        public var delivery = ""
        public var tasks: [(id: UInt32, name: String)] = []
        public var scenes: [String] = []
        /// LastTermination: code ("" never ended), description, µs since the epoch, pid.
        public var endReason = ""
        public var endDescription = ""
        public var endTime: UInt64 = 0
        public var endPid: UInt32 = 0
        public var footprint: UInt64 = 0

        public init() {}
    }

    private var front: OpaquePointer?
    private let handle: (Request) -> Answer
    private let polkitAction: (Request) -> String?
    /// The action ids handed to the C, kept for the front's life.
    private var actions: [String: UnsafeMutablePointer<CChar>] = [:]
    private let connected: () -> Void
    private let log: (Int32, String) -> Void

    /// Serves the interface on `loop` (a real one), connecting now or, when
    /// there is no bus yet, later. `polkitAction`: the polkit action that
    /// decides a call, nil when polkit is not asked; `polkitRequired`: a
    /// call polkit should decide is refused when polkitd is not there
    /// (else `handle` decides, unauthorized).
    public init(
        loop: EventLoop, version: String, polkitRequired: Bool = false,
        polkitAction: @escaping (Request) -> String? = { _ in nil }, handle: @escaping (Request) -> Answer,
        connected: @escaping () -> Void, log: @escaping (Int32, String) -> Void
    ) throws(SystemError) {
        guard let event = loop.event else {
            throw SystemError("lc_front_open", "a loop driven by hand", errno: .invalidArgument)
        }
        self.handle = handle
        self.polkitAction = polkitAction
        self.connected = connected
        self.log = log
        var callbacks = lc_front_callbacks()
        callbacks.context = Unmanaged.passUnretained(self).toOpaque()
        callbacks.call = { context, request, answer in
            let me = Unmanaged<BusFront>.fromOpaque(context!).takeUnretainedValue()
            me.answer(request!.pointee, answer!)
        }
        callbacks.polkit_action = { context, request in
            let me = Unmanaged<BusFront>.fromOpaque(context!).takeUnretainedValue()
            guard let action = me.polkitAction(BusFront.request(request!.pointee)) else { return nil }
            if me.actions[action] == nil { me.actions[action] = strdup(action) }
            return UnsafePointer(me.actions[action])
        }
        callbacks.polkit_required = polkitRequired ? 1 : 0
        callbacks.connected = { context in Unmanaged<BusFront>.fromOpaque(context!).takeUnretainedValue().connected() }
        callbacks.log = { context, priority, message in
            Unmanaged<BusFront>.fromOpaque(context!).takeUnretainedValue().log(priority, String(cString: message!))
        }
        var f: OpaquePointer?
        let r = lc_front_open(event, 10, version, &callbacks, &f)
        guard r >= 0 else { throw SystemError("lc_front_open", errno: .init(rawValue: -r)) }
        front = f
    }

    deinit {
        lc_front_close(front)
        lastError = (nil, nil)  // frees the last pair
        for a in actions.values { free(a) }
    }

    private static func request(_ r: lc_front_request) -> Request {
        func string(_ p: UnsafePointer<CChar>?) -> String? { p.map { String(cString: $0) } }
        let groups = r.n_gids > 0 ? Array(UnsafeBufferPointer(start: r.gids, count: r.n_gids)) : []
        return Request(
            verb: string(r.verb) ?? "", app: string(r.app), scene: string(r.scene), display: string(r.display),
            background: r.background < 0 ? nil : r.background != 0, argument: string(r.argument),
            sender: string(r.sender) ?? "", uid: r.uid, pid: r.pid > 0 ? Int32(bitPattern: r.pid) : nil,
            groups: groups, authorized: r.authorized != 0)
    }

    private func answer(_ r: lc_front_request, _ out: UnsafeMutablePointer<lc_front_answer>) {
        switch handle(BusFront.request(r)) {
        case .done: break
        case .operation(let id): out.pointee.operation = id
        case .descriptor(let fd): out.pointee.descriptor = fd
        case .error(let name, let message):
            // Kept until the next answer: the C copies them into its reply at once.
            lastError = (strdup(name), strdup(message))
            out.pointee.error_name = UnsafePointer(lastError.name)
            out.pointee.error_message = UnsafePointer(lastError.message)
        }
    }

    private var lastError: (name: UnsafeMutablePointer<CChar>?, message: UnsafeMutablePointer<CChar>?) = (nil, nil) {
        willSet {
            free(lastError.name)
            free(lastError.message)
        }
    }

    /// What the daemon pushes: an app, a display, a scene of an app.
    public enum Kind: Int32, Sendable {
        case app, display, scene
    }

    /// An object's values now, in its kind's slots (BusFront.h); signalled,
    /// if changed, at the next flush.
    public func set(_ kind: Kind, _ key: String, strings: [String], numbers: [UInt64]) {
        // The strings back to back in one buffer, each ended by its NUL: one
        // allocation, not a C copy of each (this runs for every app, scene
        // and display pushed after every save). A string is cut at a NUL of
        // its own (a task's name is the app's to choose), as a C copy was.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(strings.reduce(0) { $0 + $1.utf8.count + 1 })
        for var string in strings {
            string.withUTF8 { utf8 in
                guard let base = utf8.baseAddress else { return }
                let cut = memchr(base, 0, utf8.count).map { UnsafeRawPointer($0) - UnsafeRawPointer(base) }
                bytes.append(contentsOf: UnsafeBufferPointer(start: base, count: cut ?? utf8.count))
            }
            bytes.append(0)
        }
        bytes.withUnsafeBytes { b in
            numbers.withUnsafeBufferPointer { n in
                lc_front_set(
                    front, kind.rawValue, key, b.baseAddress?.assumingMemoryBound(to: CChar.self), strings.count,
                    n.baseAddress, n.count)
            }
        }
    }

    /// An object's path on the bus.
    public static func path(_ kind: Kind, _ key: String) -> String {
        guard let p = lc_front_path(kind.rawValue, key) else { return "/" }
        defer { free(p) }
        return String(cString: p)
    }

    /// The object goes at the next flush.
    public func remove(_ kind: Kind, _ key: String) { lc_front_remove(front, kind.rawValue, key) }

    /// The app's properties now.
    public func setApp(_ name: String, _ p: AppProperties) {
        set(
            .app, name,
            strings: [
                p.state, p.awaiting, p.band, p.display, p.delivery,
                p.tasks.map { "\($0.id)\t\($0.name.replacingNewlines)" }.joined(separator: "\n"),
                p.scenes.map(\.replacingNewlines).joined(separator: "\n"), p.endReason, p.endDescription,
            ],
            numbers: [
                UInt64(p.pid), p.launching ? 1 : 0, p.frozen ? 1 : 0, p.endTime, UInt64(p.endPid), p.footprint,
            ])
    }

    public func removeApp(_ name: String) { remove(.app, name) }

    /// A display's properties now.
    public func setDisplay(_ name: String, slots: Int, front: [String], locked: Bool, interruptions: Int) {
        set(
            .display, name, strings: [front.map(\.replacingNewlines).joined(separator: "\n")],
            numbers: [UInt64(max(0, slots)), locked ? 1 : 0, UInt64(max(0, interruptions))])
    }

    /// A scene's properties now.
    public func setScene(
        app: String, name: String, display: String, state: String, inFront: Bool, discarding: Bool, shed: Bool
    ) {
        set(
            .scene, app + "/" + name, strings: [display, state, Self.path(.app, app), app, name],
            numbers: [inFront ? 1 : 0, discarding ? 1 : 0, shed ? 1 : 0])
    }

    public func removeScene(app: String, name: String) { remove(.scene, app + "/" + name) }

    public func newOperation(verb: String, app: String?, requester: String) -> UInt64 {
        lc_front_operation_new(front, verb, app, requester)
    }

    public func finish(_ operation: UInt64, result: String, reason: String) {
        lc_front_operation_finish(front, operation, result, reason)
    }

    /// A request (its JSON) to the compositor that reports over the bus; false when it could not be sent.
    public func toReporter(_ destination: String, _ request: String) -> Bool {
        lc_front_to_reporter(front, destination, request) >= 0
    }

    /// An event record (its JSON) about `app`, to the monitors that follow it.
    public func record(app: String, json: String) { lc_front_record(front, app, json) }
    /// Monitors open now.
    public var monitors: Int { lc_front_monitors(front) }

    /// The bus daemon takes no messages now: signals wait, gathered.
    public var stalled: Bool { lc_front_stalled(front) != 0 }
    /// The interface is served now (connected, the name ours).
    public var serving: Bool { lc_front_serving(front) != 0 }
    /// Before the process goes (execve): what is held and queued, written
    /// (for at most a second).
    public func flushOut() { lc_front_flush_out(front) }

    /// Emits what changed since the last flush (and the replies held for it).
    public func flush() { lc_front_flush(front) }
}

extension String {
    fileprivate var replacingNewlines: String {
        contains("\n") ? split(separator: "\n", omittingEmptySubsequences: false).joined(separator: " ") : self
    }
}
