@preconcurrency import Glibc
import CLifecycleShim
import SystemPackage

// The daemon's two threads of its own (the log writer, the output writer)
// and the lock each shares with the loop, on pthreads directly: Foundation's
// Thread, NSLock and NSCondition are what linked all of swift-corelibs-
// foundation and ICU into the static daemon (docs/performance.md, small
// binaries).

/// A mutex with a condition variable on the monotonic clock.
public final class Condition: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(cond, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        cond.deallocate()
        mutex.deallocate()
    }

    public func lock() { pthread_mutex_lock(mutex) }
    public func unlock() { pthread_mutex_unlock(mutex) }

    /// `body` with the mutex held.
    public func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Waits for a signal, the mutex held on both sides.
    public func wait() { pthread_cond_wait(cond, mutex) }

    /// Waits for a signal until `deadline` (CLOCK_MONOTONIC nanoseconds);
    /// false when the deadline passed first.
    public func wait(untilMonotonic deadline: Int64) -> Bool {
        var ts = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        return pthread_cond_timedwait(cond, mutex, &ts) != ETIMEDOUT
    }

    public func signal() { pthread_cond_signal(cond) }
    public func broadcast() { pthread_cond_broadcast(cond) }
}

/// Starts a detached thread named `name` (the kernel keeps 15 bytes)
/// running `body`, which never returns while the daemon runs. Throws when
/// the system has no thread to give (EAGAIN: a tasks limit).
public func startThread(named name: String, _ body: @escaping @Sendable () -> Void) throws(SystemError) {
    let box = Unmanaged.passRetained(
        ThreadBody {
            lc_name_thread(name)
            body()
        }
    ).toOpaque()
    var thread = pthread_t()
    let started = pthread_create(
        &thread, nil,
        { raw in
            let body = Unmanaged<ThreadBody>.fromOpaque(raw!).takeRetainedValue()
            body.run()
            return nil
        }, box)
    guard started == 0 else {
        Unmanaged<ThreadBody>.fromOpaque(box).release()
        throw SystemError("pthread_create", "the \(name) thread", errno: Errno(rawValue: started))
    }
    pthread_detach(thread)
}

private final class ThreadBody: @unchecked Sendable {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}
