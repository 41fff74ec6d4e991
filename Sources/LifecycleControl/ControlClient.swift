#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc

/// A blocking client of the control socket, for supervisorctl and tests.
public final class ControlClient {
    public enum Failure: Error, CustomStringConvertible {
        /// The daemon is not there (no socket, nobody listening).
        case noDaemon(path: String, reason: String)
        case connectionLost
        case badResponse(String)

        public var description: String {
            switch self {
            case .noDaemon(let path, let reason): "cannot reach lifecycled at \(path): \(reason)"
            case .connectionLost: "the daemon closed the connection"
            case .badResponse(let line): "unreadable response from the daemon: \(line)"
            }
        }
    }

    let fd: Int32
    private var buffer: [UInt8] = []

    public init(path: String) throws(Failure) {
        switch Self.connectStream(path) {
        case .success(let fd): self.fd = fd
        case .failure(let reason): throw .noDaemon(path: path, reason: reason.description)
        }
    }

    public struct ConnectFailure: Error, CustomStringConvertible {
        public var description: String
    }

    /// A connected AF_UNIX stream socket (close-on-exec), or why not:
    /// for this client and for lifecycled-follow's compositor connection.
    public static func connectStream(_ path: String) -> Result<Int32, ConnectFailure> {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
            return .failure(ConnectFailure(description: "bad socket path"))
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .failure(ConnectFailure(description: String(cString: strerror(errno)))) }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in for (i, b) in bytes.enumerated() { raw[i] = b } }
        let r = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if r != 0 {
            let reason = String(cString: strerror(errno))
            close(fd)
            return .failure(ConnectFailure(description: reason))
        }
        return .success(fd)
    }

    /// Connects to the daemon at `path`, through its private socket
    /// (`ControlDefaults.privatePath`) when that file belongs to this user:
    /// root's commands then never queue behind other users' connections.
    /// Any failure there falls back to `path` itself.
    public static func preferringPrivate(path: String) throws(Failure) -> ControlClient {
        let privatePath = ControlDefaults.privatePath(for: path)
        var st = stat()
        if lstat(privatePath, &st) == 0, st.st_mode & S_IFMT == S_IFSOCK, st.st_uid == geteuid(),
            let client = try? ControlClient(path: privatePath)
        {
            return client
        }
        return try ControlClient(path: path)
    }

    deinit { close(fd) }

    /// The connection's descriptor, to poll it beside others (lifecycled-follow).
    public var fileDescriptor: Int32 { fd }
    /// A whole line is already read and waits for `readResponse`.
    public var hasBufferedLine: Bool { buffer.contains(0x0A) }

    /// Makes every read give up after `seconds` (SO_RCVTIMEO); the read
    /// then fails with `.connectionLost`. Tests bound their waits with it.
    public func setReadTimeout(seconds: Double) {
        var tv = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Sends one request and reads its response.
    public func send(_ request: ControlRequest) throws(Failure) -> ControlResponse {
        try write(request)
        return try readResponse()
    }

    public func write(_ request: ControlRequest) throws(Failure) {
        guard var data = try? JSONEncoder().encode(request) else { throw .badResponse("cannot encode request") }
        data.append(0x0A)
        try writeRaw(Array(data))
    }

    /// Writes raw bytes (tests use it to send malformed requests).
    public func writeRaw(_ bytes: [UInt8]) throws(Failure) {
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 { if errno == EINTR { continue }; throw .connectionLost }
            off += n
        }
    }

    /// Reads the next response line.
    public func readResponse() throws(Failure) -> ControlResponse {
        let line = try readLine()
        // The one large answer is read by hand (StatusJSON.swift); anything it does not know, by JSONDecoder.
        if line.starts(with: Self.statusPrefix), let status = StatusReport.fromResponseLine(line) {
            return ControlResponse(ok: true, status: status)
        }
        do { return try JSONDecoder().decode(ControlResponse.self, from: Data(line)) } catch {
            throw .badResponse(String(decoding: line, as: UTF8.self))
        }
    }

    static let statusPrefix = Array(#"{"ok":true,"status":"#.utf8)

    func readLine() throws(Failure) -> [UInt8] {
        var searched = 0  // the bytes already looked through for the newline: a long line comes in many chunks
        while true {
            let found = buffer.withUnsafeBufferPointer { all -> Int? in
                guard let base = all.baseAddress, all.count > searched else { return nil }
                return memchr(base + searched, 0x0A, all.count - searched)
                    .map { base.distance(to: $0.assumingMemoryBound(to: UInt8.self)) }
            }
            if let nl = found {
                let line = Array(buffer[..<nl])
                buffer.removeSubrange(...nl)
                return line
            }
            searched = buffer.count
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { throw .connectionLost }
            buffer += chunk[0..<n]
        }
    }

    /// Streams `events --follow`: calls `body` for each record until it
    /// returns false or the daemon goes away.
    public func follow(apps: [String]? = nil, _ body: (EventRecord) -> Bool) throws(Failure) {
        let first = try send(ControlRequest(.events, apps: apps, follow: true))
        guard first.ok else { throw .badResponse(first.error?.message ?? "refused") }
        while true {
            let r = try readResponse()
            if let e = r.event, !body(e) { return }
        }
    }
}
