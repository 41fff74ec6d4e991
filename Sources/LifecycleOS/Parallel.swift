import Dispatch
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc

// Work a restarting daemon does for every app before it supervises any:
// reading 1,000 manifests, decoding 1,000 saved records, checking 1,000
// processes. Spread over the cores, in order, with no shared state but the
// slot each index writes.

public enum Parallel {
    /// `body(0..<count)`, on up to one thread per core (none extra for a few
    /// items), results in index order. `body` must not touch shared mutable
    /// state: each call only computes its own result.
    public static func map<T>(_ count: Int, minimumPerThread: Int = 16, _ body: (Int) -> T) -> [T] {
        let threads = min(ProcessInfo.processInfo.activeProcessorCount, count / max(1, minimumPerThread))
        guard threads > 1 else { return (0..<count).map(body) }
        // More pieces than threads: the calling thread starts at once and
        // the pool's threads join as they wake, taking the pieces left.
        let pieces = min(count, threads * 8)
        return [T](unsafeUninitializedCapacity: count) { buffer, initialized in
            let slots = Slots(buffer.baseAddress!)
            withoutActuallyEscaping(body) { body in
                let work = Work(body)
                DispatchQueue.concurrentPerform(iterations: pieces) { piece in
                    for i in stride(from: piece, to: count, by: pieces) {
                        (slots.base + i).initialize(to: work.body(i))
                    }
                }
            }
            initialized = count
        }
    }

    /// Each index is written by exactly one thread, and read only after
    /// concurrentPerform has returned.
    private struct Slots<T>: @unchecked Sendable {
        let base: UnsafeMutablePointer<T>
        init(_ base: UnsafeMutablePointer<T>) { self.base = base }
    }

    private struct Work<T>: @unchecked Sendable {
        let body: (Int) -> T
        init(_ body: @escaping (Int) -> T) { self.body = body }
    }
}
