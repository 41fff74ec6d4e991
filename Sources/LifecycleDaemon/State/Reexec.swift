#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleCore
import LifecycleOS
import Logging

// daemon-reexec: an upgrade that touches no app. The daemon saves its
// state with the descriptors it keeps open (the control and resume
// listeners, every app's channel, pidfd and notify socket), clears their
// close-on-exec flag and execs the binary now installed at its path. The
// process keeps its pid, so apps stay its children and systemd sees the
// same main process; the new image reads the state, takes the descriptors
// back and carries on. Apps see at most a delay: nothing is resumed.

extension Daemon {
    /// Called by the command front: the answer goes out first, then the
    /// timer (due at once) execs on the next turn of the loop.
    func scheduleReexec() -> String? {
        guard store != nil else { return "this daemon keeps no state to hand over" }
        guard !supervisor.shuttingDown else { return "the daemon is shutting down" }
        guard access(executablePath, X_OK) == 0 else {
            return "\(executablePath) is not an executable file: nothing to re-execute"
        }
        reexecTimer?.arm(at: loop.now)
        return nil
    }

    func reexec() {
        let decidedAt = loop.now
        var kept: [Int32] = []
        var handed: [AppID: HandedRun] = [:]
        for (id, run) in runs.byApp {
            handed[id] = HandedRun(channel: run.channel, pidfd: run.pidfd, notify: run.notify, child: !run.adopted)
            kept += [run.channel, run.pidfd, run.notify].filter { $0 >= 0 }
        }
        let control = self.control?.listener ?? -1
        let privateControl = self.control?.privateListener
        kept += [control, resume.listener, privateControl ?? -1].filter { $0 >= 0 }
        var handoff = Handoff(
            pid: getpid(), control: control, controlPath: controlPath, resume: resume.listener,
            privateControl: privateControl, runs: handed)
        handoff.decidedAt = decidedAt
        guard saveState(handoff: handoff) else {
            logger.error("daemon-reexec abandoned: the state could not be saved for the new image")
            return
        }
        for fd in kept { try? Posix.setCloseOnExec(fd, false) }
        abandonOperations("daemon-reexec")  // the new image knows none of them
        bus?.front.flushOut()  // told before the connection closes with the exec
        logger.notice(
            "re-executing \(executablePath), keeping every app",
            metadata: [
                "apps": "\(handed.count)",
                "state-saved-in-ms": "\((loop.now - decidedAt) / 1_000_000)",
            ])
        // In its own tree the daemon sits in BASE/daemon: the next image
        // needs to know where it came from. In a systemd scope it never moved.
        if let cgroups = confinement as? Cgroups, cgroups.scope == nil {
            setenv(Cgroups.originEnvironmentKey, cgroups.original, 1)
        }
        let argv = CommandLine.arguments.map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        store?.close()  // the new image takes the file
        history.close()  // and this one, with what was queued written
        LogOutput.standardError.flush(seconds: 1)  // the new image cannot write what this one queued
        execv(executablePath, argv)
        // Still here: the old image carries on, as if nothing was asked.
        let why = String(cString: strerror(errno))
        unsetenv(Cgroups.originEnvironmentKey)
        for fd in kept { try? Posix.setCloseOnExec(fd) }
        saveState()
        logger.error("cannot re-execute \(executablePath): \(why); carrying on in the running image")
    }
}

// `systemctl restart` with the apps in their systemd scope: systemd only
// ends the service's cgroup, so the apps can stay. SIGTERM alone does not
// say why it came; the job systemd is running on our unit does ("restart"
// for restart, try-restart and reload-or-restart; "stop" for stop; none for
// `systemctl kill` or a plain kill). On a restart the daemon saves its state
// and exits, and the next one takes every app back as after a crash.

extension Daemon {
    /// True when this SIGTERM is a restart that leaves the apps running
    /// (the loop then ends without stopping them).
    func leaveAppsForRestart() -> Bool {
        guard let cgroups = confinement as? Cgroups, cgroups.scope != nil, !supervisor.shuttingDown,
            let service = AppsScope.names()?.service, AppsScope.jobType(service) == "restart"
        else { return false }
        guard saveState() else {
            logger.error("systemctl restart: the state could not be saved, so every app is stopped instead")
            return false
        }
        logger.notice("systemctl restart: leaving every app running for the next daemon")
        Systemd.notify("STOPPING=1")
        leavingApps = true
        loop.exit()
        return true
    }
}
