@preconcurrency import Glibc
import SystemPackage

// Files the shell keeps (FIFOs, logs, socket files, its databases) and the
// configuration it reads: every call through Posix.call, which names it in
// its errors.

extension Posix {
    /// unlink(2); true when the file is gone afterwards (ENOENT counts).
    @discardableResult
    public static func unlink(_ path: String) -> Bool {
        do { try call("unlink", path) { Glibc.unlink(path) } } catch { return error.errno == .noSuchFileOrDirectory }
        return true
    }

    /// rename(2), replacing `to`.
    @discardableResult
    public static func rename(_ from: String, to: String) -> Bool {
        (try? call("rename", from) { Glibc.rename(from, to) }) != nil
    }

    public static func chmod(_ path: String, _ mode: mode_t) throws(SystemError) {
        try call("chmod", path) { Glibc.chmod(path, mode) }
    }

    public static func open(_ path: String, _ flags: Int32, mode: mode_t = 0) throws(SystemError) -> Int32 {
        try call("open", path) { Glibc.open(path, flags | O_CLOEXEC, mode) }
    }

    /// A FIFO at `path` (whatever was there goes first).
    public static func makeFIFO(_ path: String, mode: mode_t) throws(SystemError) {
        unlink(path)
        try call("mkfifo", path) { mkfifo(path, mode) }
    }

    /// The FIFO at `path` when it is one of ours with `mode`, else a new
    /// one: an app's relaunch makes and deletes no inode (on ext4 a
    /// directory of recently deleted inodes made every mkfifo slower).
    public static func reuseOrMakeFIFO(_ path: String, mode: mode_t) throws(SystemError) {
        var st = stat()
        if lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFIFO, st.st_uid == geteuid(), st.st_mode & 0o7777 == mode {
            return
        }
        try makeFIFO(path, mode: mode)
    }

    /// The device and inode `fd` is open on; nil when fstat fails.
    public static func fileIdentity(_ fd: Int32) -> (device: UInt64, inode: UInt64)? {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        return (UInt64(st.st_dev), UInt64(st.st_ino))
    }

    /// F_SETPIPE_SZ: up to `bytes` may wait in the pipe (at most
    /// /proc/sys/fs/pipe-max-size); false when refused.
    @discardableResult
    public static func setPipeSize(_ fd: Int32, _ bytes: Int32) -> Bool {
        (try? call("fcntl(F_SETPIPE_SZ)", "fd \(fd)") { fcntl(fd, 1031 /* F_SETPIPE_SZ */, bytes) }) != nil
    }

    /// FD_CLOEXEC on or off (off: the descriptor survives an execve).
    public static func setCloseOnExec(_ fd: Int32, _ on: Bool = true) throws(SystemError) {
        try call("fcntl(F_SETFD)", "fd \(fd)") { fcntl(fd, F_SETFD, on ? FD_CLOEXEC : 0) }
    }

    /// The size of an open file.
    public static func size(_ fd: Int32) throws(SystemError) -> UInt64 {
        var st = stat()
        try call("fstat", "fd \(fd)") { fstat(fd, &st) }
        return UInt64(st.st_size)
    }

    /// Up to `count` bytes at `offset` (fewer at the end of the file).
    public static func read(_ fd: Int32, count: Int, at offset: UInt64) throws(SystemError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let got = try bytes.withUnsafeMutableBytes { b in
            Result { () throws(SystemError) in
                try call("pread", "fd \(fd)") { pread(fd, b.baseAddress, count, off_t(offset)) }
            }
        }.get()
        return Array(bytes.prefix(got))
    }

    /// Appends `bytes` whole or not at all: a short write (a full disk) is
    /// cut back to where it began and thrown as ENOSPC.
    public static func appendWhole(_ fd: Int32, _ bytes: [UInt8], path: String) throws(SystemError) {
        let before = lseek(fd, 0, SEEK_END)
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        guard written == bytes.count else {
            let e = written < 0 ? Glibc.errno : ENOSPC
            if before >= 0, written > 0 { _ = ftruncate(fd, before) }
            throw SystemError("write", path, errno: Errno(rawValue: e))
        }
    }

    /// CLOCK_REALTIME in nanoseconds since the epoch.
    public static func realtimeNanoseconds() -> Int64 {
        var t = timespec()
        clock_gettime(CLOCK_REALTIME, &t)
        return Int64(t.tv_sec) * 1_000_000_000 + Int64(t.tv_nsec)
    }
}

/// What is wrong with a file read as text, never quoting its content.
public struct TextFileProblem: Error, Sendable, Equatable {
    public var message: String
    /// The line of a NUL byte.
    public var line: Int?
}

public enum TextFile {
    /// A small text file, read safely: missing, not a regular file
    /// (opened without blocking, so a FIFO cannot hang the caller),
    /// unreadable, a symlink loop, larger than `maxSize`, not UTF-8, or
    /// holding a NUL byte is a problem that says so.
    public static func read(_ path: String, maxSize: Int) throws(TextFileProblem) -> String {
        let fail = { (message: String, line: Int?) in TextFileProblem(message: message, line: line) }
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else {
            switch Glibc.errno {
            case ENOENT: throw fail("does not exist", nil)
            case EACCES: throw fail("cannot be read (permission denied)", nil)
            case ELOOP: throw fail("is a loop of symbolic links", nil)
            default: throw fail("cannot be opened: \(Errno(rawValue: Glibc.errno))", nil)
            }
        }
        defer { Posix.close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw fail("cannot be read: \(Errno(rawValue: Glibc.errno))", nil) }
        switch st.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFDIR: throw fail("is a directory, not a file", nil)
        case S_IFIFO: throw fail("is a FIFO, not a regular file", nil)
        case S_IFSOCK: throw fail("is a socket, not a regular file", nil)
        default: throw fail("is a device, not a regular file", nil)
        }
        guard Int(st.st_size) <= maxSize else { throw fail("is larger than \(maxSize / 1024) KiB", nil) }
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size) + 1)
        var count = 0
        while count < bytes.count {
            let n = bytes[count...].withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0, Glibc.errno == EINTR { continue }
            guard n >= 0 else { throw fail("cannot be read: \(Errno(rawValue: Glibc.errno))", nil) }
            if n == 0 { break }
            count += n
        }
        guard count <= maxSize else { throw fail("is larger than \(maxSize / 1024) KiB", nil) }
        let data = bytes[..<count]
        if let nul = data.firstIndex(of: 0) {
            throw fail("contains a NUL byte (a TOML file is text)", data[..<nul].count(where: { $0 == 0x0A }) + 1)
        }
        guard let text = String(validating: data, as: UTF8.self) else { throw fail("is not UTF-8 text", nil) }
        return text
    }
}
