@preconcurrency import Glibc
import CMemoryWatch
import SystemPackage

/// The memory sampler's clock, kept by a C sentinel thread
/// (Sources/CMemoryWatch): while `quiet(...)` holds, the sentinel reads
/// the available memory, finds it above the hand-back point and sleeps again without
/// waking the loop. Every other sample runs `sample` on the loop's thread,
/// which re-arms with `arm(at:)` and says whether the next may be quiet.
///
/// On a manual loop (the shell's tests) there is no sentinel: the watch is
/// a timer of that loop, and every firing is a sample.
public final class MemoryWatch {
    private var watch: OpaquePointer?
    private var timer: EventLoop.Source?
    private let sample: () -> Void

    public init(loop: EventLoop, sample: @escaping () -> Void) throws(SystemError) {
        self.sample = sample
        guard let event = loop.event else {
            timer = try loop.timer { [unowned self] in self.sample() }
            return
        }
        let context = Unmanaged.passUnretained(self).toOpaque()
        guard
            let w = lc_memwatch_new(
                UnsafeMutableRawPointer(event),
                { ctx in
                    Unmanaged<MemoryWatch>.fromOpaque(ctx!).takeUnretainedValue().sample()
                }, context)
        else {
            throw SystemError("memory watch", errno: Errno(rawValue: errno))
        }
        watch = w
    }

    deinit {
        if let watch { lc_memwatch_free(watch) }
        timer?.cancel()
    }

    /// Fires once at `monotonicNanoseconds`, or never if nil.
    public func arm(at monotonicNanoseconds: Int64?) {
        guard let watch else { return timer?.arm(at: monotonicNanoseconds) ?? () }
        lc_memwatch_arm(watch, monotonicNanoseconds.map { max(0, $0) } ?? -1)
    }

    /// Quiet firings until the available memory (MemAvailable, plus the
    /// per-CPU free pages once MemAvailable alone is at the point) is at or
    /// below `handBackAt` bytes or MemTotal is no longer `total`; the next
    /// sample after the time `available - critical` would take to fill at
    /// `fillRate` bytes/s.
    public func quiet(
        handBackAt: UInt64, total: UInt64, critical: UInt64, fillRate: UInt64,
        shortest: Int64, longest: Int64
    ) {
        if let watch { lc_memwatch_quiet(watch, handBackAt, total, critical, fillRate, shortest, longest) }
    }

    /// Every firing runs `sample`.
    public func loud() { if let watch { lc_memwatch_loud(watch) } }

    public struct State: Sendable, Equatable {
        /// MemAvailable at the sentinel's last reading, bytes, and when.
        public var available: UInt64?
        /// The free pages in per-CPU lists then, if it read them (only near
        /// the hand-back point).
        public var perCPU: UInt64?
        public var at: Int64?
        public var quietSamples: UInt64
        public var quiet: Bool
    }

    public var state: State {
        guard let watch else { return State(available: nil, perCPU: nil, at: nil, quietSamples: 0, quiet: false) }
        let s = lc_memwatch_get(watch)
        return State(
            available: s.at_ns > 0 ? s.available : nil,
            perCPU: s.at_ns > 0 && s.percpu >= 0 ? UInt64(s.percpu) : nil, at: s.at_ns > 0 ? s.at_ns : nil,
            quietSamples: s.quiet_samples, quiet: s.quiet != 0)
    }

    /// Nanoseconds until `headroom` bytes could be gone at `fillRate` bytes
    /// per second, between `shortest` and `longest`: the one formula both
    /// halves of the sampler use.
    public static func fillInterval(headroom: UInt64, fillRate: UInt64, shortest: Int64, longest: Int64) -> Int64 {
        lc_fill_interval(headroom, fillRate, shortest, longest)
    }
}

/// The free pages the kernel keeps in per-CPU lists, which MemAvailable
/// leaves out (see `lc_percpu_free` in CMemoryWatch.h): since Linux 6.7
/// they can hide a killed app's memory from MemAvailable for tens of
/// seconds. Reads /proc/zoneinfo, opened once; one reader per thread.
public final class PerCPUFreePages {
    private let reader: OpaquePointer

    /// Nil where /proc/zoneinfo cannot be opened.
    public init?() {
        guard let r = lc_percpu_open() else { return nil }
        reader = r
    }

    deinit { lc_percpu_close(reader) }

    /// Bytes; nil when the file cannot be read.
    public func read() -> UInt64? {
        let bytes = lc_percpu_free(reader)
        return bytes >= 0 ? UInt64(bytes) : nil
    }
}
