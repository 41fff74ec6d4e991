@preconcurrency import Glibc
import SystemPackage

/// An error from a system call, naming the call and what it acted on.
public struct SystemError: Error, CustomStringConvertible, Sendable {
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

/// Every system call that swift-system does not wrap goes through here: one
/// place that retries EINTR and turns -1 into an error naming the call.
public enum Posix {
    @discardableResult
    public static func call<T: BinaryInteger>(_ name: String, _ subject: String = "",
                                               _ body: () -> T) throws(SystemError) -> T {
        while true {
            let r = body()
            if r != -1 { return r }
            let e = Glibc.errno
            if e == EINTR { continue }
            throw SystemError(name, subject, errno: Errno(rawValue: e))
        }
    }

    /// The monotonic clock, in nanoseconds: the clock of every Instant.
    public static func monotonicNanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// Reads a whole small file (a cgroup or /proc file).
    public static func readFile(_ path: String) throws(SystemError) -> String {
        let fd: FileDescriptor
        do { fd = try FileDescriptor.open(path, .readOnly, options: .closeOnExec) } catch {
            throw SystemError("open", path, errno: error as? Errno ?? .ioError)
        }
        defer { try? fd.close() }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        while true {
            let n: Int
            do { n = try buf.withUnsafeMutableBytes { try fd.read(into: $0) } } catch {
                throw SystemError("read", path, errno: error as? Errno ?? .ioError)
            }
            if n == 0 { break }
            out += buf[0..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Writes a short string to a (cgroup) file in one write(2).
    public static func writeFile(_ path: String, _ value: String) throws(SystemError) {
        let fd: FileDescriptor
        do { fd = try FileDescriptor.open(path, .writeOnly, options: .closeOnExec) } catch {
            throw SystemError("open", path, errno: error as? Errno ?? .ioError)
        }
        defer { try? fd.close() }
        do { _ = try fd.writeAll(value.utf8) } catch {
            throw SystemError("write", path, errno: error as? Errno ?? .ioError)
        }
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
