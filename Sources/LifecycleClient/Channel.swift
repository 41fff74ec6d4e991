@preconcurrency import Glibc
import LifecycleWire

/// The app's end of its channel to lifecycled: the inherited, connected
/// SOCK_SEQPACKET socket named by $LIFECYCLE_FD.
struct Channel: @unchecked Sendable {
    let fd: Int32

    /// The inherited socket, or nil when not run by lifecycled.
    static func inherited() -> Channel? {
        guard let raw = getenv(Wire.socketEnvironmentKey), let fd = Int32(String(cString: raw)), fd >= 0 else { return nil }
        var type: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0, type == Int32(SOCK_SEQPACKET.rawValue) else { return nil }
        if let raw = getenv(Wire.protocolEnvironmentKey), case let spoken = String(cString: raw),
           !spoken.isEmpty, spoken != String(Wire.version) {
            fputs("lifecycled speaks protocol version \(spoken) on the app channel; this LifecycleClient speaks \(Wire.version): update the app\n", stderr)
            exit(70)   // EX_SOFTWARE
        }
        unsetenv(Wire.protocolEnvironmentKey)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)   // not for the app's own children
        unsetenv(Wire.socketEnvironmentKey)
        return Channel(fd: fd)
    }

    func send(_ m: AppMessage) {
        let bytes = m.encoded()
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    enum Received { case message(DaemonMessage), closed, timeout }

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
                let n = recv(fd, buffer.baseAddress, buffer.count, 0)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return .closed }
                guard let m = try? DaemonMessage.decode(Array(buffer[0..<n])) else { return .closed }
                return .message(m)
            }
        }
    }
}

func monotonicNanoseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}
