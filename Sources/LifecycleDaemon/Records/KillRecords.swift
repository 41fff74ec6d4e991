import LifecycleOS
import LifecycleControl
import LifecycleCore
import Logging

extension Daemon {
    /// A kill for memory: the kill log, the journal, the event stream.
    func recordKill(_ k: MemoryKill) {
        let pid = runs[k.app]?.pid
        let reading = MemoryReading(k.measurements)
        let r = KillRecord(
            time: Records.wallTime(decidedAt ?? now()), app: k.app, pid: pid, reason: k.cause.code,
            footprint: k.footprint, limit: k.limit, state: k.state, band: k.band,
            level: k.level, simulated: k.simulated, reading: reading,
            candidates: k.candidates.map {
                KillRecord.Candidate(app: $0.app, state: $0.state, band: $0.band, footprint: $0.footprint)
            },
            lastNotice: k.lastNotice)
        let saved = killLog.append(r, logger: logger)
        let footprint = k.footprint.map(formatBytes) ?? "unknown"
        var detail = "\(k.cause.rawValue): footprint \(footprint), \(k.state.rawValue), band \(k.band.rawValue)"
        if let limit = k.limit { detail += ", limit \(formatBytes(limit))" }
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
