import CLifecycleShim
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc

// The clipboard, kept by the follower (docs/focus.md, "Holds"): on Wayland
// the selection stays with the client that copied it, and a paste asks
// that client for the data; a frozen owner answers nobody, and every paste
// hangs. So the follower takes every new selection over at once, with the
// wlr-data-control protocol (zwlr_data_control_manager_v1; sway, labwc,
// Wayfire, river, Hyprland have it): it reads the data of each text or
// image type (at most 8 types, 1 MiB each, 1 s each) and offers the
// same types itself. After that the owner is the follower, which the
// daemon never freezes, and the app that copied may be frozen with no
// harm. A selection it cannot read in time stays where it was. The same
// for the primary selection (what middle-click pastes), where the
// compositor's data-control is version 2.

public final class ClipboardKeeper {
    let wayland: WaylandConnection
    let say: (String) -> Void
    var device: UInt32 = 0
    var manager: UInt32 = 0
    /// Offers announced, with their types, until a selection names one.
    var offers: [UInt32: [String]] = [:]
    /// The two selections: the clipboard, and the primary selection.
    enum Which: Int { case clipboard = 0, primary = 1 }
    struct Held {
        /// What the follower offers now: its source, and the data by type.
        var source: UInt32 = 0
        var kept: [(type: String, data: [UInt8])] = []
        /// The next selection event is the one the follower just set.
        var ownNext = false
    }
    var held = [Held(), Held()]
    /// The compositor's data-control has the primary selection (version 2).
    var primary = false
    /// The selection there when the follower starts is left where it is:
    /// its owner may be frozen already, and a request to a frozen owner
    /// stays pending in the compositor (later transfers were seen to stall
    /// behind it). Only a selection made while the follower runs is taken,
    /// from an owner that has just copied.
    var starting = true
    /// Sources the follower destroyed: a `send` already on its way still
    /// carries a descriptor, which must be taken (and closed) so that the
    /// next one lines up with its event.
    var retired: Set<UInt32> = []

    static let typeLimit = 8
    static let sizeLimit = 1 << 20

    public init(display: String, say: @escaping (String) -> Void) throws(FollowError) {
        self.say = say
        wayland = try WaylandConnection(display: display)
        let (registry, globals) = try wayland.registry { (_: WaylandConnection.Event) throws(FollowError) in }
        guard let m = globals.first(where: { $0.interface == "zwlr_data_control_manager_v1" }) else {
            throw FollowError("the compositor offers no zwlr_data_control_manager_v1: the clipboard is not kept")
        }
        guard let s = globals.first(where: { $0.interface == "wl_seat" }) else {
            throw FollowError("the compositor offers no seat: the clipboard is not kept")
        }
        let seat = try wayland.bind(registry, s, 1)
        primary = m.version >= 2
        manager = try wayland.bind(registry, m, primary ? 2 : 1)
        device = wayland.newID()
        var a = WaylandConnection.Args()
        a.uint(device)
        a.uint(seat)
        try wayland.send(manager, 1, a)  // get_data_device(new_id, seat)
        try wayland.roundtrip { (e: WaylandConnection.Event) throws(FollowError) in try self.handle(e) }
        starting = false
    }

    public var descriptor: Int32 { wayland.fd }

    public func readEvents() throws(FollowError) {
        for e in try wayland.read() { try handle(e) }
    }

    func handle(_ event: WaylandConnection.Event) throws(FollowError) {
        var e = event
        if e.object == device {
            switch e.opcode {
            case 0: offers[e.uint()] = []  // data_offer(new_id)
            case 1: selection(.clipboard, e.uint())  // selection(offer or null)
            case 2: throw FollowError("the compositor finished the data device", ended: true)
            case 3: selection(.primary, e.uint())  // primary_selection(offer or null), version 2
            default: break
            }
            return
        }
        if offers[e.object] != nil {
            if e.opcode == 0 { offers[e.object]?.append(e.string()) }  // offer(mime)
            return
        }
        if retired.contains(e.object) {
            if e.opcode == 0 {
                _ = e.string()
                let fd = wayland.takeDescriptor()
                if fd >= 0 { close(fd) }
            }
            return
        }
        if let w = held.firstIndex(where: { $0.source != 0 && $0.source == e.object }) {
            switch e.opcode {
            case 0:  // send(mime, fd): the data, written for whoever pastes
                let type = e.string()
                let fd = wayland.takeDescriptor()
                if fd >= 0 {
                    if let data = held[w].kept.first(where: { $0.type == type })?.data { Self.write(data, to: fd) }
                    close(fd)
                }
            case 1:  // cancelled: someone else copied
                try? wayland.send(e.object, 1)  // destroy
                retired.insert(e.object)
                held[w] = Held()
            default: break
            }
        }
    }

    /// A new selection (clipboard or primary): kept, unless it is the
    /// follower's own or was there when it started.
    func selection(_ which: Which, _ offer: UInt32) {
        if held[which.rawValue].ownNext || starting {
            held[which.rawValue].ownNext = false
            forget(offer)
        } else if offer != 0 {
            keep(offer, which)
        }
    }

    func forget(_ offer: UInt32) {
        guard offer != 0, offers.removeValue(forKey: offer) != nil else { return }
        try? wayland.send(offer, 1)  // destroy
    }

    /// Reads the selection's data and offers it as the follower's own.
    func keep(_ offer: UInt32, _ which: Which) {
        let types = (offers[offer] ?? []).filter(Self.worthKeeping).prefix(Self.typeLimit)
        var data: [(type: String, data: [UInt8])] = []
        for type in types {
            // An owner that does not answer one type will not answer the next.
            guard let d = read(offer, type) else { break }
            if !d.isEmpty { data.append((type, d)) }
        }
        forget(offer)
        let what = which == .primary ? "the primary selection's" : "the clipboard's"
        guard !data.isEmpty else {
            return say("\(what) data could not be read (\(types.count) types offered): it stays with its owner")
        }
        do {
            let old = held[which.rawValue].source
            if old != 0 {
                try wayland.send(old, 1)  // destroy the one before
                retired.insert(old)
            }
            let source = wayland.newID()
            var a = WaylandConnection.Args()
            a.uint(source)
            try wayland.send(manager, 0, a)  // create_data_source(new_id)
            for (type, _) in data {
                var o = WaylandConnection.Args()
                o.string(type)
                try wayland.send(source, 0, o)  // offer(mime)
            }
            var s = WaylandConnection.Args()
            s.uint(source)
            try wayland.send(device, which == .primary ? 2 : 0, s)  // set_selection / set_primary_selection(source)
            held[which.rawValue] = Held(source: source, kept: data, ownNext: true)
        } catch {
            say("keeping the clipboard: \(error)")
        }
    }

    static func worthKeeping(_ type: String) -> Bool {
        type.hasPrefix("text/") || type.hasPrefix("image/") || ["UTF8_STRING", "TEXT", "STRING"].contains(type)
    }

    /// One type's data: a pipe handed to the owner (receive), read to its
    /// end; nil past 1 s or 1 MiB.
    func read(_ offer: UInt32, _ type: String) -> [UInt8]? {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { return nil }
        for e in ends { _ = fcntl(e, F_SETFD, FD_CLOEXEC) }
        defer { close(ends[0]) }
        var a = WaylandConnection.Args()
        a.string(type)
        let sent = (try? wayland.send(offer, 0, a, passing: ends[1])) != nil  // receive(mime, fd)
        close(ends[1])
        guard sent else { return nil }
        var data: [UInt8] = []
        let deadline = Date().addingTimeInterval(1)
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let left = Int32(max(0, deadline.timeIntervalSinceNow) * 1000)
            var p = pollfd(fd: ends[0], events: Int16(POLLIN), revents: 0)
            guard left > 0, poll(&p, 1, left) == 1 else { return nil }
            let n = chunk.withUnsafeMutableBytes { Glibc.read(ends[0], $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return n == 0 ? data : nil }
            data += chunk[0..<n]
            if data.count > Self.sizeLimit { return nil }
        }
    }

    /// Writes it all to a paster's pipe, blocking at most 500 ms for it.
    static func write(_ data: [UInt8], to fd: Int32) {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var off = 0
        let deadline = Date().addingTimeInterval(0.5)
        while off < data.count && Date() < deadline {
            let n = data[off...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && errno == EAGAIN {
                var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                _ = poll(&p, 1, 50)
                continue
            }
            if n <= 0 { return }
            off += n
        }
    }
}
