import CLifecycleShim
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleControl

// The wlr-foreign-toplevel-management protocol (zwlr_foreign_toplevel_
// manager_v1, version 3) as a source, for the compositors that have no IPC
// of sway's kind: labwc, Wayfire, river, Hyprland, niri, cage, and sway
// itself. Spoken on the Wayland socket directly: the wire format is small
// (a 32-bit object id, a 16-bit opcode and a 16-bit size, then 32-bit
// aligned arguments), and Debian ships no XML of this protocol to generate
// a binding from. What it gives: each toplevel's app_id, the outputs it is
// on (wl_output v4 names them), and whether it is activated or minimised.
// What it does not: a process id (apps are matched by their manifest's
// `app_id`) and visibility (a window on a workspace not shown is not
// minimised: it counts as shown). It can activate a toplevel for a seat
// and unminimise it; it cannot move one to another output.

/// One Wayland connection, as a client.
final class WaylandConnection {
    let fd: Int32
    private var input: [UInt8] = []
    private var nextID: UInt32 = 2  // 1 is wl_display
    /// Descriptors the compositor passed, in order: an event with a
    /// descriptor argument takes the next (`takeDescriptor`).
    private var passed: [Int32] = []

    init(display: String) throws(FollowError) {
        let path: String
        if display.hasPrefix("/") {
            path = display
        } else {
            guard let runtime = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"] else {
                throw FollowError("no XDG_RUNTIME_DIR: cannot find the Wayland display \(display)")
            }
            path = runtime + "/" + display
        }
        switch ControlClient.connectStream(path) {
        case .success(let fd): self.fd = fd
        case .failure(let why): throw FollowError("cannot reach the Wayland display at \(path): \(why)")
        }
    }

    deinit {
        close(fd)
        for p in passed { close(p) }
    }

    /// The next descriptor the compositor passed (-1: none came).
    func takeDescriptor() -> Int32 { passed.isEmpty ? -1 : passed.removeFirst() }

    func newID() -> UInt32 {
        defer { nextID += 1 }
        return nextID
    }

    /// A message's arguments, in wire form.
    struct Args {
        var bytes: [UInt8] = []
        mutating func uint(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { bytes += $0 } }
        mutating func string(_ s: String) {
            let b = Array(s.utf8) + [0]
            uint(UInt32(b.count))
            bytes += b
            while bytes.count % 4 != 0 { bytes.append(0) }
        }
    }

    /// A request; `passing` (>= 0) goes with it (SCM_RIGHTS), for a
    /// request with a descriptor argument.
    func send(_ object: UInt32, _ opcode: UInt16, _ args: Args = Args(), passing: Int32 = -1) throws(FollowError) {
        var m = Args()
        m.uint(object)
        m.uint(UInt32(8 + args.bytes.count) << 16 | UInt32(opcode))
        let message = m.bytes + args.bytes
        var off = 0
        var pass = passing
        while off < message.count {
            let n = message[off...].withUnsafeBytes { lc_send_with_fd(fd, $0.baseAddress, UInt($0.count), pass) }
            pass = -1
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { throw FollowError("the compositor closed the Wayland connection", ended: true) }
            off += n
        }
    }

    /// One event: its object, opcode and arguments.
    struct Event {
        let object: UInt32
        let opcode: UInt16
        let body: [UInt8]
        var at = 0
        init(object: UInt32, opcode: UInt16, body: [UInt8]) {
            self.object = object
            self.opcode = opcode
            self.body = body
        }
        mutating func uint() -> UInt32 {
            guard at + 4 <= body.count else { return 0 }
            defer { at += 4 }
            return body[at..<at + 4].withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)) }
        }
        mutating func string() -> String {
            let n = Int(uint())
            guard n > 0, at + n <= body.count else { return "" }
            defer { at += (n + 3) & ~3 }
            return String(decoding: body[at..<at + n - 1], as: UTF8.self)
        }
        mutating func array() -> [UInt32] {
            let n = Int(uint())
            guard at + n <= body.count else { return [] }
            var out: [UInt32] = []
            let end = at + n
            while at + 4 <= end { out.append(uint()) }
            at = (end + 3) & ~3
            return out
        }
    }

    /// The events read so far, and whether the connection is open.
    func read() throws(FollowError) -> [Event] {
        var chunk = [UInt8](repeating: 0, count: 65536)
        var fds = [Int32](repeating: -1, count: 28)
        var count: Int32 = 0
        let n = chunk.withUnsafeMutableBytes { buf in
            fds.withUnsafeMutableBufferPointer {
                lc_recv_with_fds(fd, buf.baseAddress, UInt(buf.count), $0.baseAddress, 28, &count)
            }
        }
        passed += fds.prefix(Int(count))
        if n < 0 && (errno == EAGAIN || errno == EINTR) { return [] }
        if n <= 0 { throw FollowError("the compositor closed the Wayland connection", ended: true) }
        input += chunk[0..<Int(n)]
        var events: [Event] = []
        while input.count >= 8 {
            let object = input[0..<4].withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)) }
            let word = input[4..<8].withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)) }
            let size = Int(word >> 16)
            guard size >= 8 else { throw FollowError("the compositor sent a message of \(size) bytes") }
            guard input.count >= size else { break }
            var event = Event(object: object, opcode: UInt16(word & 0xffff), body: Array(input[8..<size]))
            input.removeFirst(size)
            if object == 1 && event.opcode == 0 {  // wl_display.error: the connection is over
                let on = event.uint(), code = event.uint()
                throw FollowError("the compositor said: error \(code) on object \(on): \(event.string())")
            }
            events.append(event)
        }
        return events
    }

    struct Global {
        let name: UInt32
        let interface: String
        let version: UInt32
    }

    /// A registry, and every global it lists now (other events to `handle`).
    func registry(_ handle: (Event) throws(FollowError) -> Void) throws(FollowError) -> (
        id: UInt32, globals: [Global]
    ) {
        let registry = newID()
        var args = Args()
        args.uint(registry)
        try send(1, 1, args)  // wl_display.get_registry
        var globals: [Global] = []
        try roundtrip { (e: Event) throws(FollowError) in
            var e = e
            if e.object == registry && e.opcode == 0 {
                globals.append(Global(name: e.uint(), interface: e.string(), version: e.uint()))
            } else {
                try handle(e)
            }
        }
        return (registry, globals)
    }

    /// Binds a global (wl_registry.bind) at `version` at most; its new id.
    func bind(_ registry: UInt32, _ g: Global, _ version: UInt32) throws(FollowError) -> UInt32 {
        let id = newID()
        var a = Args()
        a.uint(g.name)
        a.string(g.interface)
        a.uint(min(version, g.version))
        a.uint(id)
        try send(registry, 0, a)
        return id
    }

    /// Waits (at most 5 s) until the compositor has answered everything sent so far.
    func roundtrip(_ handle: (Event) throws(FollowError) -> Void) throws(FollowError) {
        let callback = newID()
        var args = Args()
        args.uint(callback)
        try send(1, 0, args)  // wl_display.sync
        let deadline = Date().addingTimeInterval(5)
        while true {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard Date() < deadline, poll(&p, 1, 100) >= 0 else { throw FollowError("the compositor did not answer") }
            for e in try read() {
                if e.object == callback { return }
                try handle(e)
            }
        }
    }
}

/// The toplevels of a wlr-foreign-toplevel compositor.
public final class WlrSource: FocusSource {
    public let name = "wlr-foreign-toplevel"
    public let carriesOutAtOnce = false
    let wayland: WaylandConnection
    let say: (String) -> Void
    var manager: UInt32 = 0
    var seat: UInt32 = 0
    /// wl_output object to its name (v4), in the order they came.
    var outputs: [(id: UInt32, name: String)] = []
    struct Toplevel {
        var appID = ""
        var outputs: [UInt32] = []
        var activated = false
        var minimized = false
        var complete = false
    }
    var toplevels: [UInt32: Toplevel] = [:]
    /// Toplevels by activation, the most recent first.
    var recency: [UInt32] = []
    /// A toplevel was activated or deactivated since `readHints` last looked.
    var activationChanged = false

    public init(display: String, say: @escaping (String) -> Void) throws(FollowError) {
        self.say = say
        wayland = try WaylandConnection(display: display)
        let (registry, globals) = try wayland.registry { (e: WaylandConnection.Event) throws(FollowError) in
            try self.handle(e)
        }
        func bind(_ g: WaylandConnection.Global, _ version: UInt32) throws(FollowError) -> UInt32 {
            try wayland.bind(registry, g, version)
        }
        guard let m = globals.first(where: { $0.interface == "zwlr_foreign_toplevel_manager_v1" }) else {
            throw FollowError("the compositor offers no zwlr_foreign_toplevel_manager_v1")
        }
        for g in globals where g.interface == "wl_output" {
            guard g.version >= 4 else {
                throw FollowError("the compositor's wl_output is version \(g.version): 4 names outputs")
            }
            outputs.append((try bind(g, 4), ""))
        }
        if let s = globals.first(where: { $0.interface == "wl_seat" }) { seat = try bind(s, 1) }
        manager = try bind(m, 3)
        try wayland.roundtrip { (e: WaylandConnection.Event) throws(FollowError) in try self.handle(e) }
    }

    public var descriptor: Int32 { wayland.fd }

    public func readEvents() throws(FollowError) -> Bool {
        var changed = false
        for e in try wayland.read() { changed = try handle(e) || changed }
        return changed
    }

    /// As sway's hint (SwaySource): true when a toplevel's activation
    /// changed, which sway's IPC does not say when a layer surface takes
    /// or gives back the keyboard.
    public func readHints() throws(FollowError) -> Bool {
        _ = try readEvents()
        defer { activationChanged = false }
        return activationChanged
    }

    /// Applies an event; true when what is shown may have changed.
    @discardableResult
    func handle(_ event: WaylandConnection.Event) throws(FollowError) -> Bool {
        var e = event
        if let i = outputs.firstIndex(where: { $0.id == e.object }) {
            if e.opcode == 4 { outputs[i].name = e.string() }  // wl_output.name
            return false
        }
        if e.object == manager {
            switch e.opcode {
            case 0: toplevels[e.uint()] = Toplevel()  // toplevel(new_id)
            case 1: throw FollowError("the compositor finished the toplevel manager", ended: true)
            default: break
            }
            return false
        }
        guard var t = toplevels[e.object] else { return false }
        let id = e.object
        switch e.opcode {
        case 1: t.appID = e.string()
        case 2: t.outputs.append(e.uint())  // output_enter
        case 3:
            let o = e.uint()
            t.outputs.removeAll { $0 == o }  // output_leave
        case 4:
            let states = e.array()
            let activated = states.contains(2)
            if activated && !t.activated {
                recency.removeAll { $0 == id }
                recency.insert(id, at: 0)
            }
            if activated != t.activated { activationChanged = true }
            t.activated = activated
            t.minimized = states.contains(1)
        case 5: t.complete = true  // done
        case 6:  // closed
            toplevels[id] = nil
            recency.removeAll { $0 == id }
            try wayland.send(id, 7)  // destroy
            return true
        default: return false
        }
        toplevels[id] = t
        return e.opcode == 5
    }

    public func snapshot(interval: Double) throws(FollowError) -> ShownReport {
        let names = Dictionary(outputs.map { ($0.id, $0.name) }, uniquingKeysWith: { a, _ in a })
        var windows: [ShownWindow] = []
        for (id, t) in toplevels.sorted(by: { $0.key < $1.key }) where t.complete {
            let rank = recency.firstIndex(of: id) ?? (recency.count + windows.count)
            windows.append(
                ShownWindow(
                    id: String(id), pid: nil, appID: t.appID.isEmpty ? nil : t.appID,
                    output: t.outputs.first.flatMap { names[$0] }, focused: t.activated, visible: !t.minimized,
                    rank: rank))
        }
        return ShownReport(
            source: name, outputs: outputs.map(\.name).filter { !$0.isEmpty }, windows: windows, interval: interval)
    }

    /// Unminimised and activated for the seat; `output` cannot be honoured.
    public func raise(_ r: RaiseRequest) {
        guard let id = UInt32(r.window), let t = toplevels[id] else { return }
        do {
            if t.minimized { try wayland.send(id, 3) }  // unset_minimized
            var a = WaylandConnection.Args()
            a.uint(seat)
            try wayland.send(id, 4, a)  // activate(seat)
            if r.output != nil { say("wlr-foreign-toplevel cannot move a window to another output") }
        } catch {
            say("raising window \(id): \(error)")
        }
    }

    public func run(_ c: CompositorCommand) {
        say("home on \(c.display): a home_command needs sway's IPC; wlr-foreign-toplevel runs none")
    }
}
