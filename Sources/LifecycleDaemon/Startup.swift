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

// The daemon's start: the configuration read, the instance lock taken, the
// process made ready to supervise (descriptors, priority, signals, the OOM
// score), the confinement chosen, then the loop's sources registered in one
// list and the earlier daemon's state and apps taken back.

extension Daemon {
    /// Loads the configuration, takes the cgroup subtree and the control
    /// socket, and tells systemd READY=1 (in `run`) only once all of that is done.
    public convenience init(options: Options, logger: Logger) throws {
        let began = Posix.monotonicNanoseconds()
        // The spawn helper first, while this process is small: it starts
        // every app, so that no launch copies the daemon (its memory, its
        // descriptors), however many apps run (docs/architecture.md).
        let spawner = HelperSpawner { [logger] in logger.warning("\($0)") }
        // About three descriptors per running app (its pidfd, its group's
        // directory, its channel or notify socket): the soft limit (1,024
        // by default) would cap a daemon at about 330 apps. The table is
        // sized here, while this process has one thread (reading the
        // configuration starts more), for 1,300 apps without growing.
        let descriptors = Posix.raiseDescriptorLimit()
        Posix.reserveDescriptorTable(Self.descriptorsReserved)
        // Above its apps (which start at 0): a busy app, or a user flooding
        // the control socket, competes with the daemon at a disadvantage.
        // Needs CAP_SYS_NICE; without it, or under a unit's own Nice=, left as is.
        Processes.raisePriority(to: Self.niceness)
        let settings = try Settings(configPath: options.configPath)
        if Self.descriptors(forApps: settings.manifests.count) > Self.descriptorsReserved {
            Posix.reserveDescriptorTable(Self.descriptors(forApps: settings.manifests.count))  // one grace period
        }
        let configured = Posix.monotonicNanoseconds()
        // Before anything is touched: a second daemon on the same runtime
        // directory stops here, naming the one that runs.
        let lock = try InstanceLock(directory: settings.config.runtimeDirectory)
        for p in settings.problems {
            logger.error("skipping app manifest: \(p)", metadata: ["file": "\(p.file)"])
        }
        if let note = settings.implicitlyRootNote { logger.warning("\(note)") }
        // Signals come through the loop (signalfd); children are reaped by us,
        // including orphaned grandchildren (child subreaper). A disposition
        // inherited as ignored (a script's `trap '' INT`, nohup) would
        // discard the signal before signalfd sees it: back to the default.
        Processes.takeSignals([SIGCHLD, SIGTERM, SIGINT, SIGHUP])
        Processes.becomeSubreaper()
        // Protect the one process every app depends on from the kernel's OOM
        // killer (the unit's OOMScoreAdjust= does it under systemd; lowering
        // needs CAP_SYS_RESOURCE, so this may not take standalone). Apps get
        // their own value at their first transition.
        Posix.setOOMScoreAdjust(getpid(), -900)
        let confinement = Cgroups.confinement(root: options.cgroupRoot ?? settings.config.cgroupRoot)
        if let fallback = confinement as? ProcessGroups {
            logger.warning(
                """
                no usable cgroup v2 freezer (\(fallback.reason)): falling back to process groups. \
                Suspension uses SIGSTOP (an app can see it and its children can escape \
                by changing process group), and memory is read from /proc.
                """)
        }
        if let cgroups = confinement as? Cgroups {
            for n in cgroups.notes { logger.info("\(n)") }
            for w in cgroups.warnings { logger.warning("\(w)") }
            for p in cgroups.problems { logger.warning("cgroup controllers: \(p)") }
        }
        let confined = Posix.monotonicNanoseconds()
        do {
            try self.init(
                settings: settings, confinement: confinement, starter: spawner, options: options,
                logger: logger, standalone: false)
        } catch {
            // A start that fails (the control socket in use, say) leaves no
            // trace: what the confinement made goes (a group with processes
            // in it, an earlier daemon's app, cannot be removed and stays).
            confinement.leave()
            throw error
        }
        instanceLock = lock
        descriptorLimit = descriptors
        if let helper = spawner.helperPID { startPhases["spawn-helper"] = "\(helper)" }
        logger.info(
            "started",
            metadata: startPhases.merging([
                "config-ms": "\(Self.ms(began, configured))", "confinement-ms": "\(Self.ms(configured, confined))",
                "state-ms": "\(Self.ms(confined, loop.now))",
            ]) { $1 })
    }

    /// The daemon's nice value.
    static let niceness: Int32 = -5

    /// The descriptor table every daemon starts with, and what `apps` apps
    /// need: their channel or notify socket, group and pidfd, and the
    /// reading end of their output FIFO (held by the output thread).
    static let descriptorsReserved: UInt64 = 4096
    static let descriptorsPerApp = 4
    static func descriptors(forApps apps: Int) -> UInt64 { UInt64(descriptorsPerApp * apps + 256) }

    static func ms(_ from: Int64, _ to: Int64) -> String { fixed(Double(to - from) / 1e6, 1) }

    /// The loop's sources, all in one place: the core's timer, STATUS=,
    /// memory sampling and the PSI trigger, signals, the control socket.
    func start(standalone: Bool) throws {
        reapsEveryChild = Processes.isSubreaper()
        coreTimer = try loop.timer { [unowned self] in self.submit(.tick) }
        statusTimer = try loop.timer { [unowned self] in self.status.send(self) }
        audioTimer = try loop.timer { [unowned self] in self.lookAtAudio() }
        sweep.timer = try loop.timer { [unowned self] in self.sweepFootprints() }
        sweep.arrivalTimer = try loop.timer { [unowned self] in self.measureArrivals() }
        historyTimer = try loop.timer { [unowned self] in self.flushHistory() }
        memoryWatch = try MemoryWatch(loop: loop) { [unowned self] in self.sampleMemory() }
        if confinement.standings.contains(.memory) {
            let reclaimer = try Reclaimer()
            reclaim.reclaimer = reclaimer
            reclaim.source = try loop.watch(fd: reclaimer.fd) { [unowned self] _ in self.reclaimsDone() }
        }
        if let trigger = memory.trigger {
            triggerSource = try loop.watch(fd: trigger.fd, events: IOEvents.priority) { [unowned self] _ in
                self.sampleMemory(triggered: true)
            }
        }
        // The save once per turn, after every step that changed something
        // (a shell test's manual loop fires it as the daemon's would).
        saveTimer = try loop.timer { [unowned self] in self.saveState() }
        let front = CommandFront(target: self, permissions: Permissions(controlGroup: config.controlGroup))
        self.front = front
        guard !standalone else { return }
        openBus()
        signalSources.append(try loop.onSignal(SIGCHLD) { [unowned self] _ in self.reapChildren() })
        for s in [SIGTERM, SIGINT] {
            signalSources.append(
                try loop.onSignal(s) { [unowned self] _ in
                    if s == SIGTERM, self.leaveAppsForRestart() { return }
                    self.logger.notice("received \(Posix.signalName(s)): stopping every app")
                    self.beginShutdown()
                })
        }
        signalSources.append(
            try loop.onSignal(SIGHUP) { [unowned self] _ in
                self.logger.notice("SIGHUP: reloading the configuration")
                _ = self.reload(dryRun: false, restartChanged: false)
            })

        let store = StateStore(directory: config.runtimeDirectory)
        self.store = store
        let reading = loop.now
        let (loaded, problem): (SavedDaemon?, String?)
        do { (loaded, problem) = try store.load() } catch {
            throw DatabaseError(
                code: error.code,
                message:
                    "another lifecycled holds \(error.message): one daemon per runtime directory; stop that one first")
        }
        if let problem { logger.error("\(problem)") }
        // Our own earlier image's descriptors, kept open across execve.
        let handoff = loaded?.handoff.flatMap { $0.pid == getpid() ? $0 : nil }
        let listener = try controlListener(handoff)
        let control = try ControlServer(
            loop: loop, listener: listener, privateListener: privateListener(handoff, beside: listener), front: front,
            descriptorLimit: Posix.descriptorLimit(), reserve: reserve)
        control.logger = logger
        control.holding = { [unowned self] in self.holding }
        self.control = control
        records.sinks.append(control)
        reexecTimer = try loop.timer { [unowned self] in self.reexec() }
        try listenForResumes(handoff)
        let adopting = loop.now
        makeNotifyDirectory()
        output = AppOutput(config: config, logger: logger)
        restoreState(loaded, handoff: handoff)
        endLeasedInterruptions(loaded?.leases ?? [:])
        restoreHistory()
        if restored, handoff == nil { catchUpHistory() }
        output?.reattach()
        sweep.timer?.arm(at: 0)  // on the loop's first turn: the start does not wait for 1,000 files
        removeStaleNotifySockets()
        startPhases["state-read-ms"] = "\(Self.ms(reading, adopting))"
        startPhases["adoption-ms"] = "\(Self.ms(adopting, loop.now))"
        if restored {
            startKind = handoff != nil ? "reexec" : "restored"
            // At once: the rows of apps no longer configured go, and a
            // state.json of an earlier version is replaced.
            saveState()
        }
        if let decided = handoff?.decidedAt {
            let now = loop.now
            logger.notice("daemon-reexec: every app taken back \((now - decided) / 1_000_000) ms after the decision")
        }
        reapChildren()  // a child that ended during the exec

        if Systemd.watchdogInterval() != nil, loop.enableWatchdog() {
            logger.info("watchdog enabled")
        }
    }

    /// The socket-activated control socket, or one bound at the configured
    /// path, or the one our earlier image kept open across execve.
    private func controlListener(_ handoff: Handoff?) throws -> Int32 {
        if let handoff {
            try Posix.setCloseOnExec(handoff.control)
            controlPath = handoff.controlPath
            controlIdentity = handoff.controlPath.flatMap(UnixSocket.identity)
            return handoff.control
        }
        if let fd = Systemd.listenFDs().first(where: UnixSocket.isListeningUnixStream) {
            try Posix.setNonBlocking(fd)
            try Posix.setCloseOnExec(fd)
            logger.info("control socket passed by socket activation")
            return fd
        }
        let path = options.controlSocket ?? config.controlSocket
        let dir = ConfigLoader.directory(of: path)
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let fd = try UnixSocket.listen(path: path, mode: mode_t(config.controlSocketMode))
        controlPath = path
        controlIdentity = UnixSocket.identity(path)
        return fd
    }

    /// The private control socket: the earlier image's, or bound afresh
    /// beside the control socket (mode 0600). Without it the daemon still
    /// runs: root's commands share the one backlog, and the log says why.
    private func privateListener(_ handoff: Handoff?, beside listener: Int32) -> Int32? {
        guard let shared = controlPath ?? UnixSocket.boundPath(listener) else { return nil }
        let path = ControlDefaults.privatePath(for: shared)
        if let fd = handoff?.privateControl, (try? Posix.setCloseOnExec(fd)) != nil {
            privateControl = (path, UnixSocket.identity(path))
            return fd
        }
        do {
            let fd = try UnixSocket.listen(path: path, mode: 0o600)
            privateControl = (path, UnixSocket.identity(path))
            return fd
        } catch {
            logger.warning("no private control socket: \(error); root's commands share the control socket's backlog")
            return nil
        }
    }
}
