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
import Logging

// Launching: a run of an app from its manifest. The shell's only say is
// how; whether and when are the core's.

extension Daemon {
    /// A plain program's NOTIFY_SOCKET: a socket file of mode 0600 in the
    /// runtime directory's `notify/` (mode 0711), so that only processes
    /// with the daemon's uid can send to it (an abstract address, used
    /// before, let anyone flood it); within the 107 bytes a socket path
    /// holds whatever the app's name (a long one is shortened, with a hash
    /// of the whole name so that two never meet).
    func notifyPath(_ id: AppID, _ generation: UInt64) -> String {
        let full = "\(notifyDirectory)/\(id).\(generation)"
        guard full.utf8.count > 107 else { return full }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a
        for b in id.utf8 { hash = (hash ^ UInt64(b)) &* 0x100_0000_01b3 }
        let tail = "~\(String(hash, radix: 16)).\(generation)"  // names are ASCII
        return "\(notifyDirectory)/\(id.prefix(max(0, 106 - notifyDirectory.utf8.count - tail.utf8.count)))\(tail)"
    }

    var notifyDirectory: String { config.runtimeDirectory + "/notify" }

    /// Why a launch cannot have the descriptors it needs (its channel or
    /// notify socket, its group, its pidfd, its output, the spawn's own: at
    /// most 10 at once, `descriptorsPerApp` kept while it runs), or nil. Counted only near the limit:
    /// far from it, the number of running apps says enough.
    func descriptorShortage() -> String? {
        let limit = Posix.descriptorLimit()
        guard Self.descriptors(forApps: runs.byApp.count) > limit / 2 else { return nil }
        let open = UInt64((try? FileManagerLite.list("/proc/self/fd").count) ?? 0)
        guard open + 10 + 16 > limit else { return nil }  // 16 left for the daemon's own work
        return "no file descriptors left for it: \(open) of the limit of \(limit) in use "
            + "(about \(Self.descriptorsPerApp) per running app; raise LimitNOFILE=)"
    }

    /// Starts one run of the app: a fresh group, its channel or notify
    /// socket, the process placed in its group before it runs. A failure is
    /// reported to the core as `.launchFailed`, queued (never nested).
    /// `prewarm`: started ahead of use (LIFECYCLE_PREWARM=1: its library
    /// says when it is at its first event; the core then freezes it).
    func launch(_ id: AppID, _ generation: UInt64, _ mode: LaunchMode, prewarm: Bool = false) {
        let m = manifests[id]!
        let fail = { [unowned self] (message: String) in
            self.logger.error("cannot launch \(id): \(message)", metadata: ["app": "\(id)"])
            self.queue.append(Queued(.launchFailed(id, generation: generation, message: message)))
        }
        if let shortage = descriptorShortage() { return fail(shortage) }
        guard let executable = settings.executable(for: m) else {
            return fail(
                "command '\(m.command[0])' not found or not executable (searched \(settings.searchPath(for: m)))")
        }
        let group: any AppGroup
        do { group = try confinement.makeGroup(app: id, generation: generation) } catch {
            return fail("cannot create its cgroup: \(error)")
        }
        // A cleanup still retrying at this path was for another group (its
        // handle would not touch this one anyway: AppCgroup.stillItself).
        cleanupTimers.removeValue(forKey: group.name)?.cancel()
        if let limit = m.policy.memory.limit { group.setMemoryLimit(limit) }
        var env = baseAppEnvironment
        for (k, v) in m.environment { env[k] = v }
        env[Wire.appNameEnvironmentKey] = id
        if prewarm && m.policy.delivery == .library { env[Wire.prewarmEnvironmentKey] = "1" }  // a plain program: held at READY=1
        if let account = m.account {  // as systemd's User= does, unless the manifest says otherwise
            for (k, v) in ["USER": account.name, "LOGNAME": account.name, "HOME": account.home]
            where m.environment[k] == nil {
                env[k] = v
            }
        }
        var channel: (daemon: Int32, app: Int32)? = nil
        if m.policy.delivery == .library {
            do { channel = try UnixSocket.channelPair() } catch {
                _ = group.remove()
                return fail("cannot create its channel: \(error)")
            }
            env[Wire.socketEnvironmentKey] = "3"
            env[Wire.protocolEnvironmentKey] = String(Wire.version)
            if let path = resume.path { env[Wire.resumeSocketEnvironmentKey] = path }
        }
        var notify: Int32 = -1
        let notifyName = notifyPath(id, generation)
        if m.policy.delivery == .signals {
            // The sd_notify protocol, as under systemd: READY=1, STATUS=, STOPPING=1.
            // Its own user may send to it; nobody else (mode 0600).
            let owner = m.credentials.uid.map { (uid: $0, gid: m.credentials.gid ?? gid_t.max) }
            notify = UnixSocket.notifySocket(notifyName, owner: owner) ?? -1
            if notify >= 0 {
                env["NOTIFY_SOCKET"] = notifyName
            } else if m.policy.awaitsReadiness {
                _ = group.remove()
                return fail("cannot create its notification socket: \(String(cString: strerror(errno)))")
            }
        }
        let stdio = output?.prepare(id)
        // Where it stands for the kernel's OOM killer from its first
        // instruction (the child writes it before exec): the state it
        // starts in, which its first transition confirms without a write.
        var credentials = m.credentials
        let starting: LifecycleState = prewarm ? .prewarmed : mode == .background ? .background : .inactive
        credentials.oomScoreAdjust = OOMScoreAdjust.value(starting, band: m.policy.memory.band)
        let request = SpawnRequest(
            executable: executable, argv0: m.command[0], arguments: Array(m.command.dropFirst()),
            environment: env, workingDirectory: m.workingDirectory, group: group,
            inherit: (channel.map { [(source: $0.app, target: Int32(3))] } ?? []) + (stdio?.inherit ?? []),
            credentials: credentials)
        let process: SpawnedProcess
        do { process = try starter.spawn(request) } catch {
            if let stdio { output?.spawned(id, stdio, ok: false) }
            if let channel { Posix.close(channel.daemon); Posix.close(channel.app) }
            if notify >= 0 { Posix.close(notify) }
            _ = group.remove()
            return fail("\(executable): \(error)")
        }
        if let channel { Posix.close(channel.app) }
        if let stdio { output?.spawned(id, stdio, ok: true) }
        let run = Run(
            generation: generation, pid: process.pid, pidfd: process.pidfd, group: group,
            channel: channel?.daemon ?? -1)
        run.startTime = Processes.startTime(process.pid)
        run.fingerprint = m.fingerprint
        run.oomScoreAdjust = credentials.oomScoreAdjust
        run.notifyName = notify >= 0 ? notifyName : nil
        runs.insert(run, for: id)
        if run.channel >= 0 {
            run.channelSource = try? loop.watch(fd: run.channel) { [unowned self, unowned run] _ in
                self.readChannel(id, run)
            }
        }
        if notify >= 0 {
            run.notify = notify
            run.notifySource = try? loop.watch(fd: notify) { [unowned self, unowned run] _ in
                self.readNotifications(id, run)
            }
        }
        if !process.placedAtomically {
            logger.warning("\(id) was moved into its cgroup after fork (no clone3)", metadata: ["app": "\(id)"])
        }
        record(id, .launched, detail: "\(prewarm ? "prewarm" : mode.rawValue) \(executable)")
    }

    /// The daemon's environment minus what belongs to the daemon alone.
    func appEnvironment() -> [String: String] {
        var env = ProcessInfo.processInfo.environment
        for k in [
            "NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "WATCHDOG_USEC", "WATCHDOG_PID",
            "JOURNAL_STREAM", "INVOCATION_ID", Wire.socketEnvironmentKey, Wire.resumeSocketEnvironmentKey,
            ControlDefaults.socketEnvironmentKey, Cgroups.originEnvironmentKey,
        ] {
            env[k] = nil
        }
        return env
    }
}
