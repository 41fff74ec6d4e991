@preconcurrency import Glibc
import CLifecycleShim
import SystemPackage

/// An error from a system call, naming the call and what it acted on.
public struct SystemError: Error, CustomStringConvertible, Sendable, Equatable {
    public var call: String
    public var subject: String
    public var errno: Errno

    public init(_ call: String, _ subject: String = "", errno: Errno) {
        self.call = call
        self.subject = subject
        self.errno = errno
    }

    public var description: String {
        subject.isEmpty ? "\(call): \(errno)" : "\(call) \(subject): \(errno)"
    }
}

/// Every system call that swift-system does not wrap goes through here, the
/// way swift-nio makes its calls: EINTR is retried; EBADF and EFAULT trap,
/// because a bad descriptor or address is a bug of ours, never something the
/// world did, and carrying on risks acting on a descriptor that some other
/// code now owns; EAGAIN on a non-blocking descriptor is a value, not an
/// error; any other failure is thrown, naming the call and its subject.
public enum Posix {
    @discardableResult
    public static func call<T: BinaryInteger>(
        _ name: String, _ subject: String = "",
        _ body: () -> T
    ) throws(SystemError) -> T {
        while true {
            let r = body()
            if r != -1 { return r }
            let e = Glibc.errno
            if e == EINTR { continue }
            trapOnProgrammerError(e, name, subject)
            throw SystemError(name, subject, errno: Errno(rawValue: e))
        }
    }

    /// A call on a non-blocking descriptor: nil when it would block.
    public static func nonBlocking<T: BinaryInteger>(
        _ name: String, _ subject: String = "",
        _ body: () -> T
    ) throws(SystemError) -> T? {
        do { return try call(name, subject, body) } catch  where error.errno == .resourceTemporarilyUnavailable {
            return nil
        }
    }

    /// Closes a descriptor this code owns. Linux frees the number even when
    /// close fails (EINTR included), so it is never retried; only EBADF,
    /// a double close, is an error, and it traps.
    public static func close(_ fd: Int32) {
        if Glibc.close(fd) == -1 { trapOnProgrammerError(Glibc.errno, "close", "fd \(fd)") }
    }

    /// Sends a signal; false when there is no such process (it ended) or
    /// no permission.
    @discardableResult
    public static func signal(_ pid: Int32, _ signal: Int32) -> Bool {
        (try? call("kill", "pid \(pid)") { Glibc.kill(pid, signal) }) != nil
    }

    /// Signals a process through its pidfd (no pid reuse can misdirect it);
    /// false when it has ended. A negative pidfd is no process at all.
    @discardableResult
    public static func signal(pidfd: Int32, _ signal: Int32) -> Bool {
        guard pidfd >= 0 else { return false }
        return (try? call("pidfd_send_signal", "pidfd \(pidfd)") { lc_pidfd_send_signal(pidfd, signal) }) != nil
    }

    /// True when the process behind `pidfd` has ended (a zombie included):
    /// a pidfd polls readable from then on.
    public static func hasEnded(pidfd: Int32) -> Bool {
        var p = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, 0) == 1
    }

    /// Removes a file or empty directory; true when it is gone (or never was).
    @discardableResult
    public static func remove(directory path: String) -> Bool {
        do { try call("rmdir", path) { rmdir(path) } } catch { return error.errno == .noSuchFileOrDirectory }
        return true
    }

    /// Creates a directory; false when it already exists.
    @discardableResult
    public static func makeDirectory(_ path: String, mode: mode_t = 0o755) throws(SystemError) -> Bool {
        do { try call("mkdir", path) { mkdir(path, mode) } } catch  where error.errno == .fileExists { return false }
        return true
    }

    /// The target of a symbolic link (such as /proc/self/exe).
    public static func readLink(_ path: String) throws(SystemError) -> String {
        var buf = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = try call("readlink", path) { readlink(path, &buf, buf.count - 1) }
        return String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// True when `path` exists (and, with `mode`, is accessible so).
    public static func exists(_ path: String, _ mode: Int32 = F_OK) -> Bool {
        (try? call("access", path) { access(path, mode) }) != nil
    }

    static func trapOnProgrammerError(_ e: Int32, _ name: String, _ subject: String) {
        if e == EBADF || e == EFAULT {
            preconditionFailure("\(name) \(subject): \(Errno(rawValue: e)): a bug in lifecycled")
        }
    }

    /// The monotonic clock, in nanoseconds: the clock of every Instant.
    public static func monotonicNanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// Raises the soft limit on open descriptors to the hard limit (each
    /// running app holds about three); returns the limit now in force.
    @discardableResult
    public static func raiseDescriptorLimit() -> UInt64 {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return UInt64(limit.rlim_cur)
    }

    /// The soft limit on descriptors now (it can be changed from outside: prlimit).
    public static func descriptorLimit() -> UInt64 {
        var limit = rlimit()
        return getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 ? UInt64(limit.rlim_cur) : 0
    }

    /// Grows this process's descriptor table to hold `count` descriptors
    /// (at most the limit) now, rather than as they are opened. The kernel
    /// doubles the table when a descriptor needs it, and in a process with
    /// threads each doubling waits for an RCU grace period (expand_fdtable);
    /// a restart with 1,000 apps, opening 2,000 descriptors from two
    /// threads, waited six times, 40–60 ms in all. In a process with one
    /// thread the growth is free. Best effort.
    public static func reserveDescriptorTable(_ count: UInt64) {
        let fd = Glibc.open("/dev/null", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        let top = Int32(clamping: min(count, descriptorLimit())) - 1
        if top > fd {
            let high = fcntl(fd, F_DUPFD_CLOEXEC, top)
            if high >= 0 { close(high) }
        }
        close(fd)
    }

    /// Starts reading a file into the page cache without waiting for it
    /// (posix_fadvise WILLNEED): many files asked for at once are read
    /// together rather than one round trip to the disk each. Best effort.
    public static func prefetch(_ path: String) {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return }
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED)
        close(fd)
    }

    /// Reads a whole small file (a cgroup or /proc file).
    public static func readFile(_ path: String) throws(SystemError) -> String {
        try contents(of: opened(AT_FDCWD, path, O_RDONLY, path), path)
    }

    /// Reads `name` in the directory `dir`, through its open descriptor
    /// `directory`: the kernel walks nothing above it (an app's cgroup
    /// files, AppCgroup). With no descriptor (-1), by the path. Errors name
    /// `dir/name` either way.
    public static func readFile(in directory: Int32, _ name: String, of dir: String) throws(SystemError) -> String {
        guard directory >= 0 else { return try readFile(dir + "/" + name) }
        return try contents(of: opened(directory, name, O_RDONLY, dir + "/" + name), dir + "/" + name)
    }

    /// Writes a small file whole (a cgroup or /proc file).
    public static func writeFile(_ path: String, _ value: String) throws(SystemError) {
        try write(value, to: opened(AT_FDCWD, path, O_WRONLY, path), path)
    }

    /// Writes `name` in the directory `dir`, as `readFile(in:)` reads.
    public static func writeFile(in directory: Int32, _ name: String, _ value: String, of dir: String)
        throws(SystemError)
    {
        guard directory >= 0 else { return try writeFile(dir + "/" + name, value) }
        try write(value, to: opened(directory, name, O_WRONLY, dir + "/" + name), dir + "/" + name)
    }

    /// openat(2), close-on-exec, retried on EINTR. `name` says what it is
    /// in an error (made only then).
    private static func opened(
        _ directory: Int32, _ path: String, _ flags: Int32, _ name: @autoclosure () -> String
    ) throws(SystemError) -> Int32 {
        while true {
            let fd = openat(directory, path, flags | O_CLOEXEC)
            if fd >= 0 { return fd }
            let e = errno
            if e != EINTR { throw SystemError("open", name(), errno: Errno(rawValue: e)) }
        }
    }

    /// What the open `fd` holds, read to its end; `fd` is closed.
    /// `path` names it in an error (made only then).
    private static func contents(of fd: Int32, _ path: @autoclosure () -> String) throws(SystemError) -> String {
        defer { _ = Glibc.close(fd) }
        var out: [UInt8] = []
        var failure: Int32 = 0
        // Into room on the stack that is not zeroed first (zeroing a 4 KiB
        // array was half of reading a small cgroup file's instructions).
        withUnsafeTemporaryAllocation(byteCount: 4096, alignment: 1) { buf in
            while true {
                let n = Glibc.read(fd, buf.baseAddress, buf.count)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                if n == 0 { return }
                out.append(contentsOf: UnsafeRawBufferPointer(rebasing: buf[0..<n]))
            }
        }
        if failure != 0 { throw SystemError("read", path(), errno: Errno(rawValue: failure)) }
        return String(decoding: out, as: UTF8.self)
    }

    /// Writes `value` whole to the open `fd`, then closes it.
    private static func write(_ value: String, to fd: Int32, _ path: @autoclosure () -> String) throws(SystemError) {
        defer { _ = Glibc.close(fd) }
        var value = value
        let failure = value.withUTF8 { bytes -> Int32 in
            var done = 0
            while done < bytes.count {
                let n = Glibc.write(fd, bytes.baseAddress! + done, bytes.count - done)
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                done += n
            }
            return 0
        }
        if failure != 0 { throw SystemError("write", path(), errno: Errno(rawValue: failure)) }
    }

    /// `/proc/PID/oom_score_adj`. Errors are ignored: a process already
    /// gone needs none, and a value the kernel refuses changes nothing the
    /// daemon relies on (its own kill order stands; this only guides the
    /// kernel's OOM killer).
    public static func setOOMScoreAdjust(_ pid: Int32, _ value: Int32) {
        guard pid > 0 else { return }
        try? writeFile("/proc/\(pid)/oom_score_adj", "\(value)")
    }

    /// SIGABRT, SIGQUIT, SIGSEGV, SIGBUS, SIGILL and SIGFPE end the process
    /// within the handler (a line and a backtrace on stderr first), instead
    /// of the Swift runtime's handler, which returns without ending a process
    /// that has a C thread it cannot suspend. A supervisor that stays alive
    /// after its watchdog's SIGABRT is worse than one that dies.
    public static func dieOnFatalSignals(name: String) throws(SystemError) {
        try call("sigaction") { lc_die_on_fatal_signals(2, name) }
    }

    public static func setNonBlocking(_ fd: Int32, _ on: Bool = true) throws(SystemError) {
        let flags = try call("fcntl(F_GETFL)") { fcntl(fd, F_GETFL) }
        try call("fcntl(F_SETFL)") { fcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK) }
    }

    /// Blocks these signals in the calling thread (and threads it creates), so
    /// that they are taken by the event loop's signalfd instead.
    public static func blockSignals(_ signals: [Int32]) {
        var set = sigset_t()
        sigemptyset(&set)
        for s in signals { sigaddset(&set, s) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    public static func signalName(_ s: Int32) -> String {
        guard let p = strsignal(s) else { return "signal \(s)" }
        return String(cString: p)
    }
}

/// One descriptor kept open for the moment the process runs out of them
/// (EMFILE, ENFILE): released, it lets the daemon do one thing it must
/// (refuse a waiting connection with the reason, freeze an app on time),
/// then it is taken again.
public final class DescriptorReserve {
    private var fd: Int32

    public init() { fd = open("/dev/null", O_RDONLY | O_CLOEXEC) }

    deinit { if fd >= 0 { close(fd) } }

    /// Whether it is held (false: it could not be taken back, the system is out too).
    public var held: Bool { fd >= 0 }

    /// Runs `body` with the reserve's descriptor free, then takes it again
    /// (if another thread took the slot meanwhile, the next call tries again).
    public func spending<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        if fd >= 0 {
            close(fd)
            fd = -1
        }
        defer { fd = open("/dev/null", O_RDONLY | O_CLOEXEC) }
        return try body()
    }

    /// Runs `body`; when it fails for want of a descriptor, once more with
    /// the reserve's descriptor free.
    public func retrying<T>(_ body: () throws(SystemError) -> T) throws(SystemError) -> T {
        do { return try body() } catch  where Self.outOfDescriptors(error.errno) { return try spending(body) }
    }

    /// True for the errors it is for.
    public static func outOfDescriptors(_ e: Errno) -> Bool { e == .tooManyOpenFiles || e == .tooManyOpenFilesInSystem }
}
