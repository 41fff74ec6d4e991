#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleControl
import LifecycleCore
import LifecycleOS
import LifecycleWire
import SystemPackage
import Logging

// Taking apps back after a restart. A starting daemon reads what the last
// one saved, finds each recorded process alive and the same process (pid
// and start time, in its group), and carries on supervising it in its saved
// state: a suspended app stays frozen, deadlines stay as they were (but an
// event owed to an app that must resume its channel is judged from the new
// daemon's start), an event in flight is acknowledged on the resumed channel
// or its watchdog fires.
// What cannot be matched is killed and recorded with the reason; a process
// found gone is recorded as ended while the daemon was away. Nothing here
// decides a lifecycle rule: the core's restored state does.

extension Daemon {
    /// Saves the core's state and the run table for the next daemon; false
    /// when it could not be written.
    @discardableResult
    func saveState(handoff: Handoff? = nil) -> Bool {
        unsaved = false
        let changed = supervisor.takeChanged()
        keepHistory(of: changed)
        // The shell's part: the runs and terminations that changed.
        let shell = runs.takeTouched().union(terminations.takeTouched())
        for id in shell { savedRuns[id] = runs[id]?.saved }
        guard let store else {
            release(changed: changed)  // nowhere to save (the shell's tests)
            return false
        }
        let state = SavedDaemon(
            bootID: store.bootID, core: supervisor.saved, runs: savedRuns, terminations: terminations.byApp,
            handoff: handoff, leases: bus?.leaseCounts ?? [:])
        if let problem = store.save(state, changed: changed.union(shell)) { logger.error("\(problem)") }
        if store.failing { retryUnsavedRecords() }  // nothing else may change to save it again
        // Saved, or as saved as the disk allows: what waited for it goes out.
        release(changed: changed)
        return !store.failing
    }

    /// At start-up, before READY=1: the earlier daemon's apps, taken back;
    /// after a daemon-reexec, this process's own apps, with the descriptors
    /// it kept open across execve.
    func restoreState(_ loaded: SavedDaemon?, handoff: Handoff?) {
        let leftovers = Set(confinement.leftoverGroups())
        /// Groups dealt with here: taken back, or cleared for a known reason.
        var handled: Set<String> = []
        var ended: [Input] = []
        if let saved = loaded {
            restored = true
            // After a crash the count of crashes is written first: this
            // restore's numbering gaps must never be opened again at the
            // same place, whatever happens before the next save.
            let afterCrash = handoff == nil
            if afterCrash, let problem = store?.countCrash() { logger.error("\(problem)") }
            supervisor = Supervisor(
                restoring: saved.core, displays: config.displays, apps: settings.policies,
                memory: config.memory.thresholds(total: MemoryMonitor.memTotal()), afterCrash: afterCrash,
                crashesMissed: store?.crashesMissed ?? [:])
            tellCore()
            store?.restored(afterCrash: afterCrash)
            terminations = Terminations(saved.terminations.filter { manifests[$0.key] != nil })
            // Each recorded process is checked on every core (a pidfd, its
            // start time, its group: kernel calls that dominate a restart
            // with 1,000 apps), then taken back here, one after another.
            var candidates: [(id: AppID, facts: SavedRun, handed: HandedRun?)] = []
            for (id, generation, running) in saved.core.runs where running {
                let name = "\(id).\(generation)"
                guard let facts = saved.runs[id], facts.generation == generation else {
                    // Spawned after the last save, or never started: nothing to take back.
                    if manifests[id] != nil {
                        ended.append(.exited(id, generation: generation, .unknown(whileAway: true)))
                    }
                    continue
                }
                handled.insert(name)
                guard manifests[id] != nil else {
                    notAdopted(id, name, facts.pid, "its manifest is gone")
                    continue
                }
                candidates.append((id, facts, handoff?.runs[id]))
            }
            let confinement = self.confinement
            let probing = loop.now
            let probes = Parallel.map(candidates.count) { i in
                Self.probe(candidates[i].id, candidates[i].facts, handed: candidates[i].handed, in: confinement)
            }
            startPhases["probes-ms"] = "\(Self.ms(probing, loop.now))"
            for ((id, facts, handed), probe) in zip(candidates, probes) {
                let generation = facts.generation
                let name = "\(id).\(generation)"
                switch adopt(id, facts, handed: handed, probe) {
                case .adopted: break
                case .gone:
                    // What it left in its group goes with it, as after any end.
                    clearLeftover(name)
                    logger.notice("\(id) ended while lifecycled was not running", metadata: ["app": "\(id)"])
                    ended.append(.exited(id, generation: generation, .unknown(whileAway: true)))
                case .killed(let why):
                    clearLeftover(name)
                    logger.warning(
                        "killed \(id) (pid \(facts.pid)): not re-adopted: \(why)",
                        metadata: ["app": "\(id)", "reason": "\(TerminationCode.notAdopted.rawValue)"])
                    ended.append(.exited(id, generation: generation, .notAdopted(why: why)))
                }
            }
        }
        for name in leftovers.subtracting(handled).sorted() {
            let id = name.split(separator: ".").dropLast().joined(separator: ".")
            let generation = name.split(separator: ".").last.flatMap { UInt64($0) }
            if loaded != nil, let generation, let known = supervisor.snapshot(id), generation <= known.generation {
                // A run that had already ended, its group not yet removed: cleared quietly.
                clearLeftover(name)
                continue
            }
            notAdopted(id, name, nil, loaded == nil ? "no saved state names it" : "the saved state does not name it")
        }
        status.counts = [:]
        for id in supervisor.appIDs { status.counts[supervisor.snapshot(id)!.state, default: 0] += 1 }
        if restored {
            logger.notice(
                handoff != nil
                    ? "re-executed: carried on with every app" : "carried on from the earlier daemon's state",
                metadata: ["adopted": "\(runs.byApp.count)", "ended-while-away": "\(ended.count)"])
        }
        // An event owed to an app whose channel must be taken back (after a
        // crash; a reexec hands the channel over): the app cannot answer
        // before it resumes, and its library's next try may be as far as
        // Wire.resumeLongestPauseMilliseconds off. The deadline waiting on
        // it is its whole time from then, as for an event that left late:
        // the time no daemon ran is not the app's. One that never resumes
        // is still ended, that much later.
        let back = Instant(nanoseconds: loop.now + Int64(Wire.resumeLongestPauseMilliseconds) * 1_000_000)
        for (id, run) in runs.byApp.sorted(by: { $0.key < $1.key }) where run.adopted && run.channel < 0 {
            guard manifests[id]?.policy.delivery == .library, let seq = supervisor.channelState(id)?.awaiting.first
            else {
                continue
            }
            report(.left(id, generation: run.generation, sequence: seq, at: back))  // before any deadline fires
        }
        for input in ended { submit(input) }
        // A reclaim the earlier daemon's worker was doing went with it (a
        // daemon-reexec too: the worker is a thread of the old image).
        if let id = supervisor.reclaiming, let generation = supervisor.snapshot(id)?.generation {
            submit(.reclaimed(id, generation: generation))
        }
        submit(.tick)  // deadlines that passed while no daemon ran fire now
    }

    /// Taken back; found gone; or found alive where it cannot be taken
    /// back (never left running unseen: killed, and why).
    enum Adoption {
        case adopted, gone
        case killed(String)
    }

    /// Kills what runs in a group an earlier daemon left, and removes the
    /// group once the kernel has emptied it (as after any end).
    func clearLeftover(_ name: String) {
        guard let group = confinement.leftover(name) else { return }
        group.killAll()
        removeWhenEmpty(group)
    }

    /// What the kernel says of one recorded process: found on any thread,
    /// acted on in `adopt`.
    struct Probe {
        /// Its pidfd, when the pid still names the recorded process.
        var pidfd: Int32 = -1
        /// Its group, when the process is in it.
        var group: (any AppGroup)?
        /// The process has ended (a zombie that left its group).
        var ended = false
        /// Its group's freezer is set.
        var frozen = false
        /// Still our child (the earlier image's, across a daemon-reexec).
        var child = false
    }

    /// Opens the process by pid, then checks its start time (a pid recycled
    /// in between fails the check rather than being taken) and its group.
    /// Only kernel calls: safe on any thread.
    static func probe(_ id: AppID, _ facts: SavedRun, handed: HandedRun?, in confinement: any Confinement) -> Probe {
        var probe = Probe()
        let pidfd = handed?.pidfd ?? Processes.pidfd(facts.pid) ?? -1
        guard pidfd >= 0, facts.startTime != 0, Processes.startTime(facts.pid) == facts.startTime else {
            if handed == nil, pidfd >= 0 { Posix.close(pidfd) }
            return probe
        }
        probe.pidfd = pidfd
        // Our own child that ended during the exec is a zombie, no longer
        // in its group: taken back all the same, and reaped with its status.
        probe.child = handed.map { $0.child ?? true } ?? false
        probe.group = confinement.adoptGroup(
            app: id, generation: facts.generation, pid: facts.pid, member: !probe.child)
        if probe.group == nil { probe.ended = Posix.hasEnded(pidfd: pidfd) }
        probe.frozen = probe.group?.freezeAsked() ?? false
        return probe
    }

    /// Takes one recorded process back, if it is still the same process.
    /// `handed`: after a daemon-reexec, its descriptors, still open (and
    /// the process is still our child if it was the earlier image's).
    private func adopt(_ id: AppID, _ facts: SavedRun, handed: HandedRun?, _ probe: Probe) -> Adoption {
        let closeHanded = {
            for fd in [handed?.channel, handed?.pidfd, handed?.notify] { if let fd, fd >= 0 { Posix.close(fd) } }
        }
        let pidfd = probe.pidfd
        guard pidfd >= 0 else {
            // Gone, or the pid now names another process (left alone). What
            // is left in its group, if anything, is a leftover.
            closeHanded()
            return .gone
        }
        guard let group = probe.group else {
            // Ended (a zombie that left its group), or the same process (its
            // start time says so) outside the group this daemon can
            // supervise: an invisible orphan unless killed.
            if !probe.ended { Posix.signal(pidfd: pidfd, SIGKILL) }
            if handed == nil { Posix.close(pidfd) }
            closeHanded()
            if probe.ended { return .gone }
            return .killed("pid \(facts.pid) is alive but not in its group \(id).\(facts.generation)")
        }
        let run = Run(
            generation: facts.generation, pid: facts.pid, pidfd: pidfd, group: group, channel: handed?.channel ?? -1)
        run.adopted = !probe.child
        run.startTime = facts.startTime
        run.fingerprint = facts.fingerprint
        run.restore(
            statusLine: facts.statusLine, lastEvents: (facts.sentBefore ?? []) + (facts.lastEvent.map { [$0] } ?? []))
        if run.channel >= 0 {
            run.channelSource = try? loop.watch(fd: run.channel) { [unowned self, unowned run] _ in
                self.readChannel(id, run)
            }
        }
        if let name = facts.notifyName {
            // Kept open across a daemon-reexec, else bound again by name.
            let fd = handed.map(\.notify).flatMap { $0 >= 0 ? $0 : nil } ?? UnixSocket.notifySocket(name) ?? -1
            if fd >= 0 {
                run.notify = fd
                run.notifyName = name
                run.notifySource = try? loop.watch(fd: fd) { [unowned self, unowned run] _ in
                    self.readNotifications(id, run)
                }
            } else {
                logger.warning(
                    "\(id): cannot bind its NOTIFY_SOCKET \(name) again: \(String(cString: strerror(errno)))",
                    metadata: ["app": "\(id)"])
            }
        }
        runs.insert(run, for: id)
        // The freezer as the saved state says: a crash between a freeze (or
        // a thaw) and the save after it leaves the group the other way, and
        // a frozen app the state calls running could not resume its
        // channel, so its event watchdog would kill it.
        // (A prewarmed process is held frozen the same way.)
        let suspended = [.suspended, .prewarmed].contains(supervisor.snapshot(id)?.state)
        run.frozen = probe.frozen
        if probe.frozen != suspended {
            let (found, saved, doing) =
                suspended ? ("running", "suspended", "freezing") : ("frozen", "not suspended", "thawing")
            logger.notice(
                "\(id) was found \(found) though the saved state says \(saved): \(doing) it",
                metadata: ["app": "\(id)"])
            if suspended { freeze(id) } else { thaw(id) }
        } else if suspended {
            // Frozen as saved: a freeze deadline the state still holds (the
            // confirmation came after the last save) is over.
            report(.frozen(id, generation: run.generation))
        }
        if run.adopted {
            run.exitSource = try? loop.watch(fd: pidfd) { [unowned self, unowned run] _ in
                self.adoptedExited(id, run)
            }
        }
        // One line per app at debug level: the summary is a notice (with
        // 1,000 apps, 1,000 info lines would slow the restart and bury it).
        logger.debug(
            "\(id) re-adopted (pid \(facts.pid), \(group.name))",
            metadata: metadata(id, ["state": "\(supervisor.snapshot(id)?.state.rawValue ?? "?")"]))
        record(id, .adopted, detail: "pid \(facts.pid), \(group.name)")
        return .adopted
    }

    /// Kills what runs in a group this daemon cannot take back, and says why.
    private func notAdopted(_ id: AppID, _ groupName: String, _ pid: Int32?, _ why: String) {
        clearLeftover(groupName)
        let reason = TerminationReason.notAdopted(why: why)
        logger.warning(
            "killed \(groupName): \(reason)", metadata: ["app": "\(id)", "reason": "\(reason.code.rawValue)"])
        record(id, .killed, reason: reason.code.rawValue, detail: reason.description)
        if manifests[id] != nil {
            terminations[id] = TerminationInfo(
                reason: reason.code, description: reason.description, time: Date().timeIntervalSince1970, pid: pid)
        }
    }

    /// An adopted process ended: it is not our child, so its status comes
    /// from its pidfd (Linux 6.15+, once its new parent has reaped it) or
    /// from /proc while it is a zombie. When neither says yet (a parent
    /// in the middle of reaping it), it is asked again a few times, 10 ms
    /// apart; `tries` at `adoptedExitTries` reports it at once, its status
    /// unknown if it must be.
    func adoptedExited(_ id: AppID, _ run: Run, tries: Int = 0) {
        guard runs[id] === run else { return }
        let status: ExitStatus
        let end = Result { () throws(SystemError) in try Processes.exitStatus(pidfd: run.pidfd, pid: run.pid) }
        if case .success(let e) = end {
            status = ExitStatus(e)
        } else if case .failure(let e) = end, e.errno == .resourceTemporarilyUnavailable, tries < Self.adoptedExitTries
        {
            run.exitSource?.cancel()
            run.exitSource = try? loop.timer { [unowned self, unowned run] in
                self.adoptedExited(id, run, tries: tries + 1)
            }
            run.exitSource?.arm(at: loop.now + 10_000_000)
            return
        } else {
            status = .unknown(whileAway: false)
        }
        processEnded(pid: run.pid, status)
    }

    /// How often an adopted process's status is asked for before it is
    /// reported unknown.
    static let adoptedExitTries = 10
}
