@preconcurrency import Glibc
import LifecycleControl
import LifecycleCore
import LifecycleOS
import SystemPackage
import Logging

// Reclaim: pushing a suspended app's memory to swap when the core asks
// (MemoryPolicy.swift), on the reclaimer's thread, never the loop's (the
// kernel reclaims in the writer's context, for as long as it takes), and
// reporting back when it is over.

extension Daemon {
    /// The reclaimer (where the memory controller allows one), the loop's
    /// source for its results, and the jobs it holds, by number.
    struct ReclaimJobs {
        var reclaimer: Reclaimer?
        var source: EventLoop.Source?
        var jobs: [UInt64: (app: AppID, generation: UInt64)] = [:]
        var last: UInt64 = 0
    }

    /// Hands the job to the reclaimer; a job that cannot start is over at once.
    func startReclaim(_ id: AppID, _ bytes: UInt64) {
        reclaim.last += 1
        guard let run = runs[id], let reclaimer = reclaim.reclaimer, run.group.memory == .cgroupV2,
            case .cgroup(let dir, _) = run.group.placement, dir >= 0,
            reclaimer.submit(job: reclaim.last, directory: dir, bytes: bytes)
        else {
            logger.notice("\(id): cannot push its memory to swap here", metadata: metadata(id))
            if let generation = runs[id]?.generation ?? supervisor.snapshot(id)?.generation {
                queue.append(Queued(.reclaimed(id, generation: generation)))
            }
            return
        }
        reclaim.jobs[reclaim.last] = (id, run.generation)
    }

    /// The reclaimer's results: recorded, and handed to the core.
    func reclaimsDone() {
        for r in reclaim.reclaimer?.results() ?? [] {
            guard let (id, generation) = reclaim.jobs.removeValue(forKey: r.job) else { continue }
            var detail = "pushed to swap"
            if let before = r.before, let after = r.after {
                detail += ": \(formatBytes(before > after ? before - after : 0)) of \(formatBytes(before)) left memory"
            }
            detail += " in \(r.nanoseconds / 1_000_000) ms"
            switch r.stopped {
            case nil: break
            case .resourceTemporarilyUnavailable?: detail += " (the kernel found no more to push out)"
            case Errno(rawValue: ESTALE)?: detail += " (stopped: thawed or gone meanwhile)"
            case let e?: detail += " (stopped: \(e))"
            }
            logger.info("\(id): \(detail)", metadata: metadata(id))
            record(id, .reclaimed, detail: detail)
            submit(.reclaimed(id, generation: generation))
        }
    }
}
