#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc

/// Where the daemon's log lines leave, without ever blocking its loop.
///
/// A line is written at once when the kernel can take it without waiting:
/// a regular file; a pipe with room for it (its capacity less what is
/// unread); a socket, sent with MSG_DONTWAIT. Anything else (a full pipe
/// nobody drains, a terminal, journald's socket, whose sender waits when
/// journald is slow) goes to a queue that a thread of its own writes,
/// blocking there and not in the loop; once something is queued, every
/// line after it is too, so that lines keep their order. The queue holds
/// at most `limit` bytes: what does not fit is dropped and counted, and
/// the count is said as soon as writing works again.
///
/// The standard error stream may be shared with apps (`output =
/// "inherit"`), so its file status flags are left alone: O_NONBLOCK there
/// would make apps' own writes fail.
public final class LogOutput: @unchecked Sendable {
    public static let standardError = LogOutput(fd: 2)

    let fd: Int32
    let limit: Int
    /// How a count of dropped lines is said (by the log handler, which knows the format).
    public var droppedNotice: (@Sendable (Int) -> Pending)?

    /// One queued write.
    public struct Pending: Sendable {
        let bytes: Int
        let write: @Sendable () -> Void
        public init(bytes: Int, _ write: @escaping @Sendable () -> Void) {
            self.bytes = bytes
            self.write = write
        }
    }

    private let condition = Condition()
    private var queue: [Pending] = []
    private var queuedBytes = 0
    /// Taken by the writer and not yet written.
    private var inFlight = false
    /// Lines dropped since the last count was said, and in all.
    private var unsaid = 0
    private var droppedInAll = 0
    /// Lines dropped in all (shown by `status`).
    public var droppedTotal: Int {
        condition.lock()
        defer { condition.unlock() }
        return droppedInAll
    }
    private var started = false

    /// The kind of file `fd` is (S_IFREG, S_IFIFO, S_IFSOCK...), read once.
    private let kind: mode_t

    public init(fd: Int32, limit: Int = 1 << 20) {
        self.fd = fd
        self.limit = limit
        var st = stat()
        kind = fstat(fd, &st) == 0 ? st.st_mode & S_IFMT : 0
    }

    /// Writes a line of text: now if the kernel can take it without
    /// waiting and nothing is queued before it, else through the queue.
    public func write(_ text: String) {
        let fd = self.fd
        var bytes = Array(text.utf8)
        condition.lock()
        let idle = queue.isEmpty && !inFlight && unsaid == 0
        condition.unlock()
        if idle, kind == S_IFSOCK {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }
            if n == bytes.count { return }
            if n > 0 { bytes.removeFirst(n) }  // the rest after it, in order
        } else if idle, Self.writableNow(fd, kind, bytes.count) {
            Self.writeAll(fd, bytes)
            return
        }
        let rest = bytes
        enqueue(Pending(bytes: rest.count) { Self.writeAll(fd, rest) })
    }

    /// Queues a write that may block (a journal entry).
    public func enqueue(_ item: Pending) {
        condition.lock()
        defer { condition.unlock() }
        guard queuedBytes + item.bytes <= limit else {
            unsaid += 1
            droppedInAll += 1
            return
        }
        if unsaid > 0, let notice = droppedNotice {  // said where the lines went missing
            queue.append(notice(unsaid))
            unsaid = 0
        }
        if !started {
            // No thread to be had (a tasks limit): this line is dropped and
            // counted like one that does not fit, and the next one tries again.
            guard (try? startThread(named: "log-output", { [self] in self.drain() })) != nil else {
                unsaid += 1
                droppedInAll += 1
                return
            }
            started = true
        }
        queue.append(item)
        queuedBytes += item.bytes
        condition.signal()
    }

    /// Waits until everything queued is written, at most `seconds`
    /// (before an exit or an exec: what is still queued then is lost).
    public func flush(seconds: Double) {
        let until = Posix.monotonicNanoseconds() + Int64(seconds * 1e9)
        condition.lock()
        defer { condition.unlock() }
        while !queue.isEmpty || inFlight {
            if !condition.wait(untilMonotonic: until) { return }
        }
    }

    private func drain() {
        while true {
            condition.lock()
            // A count of dropped lines is said as soon as writing works again, line or not.
            while queue.isEmpty && (unsaid == 0 || droppedNotice == nil) { condition.wait() }
            var batch = queue
            queue = []
            queuedBytes = 0
            if unsaid > 0, let notice = droppedNotice {
                batch.append(notice(unsaid))
                unsaid = 0
            }
            inFlight = true
            condition.unlock()
            for item in batch { item.write() }
            condition.lock()
            inFlight = false
            condition.broadcast()
            condition.unlock()
        }
    }

    /// True when writing `count` bytes to `fd` now cannot wait.
    static func writableNow(_ fd: Int32, _ kind: mode_t, _ count: Int) -> Bool {
        switch kind {
        case S_IFREG: return true
        case S_IFIFO:
            // Room in the pipe for a write the kernel does at once. A pipe
            // is 16 pages, and a write that does not fit in the last one
            // takes a new page: with lines of up to 1 KiB and the pipe at
            // most half full, at most 13 pages can be in use. (An app
            // sharing the pipe may take the room first: one short wait.)
            let capacity = fcntl(fd, 1032)  // F_GETPIPE_SZ (F_LINUX_SPECIFIC_BASE + 8), not in Glibc's module
            var unread: Int32 = 0
            guard capacity > 0, ioctl(fd, UInt(FIONREAD), &unread) == 0 else { return false }
            return count <= 1024 && Int(unread) + count <= Int(capacity) / 2
        default: return false
        }
    }

    /// Writes every byte, blocking (on the writer thread) or known not to.
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                return  // nowhere to write: nothing more to do
            }
            offset += n
        }
    }
}
