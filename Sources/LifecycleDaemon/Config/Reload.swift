#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleControl
import LifecycleCore
import LifecycleOS
import Logging

// A reload (supervisorctl reload, SIGHUP, systemctl reload): the daemon file
// and every manifest read again, and the difference applied app by app. The
// rules of what a change does to an app are the core's (Configuration.swift);
// here the files are read, compared and named.
//
//   a broken daemon file   nothing changes; the error names file, line and key
//   a broken manifest      that app keeps its previous manifest; the rest applies
//   a daemon setting that cannot change live (all but apps_dir,
//   control_group, fetch_window and prewarm_budget)
//                          named in `needRestart`, in force at the next start

extension Daemon {
    func reload(dryRun: Bool, restartChanged: Bool) -> Result<ReloadReport, ConfigError> {
        let began = loop.now
        if !dryRun { _ = Systemd.notify("RELOADING=1\nMONOTONIC_USEC=\(began / 1000)") }
        defer { if !dryRun { _ = Systemd.notify("READY=1") } }
        var fresh: Settings
        do { fresh = try Settings(configPath: options.configPath) } catch {
            logger.error("reload: the daemon file is broken, nothing changed: \(error)")
            return .failure(error)
        }
        var (report, next) = compare(fresh)
        report.dryRun = dryRun
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
        // Live too (before, fetch_window was read from the old file here).
        config.fetchWindow = fresh.config.fetchWindow
        config.prewarmBudget = fresh.config.prewarmBudget
        fresh.config = config
        fresh.manifests = next
        settings = fresh
        front?.permissions = Permissions(controlGroup: config.controlGroup)
        for (id, manifest) in next where runs[id] == nil && manifests[id]?.fingerprint != manifest.fingerprint {
            setManifest(manifest, for: id)
        }
        status.counts[.notRunning, default: 0] += report.added.count
        supervisor.fetchWindow = fresh.config.fetchWindow  // from the next schedule on
        // A smaller budget keeps what is prewarmed; nothing new beyond it.
        supervisor.setPrewarmBudget(fresh.config.prewarmBudget.bytes(memTotal: MemoryMonitor.memTotal()))
        _ = submit(.reconfigure(next.mapValues(\.policy)))
        for id in report.added {
            if let mode = next[id]?.autostart {
                _ = submit(mode == .foreground ? .activate(id) : .launch(id, .background))
            }
        }
        for id in report.restarting { _ = submit(.restart(id)) }  // the core relaunches it into its place
        bus?.resync = true  // objects for the apps added, none for the apps gone
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
                "ms": "\(Self.ms(began, loop.now))",
            ])
        for problem in report.failed { logger.error("reload: kept the previous manifest: \(problem.description)") }
        return .success(report)
    }

    /// What a reload to `fresh` would do, app by app, and the manifests it
    /// would put in force (a broken file's app keeps what it had).
    private func compare(_ fresh: Settings) -> (ReloadReport, [AppID: AppManifest]) {
        var report = ReloadReport(dryRun: true)
        var next = fresh.manifests
        for problem in fresh.problems {
            report.failed.append(
                ReloadProblem(
                    file: problem.file, line: problem.line, key: problem.key, message: problem.message,
                    description: problem.description))
            // The app keeps what it had: its file is not what a reload may apply.
            if let name = Self.appName(problem.file), next[name] == nil, let kept = settings.manifests[name],
                kept.file == problem.file
            {
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
        return (report, next)
    }

    static func appName(_ file: String) -> String? {
        let base = file.lastIndex(of: "/").map { String(file[file.index(after: $0)...]) } ?? file
        return base.hasSuffix(".toml") ? String(base.dropLast(5)) : nil
    }

    /// `avail`: every manifest file as a reload would read it now, against
    /// what is in force, and every app in force whose file is gone.
    func available() -> Result<[AvailableApp], ConfigError> {
        let fresh: Settings
        do { fresh = try Settings(configPath: options.configPath) } catch { return .failure(error) }
        let (report, next) = compare(fresh)
        var list: [AvailableApp] = []
        func entry(_ id: AppID, _ config: AvailableApp.Config, _ m: AppManifest?) {
            var a = AvailableApp(
                name: id, file: m?.file ?? settings.manifests[id]?.file ?? "", config: config,
                inForce: settings.manifests[id] != nil)
            a.restart = m?.policy.restart.when.rawValue
            a.autostart = m.map { $0.autostart?.rawValue ?? "no" }
            list.append(a)
        }
        for id in report.unchanged { entry(id, .ok, next[id]) }
        for id in report.changed { entry(id, .changed, next[id]) }
        for id in report.added { entry(id, .new, next[id]) }
        for id in report.removed { entry(id, .gone, settings.manifests[id]) }
        for problem in report.failed {
            let id = Self.appName(problem.file) ?? problem.file
            list.removeAll { $0.name == id }
            var a = AvailableApp(name: id, file: problem.file, config: .broken, inForce: settings.manifests[id] != nil)
            a.error = problem.description
            list.append(a)
        }
        return .success(list.sorted { $0.name < $1.name })
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
        if old.declaredDisplays != new.declaredDisplays || old.follow != new.follow { keys.append("display") }
        check("cgroup_root", \.cgroupRoot)
        check("event_history", \.eventHistory)
        check("log_level", \.logLevel)
        check("state_directory", \.stateDirectory)
        check("runtime_directory", \.runtimeDirectory)
        check("memory", \.memory)
        check("cpu", \.cpu)
        check("output", \.output)
        check("log_directory", \.logDirectory)
        check("log_max_size", \.logMaxSize)
        check("log_backups", \.logBackups)
        check("log_rate", \.logRate)
        check("dbus", \.dbus)
        check("dbus_authorization", \.dbusAuthorization)
        return keys
    }

    /// An app's run ended: the configured manifest takes over (a change a
    /// reload left pending), for the relaunch that may follow in the same step.
    func runEnded(_ id: AppID) {
        if let configured = settings.manifests[id], manifests[id]?.fingerprint != configured.fingerprint {
            setManifest(configured, for: id)
        }
    }

    /// A removed app has ended and the core forgot it.
    func forget(_ id: AppID) {
        setManifest(nil, for: id)
        terminations[id] = nil
        status.counts[.notRunning, default: 0] -= 1
    }
}
