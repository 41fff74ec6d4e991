@preconcurrency import Glibc
import CLifecycleShim
import SystemPackage

/// Unix sockets: the app channels (SOCK_SEQPACKET pairs) and the control
/// socket (SOCK_STREAM).
public enum UnixSocket {
    /// An app's NOTIFY_SOCKET (the sd_notify protocol): a datagram socket
    /// bound to `name` with SO_PASSCRED, non-blocking, close-on-exec. A path
    /// ("/...") becomes a socket file of mode 0600, owned by `owner` when
    /// given (its user may send, nobody else); another name is an abstract
    /// address, as earlier daemons used. Nil when it cannot be bound.
    public static func notifySocket(_ name: String, owner: (uid: uid_t, gid: gid_t)? = nil) -> Int32? {
        let fd = lc_notify_socket(name)
        guard fd >= 0 else { return nil }
        if let owner, name.hasPrefix("/") { chown(name, owner.uid, owner.gid) }
        return fd
    }

    /// One notification datagram into `buffer`: its length (larger than the
    /// buffer when it was cut) and its sender's pid (0 when none came);
    /// nil when nothing waits. Descriptors passed with it are closed at once
    /// (sd_notify's BARRIER=1 waits for that).
    public static func receiveNotification(_ fd: Int32, into buffer: inout [UInt8]) throws(SystemError)
        -> (length: Int, pid: pid_t)?
    {
        var pid: pid_t = 0
        let count = buffer.count
        let n = try buffer.withUnsafeMutableBytes { b in
            Result { () throws(SystemError) in
                try Posix.nonBlocking("recvmsg", "a notification socket") {
                    lc_recv_notify(fd, b.baseAddress, UInt(count), &pid)
                }
            }
        }.get()
        return n.map { (Int($0), pid) }
    }

    /// Reads what a stream socket holds into `buffer`, without blocking:
    /// the count (0: the peer closed), nil when nothing waits.
    public static func read(_ fd: Int32, into buffer: inout [UInt8]) throws(SystemError) -> Int? {
        let count = buffer.count
        return try buffer.withUnsafeMutableBytes { b in
            Result { () throws(SystemError) in
                try Posix.nonBlocking("recv", "fd \(fd)") { recv(fd, b.baseAddress, count, Int32(MSG_DONTWAIT)) }
            }
        }.get()
    }

    /// Writes what a stream socket takes of `bytes`, without blocking and
    /// without SIGPIPE: the count, nil when its buffer is full.
    public static func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemError) -> Int? {
        try Posix.nonBlocking("send", "fd \(fd)") {
            Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
        }
    }

    /// A connected SOCK_SEQPACKET pair: (daemon end, non-blocking; app end,
    /// blocking). Both close-on-exec: the spawner maps the app end into the
    /// child explicitly.
    public static func channelPair() throws(SystemError) -> (daemon: Int32, app: Int32) {
        try pair(Int32(SOCK_SEQPACKET.rawValue))
    }

    /// A connected stream pair, close-on-exec, the first end non-blocking: a
    /// lease (read 0 only when the other end is closed, never for an empty send).
    public static func streamPair() throws(SystemError) -> (daemon: Int32, app: Int32) {
        try pair(Int32(SOCK_STREAM.rawValue))
    }

    private static func pair(_ type: Int32) throws(SystemError) -> (daemon: Int32, app: Int32) {
        var fds: [Int32] = [-1, -1]
        try Posix.call("socketpair") { socketpair(AF_UNIX, type | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) }
        try Posix.setNonBlocking(fds[0])
        return (fds[0], fds[1])
    }

    /// Reads and drops what the peer sent, without blocking; true once the
    /// peer has closed its end (or the socket failed): a lease's end.
    public static func peerClosed(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        while true {
            let n = recv(fd, &byte, 1, Int32(MSG_DONTWAIT))
            if n > 0 { continue }
            return !(n < 0 && (errno == EAGAIN || errno == EINTR))
        }
    }

    /// Sends one datagram without blocking. False when the peer's queue is
    /// full (EAGAIN) or gone.
    public static func send(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        let sent = try? bytes.withUnsafeBytes { b throws(SystemError) in
            try Posix.nonBlocking("send", "fd \(fd)") {
                Glibc.send(fd, b.baseAddress, b.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
            }
        }
        return sent.flatMap { $0 } == bytes.count
    }

    public enum Received { case message([UInt8]), wouldBlock, closed, oversized }

    /// Receives one datagram; MSG_TRUNC reports its real size, so an
    /// oversized message is detected rather than silently cut.
    /// ECONNRESET and the like mean the peer is gone: `.closed`.
    public static func receive(_ fd: Int32, into buffer: inout [UInt8]) -> Received {
        let cap = buffer.count
        let received: Int?
        do {
            received = try buffer.withUnsafeMutableBytes { b throws(SystemError) in
                try Posix.nonBlocking("recv", "fd \(fd)") {
                    recv(fd, b.baseAddress, cap, Int32(MSG_DONTWAIT) | Int32(MSG_TRUNC))
                }
            }
        } catch {
            return .closed
        }
        guard let n = received else { return .wouldBlock }
        if n > cap { return .oversized }
        if n > 0 { return .message(Array(buffer[0..<n])) }
        return .closed
    }

    /// Binds and listens on a stream socket at `path` (replacing a stale
    /// socket file), with the given mode. A socket someone still listens on
    /// is not taken over (EADDRINUSE), and a file that is not a socket is
    /// never removed (EEXIST).
    public static func listen(path: String, mode: mode_t, packets: Bool = false) throws(SystemError) -> Int32 {
        let type = packets ? Int32(SOCK_SEQPACKET.rawValue) : Int32(SOCK_STREAM.rawValue)
        var st = stat()
        if lstat(path, &st) == 0 {
            guard st.st_mode & S_IFMT == S_IFSOCK else {
                throw SystemError("bind", path + " (not a socket)", errno: .fileExists)
            }
            if let fd = try? connect(path: path, type: type) {
                Posix.close(fd)
                throw SystemError("bind", path + " (a running process listens on it)", errno: .addressInUse)
            }
        }
        let fd = try Posix.call("socket") {
            socket(AF_UNIX, type | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        }
        do {
            var addr = try address(path)
            _ = try? Posix.call("unlink", path) { Glibc.unlink(path) }  // a stale socket file: nobody listens
            try Posix.call("bind", path) {
                withUnsafePointer(to: &addr) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                    }
                }
            }
            try Posix.call("chmod", path) { chmod(path, mode) }
            try Posix.call("listen", path) { Glibc.listen(fd, 128) }
        } catch {
            Posix.close(fd)
            throw error
        }
        return fd
    }

    /// Which file `path` is now (device and inode), to remove it later only
    /// if it is still the one we bound (not a socket another daemon bound
    /// there since).
    public static func identity(_ path: String) -> [UInt64]? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        return [UInt64(st.st_dev), UInt64(st.st_ino)]
    }

    /// Removes `path` if it is still the file `identity` named.
    public static func unlink(_ path: String, ifStill identity: [UInt64]?) {
        guard let identity, Self.identity(path) == identity else { return }
        _ = Glibc.unlink(path)
    }

    /// Connects to a stream socket (blocking).
    public static func connect(path: String, type: Int32 = Int32(SOCK_STREAM.rawValue)) throws(SystemError) -> Int32 {
        let fd = try Posix.call("socket") { socket(AF_UNIX, type | Int32(SOCK_CLOEXEC.rawValue), 0) }
        do {
            var addr = try address(path)
            try Posix.call("connect", path) {
                withUnsafePointer(to: &addr) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                    }
                }
            }
        } catch {
            Posix.close(fd)
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

    /// Accepts one connection (non-blocking, close-on-exec): nil when none
    /// is waiting; thrown when accepting failed (EMFILE, ENOMEM, ...).
    public static func accept(_ listener: Int32) throws(SystemError) -> Int32? {
        // Glibc in Swift has no accept4; the window before FD_CLOEXEC is
        // harmless here: spawned children close every fd they were not given.
        guard let fd = try Posix.nonBlocking("accept", "fd \(listener)", { Glibc.accept(listener, nil, nil) }) else {
            return nil
        }
        do {
            try Posix.call("fcntl(F_SETFD)") { fcntl(fd, F_SETFD, FD_CLOEXEC) }
            try Posix.setNonBlocking(fd)
        } catch {
            Posix.close(fd)
            throw error
        }
        return fd
    }

    public struct Credentials: Sendable { public var pid: Int32; public var uid: UInt32; public var gid: UInt32 }

    /// The peer's credentials, from the kernel (SO_PEERCRED): not forgeable.
    public static func peerCredentials(_ fd: Int32) -> Credentials? {
        var pid: pid_t = 0, uid: uid_t = 0, gid: gid_t = 0
        guard lc_peer_credentials(fd, &pid, &uid, &gid) == 0 else { return nil }
        return Credentials(pid: pid, uid: uid, gid: gid)
    }

    /// The path a Unix socket is bound to (getsockname): nil for an
    /// unbound or abstract one. A socket-activated listener names its file.
    public static func boundPath(_ fd: Int32) -> String? {
        var addr = sockaddr_un()
        var len = socklen_t(MemoryLayout<sockaddr_un>.size)
        let r = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        guard r == 0, addr.sun_family == sa_family_t(AF_UNIX) else { return nil }
        let bytes = withUnsafeBytes(of: addr.sun_path) { Array($0.prefix(while: { $0 != 0 })) }
        guard !bytes.isEmpty else { return nil }
        return String(decoding: bytes, as: UTF8.self)
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
