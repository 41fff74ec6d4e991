import Foundation
import LifecycleControl
import LifecycleCore
import LifecycleOS

// A reload (supervisorctl reload, SIGHUP, systemctl reload): the daemon file
// and every manifest read again, and the difference applied app by app. The
// rules of what a change does to an app are the core's (Configuration.swift);
// here the files are read, compared and named.
//
//   a broken daemon file   nothing changes; the error names file, line and key
//   a broken manifest      that app keeps its previous manifest; the rest applies
//   a daemon setting that cannot change live (all but apps_dir and
//   control_group)         named in `needRestart`, in force at the next start

extension Daemon {
    func reload(dryRun: Bool, restartChanged: Bool) -> Result<ReloadReport, ConfigError> {
        let began = Posix.monotonicNanoseconds()
        if !dryRun { _ = Systemd.notify("RELOADING=1\nMONOTONIC_USEC=\(began / 1000)") }
        defer { if !dryRun { _ = Systemd.notify("READY=1") } }
        var fresh: Settings
        do { fresh = try Settings(configPath: options.configPath) } catch {
            logger.error("reload: the daemon file is broken, nothing changed: \(error)")
            return .failure(error)
        }
        var report = ReloadReport(dryRun: dryRun)
        var next = fresh.manifests
        for problem in fresh.problems {
            report.failed.append(
                ReloadProblem(
                    file: problem.file, line: problem.line, key: problem.key, message: problem.message,
                    description: problem.description))
            // The app keeps what it had: its file is not what a reload may apply.
            let name = String(((problem.file as NSString).lastPathComponent as NSString).deletingPathExtension)
            if next[name] == nil, let kept = settings.manifests[name], kept.file == problem.file {
                next[name] = kept
            }
        }
        let before = settings.manifests
        for id in Set(before.keys).union(next.keys).sorted() {
            switch (before[id], next[id]) {
            case (nil, .some): report.added.append(id)
            case (.some, nil): report.removed.append(id)
            case (let old?, let new?):
                if old.fingerprint != new.fingerprint { report.changed.append(id) } else { report.unchanged.append(id) }
            case (nil, nil): break
            }
        }
        report.needRestart = Self.settingsNeedingRestart(from: settings.config, to: fresh.config)
        if restartChanged {
            // Changed by this reload or an earlier one: what it runs is not what is configured.
            report.restarting = next.keys.sorted().filter { id in
                guard let launched = runs[id]?.fingerprint else { return false }
                return launched != next[id]!.fingerprint
            }
        }
        guard !dryRun else { return .success(report) }

        // Apply: the live settings, then every app in one step of the core.
        var config = settings.config
        config.appsDirectory = fresh.config.appsDirectory
        config.controlGroup = fresh.config.controlGroup
        fresh.config = config
        fresh.manifests = next
        settings = fresh
        front?.permissions = Permissions(controlGroup: config.controlGroup)
        for (id, manifest) in next where runs[id] == nil && manifests[id]?.fingerprint != manifest.fingerprint {
            setManifest(manifest, for: id)
        }
        status.counts[.notRunning, default: 0] += report.added.count
        _ = submit(.reconfigure(next.mapValues(\.policy)))
        for id in report.added {
            if let mode = next[id]?.autostart {
                _ = submit(mode == .foreground ? .activate(id) : .launch(id, .background))
            }
        }
        for id in report.restarting {
            let state = supervisor.snapshot(id)?.state
            relaunch[id] = state == .active || state == .inactive ? .foreground : .background
            _ = submit(.stop(id))
        }
        saveState()
        logger.notice(
            "reloaded \(options.configPath)",
            metadata: [
                "added": "\(report.added.joined(separator: ","))",
                "removed": "\(report.removed.joined(separator: ","))",
                "changed": "\(report.changed.joined(separator: ","))",
                "unchanged": "\(report.unchanged.count)",
                "failed": "\(report.failed.map(\.description).joined(separator: "; "))",
                "need-restart": "\(report.needRestart.joined(separator: ","))",
                "restarting": "\(report.restarting.joined(separator: ","))",
                "ms": "\(Self.ms(began, Posix.monotonicNanoseconds()))",
            ])
        for problem in report.failed { logger.error("reload: kept the previous manifest: \(problem.description)") }
        return .success(report)
    }

    /// The manifest in force for `id` (nil: the app is gone), and its limit.
    func setManifest(_ manifest: AppManifest?, for id: AppID) {
        manifests[id] = manifest
        limits[id] = manifest?.policy.memory.limit
    }

    /// The daemon file's keys whose change waits for the next start.
    static func settingsNeedingRestart(from old: DaemonConfig, to new: DaemonConfig) -> [String] {
        var keys: [String] = []
        func check<T: Equatable>(_ key: String, _ path: KeyPath<DaemonConfig, T>) {
            if old[keyPath: path] != new[keyPath: path] { keys.append(key) }
        }
        check("control_socket", \.controlSocket)
        check("control_socket_mode", \.controlSocketMode)
        check("foreground_slots", \.foregroundSlots)
        check("cgroup_root", \.cgroupRoot)
        check("event_history", \.eventHistory)
        check("log_level", \.logLevel)
        check("state_directory", \.stateDirectory)
        check("runtime_directory", \.runtimeDirectory)
        check("memory", \.memory)
        return keys
    }

    /// An app's run ended: the configured manifest takes over (a change a
    /// reload left pending), and one `reload --restart-changed` stopped is
    /// launched again into its place.
    func runEnded(_ id: AppID) {
        if let configured = settings.manifests[id], manifests[id]?.fingerprint != configured.fingerprint {
            setManifest(configured, for: id)
        }
        if let mode = relaunch.removeValue(forKey: id), settings.manifests[id] != nil {
            queue.append(mode == .foreground ? .activate(id) : .launch(id, .background))
        }
    }

    /// A removed app has ended and the core forgot it.
    func forget(_ id: AppID) {
        setManifest(nil, for: id)
        terminations[id] = nil
        relaunch[id] = nil
        status.counts[.notRunning, default: 0] -= 1
    }
}
