import Testing
@testable import LifecycleCore

/// The memory rules of docs/lifecycle.md, on a manual clock.
extension Harness {
    /// Launches `id` into the background and lets it be suspended.
    mutating func suspend(_ id: AppID) {
        eventsUntilQuiet(id, after: send(.launch(id, .background)))
        if supervisor.snapshot(id)!.state == .background { advance(.seconds(5)) }  // plain: grace
    }

    /// Reports measurements that give `level` under the default thresholds
    /// (or injects it, `simulated`), with these footprints.
    @discardableResult
    mutating func memory(_ level: MemoryLevel, simulated: Bool = false, _ footprints: [AppID: UInt64] = [:]) -> [Effect]
    {
        let report = MemoryReport(
            footprints: footprints, measurements: Harness.measurements(simulated ? .critical : level))
        return send(simulated ? .simulateMemoryLevel(level, report) : .memory(report))
    }

    /// Available memory of 16 GiB that the default thresholds (warning
    /// below 20 %, critical below 10 %) read as `level`.
    static func measurements(_ level: MemoryLevel) -> MemoryReading {
        let total: UInt64 = 1 << 34
        let available: UInt64 =
            switch level {
            case .critical: 1 << 30  // 6.25 %
            case .warning: total / 100 * 15
            case .normal: total / 2
            }
        return MemoryReading(available: available, total: total)
    }

    func memoryKills(in effects: [Effect]) -> [KillRecord] {
        effects.compactMap { if case .memoryKill(let k) = $0 { k } else { nil } }
    }

    /// The app killed by the last pressure decision in `effects`.
    func victim(in effects: [Effect]) -> AppID? { memoryKills(in: effects).first?.app }

    /// Reports the exit of the app the core killed; returns the effects.
    @discardableResult
    mutating func reapKilled(_ id: AppID) -> [Effect] {
        let gen = generation(id)
        return send(.exited(id, generation: gen, .signaled(9)))
    }
}

extension AppPolicy {
    static func band(_ band: MemoryBand, plain: Bool = false) -> AppPolicy {
        var p = plain ? AppPolicy.plain : AppPolicy()
        p.memory.band = band
        return p
    }
}

@Suite struct MemoryWarningTests {
    @Test func warningReachesRunningAppsNotSuspendedOnes() {
        var plain = AppPolicy.plain
        plain.backgroundGrace = .seconds(60)
        var h = Harness(["fg": AppPolicy(), "sleeper": AppPolicy(), "p": plain])
        h.suspend("sleeper")
        h.send(.launch("p", .background))
        h.launchActive("fg")
        let effects = h.memory(.warning)
        #expect(Harness.events("fg", in: effects) == [.didReceiveMemoryWarning])
        #expect(
            Harness.events("p", in: effects) == [.didReceiveMemoryWarning], "plain programs get their mapped signal")
        #expect(Harness.events("sleeper", in: effects) == [], "a suspended app is never told")
        #expect(!effects.contains(.thaw("sleeper")))
        // The library app acknowledges it like any callback, within its deadline.
        let d = h.outstanding("fg")!
        #expect(d.deadline == h.now + .seconds(5))
        h.ackAll("fg")
        #expect(h.state("fg") == .active)
    }

    @Test func warningWaitsForTheAcknowledgementInFlight() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        let home = h.send(.home)  // willResignActive in flight
        let warning = h.memory(.warning)
        #expect(Harness.events("a", in: warning) == [], "the next event waits for the acknowledgement")
        #expect(
            h.eventsUntilQuiet("a", after: home) == [.willResignActive, .didReceiveMemoryWarning, .didEnterBackground])
        #expect(h.state("a") == .suspended)
    }

    @Test func warningOnlyWhenTheLevelRises() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        #expect(Harness.events("a", in: h.memory(.warning)) == [.didReceiveMemoryWarning])
        h.ackAll("a")
        #expect(Harness.events("a", in: h.memory(.warning)) == [], "still warning: not told again")
        h.memory(.normal)
        #expect(Harness.events("a", in: h.memory(.warning)) == [.didReceiveMemoryWarning])
    }

    @Test func unacknowledgedWarningIsAWatchdogKill() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        h.memory(.warning)
        #expect(h.advance(.seconds(5)) == [.kill("a", .eventWatchdog(event: .didReceiveMemoryWarning))])
    }
}

@Suite struct MemoryKillTests {
    /// The kernel's OOM killer is told the core's order: a higher
    /// oom_score_adj for every app the core would kill first.
    @Test func theKernelIsToldTheSameKillOrder() {
        let tiers: [[LifecycleState]] = [[.suspended], [.background], [.inactive, .active]]
        var previous: Int32 = 1001
        for tier in tiers {
            for band in MemoryBand.allCases {
                let values = tier.map { OOMScoreAdjust.value($0, band: band)! }
                #expect(Set(values).count == 1, "one tier, one value: \(tier) \(band)")
                #expect(values[0] < previous, "\(tier) \(band) after the apps killed before it")
                #expect(values[0] > 0, "above the daemon and every unmanaged process")
                previous = values[0]
            }
        }
        #expect(OOMScoreAdjust.value(.notRunning, band: .normal) == nil)
    }

    /// low-band suspended, two normal suspended (s1 used before s2), one in
    /// the background with a task, one active.
    func world() -> Harness {
        var h = Harness([
            "s1": .band(.normal), "s2": .band(.normal), "low": .band(.low),
            "bg": .band(.low), "fg": .band(.low),
        ])
        h.launchActive("s1"); h.advance(.seconds(1))
        h.launchActive("s2"); h.advance(.seconds(1))
        h.ackAll("s1")
        h.launchActive("low"); h.advance(.seconds(1))
        h.ackAll("s2")
        h.launchActive("bg")
        h.send(.beginBackgroundTask("bg", generation: 1, request: 1, name: "upload"))
        h.advance(.seconds(1))
        h.launchActive("fg")
        h.ackAll("low"); h.ackAll("bg")
        return h
    }

    @Test func suspendedFirstLowestBandThenLeastRecentlyUsedThenBackgroundThenForeground() {
        var h = world()
        #expect(["s1", "s2", "low"].allSatisfy { h.state($0) == .suspended })
        #expect(h.state("bg") == .background)
        #expect(h.state("fg") == .active)
        var order: [AppID] = []
        for _ in 0..<5 {
            let effects = h.memory(.critical)
            guard let v = h.victim(in: effects) else { break }
            #expect(effects.contains(.kill(v, .memoryPressure(footprint: nil, simulated: false))))
            order.append(v)
            #expect(h.reapKilled(v).contains(.remeasure), "the next decision waits for fresh numbers")
        }
        #expect(order == ["low", "s1", "s2", "bg", "fg"])
    }

    @Test func oneKillAtATimeUntilTheVictimIsGone() {
        var h = world()
        #expect(h.victim(in: h.memory(.critical)) == "low")
        #expect(h.memoryKills(in: h.memory(.critical)).isEmpty, "no second kill before the first victim ended")
        h.reapKilled("low")
        #expect(h.victim(in: h.memory(.critical)) == "s1")
    }

    @Test func noKillOnceTheLevelDrops() {
        var h = world()
        h.memory(.critical)
        h.reapKilled("low")
        #expect(h.memoryKills(in: h.memory(.warning)).isEmpty)
        #expect(h.state("s1") == .suspended)
    }

    @Test func recordTellsWhyWithTheCandidatesConsidered() {
        var h = world()
        let effects = h.memory(.critical, ["low": 300 << 20, "s1": 100 << 20, "fg": 50 << 20])
        let k = h.memoryKills(in: effects).first!
        #expect(k.app == "low")
        #expect(k.reason == .memoryPressure)
        #expect(k.footprint == 300 << 20)
        #expect(k.state == .suspended && k.band == .low && k.level == .critical && !k.simulated)
        #expect(k.reading.available == 1 << 30)
        #expect(k.candidates.map(\.app) == ["low", "s1", "s2", "bg", "fg"])
        #expect(k.candidates[1].footprint == 100 << 20)
    }

    @Test func activeAppOnlyWhenNothingElseIsLeft() {
        var h = Harness(apps: ["fg", "other"])
        h.launchActive("fg")
        let effects = h.memory(.critical)
        #expect(h.victim(in: effects) == "fg", "nothing else runs")
        #expect(h.memoryKills(in: effects).first!.candidates.map(\.app) == ["fg"])
    }

    @Test func simulatedPressureIsMarked() {
        var h = world()
        let effects = h.memory(.critical, simulated: true)
        #expect(h.memoryKills(in: effects).first!.simulated)
        #expect(effects.contains(.kill("low", .memoryPressure(footprint: nil, simulated: true))))
        #expect(h.supervisor.memorySimulated)
    }

    @Test func nextLaunchIsToldItWasKilledForMemory() {
        var h = Harness(apps: ["a"])
        h.suspend("a")
        h.memory(.critical, ["a": 64 << 20])
        h.reapKilled("a")
        let launch = h.send(.activate("a"))
        let first = launch.compactMap { if case .deliver("a", let d) = $0 { d } else { nil } }.first!
        #expect(first.event == .willFinishLaunching)
        #expect(first.previous?.reason == .memoryPressure(footprint: 64 << 20, simulated: false))
        #expect(first.previous?.reason.code == .memoryPressure)
    }
}

@Suite struct MemoryLimitTests {
    @Test func anAppOverItsLimitIsKilledWhateverTheLevel() {
        var p = AppPolicy()
        p.memory.limit = 100 << 20
        var h = Harness(["a": p, "b": AppPolicy()])
        h.launchActive("a")
        #expect(h.memoryKills(in: h.memory(.normal, ["a": 100 << 20])).isEmpty, "at the limit is allowed")
        let effects = h.memory(.normal, ["a": (100 << 20) + 1, "b": 1 << 40])
        #expect(effects.contains(.kill("a", .memoryLimit(footprint: (100 << 20) + 1, limit: 100 << 20))))
        let k = h.memoryKills(in: effects)
        #expect(k.count == 1, "b has no limit")
        #expect(k.first?.reason == .perAppLimit && k.first?.limit == 100 << 20)
        #expect(h.reapKilled("a").contains(.remeasure) == false)
        #expect(h.supervisor.snapshot("a")!.last?.reason.code == .perAppLimit)
    }
}

extension MemoryLimitTests {
    /// Where the kernel holds the app to its limit (memory.max), memory in
    /// RAM above it is the kernel's kill under way (a dying task may charge
    /// past memory.max): that kill is the kernel's to make and record. What
    /// swap adds beyond the limit is still the daemon's to kill.
    @Test func whereTheKernelHoldsTheLimitItsKillIsLeftToIt() {
        var p = AppPolicy()
        p.memory.limit = 100 << 20
        var h = Harness(["a": p])
        h.supervisor.kernelEnforcesLimits = true
        h.launchActive("a")
        let over = h.send(
            .memory(
                MemoryReport(
                    footprints: ["a": (100 << 20) + (1 << 20)], measurements: Harness.measurements(.normal))))
        #expect(h.memoryKills(in: over).isEmpty, "the kernel's kill, racing the sample")
        let swapped = h.send(
            .memory(
                MemoryReport(
                    footprints: ["a": (100 << 20) + (8 << 20)], swapped: ["a": 16 << 20],
                    measurements: Harness.measurements(.normal))))
        #expect(swapped.contains(.kill("a", .memoryLimit(footprint: (100 << 20) + (8 << 20), limit: 100 << 20))))
    }

    @Test func theKernelsOOMKillAtTheLimitIsRecordedAsOursWithItsPeak() {
        var p = AppPolicy()
        p.memory.limit = 100 << 20
        var h = Harness(["a": p, "b": AppPolicy()])
        h.launchActive("a")
        _ = h.memory(.normal, ["a": 24 << 10])  // sampled before the allocation that hit the limit
        let effects = h.send(.exited("a", generation: 1, .outOfMemory(OutOfMemory(limit: 100 << 20, peak: 99 << 20))))
        let k = h.memoryKills(in: effects).first
        #expect(k?.reason == .perAppLimit && k?.killer == .kernel && k?.limit == 100 << 20)
        #expect(k?.footprint == 99 << 20 && k?.peak == 99 << 20, "the peak, not the sample before the allocation")
        #expect(h.supervisor.snapshot("a")!.last?.reason == .memoryLimit(footprint: 99 << 20, limit: 100 << 20))
    }

    @Test func aKernelOOMKillNotAtTheAppsLimitIsTheKernelsOwn() {
        var p = AppPolicy()
        p.memory.limit = 300 << 20
        p.restart.when = .onFailure
        var h = Harness(["a": p, "b": AppPolicy()])
        h.launchActive("a")
        _ = h.memory(.normal, ["a": 121 << 20])
        // The machine ran out first: no `oom` at the group's limit, whatever the manifest says.
        let effects = h.send(.exited("a", generation: 1, .outOfMemory(OutOfMemory(limit: nil, peak: 121 << 20))))
        let k = h.memoryKills(in: effects).first
        #expect(k?.reason == .kernelOOM && k?.killer == .kernel && k?.limit == nil)
        #expect(k?.footprint == 121 << 20 && k?.peak == 121 << 20, "its last footprint, and its peak")
        #expect(h.supervisor.snapshot("a")!.last?.reason == .oomKilled(by: .kernel, peak: 121 << 20))
        #expect(h.supervisor.snapshot("a")!.last?.reason.code.rawValue == "kernel-oom")
        #expect(!effects.contains { if case .relaunchScheduled = $0 { true } else { false } }, "not a failure")
        h.launchActive("b")
        let b = h.send(.exited("b", generation: 1, .outOfMemory(OutOfMemory(limit: nil, peak: nil))))
        #expect(h.memoryKills(in: b).first?.reason == .kernelOOM)
        // systemd-oomd's: its own cause and code, not relaunched either.
        h.launchActive("b")
        let oomd = h.send(
            .exited("b", generation: 2, .outOfMemory(OutOfMemory(limit: nil, peak: nil, killer: .systemdOOMD))))
        #expect(h.memoryKills(in: oomd).first?.reason == .systemdOOMD)
        #expect(h.supervisor.snapshot("b")!.last?.reason.code.rawValue == "systemd-oomd")
    }
}

@Suite struct LastNoticeTests {
    func noticed(plain: Bool = false) -> (Harness, [Effect]) {
        var p = plain ? AppPolicy.plain : AppPolicy()
        p.memory.lastNotice = true
        var h = Harness(["a": p])
        h.suspend("a")
        #expect(h.state("a") == .suspended)
        let effects = h.memory(.critical)
        return (h, effects)
    }

    @Test func suspendedAppIsThawedToldAndKilledOnAcknowledgement() {
        var (h, effects) = noticed()
        #expect(
            effects.firstIndex(of: .thaw("a"))! < effects.firstIndex { if case .deliver = $0 { true } else { false } }!)
        let d = h.outstanding("a")!
        #expect(d.event == .willBeKilledForMemory)
        #expect(d.deadline == h.now + .milliseconds(250))
        #expect(h.memoryKills(in: effects).first?.lastNotice == true)
        #expect(!effects.contains { if case .kill = $0 { true } else { false } }, "not before the notice is answered")
        let ack = h.send(.acknowledged("a", generation: 1, sequence: d.sequence))
        #expect(ack == [.kill("a", .memoryPressure(footprint: nil, simulated: false))])
        #expect(h.reapKilled("a").contains(.remeasure))
    }

    @Test func noAnswerMeansTheKillAtTheDeadline() {
        var (h, _) = noticed()
        #expect(h.advance(.milliseconds(249)).isEmpty)
        #expect(h.advance(.milliseconds(1)) == [.kill("a", .memoryPressure(footprint: nil, simulated: false))])
    }

    @Test func plainProgramGetsItsSignalAndTheSameDeadline() {
        var (h, effects) = noticed(plain: true)
        #expect(Harness.events("a", in: effects) == [.willBeKilledForMemory])
        #expect(h.advance(.milliseconds(250)) == [.kill("a", .memoryPressure(footprint: nil, simulated: false))])
    }

    @Test func offByDefault() {
        var h = Harness(apps: ["a"])
        h.suspend("a")
        let effects = h.memory(.critical)
        #expect(!effects.contains(.thaw("a")))
        #expect(effects.contains(.kill("a", .memoryPressure(footprint: nil, simulated: false))))
    }
}

@Suite struct MemoryGaugeTests {
    func m(available: Double? = nil, stall: Double? = nil, budget: Double? = nil) -> MemoryReading {
        MemoryReading(
            available: available.map { UInt64($0 * 10) }, total: available == nil ? nil : 1000,
            stallPercent: stall, appsTotal: budget.map { UInt64($0 * 10) },
            budget: budget == nil ? nil : 1000)
    }

    @Test func eachSignalReachesEachLevel() {
        var g = MemoryGauge(thresholds: MemoryThresholds())
        #expect(g.update(m(available: 50, stall: 0, budget: 10)) == .normal)
        var a = MemoryGauge(thresholds: MemoryThresholds())
        #expect(a.update(m(available: 19.9)) == .warning)
        #expect(a.update(m(available: 9.9)) == .critical)
        var s = MemoryGauge(thresholds: MemoryThresholds())
        #expect(s.update(m(stall: 10)) == .warning)
        #expect(s.update(m(stall: 40)) == .critical)
        var b = MemoryGauge(thresholds: MemoryThresholds())
        #expect(b.update(m(budget: 90)) == .warning)
        #expect(b.update(m(budget: 100)) == .critical)
        var none = MemoryGauge(thresholds: MemoryThresholds())
        #expect(none.update(MemoryReading()) == .normal, "nothing measured, nothing to fear")
    }

    @Test func hysteresisKeepsTheLevelUntilTheSignalIsClearByTheMargin() {
        var g = MemoryGauge(thresholds: MemoryThresholds())  // critical below 10 %, margin 2 points
        #expect(g.update(m(available: 9)) == .critical)
        #expect(g.update(m(available: 10.5)) == .critical, "back over the threshold, not past the margin")
        #expect(g.update(m(available: 11.9)) == .critical)
        #expect(g.update(m(available: 12)) == .warning)
        #expect(g.update(m(available: 21)) == .warning)
        #expect(g.update(m(available: 22)) == .normal)
        #expect(g.update(m(available: 19.99)) == .warning, "rising needs no margin")
    }

    @Test func fallsStraightToWhatTheSignalsJustify() {
        var g = MemoryGauge(thresholds: MemoryThresholds())
        #expect(g.update(m(stall: 80)) == .critical)
        #expect(g.update(m(stall: 0)) == .normal)
    }

    @Test func disabledSignalsAreIgnored() {
        var t = MemoryThresholds()
        t.availableWarning = nil
        t.availableCritical = nil
        var g = MemoryGauge(thresholds: t)
        #expect(g.update(m(available: 1)) == .normal)
    }
}

/// Swap: suspended apps' memory pushed out before any kill (iOS compresses,
/// Android compacts), and a kill that would give back swap, not memory,
/// passed over while swap has room.
@Suite struct ReclaimTests {
    static let mib: UInt64 = 1 << 20

    /// s1 then s2 suspended (s1 the least recently used), fg in front.
    func world(reclaim: Bool = true) -> Harness {
        var h = Harness(["s1": AppPolicy(), "s2": AppPolicy(), "fg": AppPolicy()])
        h.supervisor.reclaimEnabled = reclaim
        h.suspend("s1")
        h.advance(.seconds(1))
        h.suspend("s2")
        h.launchActive("fg")
        return h
    }

    /// A sample at `level` with 8 GiB of swap, `free` of it free; `urgent`:
    /// critical with less than half the critical available memory left.
    @discardableResult
    func sample(
        _ h: inout Harness, _ level: MemoryLevel, swapFree free: UInt64 = 8 << 30,
        _ footprints: [AppID: UInt64] = ["s1": 100 * mib, "s2": 100 * mib, "fg": 200 * mib],
        swapped: [AppID: UInt64] = [:], simulated: Bool = false, urgent: Bool = false
    ) -> [Effect] {
        var m = Harness.measurements(simulated ? .critical : level)
        if urgent { m.available = m.total! / 25 }  // 4 %
        m.swapTotal = 8 << 30
        m.swapFree = free
        let report = MemoryReport(footprints: footprints, swapped: swapped, measurements: m)
        return h.send(simulated ? .simulateMemoryLevel(level, report) : .memory(report))
    }

    func reclaims(_ effects: [Effect]) -> [AppID] {
        effects.compactMap { if case .reclaim(let id, _) = $0 { id } else { nil } }
    }

    @Test func atWarningTheColdestSuspendedAppGoesToSwapOneAtATime() {
        var h = world()
        #expect(reclaims(sample(&h, .normal)).isEmpty, "nothing while memory is plentiful")
        let first = sample(&h, .warning)
        #expect(first.contains(.reclaim("s1", bytes: 100 * Self.mib)), "the least recently used, all it has in memory")
        #expect(reclaims(sample(&h, .warning)).isEmpty, "one at a time")
        #expect(h.supervisor.reclaiming == "s1")
        #expect(h.send(.reclaimed("s1", generation: h.generation("s1"))).contains(.remeasure))
        #expect(h.supervisor.reclaiming == nil)
        // Fresh numbers: s1 is in swap now; s2 is next, and then nobody (fg is in front).
        let swapped: [AppID: UInt64] = ["s1": 98 * Self.mib]
        #expect(reclaims(sample(&h, .warning, swapped: swapped)) == ["s2"])
        h.send(.reclaimed("s2", generation: h.generation("s2")))
        #expect(reclaims(sample(&h, .critical, swapped: swapped)).isEmpty, "each once while it stays frozen")
        // Thawed, it is taken back; suspended again, it may go out again.
        h.launchActive("s1")
        h.ackAll("fg")
        #expect(h.state("s1") == .active && h.state("fg") == .suspended)
        #expect(reclaims(sample(&h, .warning)) == ["fg"])
    }

    @Test func noReclaimWithoutSwapRoomOrWhenTurnedOffOrForTinyApps() {
        var h = world()
        #expect(reclaims(sample(&h, .warning, swapFree: 512 << 20)).isEmpty, "swap less than a tenth free")
        var off = world(reclaim: false)
        #expect(reclaims(sample(&off, .critical)).isEmpty)
        var tiny = world()
        #expect(reclaims(sample(&tiny, .warning, ["s1": 512 << 10, "s2": 100 * Self.mib])) == ["s2"])
        var room = world()
        let effects = sample(&room, .warning, swapFree: 900 << 20)
        #expect(
            effects.contains(.reclaim("s1", bytes: 900 * Self.mib - (8 << 30) / 10)), "no more than swap has room for")
        // A simulated warning (supervisorctl pressure warning) reclaims one, as critical kills one.
        var simulated = world()
        #expect(reclaims(sample(&simulated, .warning, simulated: true)) == ["s1"])
    }

    @Test func atCriticalTheKillWaitsWhileReclaimCanGiveBackWhatIsShort() {
        var h = world()
        let first = sample(&h, .critical)
        #expect(h.memoryKills(in: first).isEmpty && reclaims(first) == ["s1"], "s1 goes to swap; nobody dies")
        #expect(h.memoryKills(in: sample(&h, .critical)).isEmpty, "while the reclaim is under way")
        // Less than half the critical available memory left: the kill goes ahead.
        let urgent = sample(&h, .critical, urgent: true)
        #expect(h.victim(in: urgent) == "s1")
        h.reapKilled("s1")
        // A stall or the budget at critical is not helped by swap: killed at once.
        var stalled = world()
        var m = Harness.measurements(.critical)
        (m.swapTotal, m.swapFree, m.stallPercent) = (8 << 30, 8 << 30, 50)
        let effects = stalled.send(
            .memory(MemoryReport(footprints: ["s1": 100 * Self.mib, "s2": 100 * Self.mib], measurements: m)))
        #expect(stalled.victim(in: effects) == "s1")
        // Nothing left to push out, and the apps in swap give back no memory: the
        // first behind the front that does dies (here none: then s1, never fg).
        var done = world()
        sample(&done, .warning)
        done.send(.reclaimed("s1", generation: done.generation("s1")))
        let swapped: [AppID: UInt64] = ["s1": 99 * Self.mib, "s2": 99 * Self.mib]
        sample(&done, .warning, swapped: ["s1": 99 * Self.mib])
        done.send(.reclaimed("s2", generation: done.generation("s2")))
        #expect(done.victim(in: sample(&done, .critical, swapped: swapped)) == "s1", "never the app in front")
    }

    @Test func aKillThatWouldGiveBackSwapIsPassedOverWhileSwapHasRoom() {
        var h = world()
        let swapped: [AppID: UInt64] = ["s1": 95 * Self.mib]
        let effects = sample(&h, .critical, swapped: swapped, urgent: true)
        let k = h.memoryKills(in: effects).first
        #expect(k?.app == "s2", "s1 is mostly on swap: killing it gives back swap, not memory")
        #expect(k?.candidates.map(\.app) == ["s2", "s1", "fg"], "the victim first, then the rest in kill order")
        #expect(k?.candidates[1].swap == 95 * Self.mib)
        h.reapKilled("s2")
        // Swap full too: s1 is the next, in order.
        let full = sample(
            &h, .critical, swapFree: 100 << 20, ["s1": 100 * Self.mib, "fg": 200 * Self.mib], swapped: swapped,
            urgent: true)
        #expect(h.victim(in: full) == "s1")
    }

    @Test func whenEveryCandidateIsInSwapTheFirstInOrderStillGoes() {
        var h = world()
        let swapped: [AppID: UInt64] = ["s1": 99 * Self.mib, "s2": 99 * Self.mib, "fg": 199 * Self.mib]
        #expect(h.victim(in: sample(&h, .critical, swapped: swapped, urgent: true)) == "s1")
    }

    @Test func aReclaimEndsWithItsAppAndSurvivesARestart() {
        var h = world()
        sample(&h, .warning)
        #expect(h.supervisor.reclaiming == "s1")
        // Saved and restored (a daemon restart): the reclaim is still awaited,
        // and the shell reports it over (its worker died with the daemon).
        var restored = Harness(["s1": AppPolicy(), "s2": AppPolicy(), "fg": AppPolicy()])
        restored.supervisor = Supervisor(
            restoring: h.supervisor.saved, foregroundSlots: 1,
            apps: ["s1": AppPolicy(), "s2": AppPolicy(), "fg": AppPolicy()], afterCrash: true)
        restored.now = h.now
        #expect(restored.supervisor.reclaiming == "s1")
        #expect(restored.send(.reclaimed("s1", generation: restored.generation("s1"))).contains(.remeasure))
        #expect(restored.supervisor.reclaiming == nil)
        // A reclaimed app killed meanwhile lets go of the reclaim.
        sample(&h, .critical, urgent: true)
        #expect(h.supervisor.reclaiming == "s1" || h.supervisor.pressureVictim == "s1")
        h.send(.kill("s1"))
        h.reapKilled("s1")
        #expect(h.supervisor.reclaiming == nil)
        #expect(h.send(.reclaimed("s1", generation: 1)).isEmpty, "a late report of an ended run does nothing")
    }
}

/// The quiet point is the gauge's own arithmetic: just above it nothing
/// the available memory does changes the level; at the hand-back point it
/// can be entered, and the per-CPU point is where it can be left.
@Suite struct QuietPointRuleTests {
    @Test(arguments: [(20.0, 10.0, 2.0), (30.0, 5.0, 0.5), (7.5, nil as Double?, 3.0)])
    func theQuietPointIsWhereTheGaugeTurns(warning: Double, critical: Double?, hysteresis: Double) throws {
        var t = MemoryThresholds()
        t.availableWarning = warning
        t.availableCritical = critical
        t.hysteresis = hysteresis
        for total: UInt64 in [1 << 30, 24 << 30, (16 << 30) + 12_345] {
            let q = try #require(t.quietPoint(total: total))
            func level(from start: MemoryLevel, _ available: UInt64) -> MemoryLevel {
                var g = MemoryGauge(thresholds: t)
                if start != .normal { _ = g.update(MemoryReading(available: 0, total: total)) }
                return g.update(MemoryReading(available: available, total: total))
            }
            #expect(level(from: .normal, q.handBackAt) == .normal, "at the hand-back point nothing has changed yet")
            #expect(level(from: .normal, q.handBackAt - 1) != .normal, "below it the level can turn")
            #expect(level(from: .critical, q.perCPUBelow) == .normal, "at the per-CPU point it can be left")
            #expect(level(from: .critical, q.perCPUBelow - 1) != .normal, "below it, not yet")
            #expect(q.critical == critical.map { UInt64(Double(total) * $0 / 100) })
        }
        var none = MemoryThresholds()
        none.availableWarning = nil
        none.availableCritical = nil
        #expect(none.quietPoint(total: 1 << 30) == nil, "no available-memory threshold: never")
    }
}
