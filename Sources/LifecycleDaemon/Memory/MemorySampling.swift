#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleControl
import LifecycleCore
import LifecycleOS
import Logging

// Memory sampling: when to measure (the monitor's adaptive interval, the
// quiet path in C, the PSI trigger) and handing each measurement to the core,
// which decides. A change of level is recorded before what it causes.

extension Daemon {
    /// What `status` shows of each running app's footprint: the last one
    /// measured, by a memory sample or by a sweep; when the last sweep ran,
    /// and its timer.
    struct FootprintSweep {
        var shown: [AppID: UInt64] = [:]
        var at: Int64 = 0
        var timer: EventLoop.Source?
        /// Apps that arrived in front or in the freezer since `arrivalTimer` was armed.
        var arrived: Set<AppID> = []
        var arrivalTimer: EventLoop.Source?
    }

    /// One sample: measure, report to the core, look again after the
    /// adaptive interval.
    func sampleMemory(triggered: Bool = false) {
        guard config.memory.monitor else { return }
        let now = loop.now
        let report = memory.sample(
            groups: { self.runs.groups }, limited: limits, now: now,
            triggered: triggered, measuredLevel: supervisor.gauge.level,
            preview: { self.supervisor.memoryLevel(previewing: $0) })
        noteLevelChange(
            to: supervisor.memoryLevel(previewing: report.measurements), simulated: false, report.measurements)
        submit(.memory(report))
        for (id, f) in report.footprints where runs[id] != nil { sweep.shown[id] = f }
        guard let memoryWatch else { return }
        memory.schedule(
            memoryWatch, after: report, measuredLevel: supervisor.gauge.level,
            coreLevel: supervisor.memoryLevel, limits: limits, now: now)
    }

    /// Every running app's footprint, for `status`: at start, then after a
    /// `status` answer when what it showed was older than `sweepAge` (so a
    /// daemon nobody watches reads nothing, and no request waits for 1,000
    /// files). Memory samples that measure footprints refresh them too, and
    /// so does each app's arrival in front or in the freezer (Effects.swift).
    func sweepFootprints() {
        sweep.shown = [:]
        for (id, run) in runs.byApp { sweep.shown[id] = run.group.memoryFootprint() }
        sweep.at = loop.now
    }

    static let sweepAge: Int64 = 30_000_000_000

    /// An app arrived in front (active) or in the freezer (suspended),
    /// where its footprint says something: read `arrivalDelay` later, not
    /// in the turn that sends its event. Read in that turn (before the
    /// save), it held a prewarmed activation's last event 35 µs; read
    /// right after the send, it sat inside the round trip on one core,
    /// where the app runs only once the daemon waits (docs/performance.md,
    /// "What the daemon adds to a prewarmed activation"). One timer for
    /// all of them (made at start, before any app can arrive).
    func footprintArrived(_ id: AppID) {
        if sweep.arrived.isEmpty { sweep.arrivalTimer?.arm(at: loop.now + Self.arrivalDelay) }
        sweep.arrived.insert(id)
    }

    /// The footprints of the apps that arrived, each still running (and
    /// to the bus, whose `Footprint` was pushed with the transition); also
    /// before a `status` answer, which never shows one older than an
    /// arrival.
    func measureArrivals() {
        let arrived = sweep.arrived
        sweep.arrived = []
        sweep.arrivalTimer?.arm(at: nil)
        for id in arrived {
            guard let run = runs[id] else { continue }
            sweep.shown[id] = run.group.memoryFootprint()
            touchBus(id)
        }
    }

    static let arrivalDelay: Int64 = 20_000_000

    /// After a `status` answer: sweep on the next turn if what it showed was old.
    func footprintsShown() {
        if loop.now - sweep.at > Self.sweepAge { sweep.timer?.arm(at: 0) }
    }

    /// Records a change of level before the core acts on it, so the event
    /// stream shows the level first, then what it caused.
    func noteLevelChange(to level: MemoryLevel, simulated: Bool, _ measurements: MemoryReading) {
        let before = supervisor.memoryLevel
        guard level != before else { return }
        let detail = (simulated ? "simulated; " : "") + measurements.summary
        logger.notice(
            "memory level \(before.rawValue) -> \(level.rawValue): \(detail)",
            metadata: [
                "from-level": "\(before.rawValue)", "to-level": "\(level.rawValue)",
                "simulated": "\(simulated)",
            ])
        record(EventRecord.daemonWide, .memoryLevel, from: before.rawValue, to: level.rawValue, detail: detail)
    }
}

extension MemoryReading {
    /// "available 2.1 GiB of 23 GiB (9.1 %), stall 0 %, apps 1 GiB of 2 GiB"
    var summary: String {
        var parts: [String] = []
        if let a = available, let t = total {
            parts.append(
                "available \(formatBytes(a)) of \(formatBytes(t)) "
                    + "(\(fixed(Double(a) * 100 / Double(max(t, 1)), 1)) %)"
            )
        }
        if let s = stallPercent { parts.append("stall \(fixed(s, 1)) %") }
        if let u = appsTotal, let b = budget { parts.append("apps \(formatBytes(u)) of a \(formatBytes(b)) budget") }
        if let t = swapTotal, let f = swapFree { parts.append("swap \(formatBytes(f)) free of \(formatBytes(t))") }
        return parts.isEmpty ? "no measurement" : parts.joined(separator: ", ")
    }
}
