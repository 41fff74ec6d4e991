import LifecycleOS
import LifecycleControl
import LifecycleCore
import Logging

extension Daemon {
    /// A kill for memory: the kill log, the journal, the event stream.
    func recordKill(_ decided: KillRecord) {
        var r = decided
        r.time = wallTime(decidedAt ?? now())
        // The kernel's kills are recorded once the run has ended: its last pid.
        let pid = runs.pid(r.app)
        r.pid = pid
        r.freed = runs[r.app]?.memoryFreed
        let k = r
        let saved = killLog.append(r, logger: logger)
        let footprint = k.footprint.map(formatBytes) ?? "unknown"
        var detail = "\(k.reason.rawValue): footprint \(footprint), \(k.state.rawValue), band \(k.band.rawValue)"
        if let swap = k.swap, swap > 0 { detail += ", \(formatBytes(swap)) of it on swap" }
        if let limit = k.limit { detail += ", limit \(formatBytes(limit))" }
        if let killer = k.killer {
            detail += killer == .kernel ? "; killed by the kernel's OOM killer" : "; killed by systemd-oomd"
            detail += k.peak.map { ", peak \(formatBytes($0))" } ?? ""
        }
        if let freed = r.freed { detail += "; gave back \(formatBytes(freed))" }
        detail += "; level \(k.level.rawValue)\(k.simulated ? " (simulated)" : ""); \(k.reading.summary)"
        if k.candidates.count > 1 {
            detail += "; next: " + k.candidates.dropFirst().prefix(5).map(\.app).joined(separator: ", ")
        }
        var meta: Logger.Metadata = [
            "app": "\(k.app)", "reason": "\(k.reason.rawValue)", "app-state": "\(k.state.rawValue)",
            "band": "\(k.band.rawValue)", "memory-level": "\(k.level.rawValue)", "simulated": "\(k.simulated)",
            "candidates": "\(k.candidates.map(\.app).joined(separator: ","))",
        ]
        if let pid { meta["app-pid"] = "\(pid)" }
        if let f = k.footprint { meta["footprint-bytes"] = "\(f)" }
        if let freed = r.freed { meta["freed-bytes"] = "\(freed)" }
        if let killer = k.killer { meta["killer"] = "\(killer.rawValue)" }
        if let a = k.reading.available { meta["mem-available-bytes"] = "\(a)" }
        logger.notice("jetsam: \(k.app): \(detail)", metadata: meta)
        record(
            k.app, .jetsam, reason: k.reason.rawValue,
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
            self.unsavedRetry?.arm(at: loop.now + delay)
        }
        unsavedRetry?.arm(at: loop.now + delay)
    }
}
