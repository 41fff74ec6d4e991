@preconcurrency import Glibc
import LifecycleWire

/// The app's end of its channel to lifecycled: the inherited, connected
/// SOCK_SEQPACKET socket named by $LIFECYCLE_FD.
struct Channel: @unchecked Sendable {
    let fd: Int32

    /// The inherited socket, or nil when not run by lifecycled.
    static func inherited() -> Channel? {
        guard let raw = getenv(Wire.socketEnvironmentKey), let fd = Int32(String(cString: raw)), fd >= 0 else {
            return nil
        }
        var type: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0, type == Int32(SOCK_SEQPACKET.rawValue) else {
            return nil
        }
        if let raw = getenv(Wire.protocolEnvironmentKey), case let spoken = String(cString: raw),
            !spoken.isEmpty, spoken != String(Wire.version)
        {
            fputs(
                "lifecycled speaks protocol version \(spoken) on the app channel; this LifecycleClient speaks \(Wire.version): update the app\n",
                stderr)
            exit(70)  // EX_SOFTWARE
        }
        unsetenv(Wire.protocolEnvironmentKey)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)  // not for the app's own children
        unsetenv(Wire.socketEnvironmentKey)
        return Channel(fd: fd)
    }

    func send(_ m: AppMessage) {
        let bytes = m.encoded()
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// What a wait on the channel brought: a message, the end of the
    /// channel, a datagram that does not decode (why, as WireError says it;
    /// the C library's lifecycle_last_error says the same), or nothing in time.
    enum Received { case message(DaemonMessage), closed, violation(String), timeout }

    /// Waits up to `timeoutMilliseconds` (-1: forever) for one message.
    /// With no timeout it goes straight to a blocking recv (one system call
    /// per message on the hot path), into a stack buffer.
    func receive(timeoutMilliseconds: Int32) -> Received {
        if timeoutMilliseconds >= 0 {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            while true {
                let r = poll(&p, 1, timeoutMilliseconds)
                if r < 0 && errno == EINTR { continue }
                if r == 0 { return .timeout }
                break
            }
        }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Wire.maxMessageSize) { buffer in
            while true {
                // MSG_TRUNC: the real length of a longer datagram, to reject it (as C does).
                let n = recv(fd, buffer.baseAddress, buffer.count, Int32(MSG_TRUNC))
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return .closed }
                if n > buffer.count { return .violation("message of \(n) bytes exceeds \(Wire.maxMessageSize)") }
                do throws(WireError) {
                    return .message(try DaemonMessage.decode(Array(buffer[0..<n])))
                } catch {
                    return .violation(error.description)
                }
            }
        }
    }
}

/// Why the channel became unusable. Final, as a channel error is in the C
/// library, and in the same words as its lifecycle_last_error() (see
/// docs/protocol.md, "What the client libraries do").
enum ChannelError: Error, Equatable, CustomStringConvertible {
    /// The daemon closed its end (C: ECONNRESET).
    case closed
    /// The daemon sent a datagram that does not decode (C: EPROTO).
    case protocolViolation(String)
    /// More than Wire.maxQueuedWhileWaiting messages arrived while
    /// beginBackgroundTask waited for its reply (C: ENOBUFS).
    case tooManyQueued

    var description: String {
        switch self {
        case .closed: "lifecycled closed the channel"
        case .protocolViolation(let why): "protocol violation by the daemon: \(why)"
        case .tooManyQueued:
            "more than \(Wire.maxQueuedWhileWaiting) messages arrived while waiting for a background task reply"
        }
    }

    /// The line the client writes on stderr: the error, then the app's name.
    func notice(app: String?) -> String { "\(self) (\(app ?? "this app"))" }
}

func monotonicNanoseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}
