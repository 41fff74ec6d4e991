@preconcurrency import Glibc
import LifecycleCore
import LifecycleOS

// Freezing and thawing, with the kernel's confirmation: a busy process
// freezes at its next tick or two, so the freeze is looked at again on a
// short back-off until cgroup.events says so (its notifications are
// rate-limited), and the latency is recorded.

extension Daemon {
    func freeze(_ id: AppID) {
        guard let run = runs[id] else { return }
        let started = Posix.monotonicNanoseconds()
        do {
            if try run.group.freeze() {
                return record(id, .frozen, latency: Double(Posix.monotonicNanoseconds() - started) / 1000)
            }
        } catch {
            logger.error("freeze failed: \(error)", metadata: ["app": "\(id)"])
            return
        }
        // A busy process freezes at its next tick or two: look again, with
        // a short back-off (cgroup.events notifications are rate-limited).
        run.freezeStarted = started
        var delay: Int64 = 250_000
        run.freezeTimer = try? loop.timer { [unowned self, unowned run] in
            guard self.runs[id] === run, let started = run.freezeStarted else { return }
            let now = Posix.monotonicNanoseconds()
            if run.group.isFrozen() {
                run.freezeStarted = nil
                run.freezeTimer?.cancel(); run.freezeTimer = nil
                self.record(id, .frozen, latency: Double(now - started) / 1000)
                return
            }
            if now - started > 5_000_000_000 {
                self.logger.warning("\(id) has not frozen after 5 s; still trying", metadata: ["app": "\(id)"])
                delay = 1_000_000_000
            } else {
                delay = min(delay * 2, 16_000_000)
            }
            run.freezeTimer?.arm(at: now + delay)
        }
        run.freezeTimer?.arm(at: started + delay)
    }

    func thaw(_ id: AppID) {
        guard let run = runs[id] else { return }
        run.freezeTimer?.cancel()
        run.freezeTimer = nil
        run.freezeStarted = nil
        do { try run.group.thaw() } catch { logger.error("thaw failed: \(error)", metadata: ["app": "\(id)"]) }
        record(id, .thawed)
    }
}
