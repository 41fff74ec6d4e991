import LifecycleOS
import LifecycleControl
import LifecycleCore
import Logging

extension Daemon {
    /// A kill for memory: the kill log, the journal, the event stream.
    func recordKill(_ k: MemoryKill) {
        // The kernel's kills are recorded once the run has ended: its last pid.
        let pid = runs.pid(k.app)
        let reading = MemoryReading(k.measurements)
        var r = KillRecord(
            time: Records.wallTime(decidedAt ?? now()), app: k.app, pid: pid, reason: k.cause.code,
            footprint: k.footprint, limit: k.limit, state: k.state, band: k.band,
            level: k.level, simulated: k.simulated, reading: reading,
            candidates: k.candidates.map {
                KillRecord.Candidate(
                    app: $0.app, state: $0.state, band: $0.band, footprint: $0.footprint, swap: $0.swap)
            },
            lastNotice: k.lastNotice)
        r.swap = k.swap
        r.killer = k.killer?.rawValue
        r.peak = k.peak
        r.freed = runs[k.app]?.memoryFreed
        let saved = killLog.append(r, logger: logger)
        let footprint = k.footprint.map(formatBytes) ?? "unknown"
        var detail = "\(k.cause.rawValue): footprint \(footprint), \(k.state.rawValue), band \(k.band.rawValue)"
        if let swap = k.swap, swap > 0 { detail += ", \(formatBytes(swap)) of it on swap" }
        if let limit = k.limit { detail += ", limit \(formatBytes(limit))" }
        if let killer = k.killer {
            detail += killer == .kernel ? "; killed by the kernel's OOM killer" : "; killed by systemd-oomd"
            detail += k.peak.map { ", peak \(formatBytes($0))" } ?? ""
        }
        if let freed = r.freed { detail += "; gave back \(formatBytes(freed))" }
        detail += "; level \(k.level.rawValue)\(k.simulated ? " (simulated)" : ""); \(reading.summary)"
        if k.candidates.count > 1 {
            detail += "; next: " + k.candidates.dropFirst().prefix(5).map(\.app).joined(separator: ", ")
        }
        var meta: Logger.Metadata = [
            "app": "\(k.app)", "reason": "\(k.cause.rawValue)", "app-state": "\(k.state.rawValue)",
            "band": "\(k.band.rawValue)", "memory-level": "\(k.level.rawValue)", "simulated": "\(k.simulated)",
            "candidates": "\(k.candidates.map(\.app).joined(separator: ","))",
        ]
        if let pid { meta["app-pid"] = "\(pid)" }
        if let f = k.footprint { meta["footprint-bytes"] = "\(f)" }
        if let freed = r.freed { meta["freed-bytes"] = "\(freed)" }
        if let killer = k.killer { meta["killer"] = "\(killer.rawValue)" }
        if let a = k.measurements.available { meta["mem-available-bytes"] = "\(a)" }
        logger.notice("jetsam: \(k.app): \(detail)", metadata: meta)
        record(
            k.app, .jetsam, reason: k.cause.rawValue,
            detail: detail + (saved ? "" : "; not yet saved (\(killLog.problem ?? "?")): kept in memory, retried"),
            kill: r)
        if !saved { retryUnsavedRecords() }
    }

    /// While kill records or the state cannot be written: again every
    /// second, then less often (up to 30 s), until they are.
    func retryUnsavedRecords() {
        guard unsavedRetry == nil else { return }
        var delay: Int64 = 1_000_000_000
        unsavedRetry = try? loop.timer { [unowned self] in
            let killsDone = self.killLog.flush(logger: self.logger)
            let stateDone = self.store?.failing != true || self.saveState()
            _ = self.history.flush()
            if killsDone && stateDone && !self.history.hasPending {
                self.unsavedRetry?.cancel()
                self.unsavedRetry = nil
                return
            }
            delay = min(delay * 2, 30_000_000_000)
            self.unsavedRetry?.arm(at: Posix.monotonicNanoseconds() + delay)
        }
        unsavedRetry?.arm(at: Posix.monotonicNanoseconds() + delay)
    }
}
