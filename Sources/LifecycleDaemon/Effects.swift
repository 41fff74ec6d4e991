@preconcurrency import Glibc
import LifecycleControl
import LifecycleCore
import LifecycleOS
import LifecycleWire
import Logging

// The one switch where the core's effects become system calls, log lines
// and records. Nothing here decides: each case performs what it is told,
// and reports back to the core only facts (through `submit` or `queue`).

extension Daemon {
    func perform(_ effect: Effect) {
        switch effect {
        case .spawn(let id, let generation, let mode):
            launch(id, generation, mode)
            spawnedUnsaved = true
        case .prewarm(let id, let generation):
            launch(id, generation, .background, prewarm: true)
            spawnedUnsaved = true
        case .deliver(let id, let d): deliver(id, d)
        case .backgroundTaskReply(let id, let request, let task, let budgetEnd):
            let reply = DaemonMessage.backgroundTaskReply(
                request: request, task: task, budgetEnd: budgetEnd?.nanoseconds)
            outward(id) { [unowned self] _ in self.send(id, reply) }
        case .expireBackgroundTasks(let id, let tasks):
            outward(id) { [unowned self] _ in self.send(id, .backgroundTasksExpiring(tasks)) }
            record(id, .expiring, detail: "tasks \(tasks.map(String.init).joined(separator: ","))")
        // Freezes, thaws and kills after the save too: the next daemon
        // reconciles a freezer left the other way, but an end it did not
        // cause it could only record as "ended while away".
        case .freeze(let id): outward(id) { [unowned self] _ in self.freeze(id) }
        case .thaw(let id): outward(id) { [unowned self] _ in self.thaw(id) }
        case .kill(let id, let reason): outward(id) { [unowned self] _ in self.kill(id, reason) }
        case .transition(let id, let from, let to):
            status.counts[from, default: 0] -= 1
            status.counts[to, default: 0] += 1
            // Where the app stands for the kernel first, so that whoever sees
            // the transition's record finds it done. Written only when the
            // value changes (not between inactive and active), and not after
            // a launch whose child already wrote it (Apps/Launcher.swift).
            if let band = manifests[id]?.policy.memory.band,
                let value = OOMScoreAdjust.value(to, band: band), value != OOMScoreAdjust.value(from, band: band)
            {
                outward(id) { run in
                    guard run.oomScoreAdjust != value else { return }
                    run.group.setOOMScoreAdjust(value)
                    run.oomScoreAdjust = value
                }
            }
            if let standing = settings.standing(to, from: from, knobs: confinement.standings) {
                outward(id) { run in run.group.stand(standing) }
            }
            logger.info(
                "\(id): \(from.rawValue) -> \(to.rawValue)",
                metadata: metadata(
                    id,
                    [
                        "from-state": "\(from.rawValue)", "to-state": "\(to.rawValue)",
                    ]))
            record(id, .transition, from: from.rawValue, to: to.rawValue)
            // What `status` shows: measured where it says something (settled
            // in front, or frozen), never per request: the group's usage and
            // memory.stat (and memory.swap.current on v2), a moment later
            // (Memory/MemorySampling.swift).
            if to == .suspended || to == .active { footprintArrived(id) }
        case .terminated(let id, let rec):
            logger.notice(
                "\(id) ended: \(rec.reason)", metadata: metadata(id, ["reason": "\(rec.reason.code.rawValue)"]))
            record(id, .terminated, reason: rec.reason.code.rawValue, detail: rec.reason.description)
            terminations[id] = TerminationInfo(
                reason: rec.reason.code, description: rec.reason.description,
                time: wallTime(rec.at), pid: runs.pid(id))
            runEnded(id)
            sweep.shown[id] = nil
        case .forgotten(let id):
            logger.notice("\(id) removed: its manifest is gone and it has ended", metadata: metadata(id, [:]))
            forget(id)
        case .relaunchScheduled(let id, let at, let attempt):
            let restart = manifests[id]?.policy.restart ?? RestartPolicy()
            let detail =
                "in \(fixed(Double((at - now()).nanoseconds) / 1e9, 1)) s, attempt \(attempt)"
                + (restart.limit > 0 ? " of \(restart.limit) within \(restart.window.formattedSeconds)" : "")
            logger.notice("\(id) relaunches \(detail)", metadata: metadata(id, ["attempt": "\(attempt)"]))
            record(id, .relaunching, detail: detail)
        case .failed(let id, let failure):
            logger.error(
                "\(id) \(failure.description); down until launched",
                metadata: metadata(id, ["reason": "\(failure.reason.code.rawValue)", "ends": "\(failure.ends)"]))
            record(id, .failed, reason: failure.reason.code.rawValue, detail: failure.description)
        case .wake(let id, let note):
            logger.info("\(id): \(note)", metadata: metadata(id, ["wake": "\(note.code)"]))
            var result: String? = nil
            var event: LifecycleEvent? = nil
            switch note {
            case .answered(let e, let r, _):
                result = r.rawValue
                event = e
            case .unanswered(let e, _): event = e
            default: break
            }
            record(id, .wake, to: result, event: event, reason: note.code, detail: note.description)
        case .discardRestoration(let id, let why):
            guard history.blobs[id] != nil else { break }
            history.discardRestoration(id)
            logger.info("\(id): restoration data discarded: \(why)", metadata: metadata(id))
            record(id, .restoration, detail: "restoration data discarded: \(why)")
        case .refused: break  // the front answers the caller
        // After the kill it records (what the kill gave back is in it).
        case .memoryKill(let k): outward { [unowned self] in self.recordKill(k) }
        case .sceneShed(let id, let scene):
            logger.notice(
                "\(id): scene \(scene) disconnected to free memory", metadata: metadata(id, ["scene": "\(scene)"]))
            record(id, .scene, reason: "shed", detail: "scene \(scene) disconnected to free memory (its session stays)")
        case .reclaim(let id, let bytes): startReclaim(id, bytes)
        case .remeasure:
            memoryWatch?.loud()
            memoryWatch?.arm(at: loop.now)
        }
    }

    /// SIGKILL every process of the app; for a kill for memory, free its
    /// memory now, in our context, rather than when the dying processes are
    /// next scheduled (process_mrelease, Linux 5.15+), and keep what it gave
    /// back for the kill record.
    private func kill(_ id: AppID, _ reason: TerminationReason) {
        guard let run = runs[id] else { return }
        switch reason {
        case .memoryPressure, .memoryLimit:
            let started = loop.now
            let (before, after) = run.group.killForMemory(pidfd: run.pidfd)
            if let before, let after { run.memoryFreed = before.total > after.total ? before.total - after.total : 0 }
            let us = (loop.now - started) / 1000
            let freed = run.memoryFreed.map(formatBytes) ?? "an unknown amount"
            logger.debug("killed \(id) for memory and freed \(freed) in \(us) µs", metadata: ["app": "\(id)"])
        default:
            run.group.killAll()
            Posix.signal(pidfd: run.pidfd, SIGKILL)
        }
        logger.notice("killing \(id): \(reason)", metadata: metadata(id, ["reason": "\(reason.code.rawValue)"]))
        record(id, .killed, reason: reason.code.rawValue, detail: reason.description)
    }

    /// Journal fields about an app: its name and, while it has one, its pid.
    func metadata(_ id: AppID, _ extra: Logger.Metadata = [:]) -> Logger.Metadata {
        var meta = extra
        meta["app"] = "\(id)"
        if let pid = runs[id]?.pid { meta["app-pid"] = "\(pid)" }
        return meta
    }
}
