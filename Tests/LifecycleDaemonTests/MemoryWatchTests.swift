import CMemoryWatch
@preconcurrency import Glibc
@testable import LifecycleDaemon
import LifecycleCore
import LifecycleOS
import Logging
import Testing

/// The quiet path of memory sampling: a real sentinel thread reading the
/// real /proc/meminfo, handing samples to a real sd-event loop.
@Suite struct MemoryWatchTests {
    let total: UInt64 = {
        let f = KernelFile("/proc/meminfo")!
        _ = f.refresh()
        return f.integer(after: "MemTotal:")! * 1024
    }()
    let ms: Int64 = 1_000_000

    @Test func quietSamplesNeverWakeTheLoopUntilMemAvailableReachesTheHandBackPoint() throws {
        let loop = try EventLoop()
        var handedBack = 0
        let watch = try MemoryWatch(loop: loop) {
            handedBack += 1
            loop.exit()
        }
        // Every MemAvailable is above 0: quiet, every millisecond.
        watch.quiet(handBackAt: 0, total: total, critical: 0, fillRate: .max, shortest: ms, longest: ms)
        watch.arm(at: Posix.monotonicNanoseconds())
        // The loop only looks at the count; once 20 quiet samples are in, no
        // MemAvailable is above the point any more and the next comes back.
        var poll: EventLoop.Source!
        poll = try loop.timer { [total, ms] in
            if watch.state.quietSamples >= 20 {
                watch.quiet(handBackAt: .max, total: total, critical: 0, fillRate: .max, shortest: ms, longest: ms)
            } else {
                poll.arm(at: Posix.monotonicNanoseconds() + 2 * ms)
            }
        }
        poll.arm(at: Posix.monotonicNanoseconds() + 2 * ms)
        try loop.run()

        #expect(handedBack == 1, "no quiet sample reached the loop")
        let s = watch.state
        #expect(s.quiet && s.quietSamples >= 20)
        let available = try #require(s.available)
        #expect(available > 0 && available <= total)
        #expect(try #require(s.at) <= Posix.monotonicNanoseconds())
    }

    @Test func aChangedMemTotalHandsBackAtOnce() throws {
        let loop = try EventLoop()
        var handedBack = 0
        let watch = try MemoryWatch(loop: loop) {
            handedBack += 1
            loop.exit()
        }
        watch.quiet(handBackAt: 0, total: total + 4096, critical: 0, fillRate: .max, shortest: ms, longest: ms)
        watch.arm(at: Posix.monotonicNanoseconds())
        try loop.run()
        #expect(handedBack == 1)
        #expect(watch.state.quietSamples == 0)
        #expect(watch.state.available != nil, "the reading is kept for status")
    }

    @Test func loudEverySampleRunsOnTheLoopAndDisarmedNoneDoes() throws {
        let loop = try EventLoop()
        var samples = 0
        var watch: MemoryWatch!
        watch = try MemoryWatch(loop: loop) { [ms] in
            samples += 1
            if samples == 3 {
                watch.arm(at: nil)
                loop.exit()
            } else {
                watch.arm(at: Posix.monotonicNanoseconds() + ms)
            }
        }
        watch.quiet(handBackAt: 0, total: total, critical: 0, fillRate: .max, shortest: ms, longest: ms)
        watch.loud()
        watch.arm(at: Posix.monotonicNanoseconds())
        try loop.run()
        #expect(samples == 3)
        #expect(!watch.state.quiet && watch.state.quietSamples == 0)
    }

    @Test func theFillIntervalFormula() {
        let s: Int64 = 5 * ms, l: Int64 = 2000 * ms
        #expect(MemoryWatch.fillInterval(headroom: 3 << 30, fillRate: 6 << 30, shortest: s, longest: l) == 500 * ms)
        #expect(MemoryWatch.fillInterval(headroom: 0, fillRate: 6 << 30, shortest: s, longest: l) == s)
        #expect(MemoryWatch.fillInterval(headroom: .max, fillRate: 1, shortest: s, longest: l) == l)
        #expect(MemoryWatch.fillInterval(headroom: 1 << 20, fillRate: 0, shortest: s, longest: l) == l, "no rate: as if 1 B/s")
    }

    @Test func meminfoValues() {
        func value(_ text: String, _ key: String) -> Int64 {
            Array(text.utf8CString).withUnsafeBufferPointer { lc_meminfo_value($0.baseAddress, text.utf8.count, key) }
        }
        let text = "MemTotal:       24562064 kB\nMemFree:  1 kB\nMemAvailable:   23000000 kB\n"
        #expect(value(text, "MemTotal:") == 24_562_064)
        #expect(value(text, "MemAvailable:") == 23_000_000)
        #expect(value(text, "SwapTotal:") == -1)
        #expect(value("MemAvailable:   ", "MemAvailable:") == -1, "no digits")
        #expect(value("MemAvailable: 99999999999999999999 kB", "MemAvailable:") == -1, "overflow")
        #expect(value("", "MemTotal:") == -1)
    }
}

/// When samples may be quiet: only while MemAvailable alone can change the level.
@Suite struct QuietPointTests {
    let ms: Int64 = 1_000_000

    func monitor(_ change: (inout MemoryConfig) -> Void = { _ in }) -> MemoryMonitor {
        var c = MemoryConfig()
        c.psiTrigger = false
        c.stallWarning = nil
        c.stallCritical = nil
        change(&c)
        return MemoryMonitor(config: c, cgroups: nil, logger: Logger(label: "test"))
    }

    func sample(_ m: MemoryMonitor, level: MemoryLevel = .normal, simulated: Bool = false) -> MemorySample {
        var s = m.sample(groups: { [:] }, limited: [:], now: Posix.monotonicNanoseconds())
        s.level = level
        s.simulated = simulated
        return s
    }

    @Test func theHandBackPointIsTheHigherMemAvailableThresholdRoundedUp() throws {
        let m = monitor()
        let s = sample(m)
        let total = try #require(s.measurements.total)
        let q = try #require(m.quietPoint(after: s, coreLevel: .normal, limited: false, now: 1))
        #expect(q.total == total)
        #expect(q.handBackAt == UInt64((Double(total) * 20 / 100).rounded(.up)), "the warning threshold, 20 %")
        #expect(q.critical == UInt64(Double(total) * 10 / 100))
        // Just above the point the gauge says normal; at it, the sentinel hands back.
        var above = s.measurements
        above.available = q.handBackAt + 1
        var gauge = MemoryGauge(thresholds: m.gauge.thresholds)
        #expect(gauge.update(above) == .normal)
    }

    @Test func everythingElseNeedsAFullSample() {
        let m = monitor()
        let s = sample(m)
        #expect(m.quietPoint(after: sample(m, level: .warning), coreLevel: .normal, limited: false, now: 1) == nil)
        #expect(m.quietPoint(after: s, coreLevel: .critical, limited: false, now: 1) == nil, "a simulated level in the core")
        #expect(m.quietPoint(after: sample(m, simulated: true), coreLevel: .normal, limited: false, now: 1) == nil)
        #expect(m.quietPoint(after: s, coreLevel: .normal, limited: true, now: 1) == nil, "an app with a limit")
        let budget = monitor { $0.budget = 1 << 30 }
        #expect(budget.quietPoint(after: sample(budget), coreLevel: .normal, limited: false, now: 1) == nil)
        let stallNoTrigger = monitor { $0.stallCritical = 40 }
        #expect(stallNoTrigger.quietPoint(after: sample(stallNoTrigger), coreLevel: .normal, limited: false, now: 1) == nil,
                "the pressure file must be read at every sample")
        let noCritical = monitor { $0.availableCritical = nil }
        #expect(noCritical.quietPoint(after: sample(noCritical), coreLevel: .normal, limited: false, now: 1) == nil)
        let off = monitor { $0.monitor = false }
        #expect(off.quietPoint(after: sample(off), coreLevel: .normal, limited: false, now: 1) == nil)
    }

    @Test func aQuietPSITriggerLetsSamplesBeQuietExceptJustAfterItFired() throws {
        let m = monitor {
            $0.psiTrigger = true
            $0.stallWarning = 10
        }
        guard m.trigger != nil else { return }   // no PSI on this kernel: covered by the test above
        let now = Posix.monotonicNanoseconds()
        #expect(m.quietPoint(after: sample(m), coreLevel: .normal, limited: false, now: now) != nil)
        _ = m.sample(groups: { [:] }, limited: [:], now: now, triggered: true)
        // For two trigger windows after it fired, the stall is read at every sample.
        let after = m.sample(groups: { [:] }, limited: [:], now: now + ms)
        try #require(after.level == .normal, "no real memory stall on the test machine")
        #expect(m.quietPoint(after: after, coreLevel: .normal, limited: false, now: now + ms) == nil)
        #expect(m.quietPoint(after: after, coreLevel: .normal, limited: false, now: now + 5_000_000_000) != nil)
    }
}
