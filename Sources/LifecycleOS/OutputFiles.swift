#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import CLifecycleShim
import SystemPackage

/// Apps' output written to files, one per app, on a thread of its own: the
/// daemon's loop never reads an app's output nor waits for a disk.
///
/// Each app writes into a FIFO of the runtime directory (`output/NAME`),
/// which it holds open for reading and writing: it is its own reader too,
/// so a write never fails with EPIPE, even while no daemon runs. This
/// thread reads the other end, stamps every line with its time and appends
/// it to `DIRECTORY/NAME.log`, rotated by size into `NAME.log.1` ...
/// `NAME.log.BACKUPS`. A daemon that restarts opens the FIFOs again by
/// name: what an app wrote meanwhile waited in the pipe (an app that
/// fills it waits in its write, as it would for a slow terminal).
///
/// A file that cannot be written (a full disk, a read-only or missing
/// directory) costs the lines that arrive meanwhile, never the app: they
/// are read and dropped, counted, and said in the file once writing works
/// again, which is tried at most once a second. `problems` says which apps
/// are losing output and why.
public final class OutputFiles: @unchecked Sendable {
    public struct Limits: Sendable, Equatable {
        public var maxSize: UInt64
        public var backups: Int
        /// Bytes a second one app's output is read at, after a burst of
        /// `burst` (0: as fast as it comes). Beyond it the app waits in its
        /// writes: nothing is lost, and a flooding app costs no one else.
        public var rate: UInt64
        public var burst: UInt64
        public init(maxSize: UInt64, backups: Int, rate: UInt64 = 0, burst: UInt64 = 0) {
            self.maxSize = maxSize
            self.backups = backups
            self.rate = rate
            self.burst = max(burst, rate)
        }
    }

    public let directory: String
    let limits: Limits
    /// Told once per problem (a file that cannot be written), from this thread.
    let report: @Sendable (String) -> Void

    /// A pipe that wakes the thread when an app is added.
    private let wake: (read: Int32, write: Int32)
    private let lock = Condition()
    private var added: [(String, Int32)] = []
    private var problemsByApp: [String: String] = [:]
    private var streams: [Int32: Stream] = [:]
    /// The FIFOs open for each app (one, or two while a run's output outlives it).
    private var byApp: [String: [Int32]] = [:]
    /// The thread's epoll set (its FIFOs and its wake-up pipe).
    private let epollSet: Int32

    final class Stream {
        let app: String
        let fd: Int32
        var file: Int32 = -1
        var size: UInt64 = 0
        var partial: [UInt8] = []
        var lost: UInt64 = 0
        var problem: String?
        var lastTry: Int64 = 0
        /// Bytes it may still be read now (the rate's bucket), as of `refilled`.
        var tokens: Double = 0
        var refilled: Int64 = 0
        /// What the FIFO is (device, inode): one stream per FIFO.
        var inode: (device: UInt64, inode: UInt64)?
        init(app: String, fd: Int32) {
            self.app = app
            self.fd = fd
        }
    }

    public init(directory: String, limits: Limits, report: @escaping @Sendable (String) -> Void) throws(SystemError) {
        self.directory = directory
        self.limits = limits
        self.report = report
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw SystemError("pipe", "the output writer", errno: Errno(rawValue: errno)) }
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, O_NONBLOCK)
        }
        wake = (fds[0], fds[1])
        epollSet = lc_epoll_create()
        guard epollSet >= 0 else {
            let failure = SystemError("epoll_create", "the output writer", errno: Errno(rawValue: errno))
            Glibc.close(fds[0])
            Glibc.close(fds[1])
            throw failure
        }
        do { try startThread(named: "lifecycled-out") { [unowned self] in self.run() } } catch {
            Glibc.close(fds[0])
            Glibc.close(fds[1])
            Glibc.close(epollSet)
            throw error
        }
    }

    /// The file an app's output goes to.
    public func file(_ app: String) -> String { "\(directory)/\(app).log" }

    /// Apps whose output is being lost, and why.
    public var problems: [String: String] { lock.withLock { problemsByApp } }

    /// Hands the reading end of an app's FIFO to the thread, which closes it
    /// at its end (when every writer has closed).
    public func add(app: String, fd: Int32) {
        lock.withLock { added.append((app, fd)) }
        var one: UInt8 = 1
        _ = Glibc.write(wake.write, &one, 1)
    }

    // MARK: - The thread

    private func run() {
        // Named (by startThread), so that its CPU shows apart (top -H, the
        // benchmark), and at nice 5: below the apps, so that a flooding app,
        // not the daemon's loop or another app, waits for its own output to
        // be written.
        if let tid = (try? Posix.readLink("/proc/thread-self")).flatMap({ id_t($0.split(separator: "/").last ?? "") }) {
            _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), tid, 5)
        }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        // One epoll set, each FIFO in it once: a wake-up costs the streams
        // that have something, not every app's (a poll over every FIFO at
        // each wake-up, a launch or a line, was 287 k instructions a launch
        // with 1,000 apps running, and the kernel's walk of them as much).
        watch(wake.read)
        /// Streams over their rate, out of the set until this time (ns).
        var resting: [Int32: Int64] = [:]
        var ready = [Int32](repeating: -1, count: 64)
        while true {
            // An app over its rate is not read (it waits in its writes) until
            // its bucket holds a buffer again.
            var timeout: Int32 = -1
            let now = resting.isEmpty ? 0 : Posix.monotonicNanoseconds()
            for (fd, until) in resting {
                guard let s = streams[fd] else {
                    resting[fd] = nil
                    continue
                }
                var wait = Int32((until - now + 999_999) / 1_000_000)
                if until <= now {
                    guard let more = rest(s, now) else {
                        resting[fd] = nil
                        watch(fd)
                        continue
                    }
                    wait = more
                    resting[fd] = now + Int64(more) * 1_000_000
                }
                timeout = timeout < 0 ? wait : min(timeout, wait)
            }
            let n = lc_epoll_wait(epollSet, &ready, Int32(ready.count), timeout)
            if n < 0 { continue }  // EINTR
            for i in 0..<Int(n) {
                let fd = ready[i]
                if fd == wake.read {
                    var sink = [UInt8](repeating: 0, count: 64)
                    _ = Glibc.read(wake.read, &sink, 64)
                    for (app, fd) in lock.withLock({ () -> [(String, Int32)] in
                        defer { added = [] }
                        return added
                    }) {
                        // The app's FIFO is kept from run to run: a stream still
                        // open on it (the last run's output not yet at its end,
                        // which the new run's writer now holds off) reads this
                        // run's too, and a second reader would split its lines.
                        let inode = Posix.fileIdentity(fd)
                        if let inode, let open = byApp[app],
                            open.contains(where: { streams[$0]?.inode.map { $0 == inode } ?? false })
                        {
                            Glibc.close(fd)
                            continue
                        }
                        let s = Stream(app: app, fd: fd)
                        s.inode = inode
                        s.tokens = Double(limits.burst)
                        s.refilled = Posix.monotonicNanoseconds()
                        streams[fd] = s
                        byApp[app, default: []].append(fd)
                        watch(fd)
                    }
                    continue
                }
                guard let s = streams[fd] else { continue }
                let now = Posix.monotonicNanoseconds()
                _ = rest(s, now)  // the bucket refilled up to now
                drain(s, &buffer)
                if streams[fd] == nil {  // ended (drain took it out of the set)
                    byApp[s.app]?.removeAll { $0 == fd }
                    if byApp[s.app]?.isEmpty == true { byApp[s.app] = nil }
                } else if let wait = rest(s, now) {
                    _ = lc_epoll_remove(epollSet, fd)
                    resting[fd] = now + Int64(wait) * 1_000_000
                }
            }
        }
    }

    /// Puts `fd` in the thread's epoll set, to be read when it has something.
    private func watch(_ fd: Int32) { _ = lc_epoll_add(epollSet, fd) }

    /// Refills the app's bucket; the milliseconds until it may be read
    /// again, or nil when it may be now.
    private func rest(_ s: Stream, _ now: Int64) -> Int32? {
        guard limits.rate > 0 else { return nil }
        s.tokens = min(Double(limits.burst), s.tokens + Double(limits.rate) * Double(now - s.refilled) / 1e9)
        s.refilled = now
        let want = min(Double(limits.burst), 65536)
        guard s.tokens < want else { return nil }
        return Int32(((want - s.tokens) / Double(limits.rate) * 1000).rounded(.up)) + 1
    }

    /// Reads what is there (at most a few buffers, so that one flooding app
    /// does not keep the others waiting, and no more than its rate allows),
    /// and ends the stream at EOF.
    private func drain(_ s: Stream, _ buffer: inout [UInt8]) {
        for _ in 0..<4 {
            if limits.rate > 0 && s.tokens < 1 { return }
            let most = limits.rate > 0 ? min(buffer.count, Int(s.tokens)) : buffer.count
            let got = buffer.withUnsafeMutableBytes { Glibc.read(s.fd, $0.baseAddress, most) }
            if got > 0 {
                s.tokens -= Double(got)
                write(s, buffer[0..<got])
                if got < most { return }
                continue
            }
            if got < 0 && (errno == EAGAIN || errno == EINTR) { return }
            // EOF: every writer has closed (the app and its children ended).
            if !s.partial.isEmpty { write(s, [0x0A]) }  // the last line, ended
            _ = lc_epoll_remove(epollSet, s.fd)  // before its number can be reused
            Glibc.close(s.fd)
            if s.file >= 0 { Glibc.close(s.file) }
            streams[s.fd] = nil
            return
        }
    }

    /// Lines longer than this are cut (a newline is added).
    static let longestLine = 16 << 10

    /// Stamps each whole line (one time per read) and appends them.
    private func write(_ s: Stream, _ bytes: ArraySlice<UInt8>) {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + bytes.count / 4 + 64)
        let stamp = Array(Self.timestamp().utf8)
        func emit(_ line: ArraySlice<UInt8>) {
            out += stamp
            out += line
            if line.last != 0x0A { out.append(0x0A) }
        }
        bytes.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return }
            var at = 0
            while at < raw.count {
                let found = memchr(base + at, 0x0A, raw.count - at)
                let end = found.map { base.distance(to: UnsafeRawPointer($0)) + 1 } ?? raw.count
                let piece = bytes[(bytes.startIndex + at)..<(bytes.startIndex + end)]
                at = end
                if found == nil {
                    s.partial += piece  // the rest of a line that has not ended yet
                } else if s.partial.isEmpty {
                    emit(piece)
                    continue
                } else {
                    s.partial += piece
                    emit(s.partial[...])
                    s.partial.removeAll(keepingCapacity: true)
                    continue
                }
            }
        }
        while s.partial.count >= Self.longestLine {
            emit(s.partial[..<Self.longestLine])
            s.partial.removeFirst(Self.longestLine)
        }
        guard !out.isEmpty else { return }
        guard open(s) else {
            s.lost += UInt64(out.count)
            return
        }
        if s.lost > 0 {
            out =
                Array("\(Self.timestamp())[lifecycled: \(s.lost) bytes of output lost: \(s.problem ?? "")]\n".utf8)
                + out
        }
        // In pieces of whole lines that fit the file; a full file is rotated
        // (one line longer than the limit goes alone into a fresh file).
        var rest = out[...]
        while !rest.isEmpty {
            let room = limits.maxSize > s.size ? Int(limits.maxSize - s.size) : 0
            var cut = rest.startIndex
            if rest.count <= room {
                cut = rest.endIndex
            } else if room > 0, let nl = rest[..<(rest.startIndex + room)].lastIndex(of: 0x0A) {
                cut = nl + 1
            }
            if cut == rest.startIndex {
                if s.size > 0 {
                    rotate(s)
                    continue
                }
                cut = (rest.firstIndex(of: 0x0A) ?? (rest.endIndex - 1)) + 1
            }
            guard s.file >= 0 else {
                s.lost += UInt64(rest.count)
                return
            }
            let piece = rest[..<cut]
            let written = piece.withUnsafeBytes { Glibc.write(s.file, $0.baseAddress, $0.count) }
            guard written == piece.count else {
                fail(s, "cannot write \(file(s.app)): \(String(cString: strerror(written < 0 ? errno : ENOSPC)))")
                s.lost += UInt64(rest.count - max(0, written))
                return
            }
            s.size += UInt64(written)
            if s.problem != nil { solved(s) }
            rest = rest[cut...]
        }
    }

    /// The file is open, or has just been opened; false while it cannot be
    /// (tried again at most once a second).
    private func open(_ s: Stream) -> Bool {
        if s.file >= 0 { return true }
        let now = Posix.monotonicNanoseconds()
        if s.problem != nil && now - s.lastTry < 1_000_000_000 { return false }
        s.lastTry = now
        let fd = Glibc.open(file(s.app), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o640)
        guard fd >= 0 else {
            fail(s, "cannot open \(file(s.app)): \(String(cString: strerror(errno)))")
            return false
        }
        var st = stat()
        fstat(fd, &st)
        s.file = fd
        s.size = UInt64(st.st_size)
        return true
    }

    /// NAME.log -> NAME.log.1 -> ... -> NAME.log.BACKUPS (the oldest goes);
    /// with no backups the file starts again empty.
    private func rotate(_ s: Stream) {
        let path = file(s.app)
        Glibc.close(s.file)
        s.file = -1
        s.size = 0
        if limits.backups > 0 {
            for k in stride(from: limits.backups - 1, through: 1, by: -1) {
                Glibc.rename("\(path).\(k)", "\(path).\(k + 1)")
            }
            Glibc.rename(path, "\(path).1")
        } else {
            Glibc.truncate(path, 0)
        }
        s.problem = nil  // a fresh file: try at once
        _ = open(s)
    }

    private func fail(_ s: Stream, _ why: String) {
        if s.file >= 0 { Glibc.close(s.file) }
        s.file = -1
        if s.problem != why {
            report("output of \(s.app) is being lost: \(why)")
            lock.withLock { problemsByApp[s.app] = why }
        }
        s.problem = why
    }

    private func solved(_ s: Stream) {
        report("output of \(s.app) is written again (\(s.lost) bytes were lost)")
        s.problem = nil
        s.lost = 0
        lock.withLock { problemsByApp[s.app] = nil }
    }

    /// "2026-11-23T19:04:35.123456Z ": UTC, microseconds.
    static func timestamp() -> String {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        var t = tm()
        var secs = ts.tv_sec
        gmtime_r(&secs, &t)
        var out: [UInt8] = []
        out.reserveCapacity(28)
        func digits(_ value: Int, _ width: Int) {
            var divisor = 1
            for _ in 1..<width { divisor *= 10 }
            var v = value
            while divisor > 0 {
                out.append(UInt8(ascii: "0") + UInt8(v / divisor % 10))
                v %= divisor
                divisor /= 10
            }
        }
        digits(Int(t.tm_year) + 1900, 4)
        out.append(UInt8(ascii: "-"))
        digits(Int(t.tm_mon) + 1, 2)
        out.append(UInt8(ascii: "-"))
        digits(Int(t.tm_mday), 2)
        out.append(UInt8(ascii: "T"))
        digits(Int(t.tm_hour), 2)
        out.append(UInt8(ascii: ":"))
        digits(Int(t.tm_min), 2)
        out.append(UInt8(ascii: ":"))
        digits(Int(t.tm_sec), 2)
        out.append(UInt8(ascii: "."))
        digits(Int(ts.tv_nsec / 1000), 6)
        out.append(contentsOf: "Z ".utf8)
        return String(decoding: out, as: UTF8.self)
    }
}
