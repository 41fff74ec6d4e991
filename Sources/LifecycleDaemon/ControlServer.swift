import Foundation
@preconcurrency import Glibc
import LifecycleControl
import LifecycleOS

/// The control socket: JSON lines in, JSON lines out, non-blocking both
/// ways, so that a slow or stuck client can never block the daemon. Peers
/// are identified by SO_PEERCRED: root and members of the control group may
/// change things, anyone who can connect may read.
final class ControlServer {
    static let maxLine = 64 * 1024
    /// A follower that falls this far behind is disconnected.
    static let maxBacklog = 4 * 1024 * 1024

    final class Connection {
        let fd: Int32
        let credentials: UnixSocket.Credentials?
        let mayChange: Bool
        var input: [UInt8] = []
        var output: [UInt8] = []
        var source: EventLoop.Source?
        /// Set for `events --follow`: the apps it wants (empty: all).
        var following: Set<String>?

        init(fd: Int32, credentials: UnixSocket.Credentials?, mayChange: Bool) {
            self.fd = fd
            self.credentials = credentials
            self.mayChange = mayChange
        }
    }

    let loop: EventLoop
    let listener: Int32
    let controlGID: gid_t?
    var execute: (ControlRequest, Connection) -> ControlResponse = { _, _ in .failure(.refused, "not ready") }
    private var connections: [Int32: Connection] = [:]
    private var listenSource: EventLoop.Source?
    private let encoder = JSONEncoder()

    init(loop: EventLoop, listener: Int32, controlGroup: String?) throws(SystemError) {
        self.loop = loop
        self.listener = listener
        controlGID = controlGroup.flatMap { getgrnam($0)?.pointee.gr_gid }
        listenSource = try loop.watch(fd: listener) { [unowned self] _ in self.acceptAll() }
    }

    func close() {
        listenSource?.cancel()
        for c in connections.values { drop(c) }
    }

    private func acceptAll() {
        while let fd = UnixSocket.accept(listener) {
            let creds = UnixSocket.peerCredentials(fd)
            let c = Connection(fd: fd, credentials: creds, mayChange: creds.map(mayChange) ?? false)
            connections[fd] = c
            c.source = try? loop.watch(fd: fd) { [unowned self] events in self.ready(c, events) }
            if c.source == nil { drop(c) }
        }
    }

    /// Root, the control group as primary group, or as a supplementary
    /// group of the connecting process (read from /proc, as the kernel has it).
    private func mayChange(_ creds: UnixSocket.Credentials) -> Bool {
        if creds.uid == 0 { return true }
        guard let gid = controlGID else { return false }
        if creds.gid == gid { return true }
        guard let status = try? Posix.readFile("/proc/\(creds.pid)/status") else { return false }
        for line in status.split(separator: "\n") where line.hasPrefix("Groups:") {
            // "Groups:\t1 24 27 " - tab after the colon, spaces between.
            return line.dropFirst(7).split(whereSeparator: { $0 == " " || $0 == "\t" }).contains { gid_t($0) == gid }
        }
        return false
    }

    private func ready(_ c: Connection, _ events: UInt32) {
        if events & IOEvents.writable != 0 { flush(c) }
        guard events & IOEvents.readable | IOEvents.hangup | IOEvents.error != 0 else { return }
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n > 0 {
                c.input += chunk[0..<n]
                if !processLines(c) { return }
                continue
            }
            if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
            return drop(c)   // EOF or error
        }
    }

    /// Handles every complete line; false when the connection was dropped.
    private func processLines(_ c: Connection) -> Bool {
        while let nl = c.input.firstIndex(of: 0x0A) {
            let line = Array(c.input[..<nl])
            c.input.removeSubrange(...nl)
            let response: ControlResponse
            if let request = try? JSONDecoder().decode(ControlRequest.self, from: Data(line)) {
                if request.command.changes && !c.mayChange {
                    response = .failure(.permissionDenied,
                        "permission denied: '\(request.command.rawValue)' needs root or membership of the control group")
                } else {
                    response = execute(request, c)
                }
            } else {
                response = .failure(.badRequest, "bad request: expected one JSON object per line with a known \"command\" (\(line.count) bytes received)")
            }
            send(response, to: c)
            if connections[c.fd] == nil { return false }
        }
        if c.input.count > Self.maxLine {
            send(.failure(.badRequest, "bad request: line longer than \(Self.maxLine) bytes"), to: c)
            drop(c)
            return false
        }
        return true
    }

    func send(_ response: ControlResponse, to c: Connection) {
        guard var data = try? encoder.encode(response) else { return }
        data.append(0x0A)
        send(line: data, to: c)
    }

    private func send(line: Data, to c: Connection) {
        c.output += line
        if c.output.count > Self.maxBacklog { return drop(c) }
        flush(c)
    }

    /// Sends a record to every follower that wants it, encoded once.
    func broadcast(_ record: EventRecord) {
        var line: Data? = nil
        for c in connections.values {
            guard let f = c.following, f.isEmpty || f.contains(record.app) else { continue }
            if line == nil {
                line = try? encoder.encode(ControlResponse(ok: true, event: record))
                line?.append(0x0A)
            }
            if let line { send(line: line, to: c) }
        }
    }

    var hasFollowers: Bool { connections.values.contains { $0.following != nil } }

    private func flush(_ c: Connection) {
        while !c.output.isEmpty {
            let n = c.output.withUnsafeBytes { Glibc.send(c.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
            if n > 0 { c.output.removeFirst(n); continue }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && errno == EAGAIN {
                c.source?.setEvents(IOEvents.readable | IOEvents.writable)
                return
            }
            return drop(c)
        }
        c.source?.setEvents(IOEvents.readable)
    }

    private func drop(_ c: Connection) {
        c.source?.cancel()
        c.source = nil
        Glibc.close(c.fd)
        connections[c.fd] = nil
    }
}
