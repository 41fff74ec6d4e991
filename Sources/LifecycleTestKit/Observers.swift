import Foundation
@preconcurrency import Glibc
import CLifecycleShim
import LifecycleControl
import LifecycleOS

// How a test watches a daemon and its apps: the event stream followed
// (`Follower`), and a plain program's notifications read as systemd would
// (`NotifySocket`).

/// Reads `events --follow` with a bound on every wait (the bound is a
/// failure, never the synchronisation: the event is).
public final class Follower {
    public let client: ControlClient
    public private(set) var seen: [EventRecord] = []

    init(_ client: ControlClient, apps: [String]?) throws {
        self.client = client
        let first = try client.send(ControlRequest(.events, apps: apps, follow: true))
        guard first.ok else { throw TestFailure("events --follow refused") }
    }

    /// Records read but not yet matched. A wait takes the first match and
    /// drops the earlier records of the same app and kind: records are
    /// ordered per app and kind, while apps (and, say, a freeze confirmed
    /// after a back-off and its transition) interleave in any order.
    private var pending: [EventRecord] = []

    /// Returns the first record (from now on) matching `match`.
    @discardableResult
    public func wait(_ what: String, _ match: (EventRecord) -> Bool) throws -> EventRecord {
        while true {
            if let i = pending.firstIndex(where: match) {
                let found = pending[i]
                pending = pending[..<i].filter { $0.app != found.app || $0.kind != found.kind } + pending[(i + 1)...]
                return found
            }
            let r: ControlResponse
            do { r = try client.readResponse() } catch {
                throw TestFailure(
                    "timed out waiting for \(what); saw: \(seen.suffix(12).map(describe).joined(separator: " | "))")
            }
            guard let e = r.event else { continue }
            seen.append(e)
            pending.append(e)
        }
    }

    @discardableResult
    public func state(_ app: String, _ state: String) throws -> EventRecord {
        try wait("\(app) -> \(state)") { $0.app == app && $0.kind == .transition && $0.to == state }
    }

    @discardableResult
    public func acknowledged(_ app: String, _ event: String) throws -> EventRecord {
        try wait("\(app) acknowledging \(event)") {
            $0.app == app && $0.kind == .acknowledged && $0.event?.rawValue == event
        }
    }

    /// The app acknowledged `event` about `scene` (a scene event, or
    /// didDiscardSceneSessions when `scene` is the list it names).
    @discardableResult
    public func acknowledged(_ app: String, _ event: String, scene: String) throws -> EventRecord {
        let sent = try wait("\(app) sent \(event) for \(scene)") {
            $0.app == app && $0.kind == .delivered && $0.event?.rawValue == event
                && ($0.detail?.hasPrefix("scene \(scene) ") == true || $0.detail == "scenes \(scene)")
        }
        return try wait("\(app) acknowledging \(event) for \(scene)") {
            $0.app == app && $0.kind == .acknowledged && $0.sequence == sent.sequence
        }
    }

    @discardableResult
    public func terminated(_ app: String) throws -> EventRecord {
        try wait("\(app) terminated") { $0.app == app && $0.kind == .terminated }
    }

    func describe(_ e: EventRecord) -> String {
        "\(e.app) \(e.kind.rawValue) \(e.to ?? e.event?.rawValue ?? e.reason ?? "")"
    }
}

/// A datagram socket standing in for systemd's notification socket. Like
/// systemd, it reads every datagram as it arrives (a thread does), so the
/// daemon never finds the queue full.
public final class NotifySocket: @unchecked Sendable {
    public let path: String
    public let fd: Int32
    /// Guards `lines`; signalled by the reader thread for every datagram.
    private let condition = NSCondition()
    private var lines: [String] = []
    private var thread: Thread?

    init(path: String) throws {
        self.path = path
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        self.fd = fd
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in for (i, b) in path.utf8.enumerated() { raw[i] = b } }
        let r = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard r == 0 else { throw TestFailure("cannot bind \(path)") }
        let t = Thread { [weak self] in
            var buf = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = recv(fd, &buf, buf.count, 0)
                if n < 0 && errno == EINTR { continue }
                guard n > 0, let self else { return }  // shut down
                let text = String(decoding: buf[0..<n], as: UTF8.self)
                self.condition.lock()
                self.lines += text.split(separator: "\n").map(String.init)
                self.condition.broadcast()
                self.condition.unlock()
            }
        }
        t.start()
        thread = t
    }

    deinit {
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }

    public var received: [String] {
        condition.lock()
        defer { condition.unlock() }
        return lines
    }

    /// Waits (polling what the reader thread collected) for the line `line`.
    public func waitFor(_ line: String, seconds: Double) throws -> Bool {
        try waitFor(prefix: line, seconds: seconds) { $0 == line } != nil
    }

    /// Waits until the line `line` has come `count` times in all.
    public func waitFor(_ line: String, count: Int, seconds: Double) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        condition.lock()
        defer { condition.unlock() }
        while lines.filter({ $0 == line }).count < count {
            if !condition.wait(until: end) { return false }
        }
        return true
    }

    /// Waits for a line starting with `prefix` that satisfies `match`.
    public func waitFor(prefix: String, seconds: Double, _ match: (String) -> Bool) throws -> String? {
        let end = Date().addingTimeInterval(seconds)
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let l = lines.first(where: { $0.hasPrefix(prefix) && match($0) }) { return l }
            if !condition.wait(until: end) { return nil }
        }
    }
}
