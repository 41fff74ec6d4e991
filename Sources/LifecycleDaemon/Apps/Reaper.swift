@preconcurrency import Glibc
import LifecycleCore
import LifecycleOS
import Logging

// Reaping: every ended child is collected (the daemon is a child subreaper,
// so orphaned grandchildren come here too); an app's main process is
// reported to the core with how it ended, and what it left behind is killed
// and its group removed once empty. A shell that is not the subreaper (one
// sharing its process with a test runner) reaps its apps' processes only:
// the process's other children belong to whoever spawned them.

extension Daemon {
    /// Reaps every ended child. App main processes are reported to the core;
    /// anything else (an orphaned grandchild, reparented to us as subreaper)
    /// is just reaped. Peeking first (WNOWAIT) keeps each app's exit status.
    func reapChildren() {
        guard reapsEveryChild else {
            for pid in runs.mainPIDs {
                if let end = Processes.reap(pid) { processEnded(pid: pid, ExitStatus(end)) }
            }
            return
        }
        while let (pid, end) = Processes.reapEnded() {
            processEnded(pid: pid, ExitStatus(end))
        }
    }

    /// A process ended so (reaped, or an adopted one seen through its
    /// pidfd): if it was an app's main process, clean up after it and
    /// report to the core.
    func processEnded(pid: Int32, _ exit: ExitStatus) {
        guard let (id, run) = runs.removeMain(pid: pid) else { return }
        var status = exit
        if status == .signaled(SIGKILL) || status == .unknown(whileAway: false), let oom = run.group.outOfMemory() {
            status = .outOfMemory(oom)  // the kernel's OOM killer, in its cgroup: the core says why
        }
        tearDown(id, run)
        report(.exited(id, generation: run.generation, status))
    }

    /// After the main process ended: kill whatever it left in its cgroup,
    /// close its channel, remove the cgroup once empty.
    func tearDown(_ id: AppID, _ run: Run) {
        run.channelSource?.cancel()
        run.notifySource?.cancel()
        run.exitSource?.cancel()
        if run.notify >= 0 { Posix.close(run.notify) }
        if let path = run.notifyName, path.hasPrefix("/") { Posix.unlink(path) }
        run.freezeTimer?.cancel()
        if run.channel >= 0 { Posix.close(run.channel) }
        if run.pidfd >= 0 { Posix.close(run.pidfd) }
        run.group.killAll()
        removeWhenEmpty(run.group)
    }

    func removeWhenEmpty(_ group: any AppGroup) {
        if group.remove() { return }
        let path = group.name
        var delay: Int64 = 1_000_000
        let timer = try? loop.timer { [unowned self] in
            if group.remove() || delay > 8_000_000_000 {
                if delay > 8_000_000_000 { self.logger.warning("cgroup \(path) still busy; leaving it") }
                self.cleanupTimers[path]?.cancel()
                self.cleanupTimers[path] = nil
                return
            }
            group.killAll()
            delay *= 2
            self.cleanupTimers[path]?.arm(at: loop.now + delay)
        }
        cleanupTimers[path] = timer
        timer?.arm(at: loop.now + delay)
    }
}

extension ExitStatus {
    init(_ end: ProcessEnd) {
        switch end {
        case .exited(let code): self = .exited(code)
        case .signaled(let signal): self = .signaled(signal)
        }
    }
}
