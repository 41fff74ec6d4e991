import Foundation
@preconcurrency import Glibc
import LifecycleControl
import LifecycleCore
import LifecycleOS

/// The control socket, one transport over the command front: JSON lines in,
/// JSON lines out, non-blocking both ways, so that a slow or stuck client can
/// never block the daemon. Peers are identified by SO_PEERCRED; the front
/// decides what they may do. Followers of `events --follow` are a record sink.
final class ControlServer: RecordSink {
    static let maxLine = 64 * 1024
    /// A follower that falls this far behind is disconnected.
    static let maxBacklog = 4 * 1024 * 1024

    final class Connection {
        let fd: Int32
        let caller: Caller
        var input: [UInt8] = []
        var output: [UInt8] = []
        var source: EventLoop.Source?
        /// Set for `events --follow`: the apps it wants (empty: all).
        var following: Set<String>?
        var dropped = false

        init(fd: Int32, caller: Caller) {
            self.fd = fd
            self.caller = caller
        }
    }

    let loop: EventLoop
    let listener: Int32
    let front: CommandFront
    private var connections: [Int32: Connection] = [:]
    private var listenSource: EventLoop.Source?
    private let encoder = JSONEncoder()

    init(loop: EventLoop, listener: Int32, front: CommandFront) throws(SystemError) {
        self.loop = loop
        self.listener = listener
        self.front = front
        listenSource = try loop.watch(fd: listener) { [unowned self] _ in self.acceptAll() }
    }

    func close() {
        listenSource?.cancel()
        for c in connections.values { drop(c) }
    }

    private func acceptAll() {
        // A failure to accept (out of descriptors) leaves the connection
        // waiting in the backlog for the next turn.
        while let fd = (try? UnixSocket.accept(listener)).flatMap({ $0 }) {
            let creds = UnixSocket.peerCredentials(fd)
            let c = Connection(fd: fd, caller: creds.map { Caller(pid: $0.pid, uid: $0.uid, gid: $0.gid) } ?? .unknown)
            connections[fd] = c
            c.source = try? loop.watch(fd: fd) { [unowned self] events in self.ready(c, events) }
            if c.source == nil { drop(c) }
        }
    }

    private func ready(_ c: Connection, _ events: UInt32) {
        if events & IOEvents.writable != 0 { flush(c) }
        guard events & IOEvents.readable | IOEvents.hangup | IOEvents.error != 0 else { return }
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let received: Int?
            do {
                received = try chunk.withUnsafeMutableBytes { b throws(SystemError) in
                    try Posix.nonBlocking("recv", "control connection") {
                        recv(c.fd, b.baseAddress, b.count, Int32(MSG_DONTWAIT))
                    }
                }
            } catch {
                return drop(c)  // reset by the peer
            }
            guard let n = received else { return }  // all read
            guard n > 0 else { return drop(c) }  // EOF
            c.input += chunk[0..<n]
            if !processLines(c) { return }
        }
    }

    /// Handles every complete line; false when the connection was dropped.
    private func processLines(_ c: Connection) -> Bool {
        while let nl = c.input.firstIndex(of: 0x0A) {
            // The limit holds for a line that arrived whole in one read too.
            if nl - c.input.startIndex > Self.maxLine { break }
            let line = Array(c.input[..<nl])
            c.input.removeSubrange(...nl)
            let response: ControlResponse
            if let request = try? JSONDecoder().decode(ControlRequest.self, from: Data(line)) {
                response = respond(to: request, from: c)
            } else {
                response = .failure(
                    .badRequest,
                    "bad request: expected one JSON object per line with a known \"command\" (\(line.count) bytes received)"
                )
            }
            send(response, to: c)
            if c.dropped { return false }
        }
        if (c.input.firstIndex(of: 0x0A) ?? c.input.endIndex) - c.input.startIndex > Self.maxLine {
            send(.failure(.badRequest, "bad request: line longer than \(Self.maxLine) bytes"), to: c)
            drop(c)
            return false
        }
        return true
    }

    /// The request as a command for the front, and the front's result as a response.
    private func respond(to request: ControlRequest, from c: Connection) -> ControlResponse {
        let command: Command
        switch Self.command(request) {
        case .success(let decoded): command = decoded
        case .failure(let failure): return .failure(failure.code, failure.message)
        }
        switch front.execute(command, from: c.caller) {
        case .failure(let f):
            return ControlResponse(ok: false, error: ControlError(code: f.code, message: f.message, refusal: f.refusal))
        case .success(.done): return ControlResponse(ok: true)
        case .success(.status(let report)): return ControlResponse(ok: true, status: report)
        case .success(.events(let records)): return ControlResponse(ok: true, events: records)
        case .success(.kills(let kills)): return ControlResponse(ok: true, kills: kills)
        case .success(.follow(let filter)):
            c.following = filter
            return ControlResponse(ok: true)
        }
    }

    /// The JSON request as a typed command; what the JSON leaves out or
    /// gets wrong is a bad request, named.
    static func command(_ r: ControlRequest) -> Result<Command, CommandFailure> {
        func app() -> Result<AppID, CommandFailure> {
            guard let app = r.app else {
                return .failure(CommandFailure(code: .badRequest, message: "'\(r.command.rawValue)' needs an app"))
            }
            return .success(app)
        }
        switch r.command {
        case .status: return .success(.status(apps: r.apps))
        case .events: return .success(.events(apps: r.apps, follow: r.follow == true))
        case .launch: return app().map { .launch($0, r.background == true ? .background : .foreground) }
        case .activate: return app().map { .activate($0) }
        case .stop: return app().map { .stop($0) }
        case .kill: return app().map { .kill($0) }
        case .home: return .success(.home)
        case .lock: return .success(.lock)
        case .unlock: return .success(.unlock)
        case .interruptionBegin: return .success(.interruptionBegin)
        case .interruptionEnd: return .success(.interruptionEnd)
        case .daemonReexec: return .success(.daemonReexec)
        case .jetsam: return .success(.jetsam(limit: r.limit))
        case .pressure:
            guard let level = r.level.flatMap(MemoryLevel.init(rawValue:)) else {
                let got = r.level.map { "'\($0)'" } ?? "none"
                return .failure(
                    CommandFailure(
                        code: .badRequest,
                        message: "'pressure' needs a level: normal, warning or critical (got \(got))"))
            }
            return .success(.pressure(level))
        }
    }

    func send(_ response: ControlResponse, to c: Connection) {
        guard var data = try? encoder.encode(response) else { return }
        data.append(0x0A)
        send(line: data, to: c)
    }

    private func send(line: Data, to c: Connection) {
        guard !c.dropped else { return }
        c.output += line
        if c.output.count > Self.maxBacklog { return drop(c) }
        flush(c)
    }

    /// Sends a record to every follower that wants it, encoded once.
    func deliver(_ record: EventRecord) {
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

    var wantsRecords: Bool { connections.values.contains { $0.following != nil } }

    private func flush(_ c: Connection) {
        while !c.output.isEmpty {
            let sent: Int?
            do {
                sent = try c.output.withUnsafeBytes { b throws(SystemError) in
                    try Posix.nonBlocking("send", "control connection") {
                        Glibc.send(c.fd, b.baseAddress, b.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
                    }
                }
            } catch {
                return drop(c)  // the peer is gone
            }
            guard let n = sent else {
                c.source?.setEvents(IOEvents.readable | IOEvents.writable)
                return
            }
            c.output.removeFirst(n)
        }
        c.source?.setEvents(IOEvents.readable)
    }

    /// Idempotent: the fd number may already belong to a newer connection.
    private func drop(_ c: Connection) {
        guard !c.dropped else { return }
        c.dropped = true
        c.source?.cancel()
        c.source = nil
        Posix.close(c.fd)
        connections[c.fd] = nil
    }
}
