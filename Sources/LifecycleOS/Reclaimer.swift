@preconcurrency import Glibc
import CMemoryWatch
import SystemPackage

/// Pushes a suspended app's memory to swap (cgroup v2 memory.reclaim) on a
/// worker thread of its own (Sources/CMemoryWatch/reclaim.c): the kernel
/// reclaims in the writer's context, for as long as it takes, and the loop
/// must never wait on that. The loop watches `fd` and takes the results.
public final class Reclaimer {
    private let handle: OpaquePointer

    public init() throws(SystemError) {
        guard let r = lc_reclaimer_new() else { throw SystemError("reclaimer", errno: Errno(rawValue: errno)) }
        handle = r
    }

    deinit { lc_reclaimer_free(handle) }

    /// Readable when results wait.
    public var fd: Int32 { lc_reclaimer_fd(handle) }

    /// Queues `bytes` of the cgroup open at `directory` (dup'ed); false when
    /// too many jobs wait already.
    public func submit(job: UInt64, directory: Int32, bytes: UInt64) -> Bool {
        lc_reclaimer_submit(handle, job, directory, bytes) == 0
    }

    public struct Result: Sendable, Equatable {
        public var job: UInt64
        public var requested: UInt64
        /// What the kernel took of it, and memory.current before and after.
        public var pushed: UInt64
        public var before: UInt64?
        public var after: UInt64?
        public var nanoseconds: Int64
        /// nil: all of it; else why it stopped (EAGAIN: less to reclaim than
        /// asked; ESTALE: thawed, or gone, meanwhile).
        public var stopped: Errno?
    }

    /// Every result waiting.
    public func results() -> [Result] {
        var out: [Result] = []
        var r = lc_reclaim_result()
        while lc_reclaimer_take(handle, &r) == 1 {
            out.append(
                Result(
                    job: r.job, requested: r.requested, pushed: r.pushed,
                    before: r.before >= 0 ? UInt64(r.before) : nil, after: r.after >= 0 ? UInt64(r.after) : nil,
                    nanoseconds: r.nanoseconds, stopped: r.error == 0 ? nil : Errno(rawValue: r.error)))
        }
        return out
    }
}
