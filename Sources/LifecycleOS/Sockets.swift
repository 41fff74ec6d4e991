@preconcurrency import Glibc
import CLifecycleShim
import SystemPackage

/// Unix sockets: the app channels (SOCK_SEQPACKET pairs) and the control
/// socket (SOCK_STREAM).
public enum UnixSocket {
    /// A connected SOCK_SEQPACKET pair: (daemon end, non-blocking; app end,
    /// blocking). Both close-on-exec: the spawner maps the app end into the
    /// child explicitly.
    public static func channelPair() throws(SystemError) -> (daemon: Int32, app: Int32) {
        var fds: [Int32] = [-1, -1]
        try Posix.call("socketpair") {
            socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds)
        }
        try Posix.setNonBlocking(fds[0])
        return (fds[0], fds[1])
    }

    /// Sends one datagram without blocking. False when the peer's queue is
    /// full (EAGAIN) or gone.
    public static func send(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { b in
            while true {
                let n = Glibc.send(fd, b.baseAddress, b.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
                if n >= 0 { return n == b.count }
                if errno == EINTR { continue }
                return false
            }
        }
    }

    public enum Received { case message([UInt8]), wouldBlock, closed, oversized }

    /// Receives one datagram; MSG_TRUNC reports its real size, so an
    /// oversized message is detected rather than silently cut.
    public static func receive(_ fd: Int32, into buffer: inout [UInt8]) -> Received {
        let cap = buffer.count
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, cap, Int32(MSG_DONTWAIT) | Int32(MSG_TRUNC)) }
            if n > cap { return .oversized }
            if n > 0 { return .message(Array(buffer[0..<n])) }
            if n == 0 { return .closed }
            switch errno {
            case EINTR: continue
            case EAGAIN: return .wouldBlock
            default: return .closed
            }
        }
    }

    /// Binds and listens on a stream socket at `path` (replacing a stale
    /// socket file), with the given mode.
    public static func listen(path: String, mode: mode_t) throws(SystemError) -> Int32 {
        let fd = try Posix.call("socket") {
            socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        }
        do {
            var addr = try address(path)
            unlink(path)
            try Posix.call("bind", path) {
                withUnsafePointer(to: &addr) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
                }
            }
            try Posix.call("chmod", path) { chmod(path, mode) }
            try Posix.call("listen", path) { Glibc.listen(fd, 128) }
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    /// Connects to a stream socket (blocking).
    public static func connect(path: String) throws(SystemError) -> Int32 {
        let fd = try Posix.call("socket") { socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
        do {
            var addr = try address(path)
            try Posix.call("connect", path) {
                withUnsafePointer(to: &addr) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
                }
            }
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    static func address(_ path: String) throws(SystemError) -> sockaddr_un {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
            throw SystemError("bind", path, errno: .fileNameTooLong)
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        return addr
    }

    /// Accepts one connection (non-blocking, close-on-exec), or nil.
    public static func accept(_ listener: Int32) -> Int32? {
        while true {
            // Glibc in Swift has no accept4; the window before FD_CLOEXEC is
            // harmless here: spawned children close every fd they were not given.
            let fd = Glibc.accept(listener, nil, nil)
            if fd >= 0 {
                _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
                try? Posix.setNonBlocking(fd)
                return fd
            }
            if errno == EINTR { continue }
            return nil
        }
    }

    public struct Credentials: Sendable { public var pid: Int32; public var uid: UInt32; public var gid: UInt32 }

    /// The peer's credentials, from the kernel (SO_PEERCRED): not forgeable.
    public static func peerCredentials(_ fd: Int32) -> Credentials? {
        var pid: pid_t = 0, uid: uid_t = 0, gid: gid_t = 0
        guard lc_peer_credentials(fd, &pid, &uid, &gid) == 0 else { return nil }
        return Credentials(pid: pid, uid: uid, gid: gid)
    }

    /// True when `fd` is a listening Unix stream socket (socket activation check).
    public static func isListeningUnixStream(_ fd: Int32) -> Bool {
        var type: Int32 = 0, listening: Int32 = 0, domain: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 else { return false }
        len = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 else { return false }
        len = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 else { return false }
        return type == Int32(SOCK_STREAM.rawValue) && listening == 1 && domain == AF_UNIX
    }
}
