@testable import LifecycleDaemon
import LifecycleCore
import LifecycleOS
import Logging
import Testing

/// When samples may be quiet: only while the available memory alone can change the level.
@Suite struct QuietPointTests {
    let ms: Int64 = 1_000_000

    func monitor(_ change: (inout MemoryConfig) -> Void = { _ in }) -> MemoryMonitor {
        var c = MemoryConfig()
        c.psiTrigger = false
        c.stallWarning = nil
        c.stallCritical = nil
        change(&c)
        return MemoryMonitor(config: c, confinement: ProcessGroups(reason: "test"), logger: Logger(label: "test"))
    }

    func sample(_ m: MemoryMonitor) -> MemoryReport {
        m.sample(groups: { [:] }, limited: [:], now: Posix.monotonicNanoseconds())
    }

    @Test func theHandBackPointIsTheHigherAvailableMemoryThresholdRoundedUp() throws {
        let m = monitor()
        let s = sample(m)
        let total = try #require(s.measurements.total)
        let q = try #require(m.quietPoint(after: s, measuredLevel: .normal, coreLevel: .normal, limited: false, now: 1))
        #expect(q.total == total)
        #expect(q.handBackAt == UInt64((Double(total) * 20 / 100).rounded(.up)), "the warning threshold, 20 %")
        #expect(q.critical == UInt64(Double(total) * 10 / 100))
        // Just above the point the gauge says normal; at it, the sentinel hands back.
        var above = s.measurements
        above.available = q.handBackAt + 1
        var gauge = MemoryGauge(thresholds: m.thresholds)
        #expect(gauge.update(above) == .normal)
    }

    /// The per-CPU lists are read only where they could change the level:
    /// MemAvailable at or below the higher threshold plus the hysteresis.
    @Test func thePerCPUListsAreReadOnlyNearTheThresholds() {
        let total: UInt64 = 1000 << 20
        #expect(monitor().perCPUPoint(total: total) == UInt64((Double(total) * 22 / 100).rounded(.up)))
        let off = monitor {
            $0.availableWarning = nil
            $0.availableCritical = .percent(5)
            $0.hysteresis = 1
        }
        #expect(off.perCPUPoint(total: total) == UInt64((Double(total) * 6 / 100).rounded(.up)))
        let none = monitor {
            $0.availableWarning = nil
            $0.availableCritical = nil
        }
        #expect(none.perCPUPoint(total: total) == 0)
    }

    @Test func everythingElseNeedsAFullSample() {
        let m = monitor()
        let s = sample(m)
        #expect(m.quietPoint(after: s, measuredLevel: .warning, coreLevel: .warning, limited: false, now: 1) == nil)
        #expect(
            m.quietPoint(after: s, measuredLevel: .normal, coreLevel: .critical, limited: false, now: 1) == nil,
            "a simulated level in the core")
        #expect(
            m.quietPoint(after: s, measuredLevel: .normal, coreLevel: .normal, limited: true, now: 1) == nil,
            "an app with a limit")
        let budget = monitor { $0.budget = 1 << 30 }
        #expect(
            budget.quietPoint(after: sample(budget), measuredLevel: .normal, coreLevel: .normal, limited: false, now: 1)
                == nil)
        let stallNoTrigger = monitor { $0.stallCritical = 40 }
        #expect(
            stallNoTrigger.quietPoint(
                after: sample(stallNoTrigger), measuredLevel: .normal, coreLevel: .normal, limited: false, now: 1)
                == nil,
            "the pressure file must be read at every sample")
        let noCritical = monitor { $0.availableCritical = nil }
        #expect(
            noCritical.quietPoint(
                after: sample(noCritical), measuredLevel: .normal, coreLevel: .normal, limited: false, now: 1) == nil)
        let off = monitor { $0.monitor = false }
        #expect(
            off.quietPoint(after: sample(off), measuredLevel: .normal, coreLevel: .normal, limited: false, now: 1)
                == nil)
    }

    @Test func aQuietPSITriggerLetsSamplesBeQuietExceptJustAfterItFired() throws {
        let m = monitor {
            $0.psiTrigger = true
            $0.stallWarning = 10
        }
        guard m.trigger != nil else { return }  // no PSI on this kernel: covered by the test above
        let now = Posix.monotonicNanoseconds()
        #expect(
            m.quietPoint(after: sample(m), measuredLevel: .normal, coreLevel: .normal, limited: false, now: now) != nil)
        _ = m.sample(groups: { [:] }, limited: [:], now: now, triggered: true)
        // For two trigger windows after it fired, the stall is read at every sample.
        let after = m.sample(groups: { [:] }, limited: [:], now: now + ms)
        var gauge = MemoryGauge(thresholds: m.thresholds)
        try #require(gauge.update(after.measurements) == .normal, "no real memory stall on the test machine")
        #expect(
            m.quietPoint(after: after, measuredLevel: .normal, coreLevel: .normal, limited: false, now: now + ms) == nil
        )
        #expect(
            m.quietPoint(
                after: after, measuredLevel: .normal, coreLevel: .normal, limited: false, now: now + 5_000_000_000)
                != nil)
    }
}
