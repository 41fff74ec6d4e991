import LifecycleCore
import LifecycleOS
import Logging

/// Measures memory for the core: the available memory (MemAvailable and the
/// free pages in per-CPU lists, which it leaves out), the PSI stall since the last
/// sample, the apps' total against the budget, per-app footprints; and
/// says when to look again. It decides nothing about apps: the core turns
/// the report into a level (the level it asks about below is the core's).
///
/// When to look again is the earlyoom idea made sharper: the time the
/// smallest headroom left (to the critical available memory, to the budget, to a
/// per-app limit) would take to fill at `fill_rate`, between `min_interval`
/// and `interval`: far from trouble one sample every 2 s by default, near it
/// every 5 ms. A PSI trigger wakes the daemon at once when tasks start
/// stalling, whatever the interval.
///
/// Most samples ask one question: is the available memory still far above
/// the point where the level could change? Those are answered in C by
/// `MemoryWatch` without running any Swift, for as long as `schedule` finds
/// that only the available memory matters (see `quietPoint`).
final class MemoryMonitor {
    let config: MemoryConfig
    let confinement: any Confinement
    /// The thresholds the core's gauge uses, for choosing what to read and when.
    let thresholds: MemoryThresholds
    private(set) var reading = MemoryReading()
    /// When `reading` was taken (CLOCK_MONOTONIC ns).
    private var readingAt: Int64 = 0
    private(set) var trigger: PSITrigger?
    /// The trigger's specification, or why there is none.
    private(set) var triggerDescription = "none"
    private var lastStall: (total: UInt64, at: Int64)?
    private let meminfo = KernelFile("/proc/meminfo")
    private let perCPU = PerCPUFreePages()
    /// MemAvailable and the per-CPU free pages (nil: not read) of `reading`.
    private var readingParts: (memAvailable: UInt64, perCPU: UInt64?)?
    private let pressure = KernelFile("/proc/pressure/memory")
    /// While the PSI trigger is armed and quiet, the stall is below
    /// `stall_warning` by the kernel's own account: the pressure file is
    /// read only from a trigger until this time (two trigger windows).
    private var readPressureUntil: Int64 = 0
    /// Where the available memory could change the level (the core's
    /// arithmetic, `MemoryThresholds.quietPoint`); nil without MemTotal or
    /// an available-memory threshold.
    private let point: QuietPoint?
    /// Available memory below which the level is critical, bytes.
    private var criticalAvailable: UInt64? { point?.critical }

    /// MemTotal, bytes (nil without /proc/meminfo).
    static func memTotal() -> UInt64? {
        KernelFile("/proc/meminfo").flatMap { $0.refresh() ? $0.integer(after: "MemTotal:") : nil }.map { $0 * 1024 }
    }

    init(config: MemoryConfig, confinement: any Confinement, logger: Logger) {
        self.config = config
        self.confinement = confinement
        let total = meminfo.flatMap { $0.refresh() ? $0.integer(after: "MemTotal:") : nil }.map { $0 * 1024 }
        thresholds = config.thresholds(total: total)
        point = total.flatMap(thresholds.quietPoint(total:))
        guard config.monitor else {
            triggerDescription = "monitoring off"
            return
        }
        guard config.psiTrigger, let stall = config.stallWarning else {
            triggerDescription = "off by configuration"
            return
        }
        // A 1 s window, as Android's lmkd uses, where the kernel allows it
        // (CAP_SYS_RESOURCE); without, it takes windows in multiples of 2 s only.
        var refusal: SystemError?
        for window: Int64 in [1_000_000, 2_000_000] where trigger == nil {
            do {
                trigger = try PSITrigger(
                    stallMicroseconds: Int64(Double(window) * stall / 100), windowMicroseconds: window)
                triggerDescription = trigger!.specification
            } catch { refusal = error }
        }
        if trigger == nil, let error = refusal {
            triggerDescription = "unavailable (\(error)); pressure files are read at each sample"
            logger.notice("no PSI trigger: \(error); memory stall is read from /proc/pressure/memory at each sample")
        }
    }

    /// Measures now. Footprints are read for the apps with a limit, and for
    /// every running app when memory is short (kill records name them all).
    /// `groups` is asked for only when a footprint is needed: a quiet sample
    /// reads one or two small files and allocates nothing else.
    /// `triggered`: woken by the PSI trigger. `measuredLevel` is the core's
    /// measured level before this sample, `preview` the level the core would
    /// give these measurements.
    func sample(
        groups allGroups: () -> [AppID: any AppGroup], limited: [AppID: UInt64], now: Int64,
        triggered: Bool = false, measuredLevel: MemoryLevel = .normal,
        preview: (MemoryReading) -> MemoryLevel = { _ in .normal }
    ) -> MemoryReport {
        var m = MemoryReading()
        if let meminfo, meminfo.refresh(),
            let total = meminfo.integer(after: "MemTotal:"), let available = meminfo.integer(after: "MemAvailable:")
        {
            // MemAvailable leaves out the free pages in per-CPU lists,
            // which since Linux 6.7 can hold a killed app's memory for tens
            // of seconds: without them a kill would seem to free nothing,
            // and the next candidate would die for no reason. They are read
            // only where they could change the level: the kernel prints
            // /proc/zoneinfo holding each zone's lock, which the allocator
            // wants too, the more so the more CPUs.
            let memAvailable = available * 1024, total = total * 1024
            let lists = memAvailable <= perCPUPoint(total: total) ? perCPU?.read() : nil
            readingParts = (memAvailable, lists)
            m.available = memAvailable + (lists ?? 0)
            m.total = total
            // Whether a suspended app's memory can go to swap, and whether
            // one in swap would give back memory if killed (MemoryPolicy.swift).
            // No swap at all is said as none (absent), not as a swap of 0 bytes.
            m.swapTotal = meminfo.integer(after: "SwapTotal:").flatMap { $0 > 0 ? $0 * 1024 : nil }
            m.swapFree = m.swapTotal == nil ? nil : meminfo.integer(after: "SwapFree:").map { $0 * 1024 }
        }
        if triggered { readPressureUntil = now + 4_000_000_000 }
        let quiet = trigger != nil && now > readPressureUntil && measuredLevel == .normal
        if quiet {
            lastStall = nil  // a stall measured later starts afresh
        } else if let pressure, pressure.refresh(),
            let stall = pressure.integer(after: "total=")  // the "some" line comes first: its total
        {
            if let last = lastStall, now > last.at, stall >= last.total {
                m.stallPercent = min(100, Double(stall - last.total) * 1000 * 100 / Double(now - last.at))
            }
            // The trigger vouches for at least stall_warning over its window.
            if triggered, let warning = config.stallWarning { m.stallPercent = max(m.stallPercent ?? 0, warning) }
            lastStall = (stall, now)
        }
        var report = MemoryReport()
        let all = measuredLevel != .normal
        let groups = all || !limited.isEmpty || config.budget != nil ? allGroups() : [:]
        for (id, group) in groups where all || limited[id] != nil { report.measure(id, group) }
        if let budget = config.budget {
            m.budget = budget
            if let total = confinement.appsFootprint() {
                m.appsTotal = total
            } else {  // /proc accounting: the apps one by one, kept for the core too
                for (id, group) in groups where report.footprints[id] == nil { report.measure(id, group) }
                m.appsTotal = report.footprints.values.reduce(0, +)
            }
        }
        reading = m
        readingAt = now
        // Just became short: the kill record needs every footprint.
        if !all && preview(m) != .normal {
            for (id, group) in allGroups() where report.footprints[id] == nil { report.measure(id, group) }
        }
        report.measurements = m
        return report
    }

    /// A level injected by `supervisorctl pressure`, with fresh footprints.
    func simulated(groups: [AppID: any AppGroup]) -> MemoryReport {
        var report = MemoryReport(measurements: reading)
        for (id, group) in groups { report.measure(id, group) }
        return report
    }

    /// MemAvailable at or below which the per-CPU free pages could change
    /// the level (0: no available-memory threshold, never).
    func perCPUPoint(total: UInt64) -> UInt64 { thresholds.quietPoint(total: total)?.perCPUBelow ?? 0 }

    /// The latest measurements, for `status`: the last full sample's, with
    /// MemAvailable from a later quiet sample of `watch`; the per-CPU free
    /// pages read now when neither read them (far from every threshold).
    func latest(_ watch: MemoryWatch.State) -> MemoryReading {
        var m = reading
        var parts = readingParts
        if let available = watch.available, let at = watch.at, at > readingAt { parts = (available, watch.perCPU) }
        if let parts { m.available = parts.memAvailable + (parts.perCPU ?? perCPU?.read() ?? 0) }
        return m
    }

    /// Arms `watch` for the next sample after `sample`, and lets its next
    /// firings be quiet when `quietPoint` allows.
    func schedule(
        _ watch: MemoryWatch, after sample: MemoryReport, measuredLevel: MemoryLevel, coreLevel: MemoryLevel,
        limits: [AppID: UInt64], now: Int64
    ) {
        if let q = quietPoint(
            after: sample, measuredLevel: measuredLevel, coreLevel: coreLevel,
            limited: !limits.isEmpty, now: now)
        {
            watch.quiet(
                handBackAt: q.handBackAt, total: q.total, critical: q.critical, fillRate: config.fillRate,
                shortest: config.minInterval.nanoseconds, longest: config.interval.nanoseconds)
        } else {
            watch.loud()
        }
        watch.arm(at: now + interval(after: sample, limits: limits))
    }

    /// When only the available memory can change the level, the available
    /// memory at or below which it could (bytes, rounded up: handing back
    /// early is safe, late is not), with MemTotal and the critical one the interval
    /// is measured against. Nil whenever a full sample must run: the level
    /// (measured or injected) is not normal, a budget or a per-app limit
    /// needs footprints, the pressure file must be read (a stall threshold
    /// is set and no PSI trigger is armed and quiet), or no available-memory
    /// threshold is set.
    func quietPoint(
        after sample: MemoryReport, measuredLevel: MemoryLevel, coreLevel: MemoryLevel, limited: Bool,
        now: Int64
    ) -> (handBackAt: UInt64, total: UInt64, critical: UInt64)? {
        let t = thresholds
        guard config.monitor, measuredLevel == .normal, coreLevel == .normal, !limited, config.budget == nil,
            let total = sample.measurements.total, let q = t.quietPoint(total: total), let critical = q.critical
        else { return nil }
        let stallMatters = t.stallWarning != nil || t.stallCritical != nil
        guard !stallMatters || (trigger != nil && now > readPressureUntil) else { return nil }
        return (q.handBackAt, total, critical)
    }

    /// Nanoseconds until the next sample.
    func interval(after sample: MemoryReport, limits: [AppID: UInt64]) -> Int64 {
        var headroom: [UInt64] = []
        let m = sample.measurements
        if let available = m.available, let critical = criticalAvailable {
            headroom.append(available > critical ? available - critical : 0)
        }
        if let budget = m.budget, let used = m.appsTotal {
            let critical = UInt64(Double(budget) * config.budgetCritical / 100)
            headroom.append(critical > used ? critical - used : 0)
        }
        for (id, limit) in limits {
            guard let f = sample.footprints[id] else { continue }
            headroom.append(limit > f ? limit - f : 0)
        }
        let longest = config.interval.nanoseconds, shortest = config.minInterval.nanoseconds
        guard let least = headroom.min() else { return longest }
        return MemoryWatch.fillInterval(
            headroom: least, fillRate: config.fillRate, shortest: shortest, longest: longest)
    }
}

extension MemoryReport {
    /// The app's footprint, and the part of it on swap, where it can be read.
    mutating func measure(_ id: AppID, _ group: any AppGroup) {
        guard let use = group.memoryUse() else { return }
        footprints[id] = use.total
        if use.swapped > 0 { swapped[id] = use.swapped }
    }
}
