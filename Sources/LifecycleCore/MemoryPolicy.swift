// Memory pressure, the rules: the measured level with its hysteresis,
// warnings to running apps, per-app limits, memory pushed to swap before
// anything dies, and at critical one victim at a time, chosen by state, band
// and recency, each decided on fresh numbers. The shell measures and reports
// facts (the kernel's OOM kills among them); every decision is made here.

extension Supervisor {
    /// The level `measurements` would give now, without changing anything:
    /// the shell asks, to know whether to read every footprint before it
    /// reports (a kill record names them all).
    public func memoryLevel(previewing measurements: MemoryReading) -> MemoryLevel {
        var g = gauge
        return g.update(measurements)
    }

    /// A report of memory: measured (`simulated == nil`: the gauge gives
    /// the level) or with a level injected for demos and tests.
    mutating func memory(_ report: MemoryReport, simulated: MemoryLevel?) {
        let level = simulated ?? gauge.update(report.measurements)
        let sample = MemorySample(
            level: level, simulated: simulated != nil, footprints: report.footprints,
            measurements: report.measurements)
        for (id, bytes) in sample.footprints where apps[id].map(isAlive) == true {
            let swap = report.swapped[id]
            guard footprints[id] != bytes || swapped[id] != swap else { continue }
            footprints[id] = bytes
            swapped[id] = swap
            apps.markChanged(id)
        }
        let previous = memoryLevel
        lastSample = sample
        memoryLevel = sample.level
        memorySimulated = sample.simulated
        // An app over its own limit is killed whatever the level. Only the
        // apps with a limit are looked at: a sample near a limit comes every
        // few milliseconds, and most apps have none.
        for id in limited {
            let app = apps[id]!
            guard let limit = app.policy.memory.limit, let bytes = footprints[id], bytes > limit,
                killable(app)
            else { continue }
            // Where the kernel holds the app to its limit, memory in RAM
            // above it is the kernel's own kill under way (a dying task may
            // charge past memory.max): that kill and its record are the
            // kernel's (memory.events). What swap adds is the daemon's.
            if kernelEnforcesLimits, bytes - min(swapped[id] ?? 0, bytes) > limit { continue }
            // The record after the kill: the shell signals first, then writes.
            let record = killRecord(id, .perAppLimit, sample, candidates: [id], notice: false)
            kill(id, .memoryLimit(footprint: bytes, limit: limit))
            effects.append(.memoryKill(record))
        }
        if sample.level > previous { warnRunningApps() }
        // Prewarms are a guess: given up when memory runs short, made again
        // once it is back to normal (Prewarm.swift).
        if sample.level >= .warning { dropPrewarms("memory is at the \(sample.level.rawValue) level") }
        if sample.level == .normal, previous != .normal { planPrewarm(appIDs) }
        // Scenes first: background scenes are disconnected before any app
        // is killed; the next critical sample kills if that was not enough.
        // Then swap: while it can still give back what is short, nothing dies.
        if sample.level == .critical && pressureVictim == nil && !shedScenes() && !reclaimCanWait(sample) {
            killForPressure(sample)
        }
        if sample.level >= .warning { reclaimForPressure(sample) }
    }

    /// At a measured critical level, a kill waits while reclaim can still
    /// give back what is short: a suspended app's memory is going to swap,
    /// or one is left to push out; the level is critical for the available
    /// memory alone (swap does not help a stall already under way, nor a
    /// budget, which counts swap); and the available memory is still above
    /// half its critical threshold. Below that, or with swap full, the kill
    /// goes ahead as without swap. An injected level (`supervisorctl
    /// pressure critical`) kills as it always has.
    func reclaimCanWait(_ sample: MemorySample) -> Bool {
        let m = sample.measurements, t = gauge.thresholds
        guard !sample.simulated, reclaimEnabled, m.swapHasRoom, let available = m.availablePercent,
            let critical = t.availableCritical, available >= critical / 2
        else { return false }
        if let stall = m.stallPercent, let limit = t.stallCritical, stall >= limit { return false }
        if let used = m.budgetPercent, let limit = t.budgetCritical, used >= limit { return false }
        return reclaiming != nil || nextReclaim() != nil
    }

    /// The coldest suspended app worth pushing to swap: not pushed out
    /// since it was frozen, with at least `reclaimWorthIt` in memory.
    func nextReclaim() -> AppID? {
        memoryKillOrder().first {
            apps[$0]!.state == .suspended && !apps[$0]!.reclaimed && inMemory($0) >= Self.reclaimWorthIt
        }
    }

    /// Below this much in memory a suspended app is not worth a reclaim.
    static let reclaimWorthIt: UInt64 = 1 << 20

    /// iOS compresses a suspended app's memory and Android compacts its
    /// cached apps before either kills one. Here, where swap (or zswap in
    /// front of it) has room, the coldest suspended app not pushed out
    /// since it was frozen has its memory pushed to swap by the shell,
    /// off the loop (memory.reclaim); one app at a time, the next decided on
    /// the measurements after it. A thaw then pays only page faults, and an
    /// app in swap is passed over by the kills below while swap has room.
    mutating func reclaimForPressure(_ sample: MemorySample) {
        let m = sample.measurements
        guard reclaimEnabled, reclaiming == nil, m.swapHasRoom, let free = m.swapFree, let total = m.swapTotal,
            let id = nextReclaim()
        else { return }
        reclaiming = id
        update(id) { $0.reclaimed = true }
        effects.append(.reclaim(id, bytes: min(inMemory(id), free - total / 10)))
    }

    /// The reclaim is over: measure again now, to decide the next.
    mutating func reclaimDone() {
        reclaiming = nil
        effects.append(.remeasure)
    }

    /// The part of the app's footprint in memory (compressed or not).
    func inMemory(_ id: AppID) -> UInt64 {
        let f = footprints[id] ?? 0
        return f - min(swapped[id] ?? 0, f)
    }

    /// Killing an app gives back what it has in memory. One that is mostly
    /// on the swap device gives back swap, which is not what runs short
    /// while swap has room: it is passed over then.
    func givesBackMemory(_ id: AppID, _ m: MemoryReading) -> Bool {
        !m.swapHasRoom || (swapped[id] ?? 0) <= inMemory(id)
    }

    func isAlive(_ app: AppRecord) -> Bool { app.phase != .notRunning }

    /// Alive and not already on its way to a kill.
    func killable(_ app: AppRecord) -> Bool {
        isAlive(app) && app.killing == nil && app.lastNotice == nil
    }

    /// didReceiveMemoryWarning to every running app (suspended apps are not
    /// told); delivered as soon as each app is idle.
    mutating func warnRunningApps() {
        for id in appIDs {
            let app = apps[id]!
            switch app.phase {
            case .launching, .awaitingReady, .running: break
            case .notRunning, .suspended, .terminating, .prewarming, .prewarmed: continue
            }
            guard killable(app), app.stop == nil else { continue }
            update(id) { $0.warningPending = true }
            advance(id)
        }
    }

    /// The kill order: prewarmed processes, suspended apps, then background
    /// apps, then the foreground last; within each, the lowest band first,
    /// then the least recently used.
    public func memoryKillOrder() -> [AppID] {
        func tier(_ state: LifecycleState) -> Int {
            switch state {
            case .prewarmed: -1
            case .suspended: 0
            case .background: 1
            case .inactive, .active, .notRunning: 2
            }
        }
        return appIDs.filter { killable(apps[$0]!) }.sorted { a, b in
            let x = apps[a]!, y = apps[b]!
            return (tier(x.state), x.policy.memory.band.rank, x.lastUsed.nanoseconds, a)
                < (tier(y.state), y.policy.memory.band.rank, y.lastUsed.nanoseconds, b)
        }
    }

    mutating func killForPressure(_ sample: MemorySample) {
        let order = memoryKillOrder()
        // In kill order, the first whose kill gives back memory (when none
        // would, the first: something must give); never one in front while
        // an app behind it is left, in swap or not.
        let behind = order.filter { [.prewarmed, .suspended, .background].contains(apps[$0]!.state) }
        guard
            let victim = behind.first(where: { givesBackMemory($0, sample.measurements) }) ?? behind.first
                ?? order.first
        else { return }
        let app = apps[victim]!
        // A busy app (owing an acknowledgement) cannot be told anything more.
        let notice = app.policy.memory.lastNotice && app.awaiting == nil && !app.phase.isPrewarm  // told nothing yet
        let record = killRecord(
            victim, .memoryPressure, sample, candidates: [victim] + order.filter { $0 != victim }, notice: notice)
        pressureVictim = victim
        let reason = TerminationReason.memoryPressure(footprint: footprints[victim], simulated: sample.simulated)
        guard notice else {
            // The record after the kill: the shell signals and frees first, then writes.
            kill(victim, reason)
            return effects.append(.memoryKill(record))
        }
        effects.append(.memoryKill(record))
        if app.phase == .suspended { thaw(victim) }
        update(victim) {
            $0.lastNotice = reason
            $0.warningPending = false
        }
        timers.cancel(victim, .grace, .expiration, .budget)
        deliver(victim, .willBeKilledForMemory)
    }

    /// `by`: another OOM killer did it (the record then says what the
    /// kernel said: the group's limit, the run's peak).
    func killRecord(
        _ id: AppID, _ cause: TerminationCode, _ sample: MemorySample,
        candidates: [AppID], notice: Bool, by other: OutOfMemory? = nil
    ) -> KillRecord {
        let app = apps[id]!
        return KillRecord(
            app: id, reason: cause,
            footprint: (other?.limit != nil ? other?.peak : nil) ?? footprints[id], swap: swapped[id],
            limit: cause == .perAppLimit ? other?.limit ?? app.policy.memory.limit : nil,
            killer: other?.killer, peak: other?.peak,
            state: app.state, band: app.policy.memory.band, level: sample.level, simulated: sample.simulated,
            reading: sample.measurements,
            candidates: candidates.map {
                KillRecord.Candidate(
                    app: $0, state: apps[$0]!.state, band: apps[$0]!.policy.memory.band,
                    footprint: footprints[$0], swap: swapped[$0])
            },
            lastNotice: notice)
    }
}

/// Turns measurements into a level. Pure: the same measurements in the
/// same order give the same levels.
public struct MemoryGauge: Sendable, Equatable, Codable {
    public var thresholds: MemoryThresholds
    public private(set) var level: MemoryLevel = .normal

    public init(thresholds: MemoryThresholds) { self.thresholds = thresholds }

    /// The level these measurements justify, given the current one.
    public mutating func update(_ m: MemoryReading) -> MemoryLevel {
        let t = thresholds
        // The level the signals reach with no hysteresis: entering.
        let entered = Self.level(m, t, margin: 0)
        if entered >= level {
            level = entered
            return level
        }
        // Falling: only as far as the signals are clear by the margin.
        level = max(entered, Self.level(m, t, margin: t.hysteresis))
        return level
    }

    /// The highest level any signal reaches, each threshold moved by
    /// `margin` towards safety.
    static func level(_ m: MemoryReading, _ t: MemoryThresholds, margin: Double) -> MemoryLevel {
        func low(_ value: Double?, _ threshold: Double?) -> Bool {  // lower is worse
            guard let value, let threshold else { return false }
            return value < threshold + margin
        }
        func high(_ value: Double?, _ threshold: Double?) -> Bool {  // higher is worse
            guard let value, let threshold else { return false }
            return value >= threshold - margin
        }
        let a = m.availablePercent, s = m.stallPercent, b = m.budgetPercent
        if low(a, t.availableCritical) || high(s, t.stallCritical) || high(b, t.budgetCritical) { return .critical }
        if low(a, t.availableWarning) || high(s, t.stallWarning) || high(b, t.budgetWarning) { return .warning }
        return .normal
    }
}

/// Where, with only the available memory moving, the level could change:
/// what the shell needs to sample quietly (in C, without the core) and hand
/// back in time. The arithmetic of the gauge's thresholds and hysteresis
/// lives here, beside the gauge, so that the shell never re-derives it.
public struct QuietPoint: Sendable, Equatable {
    /// At or below this available memory (bytes, rounded up: early is
    /// safe, late is not) the level could leave normal.
    public var handBackAt: UInt64
    /// At or below this, the per-CPU free pages (which MemAvailable leaves
    /// out) could decide the level, entering it or leaving it with the
    /// hysteresis: they are worth reading.
    public var perCPUBelow: UInt64
    /// The critical available memory, which sample intervals are measured
    /// against; nil without an `available_critical` threshold.
    public var critical: UInt64?
}

extension MemoryThresholds {
    /// The quiet point of a machine with `total` bytes; nil when no
    /// available-memory threshold is set (the available memory then never
    /// changes the level).
    public func quietPoint(total: UInt64) -> QuietPoint? {
        guard let highest = [availableWarning, availableCritical].compactMap({ $0 }).max() else { return nil }
        func bytes(_ percent: Double) -> UInt64 { UInt64((Double(total) * percent / 100).rounded(.up)) }
        return QuietPoint(
            handBackAt: bytes(highest), perCPUBelow: bytes(highest + hysteresis),
            critical: availableCritical.map { UInt64(Double(total) * $0 / 100) })
    }
}

/// The kernel's OOM killer, told the same kill order as the core's (prewarmed
/// processes first, then suspended apps, background, the foreground; the
/// lowest band first within each), through each process's `oom_score_adj`: if the kernel must
/// kill before the daemon does, it picks as the daemon would. The daemon
/// itself runs at -900 (OOMScoreAdjust= in its unit).
public enum OOMScoreAdjust {
    /// The value for an app in `state` with `band`; nil when it has no process.
    public static func value(_ state: LifecycleState, band: MemoryBand) -> Int32? {
        let tier: Int32
        switch state {
        case .notRunning: return nil
        case .prewarmed: tier = 850
        case .suspended: tier = 800
        case .background: tier = 500
        case .inactive, .active: tier = 100
        }
        let bandOffset: Int32
        switch band {
        case .low: bandOffset = 100
        case .normal: bandOffset = 50
        case .high: bandOffset = 0
        }
        return tier + bandOffset
    }
}
