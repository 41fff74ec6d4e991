@preconcurrency import Glibc
import LifecycleCore
import LifecycleOS
import Logging
import LifecycleControl

// Freezing and thawing, with the kernel's confirmation and never a lie.
// A busy process freezes at its next tick or two, so the freeze is looked
// at again on a short back-off until cgroup.events says so (its
// notifications are rate-limited). A write the kernel refuses (out of
// descriptors, say) is retried on a longer back-off and reported once,
// with its recovery, and the refusal told to the core. The deadline is the
// core's (`Supervisor.freezeDeadline`, a `.freeze` timer): a suspended app
// whose freeze is not confirmed (`.frozen`) by then is killed
// (`freeze-failed`), and its run's end stops the retries here. A thaw is
// retried until it takes, and an app it cannot reach misses the deadline
// of the event it was sent. `status` shows what the kernel
// confirmed (`frozen`) and what went wrong (`freezeProblem`).

extension Daemon {
    func freeze(_ id: AppID) {
        guard let run = runs[id] else { return }
        if let f = follower, f.lost, f.fronts.values.contains(where: { $0.hidden.contains { $0.app == id } }) {
            // Hidden when the follower was last heard: perhaps shown since.
            logger.info("\(id): not frozen while the compositor's follower is lost", metadata: ["app": "\(id)"])
            unseen.insert(id)
            return report(.hold(id, generation: run.generation, .followerLost, true))
        }
        if let device = Audio.playbackDevice(run.group) ?? playsThroughServer(run).map({ "PipeWire, pid \($0)" }) {
            // Held: a frozen audio client stalls everyone's sound.
            logger.info("\(id) plays audio (\(device)): held from freezing", metadata: ["app": "\(id)"])
            playing.insert(id)
            audioTimer?.arm(at: loop.now + Self.audioLook)
            return report(.hold(id, generation: run.generation, .audio, true))
        }
        run.freezeTimer?.cancel()
        run.freezeStarted = loop.now
        run.freezeAsked = false
        run.freezeDelay = 25_000  // first look again after 50 µs (it doubles before the first wait)
        run.freezeTimer = try? loop.timer { [unowned self, unowned run] in self.freezeStep(id, run) }
        freezeStep(id, run)
    }

    /// Asks the kernel (again, if it refused), or looks whether it is done.
    private func freezeStep(_ id: AppID, _ run: Run) {
        guard runs[id] === run, run.freezeStarted != nil else { return }
        let now = loop.now
        if !run.freezeAsked {
            do {
                run.freezeAsked = true
                // Out of descriptors, on time all the same: the reserve.
                if try reserve.retrying({ () throws(SystemError) in try run.group.freeze() }) {
                    return frozen(id, run, at: now)
                }
            } catch {
                run.freezeAsked = false
                if run.freezeProblem == nil {
                    logger.error("\(id): cannot freeze it: \(error); retrying", metadata: ["app": "\(id)"])
                    report(.freezeRefused(id, generation: run.generation, why: "\(error)"))
                }
                run.freezeProblem = "\(error)"
                run.freezeDelay = max(run.freezeDelay, 50_000_000)  // a refusal is not over in a tick
            }
        } else if reserve.spending({ run.group.isFrozen() }) {  // a read that must not fail for want of a descriptor
            return frozen(id, run, at: now)
        }
        run.freezeDelay = min(run.freezeDelay * 2, run.freezeAsked ? 16_000_000 : 1_000_000_000)
        run.freezeTimer?.arm(at: now + run.freezeDelay)
    }

    private func frozen(_ id: AppID, _ run: Run, at now: Int64) {
        let started = run.freezeStarted ?? now
        run.freezeTimer?.cancel()
        run.freezeTimer = nil
        run.freezeStarted = nil
        run.frozen = true
        touchBus(id)
        if let problem = run.freezeProblem {
            logger.notice("\(id) frozen after all (it had failed: \(problem))", metadata: ["app": "\(id)"])
            run.freezeProblem = nil
        }
        record(id, .frozen, latency: Double(now - started) / 1000)
        report(.frozen(id, generation: run.generation))
        // A prewarm held: what it holds is its cost against the budget
        // (memory samples read every app's footprint only when memory is short).
        if supervisor.snapshot(id)?.state == .prewarmed, let footprint = run.group.memoryFootprint() {
            sweep.shown[id] = footprint
            report(.measured(id, generation: run.generation, footprint: footprint))
        }
    }

    /// How often an app held for its audio is looked at again.
    static let audioLook: Int64 = 2_000_000_000

    /// The apps held for their audio, looked at again: one that no longer
    /// plays goes on to be frozen (the core asks for it again).
    func lookAtAudio() {
        for id in playing.sorted() {
            guard let run = runs[id] else {
                playing.remove(id)
                continue
            }
            if Audio.playbackDevice(run.group) == nil && playsThroughServer(run) == nil {
                playing.remove(id)
                logger.info("\(id) no longer plays audio", metadata: ["app": "\(id)"])
                report(.hold(id, generation: run.generation, .audio, false))
            }
        }
        if !playing.isEmpty { audioTimer?.arm(at: loop.now + Self.audioLook) }
    }

    func thaw(_ id: AppID) {
        guard let run = runs[id] else { return }
        run.freezeTimer?.cancel()
        run.freezeTimer = nil
        run.freezeStarted = nil
        run.freezeDelay = 50_000_000
        thawStep(id, run)
    }

    /// Thaws, or retries until the kernel takes it (the app's event
    /// watchdog meanwhile runs as for any app that does not answer).
    private func thawStep(_ id: AppID, _ run: Run) {
        guard runs[id] === run else { return }
        do {
            try reserve.retrying { () throws(SystemError) in try run.group.thaw() }
        } catch {
            if run.freezeProblem == nil {
                logger.error("\(id): cannot thaw it: \(error); retrying", metadata: ["app": "\(id)"])
            }
            run.freezeProblem = "thaw: \(error)"
            run.freezeTimer = try? loop.timer { [unowned self, unowned run] in self.thawStep(id, run) }
            run.freezeTimer?.arm(at: loop.now + run.freezeDelay)
            run.freezeDelay = min(run.freezeDelay * 2, 1_000_000_000)
            return
        }
        run.freezeTimer?.cancel()
        run.freezeTimer = nil
        run.frozen = false
        touchBus(id)
        if let problem = run.freezeProblem {
            logger.notice("\(id) thawed after all (it had failed: \(problem))", metadata: ["app": "\(id)"])
            run.freezeProblem = nil
        }
        record(id, .thawed)
    }
}
