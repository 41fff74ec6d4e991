#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleControl

// sway's IPC (sway-ipc(7)): "i3-ipc", a 32-bit length and a 32-bit type in
// the host's byte order, then a JSON payload. One connection subscribes to
// events; another asks for the tree. The tree gives every window its pid,
// app_id, output, whether it has the focus and whether sway shows it
// (`visible`: its workspace shown, not under a fullscreen window, not in
// the scratchpad), and per container the focus order.

/// One connection to sway's IPC socket.
final class SwayConnection {
    enum Kind: UInt32 {
        case runCommand = 0, subscribe = 2, getTree = 4
    }
    /// Events have the high bit set; these are the ones the follower asks for.
    static let workspaceEvent: UInt32 = 0x8000_0000
    static let outputEvent: UInt32 = 0x8000_0001
    static let windowEvent: UInt32 = 0x8000_0003
    static let shutdownEvent: UInt32 = 0x8000_0006

    let fd: Int32
    let path: String

    init(path: String) throws(FollowError) {
        self.path = path
        switch ControlClient.connectStream(path) {
        case .success(let fd): self.fd = fd
        case .failure(let why): throw FollowError("cannot reach sway at \(path): \(why)")
        }
    }

    deinit { close(fd) }

    func send(_ kind: Kind, _ payload: String) throws(FollowError) {
        var message = Array("i3-ipc".utf8)
        let body = Array(payload.utf8)
        withUnsafeBytes(of: UInt32(body.count)) { message += $0 }
        withUnsafeBytes(of: kind.rawValue) { message += $0 }
        message += body
        var off = 0
        while off < message.count {
            let n = message[off...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { throw FollowError("sway closed its IPC socket", ended: true) }
            off += n
        }
    }

    /// The next message: its type and payload.
    func receive() throws(FollowError) -> (type: UInt32, payload: [UInt8]) {
        let header = try read(14)
        guard header.starts(with: Array("i3-ipc".utf8)) else {
            throw FollowError("sway sent something that is not i3-ipc")
        }
        let length = header[6..<10].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
        let type = header[10..<14].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
        guard length <= 64 << 20 else { throw FollowError("sway sent a message of \(length) bytes") }
        return (type, try read(Int(length)))
    }

    func call(_ kind: Kind, _ payload: String) throws(FollowError) -> [UInt8] {
        try send(kind, payload)
        while true {
            let m = try receive()
            if m.type == kind.rawValue { return m.payload }  // (an event on a connection that never subscribed: none)
        }
    }

    private func read(_ count: Int) throws(FollowError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = out[got...].withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { throw FollowError("sway closed its IPC socket", ended: true) }
            got += n
        }
        return out
    }

    /// True when a message can be read without waiting (within `ms`).
    func readable(within ms: Int32) -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while true {
            let r = poll(&p, 1, ms)
            if r < 0 && errno == EINTR { continue }
            return r > 0
        }
    }
}

/// A node of sway's tree: the fields the follower reads.
struct SwayNode: Decodable {
    var id: Int
    var type: String
    var name: String?
    var pid: Int32?
    var app_id: String?
    var focused: Bool?
    var visible: Bool?
    var nodes: [SwayNode]?
    var floating_nodes: [SwayNode]?
    var focus: [Int]?
    var window_properties: WindowProperties?

    struct WindowProperties: Decodable {
        var `class`: String?
    }

    /// Children in focus order, the most recently focused first (those
    /// the focus list does not name last, in tree order).
    var byFocus: [SwayNode] {
        let children = (nodes ?? []) + (floating_nodes ?? [])
        let order = Dictionary(uniqueKeysWithValues: (focus ?? []).enumerated().map { ($1, $0) })
        return children.enumerated().sorted { a, b in
            (order[a.element.id] ?? Int.max, a.offset) < (order[b.element.id] ?? Int.max, b.offset)
        }.map(\.element)
    }

    /// A view: a window of a client (a container has no pid).
    var isWindow: Bool { (type == "con" || type == "floating_con") && pid != nil }
}

/// The report sway's tree makes.
enum SwayTree {
    static func report(_ json: [UInt8], interval: Double) throws(FollowError) -> ShownReport {
        let root: SwayNode
        do { root = try JSONDecoder().decode(SwayNode.self, from: Data(json)) } catch {
            throw FollowError("sway's tree could not be read: \(error)")
        }
        var outputs: [String] = []
        var windows: [ShownWindow] = []
        var anyFocused = false
        for output in root.nodes ?? [] where output.type == "output" {
            // "__i3" holds the scratchpad: windows there are on no output.
            let name = output.name == "__i3" ? nil : output.name
            if let name { outputs.append(name) }
            var rank = 0
            func walk(_ node: SwayNode) {
                if node.focused == true { anyFocused = true }  // a window, or an empty workspace
                if node.isWindow {
                    windows.append(
                        ShownWindow(
                            id: String(node.id), pid: node.pid, appID: node.app_id ?? node.window_properties?.class,
                            output: name, focused: node.focused == true, visible: name != nil && node.visible == true,
                            rank: rank))
                    rank += 1
                }
                for child in node.byFocus { walk(child) }
            }
            walk(output)
        }
        // No node has the focus: a layer surface has it (or an unmanaged
        // Xwayland window), on the most recently focused output.
        let focusedOutput = root.byFocus.first { $0.type == "output" && $0.name != "__i3" }?.name
        let overlaid = anyFocused ? nil : focusedOutput.map { [$0] }
        return ShownReport(source: "sway", outputs: outputs, windows: windows, interval: interval, overlaid: overlaid)
    }
}

/// sway's IPC as a source: one connection subscribed to window and
/// workspace events, one for the tree and commands.
public final class SwaySource: FocusSource {
    public let name = "sway"
    public let carriesOutAtOnce = true
    let events: SwayConnection
    let tree: SwayConnection
    let say: (String) -> Void
    /// The same compositor's wlr-foreign-toplevel, for one thing sway's IPC
    /// does not say: a layer surface (a launcher) taking the keyboard from
    /// a window, or giving it back, sends no IPC event; the window's
    /// activation changing there wakes a snapshot. Without it, the next
    /// heartbeat sees the overlay.
    let hints: WlrSource?

    public init(socket: String, hints: WlrSource? = nil, say: @escaping (String) -> Void) throws(FollowError) {
        self.say = say
        self.hints = hints
        events = try SwayConnection(path: socket)
        tree = try SwayConnection(path: socket)
        // sway 1.7 has no output event: an output plugged in shows at the next heartbeat.
        let reply = String(decoding: try events.call(.subscribe, #"["window","workspace","shutdown"]"#), as: UTF8.self)
        guard reply.contains("\"success\": true") || reply.contains("\"success\":true") else {
            throw FollowError("sway refused the subscription: \(reply)")
        }
    }

    public var descriptor: Int32 { events.fd }
    public var hintDescriptor: Int32 { hints?.descriptor ?? -1 }
    public func readHints() throws(FollowError) -> Bool { try hints?.readHints() ?? false }

    public func readEvents() throws(FollowError) -> Bool {
        repeat {
            let event = try events.receive()
            if event.type == SwayConnection.shutdownEvent { throw FollowError("sway is shutting down", ended: true) }
        } while events.readable(within: 0)
        return true
    }

    public func snapshot(interval: Double) throws(FollowError) -> ShownReport {
        try SwayTree.report(try tree.call(.getTree, ""), interval: interval)
    }

    /// Out of the scratchpad if it is there, moved to `output` when given,
    /// then focused (which shows its workspace).
    public func raise(_ r: RaiseRequest) {
        guard let id = Int(r.window) else {
            return say("the daemon asked to raise window '\(r.window)', not one of sway's")
        }
        var commands: [String] = []
        if r.offscreen == true { commands.append("[con_id=\(id)] scratchpad show") }
        if let output = r.output { commands.append("[con_id=\(id)] move container to output \(output)") }
        commands.append("[con_id=\(id)] focus")
        sway(commands)
    }

    public func run(_ c: CompositorCommand) { sway([c.command]) }

    /// Runs sway commands, saying what sway refused.
    func sway(_ commands: [String]) {
        for command in commands {
            do {
                let reply = String(decoding: try tree.call(.runCommand, command), as: UTF8.self)
                if reply.contains("\"success\": false") || reply.contains("\"success\":false") {
                    say("sway: \(command): \(reply)")
                }
            } catch {
                say("sway: \(command): \(error)")
            }
        }
    }
}
