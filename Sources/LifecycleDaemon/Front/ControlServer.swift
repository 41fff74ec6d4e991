#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleControl
import LifecycleCore
import LifecycleOS
import Logging

/// The control socket, one transport over the command front: JSON lines in,
/// JSON lines out, non-blocking both ways, so that a slow or stuck client can
/// never block the daemon. Peers are identified by SO_PEERCRED; the front
/// decides what they may do. Followers of `events --follow` are a record sink.
final class ControlServer: RecordSink {
    static let maxLine = 64 * 1024
    /// A follower that falls this far behind is disconnected.
    static let maxBacklog = 4 * 1024 * 1024
    /// Requests handled per connection per turn of the loop (as app
    /// channels have theirs): the rest wait for the next turn, so that a
    /// peer sending as fast as it can delays a timer by one turn at most.
    static let linesPerTurn = 16
    /// Connections accepted per turn.
    static let acceptsPerTurn = 64
    /// Bad or refused requests a connection may send before it is closed:
    /// an unauthorised peer costs no more than its refusals.
    static let strikes = 32

    final class Connection {
        let fd: Int32
        let caller: Caller
        var input: [UInt8] = []
        /// What is still to be written is `output[written...]`: the bytes
        /// before it went out and are dropped once they are the larger
        /// part, not moved at every partial write (a follower that lags
        /// by megabytes would have its whole backlog moved each time).
        var output: [UInt8] = []
        var written = 0
        var unwritten: Int { output.count - written }
        /// The socket was full at the last write: nothing is tried again
        /// until the loop says it is writable (a lagging follower costs no
        /// failed write per record).
        var blocked = false
        var source: EventLoop.Source?
        /// Set for `events --follow`: the apps it wants (empty: all).
        var following: Set<String>?
        /// A compositor's follower reports on it (`shown`): raises go to it.
        var compositor = false
        var dropped = false
        /// Bad or refused requests so far.
        var strikes = 0

        init(fd: Int32, caller: Caller) {
            self.fd = fd
            self.caller = caller
        }
    }

    let loop: EventLoop
    let listener: Int32
    /// The private socket beside it (`ControlDefaults.privatePath`), mode
    /// 0600: the daemon's own user's backlog, which no flood of other
    /// users' connections reaches. Served as the shared one is.
    let privateListener: Int32?
    let front: CommandFront
    private var connections: [Int32: Connection] = [:]
    private var listenSources: [Int32: EventLoop.Source] = [:]
    private let encoder = JSONStreamEncoder()
    /// What each read lands in, made once: a new zeroed 16 KiB array at
    /// every wake-up was 5 % of an event's instructions (docs/performance.md).
    private var chunk = [UInt8](repeating: 0, count: 16384)
    /// Who may connect, and how often they may ask (Admission.swift).
    private var admission: Admission
    /// Connections with requests left over from their turn, and the
    /// timer that comes back to them at the next.
    private var pending: Set<Int32> = []
    private var pendingTimer: EventLoop.Source?
    /// The daemon's reserve descriptor: out of descriptors, it lets one
    /// waiting connection be accepted and told why it is refused (rather
    /// than left in the backlog, where it would wake the loop again and again).
    private let reserve: DescriptorReserve
    /// While out of descriptors: accepting is paused, and this resumes it.
    private var resumeTimer: EventLoop.Source?
    /// Connections refused for want of a descriptor since the last log line.
    private var refusedForDescriptors = 0
    var logger: Logger?
    /// Answers and records wait while this says the state that caused them
    /// is not yet saved (the daemon's outbox, State/Outbox.swift); `release`
    /// sends them.
    var holding: () -> Bool = { false }
    private var held: Set<Int32> = []

    init(
        loop: EventLoop, listener: Int32, privateListener: Int32? = nil, front: CommandFront,
        descriptorLimit: UInt64 = 1024, reserve: DescriptorReserve = DescriptorReserve()
    ) throws(SystemError) {
        self.reserve = reserve
        self.loop = loop
        self.listener = listener
        self.privateListener = privateListener
        self.front = front
        admission = Admission(descriptorLimit: descriptorLimit)
        for fd in [listener] + (privateListener.map { [$0] } ?? []) {
            listenSources[fd] = try loop.watch(fd: fd) { [unowned self] _ in self.acceptAll(fd) }
        }
        pendingTimer = try loop.timer { [unowned self] in self.continuePending() }
        resumeTimer = try loop.timer { [unowned self] in
            for source in self.listenSources.values { source.setEvents(IOEvents.readable) }
        }
    }

    func close() {
        for source in listenSources.values { source.cancel() }
        pendingTimer?.cancel()
        resumeTimer?.cancel()
        for c in connections.values { drop(c) }
    }

    private func acceptAll(_ listener: Int32) {
        var turnedAway = 0
        let shared = listener == self.listener
        defer {
            if shared {
                rationing = turnedAway > 0
                if rationing { rationShared() }
            }
        }
        for _ in 0..<(shared && rationing ? Self.rationedAccepts : Self.acceptsPerTurn) {
            let fd: Int32
            do {
                guard let accepted = try UnixSocket.accept(listener) else { return }  // none waiting
                fd = accepted
            } catch  where DescriptorReserve.outOfDescriptors(error.errno) {
                return outOfDescriptors(listener)
            } catch {
                return  // the peer went first (ECONNABORTED): the next turn tries again
            }
            let creds = UnixSocket.peerCredentials(fd)
            let c = Connection(fd: fd, caller: creds.map { Caller(pid: $0.pid, uid: $0.uid, gid: $0.gid) } ?? .unknown)
            switch admission.connect(uid: c.caller.uid ?? UInt32.max, now: loop.now) {
            case .admitted: break
            case .turnedAway:
                Posix.close(fd)
                turnedAway += 1
                continue
            case .refused(let refusal, let message):
                refuse(fd, refusal, message)
                continue
            }
            connections[fd] = c
            c.source = try? loop.watch(fd: fd) { [unowned self] events in self.ready(c, events) }
            if c.source == nil { drop(c) }
        }
        // More are waiting: the listener is still readable, so the next turn comes back.
    }

    /// A penalised user is reconnecting: the shared socket is served once
    /// per `rationInterval`, `rationedAccepts` at a time, until a turn finds
    /// no such connection. Each connection costs the kernel an accept and a
    /// close whatever the daemon does with it, and a flooder reconnecting
    /// without pause kept the daemon at 80 % of a core; now it waits in the
    /// backlog (or in connect), other users' connections wait with it, and
    /// root's commands go through the private socket, never rationed.
    private func rationShared() {
        listenSources[listener]?.setEvents(0)
        resumeTimer?.arm(at: loop.now + Self.rationInterval)
    }
    static let rationInterval: Int64 = 10_000_000
    static let rationedAccepts = 8
    /// The last turn of the shared socket closed a penalised user's connection.
    private var rationing = false

    /// Answers a connection it will not serve with the reason, and closes it.
    private func refuse(_ fd: Int32, _ refusal: String, _ message: String) {
        let response = ControlResponse(
            ok: false, error: ControlError(code: .refused, message: message, refusal: refusal))
        if var data = try? encoder.encode(response) {
            data.append(0x0A)
            _ = data.withUnsafeBytes { b in Result { () throws(SystemError) in try UnixSocket.write(fd, b) } }
        }
        Posix.close(fd)
    }

    /// EMFILE or ENFILE: the waiting connection is taken with the reserve
    /// descriptor and refused with the reason, so the backlog cannot keep
    /// the loop awake; if even that fails, accepting pauses for 100 ms.
    private func outOfDescriptors(_ listener: Int32) {
        reserve.spending {
            if let fd = try? UnixSocket.accept(listener) {
                refuse(fd, "out-of-descriptors", "lifecycled is out of file descriptors; try again later")
            }
        }
        refusedForDescriptors += 1
        if refusedForDescriptors == 1 || !reserve.held {
            let paused = reserve.held ? "" : " (accepting paused for 100 ms)"
            logger?.error(
                "out of file descriptors: refusing control connections\(paused)",
                metadata: ["refused": "\(refusedForDescriptors)"])
        }
        if !reserve.held {
            for source in listenSources.values { source.setEvents(0) }
            resumeTimer?.arm(at: loop.now + 100_000_000)
        }
    }

    /// The next turn: connections whose requests outran their budget.
    private func continuePending() {
        let now = pending
        pending = []
        for fd in now {
            guard let c = connections[fd], !c.dropped else { continue }
            _ = processLines(c)  // what the socket holds besides is read when the loop says so
        }
    }

    private func ready(_ c: Connection, _ events: UInt32) {
        if events & IOEvents.writable != 0 {
            c.blocked = false
            flush(c)
            // A peer gone with a backlog for it wakes the loop writable and
            // hung up at once; the write failed and closed the descriptor,
            // which must not be read then (EBADF stops the daemon: Posix.swift).
            guard !c.dropped else { return }
        }
        guard events & IOEvents.readable | IOEvents.hangup | IOEvents.error != 0 else { return }
        // Lines left from an earlier turn go first; until they are done,
        // nothing more is read (the socket's buffer then slows the peer).
        guard !pending.contains(c.fd) else { return }
        // Each read's bytes are copied to the connection's input before
        // anything else runs, so the one buffer serves every read.
        while true {
            let received: Int?
            do {
                received = try UnixSocket.read(c.fd, into: &chunk)
            } catch {
                return drop(c)  // reset by the peer
            }
            guard let n = received else { return }  // all read
            guard n > 0 else { return drop(c) }  // EOF
            c.input += chunk[0..<n]
            if !processLines(c) { return }
        }
    }

    /// Handles complete lines, at most `linesPerTurn`; false when the
    /// connection was dropped or its budget for this turn is spent (the
    /// rest is handled at the next turn).
    private func processLines(_ c: Connection) -> Bool {
        var handled = 0
        while let nl = c.input.firstIndex(of: 0x0A) {
            // The limit holds for a line that arrived whole in one read too.
            if nl - c.input.startIndex > Self.maxLine { break }
            if handled == Self.linesPerTurn {
                pending.insert(c.fd)
                pendingTimer?.arm(at: loop.now)
                return false
            }
            handled += 1
            let line = Array(c.input[..<nl])
            c.input.removeSubrange(...nl)
            let response: ControlResponse
            let rated = c.caller.uid.map { !admission.request(uid: $0, now: loop.now) } ?? false
            if rated {
                response = ControlResponse(
                    ok: false,
                    error: ControlError(
                        code: .refused,
                        message:
                            "too many requests from uid \(c.caller.uid ?? 0) (at most \(Int(Admission.requestsPerSecond)) a second)",
                        refusal: "too-many-requests"))
            } else if let request = line.isEmpty
                ? nil
                : ControlRequest.readPlain(line) ?? (try? JSONDecoder().decode(ControlRequest.self, from: Data(line)))
            {
                response = respond(to: request, from: c)
            } else {
                response = .failure(
                    .badRequest,
                    "bad request: expected one JSON object per line with a known \"command\" (\(line.count) bytes received)"
                )
            }
            if rated || response.error?.code == .badRequest || response.error?.code == .permissionDenied {
                c.strikes += 1
            }
            send(response, to: c)
            if c.dropped { return false }
            if c.strikes >= Self.strikes {
                send(
                    .failure(
                        .badRequest,
                        "\(Self.strikes) bad or refused requests: closing the connection (and any new one for 1 s)"),
                    to: c)
                if let uid = c.caller.uid { admission.struckOut(uid: uid, now: loop.now) }
                drop(c)
                return false
            }
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
        var command: Command
        switch Self.command(request) {
        case .success(let decoded): command = decoded
        case .failure(let failure): return .failure(failure.code, failure.message)
        }
        if case .shown(let report, _, _) = command, front.permissions.mayChange(c.caller) {
            command = .shown(report, fresh: !c.compositor)
            for other in connections.values where other !== c { other.compositor = false }
            c.compositor = true  // the most recent follower's connection
        }
        switch front.execute(command, from: c.caller) {
        case .failure(let f):
            return ControlResponse(ok: false, error: ControlError(code: f.code, message: f.message, refusal: f.refusal))
        case .success(.done): return ControlResponse(ok: true)
        case .success(.status(let report)): return ControlResponse(ok: true, status: report)
        case .success(.events(let records)): return ControlResponse(ok: true, events: records)
        case .success(.kills(let kills)): return ControlResponse(ok: true, kills: kills)
        case .success(.reload(let report)):
            var response = ControlResponse(ok: true)
            response.reload = report
            return response
        case .success(.avail(let apps)):
            var response = ControlResponse(ok: true)
            response.avail = apps
            return response
        case .success(.tail(let report)):
            var response = ControlResponse(ok: true)
            response.tail = report
            return response
        case .success(.follow(let filter)):
            c.following = filter
            return ControlResponse(ok: true)
        }
    }

    func send(_ response: ControlResponse, to c: Connection) {
        // status, the one large answer, is written by hand (StatusJSON.swift).
        if response.ok, let status = response.status, response.events == nil,
            let line = try? status.responseLine()
        {
            return send(line: line, to: c)
        }
        guard var bytes = try? encoder.writeBytes(response) else { return }
        bytes.append(0x0A)
        send(line: bytes, to: c)
    }

    private func send(line: [UInt8], to c: Connection) {
        guard !c.dropped else { return }
        c.output.append(contentsOf: line)
        if c.unwritten > Self.maxBacklog { return drop(c) }
        flush(c)
    }

    /// Sends a record to every follower that wants it, encoded once.
    func deliver(_ record: EventRecord) {
        var line: [UInt8]? = nil
        for c in connections.values {
            guard let f = c.following, f.isEmpty || f.contains(record.app) else { continue }
            if line == nil, var bytes = try? encoder.writeBytes(ControlResponse(ok: true, event: record)) {
                bytes.append(0x0A)
                line = bytes
            }
            if let line { send(line: line, to: c) }
        }
    }

    var wantsRecords: Bool { connections.values.contains { $0.following != nil } }

    /// A compositor reports over D-Bus now: no connection here is its.
    func forgetFollower() {
        for c in connections.values { c.compositor = false }
    }

    /// Asks the follower something (a raise, a home command); false when
    /// no follower is connected.
    func toFollower(_ response: ControlResponse) -> Bool {
        guard let c = connections.values.first(where: { $0.compositor && !$0.dropped }) else { return false }
        send(response, to: c)
        return true
    }

    /// What was held for the save, sent (unless a later change holds it again).
    func release() {
        guard !held.isEmpty, !holding() else { return }
        let waiting = held
        held = []
        for fd in waiting {
            if let c = connections[fd], !c.dropped { flush(c) }
        }
    }

    private func flush(_ c: Connection) {
        if holding(), c.unwritten > 0 {
            held.insert(c.fd)
            return
        }
        guard !c.blocked else { return }  // the writable event flushes it
        while c.unwritten > 0 {
            let sent: Int?
            let from = c.written
            do {
                sent = try c.output.withUnsafeBytes { b in
                    Result { () throws(SystemError) in
                        try UnixSocket.write(c.fd, UnsafeRawBufferPointer(rebasing: b[from...]))
                    }
                }.get()
            } catch {
                return drop(c)  // the peer is gone
            }
            guard let n = sent else {
                c.blocked = true
                if c.written > c.output.count / 2 {  // the sent part is the larger: dropped now
                    c.output.removeFirst(c.written)
                    c.written = 0
                }
                c.source?.setEvents(IOEvents.readable | IOEvents.writable)
                return
            }
            c.written += n
        }
        c.output.removeAll(keepingCapacity: c.output.count <= 64 * 1024)
        c.written = 0
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
        pending.remove(c.fd)
        held.remove(c.fd)
        admission.disconnected(uid: c.caller.uid ?? UInt32.max)
    }
}
