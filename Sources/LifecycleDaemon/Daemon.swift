import Foundation
@preconcurrency import Glibc
import CLifecycleShim
import LifecycleControl
import LifecycleCore
import LifecycleOS
import LifecycleWire
import Logging

/// The daemon shell: one sd-event loop that turns kernel and socket events
/// into inputs for the pure core, and performs the effects the core returns.
/// Every decision is the core's. The shell's rooms, each an extension or a
/// type of its own with one job:
///
///   Daemon.swift            start-up, the loop's sources (one list), the submit drain
///   Effects.swift           the one switch where effects become calls
///   Settings.swift          the config and what is derived from it, one value
///   Apps/                   the run table, launching, app channels, notify
///                           sockets, each app's output, reaping, freezing
///   Memory/                 what to measure and when
///   Records/                the event history and its sinks, the kill log, STATUS=
///   State/                  the state store, and taking apps back after a restart
///   Front/                  the transport-neutral command front; the JSON control socket
public final class Daemon {
    public struct Options: Sendable {
        public var configPath: String
        /// Overrides the config's control socket.
        public var controlSocket: String?
        /// Overrides the config's cgroup root; "none" forces the fallback.
        public var cgroupRoot: String?
        public init(configPath: String, controlSocket: String? = nil, cgroupRoot: String? = nil) {
            self.configPath = configPath
            self.controlSocket = controlSocket
            self.cgroupRoot = cgroupRoot
        }
    }

    let options: Options
    /// The configuration as last read (at start, or by a reload).
    var settings: Settings
    var config: DaemonConfig { settings.config }
    /// Each app's manifest in force: the one its run was launched with,
    /// else the configured one. A reload's change to a running app waits
    /// here for its next launch; a removed app stays until it has ended.
    /// Changed through `setManifest`, which keeps `limits` with it.
    var manifests: [AppID: AppManifest]
    /// Apps whose manifest in force sets memory.limit (read at every memory sample).
    var limits: [AppID: UInt64] = [:]
    var supervisor: Supervisor
    let loop: EventLoop
    var logger: Logger
    let confinement: any Confinement
    let starter: any ProcessStarter
    var runs = RunTable()
    let records: Records
    let killLog: KillLog
    let memory: MemoryMonitor
    let status = StatusLine()
    /// Why each app's last run ended, for `status`.
    var terminations: [AppID: TerminationInfo] = [:]
    /// Inputs that arise while performing effects wait here, never nested;
    /// `found`: a fact from an app, judged before deadlines that passed
    /// while it waited (State/Outbox.swift).
    var queue: [Queued] = []
    var draining = false
    /// Reading what apps sent before deadlines are judged: what is read
    /// goes here, then to the front of the queue.
    var sweeping = false
    /// An input waiting in `queue`. `origin`: the one `submit` was called
    /// with, whose effects it returns.
    struct Queued {
        var input: Input
        var found = false
        var origin = false
        init(_ input: Input, found: Bool = false, origin: Bool = false) {
            self.input = input
            self.found = found
            self.origin = origin
        }
    }
    var sweepFound: [Input] = []
    /// What reaches outside the daemon, held until the state that caused
    /// it is saved (State/Outbox.swift).
    var outbox: [() -> Void] = []
    /// The `now` of the input being handled: records carry the time of the
    /// decision that caused them.
    var decidedAt: Instant?
    /// Retries of cgroup removal, by path.
    var cleanupTimers: [String: EventLoop.Source] = [:]
    /// Where the state is saved for the next daemon (nil in shell tests).
    var store: StateStore?
    /// What outlives a reboot: wake-up history, restoration data (State/History.swift).
    var history: HistoryStore
    /// Where app messages are received, one at a time (as large as the largest).
    var channelBuffer = [UInt8](repeating: 0, count: Wire.maxMessageSize)
    /// A step since the last save changed something worth saving; the save
    /// runs once per turn of the loop (a timer due at once), not per step.
    var unsaved = false
    var saveTimer: EventLoop.Source?
    /// A process was started: saved before the drain returns.
    var spawnedUnsaved = false
    /// True when this daemon carried on from an earlier one's state.
    var restored = false
    /// The resume socket of library apps, and connections not yet resumed.
    var resumePath: String?
    var resumeListener: Int32 = -1
    var resumeSource: EventLoop.Source?
    var resuming: [Int32: EventLoop.Source] = [:]
    /// When this image started, and how (status shows both).
    let startedAt = Date().timeIntervalSince1970
    var startKind = "fresh"
    /// The control socket file this daemon bound (removed at exit only if still it).
    var controlIdentity: [UInt64]?
    /// RLIMIT_NOFILE in force (soft raised to hard at start), for the ready line.
    var descriptorLimit: UInt64 = 0
    /// Held for the life of the process: one daemon per runtime directory.
    var instanceLock: InstanceLock?
    /// Where the start went after the confinement (milliseconds), for the `started` line.
    var startPhases: [String: Logger.MetadataValue] = [:]
    /// The binary this daemon runs, as installed (daemon-reexec runs what is there now).
    let executablePath: String = {
        let exe = (try? Posix.readLink("/proc/self/exe")) ?? ""
        return exe.hasSuffix(" (deleted)") ? String(exe.dropLast(" (deleted)".count)) : exe
    }()
    var reexecTimer: EventLoop.Source?
    /// Kept for the moment the daemon runs out of descriptors (ControlServer, Freezer).
    let reserve = DescriptorReserve()
    /// Retries kill records and the state while the disk refuses them.
    var unsavedRetry: EventLoop.Source?

    // The loop's sources, registered in `start()`.
    var coreTimer: EventLoop.Source?
    var statusTimer: EventLoop.Source?
    var memoryWatch: MemoryWatch?
    /// Pushes suspended apps' memory to swap off the loop, and the jobs it
    /// holds (Memory/Reclaim.swift).
    var reclaimer: Reclaimer?
    var reclaimSource: EventLoop.Source?
    var reclaimJobs: [UInt64: (app: AppID, generation: UInt64)] = [:]
    var lastReclaimJob: UInt64 = 0
    var triggerSource: EventLoop.Source?
    var signalSources: [EventLoop.Source] = []
    var control: ControlServer?
    var controlPath: String?
    /// The private socket beside it, as bound (removed at exit only if still it).
    var privateControl: (path: String, identity: [UInt64]?)?
    var front: CommandFront?
    /// What `status` shows of each running app's footprint: the last one
    /// measured, by a memory sample or by a sweep (MemorySampling.swift).
    var shownFootprints: [AppID: UInt64] = [:]
    var sweptAt: Int64 = 0
    var sweepTimer: EventLoop.Source?
    /// Where apps' stdout and stderr go (nil in shell tests: inherited).
    var output: AppOutput?
    /// Set when this daemon exits leaving its apps to the next one.
    var leavingApps = false

    /// Tells a new core what this machine and configuration allow: the
    /// fetch window; suspended apps' memory may go to swap (the
    /// configuration allows it and the groups have memory.reclaim); the
    /// kernel holds each app to its limit (memory.max). Both need the
    /// cgroup v2 memory controller.
    func tellCore() {
        let memoryController = confinement.standings.contains(.memory)
        supervisor.fetchWindow = config.fetchWindow
        supervisor.reclaimEnabled = config.memory.reclaim && memoryController
        supervisor.kernelEnforcesLimits = memoryController
    }

    /// Loads the configuration, takes the cgroup subtree and the control
    /// socket, and tells systemd READY=1 (in `run`) only once all of that is done.
    public convenience init(options: Options, logger: Logger) throws {
        let began = Posix.monotonicNanoseconds()
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
        let process = Int32(PRIO_PROCESS.rawValue)
        if getpriority(process, 0) > Self.niceness { setpriority(process, 0, Self.niceness) }
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
        let handled = [SIGCHLD, SIGTERM, SIGINT, SIGHUP]
        for s in handled { signal(s, SIG_DFL) }
        Posix.blockSignals(handled)
        signal(SIGPIPE, SIG_IGN)
        _ = lc_become_subreaper()
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
                settings: settings, confinement: confinement, starter: KernelSpawner(), options: options,
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
        logger.info(
            "started",
            metadata: startPhases.merging([
                "config-ms": "\(Self.ms(began, configured))", "confinement-ms": "\(Self.ms(configured, confined))",
                "state-ms": "\(Self.ms(confined, Posix.monotonicNanoseconds()))",
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

    static func ms(_ from: Int64, _ to: Int64) -> String { String(format: "%.1f", Double(to - from) / 1e6) }

    /// The shell with its parts given: the real ones from the public init, or
    /// a test's fakes. `standalone` (tests) takes no signals and no control
    /// socket, so that the shell can be driven without a kernel to answer.
    init(
        settings: Settings, confinement: any Confinement, starter: any ProcessStarter, options: Options,
        logger: Logger, standalone: Bool
    ) throws {
        self.options = options
        self.logger = logger
        self.settings = settings
        manifests = settings.manifests
        limits = settings.limits
        self.confinement = confinement
        self.starter = starter
        supervisor = Supervisor(
            displays: settings.config.displays, apps: settings.policies,
            memory: settings.config.memory.thresholds(total: MemoryMonitor.memTotal()))
        status.counts[.notRunning] = settings.manifests.count
        loop = try EventLoop()
        memory = MemoryMonitor(config: settings.config.memory, confinement: confinement, logger: logger)
        killLog = KillLog(
            directory: settings.config.stateDirectory, keep: settings.config.memory.killHistory,
            logger: logger)
        records = Records(keep: settings.config.eventHistory)
        history = HistoryStore(directory: settings.config.stateDirectory)
        tellCore()
        try start(standalone: standalone)
    }

    /// The loop's sources, all in one place: the core's timer, STATUS=,
    /// memory sampling and the PSI trigger, signals, the control socket.
    private func start(standalone: Bool) throws {
        coreTimer = try loop.timer { [unowned self] in self.submit(.tick) }
        statusTimer = try loop.timer { [unowned self] in self.status.send(self) }
        sweepTimer = try loop.timer { [unowned self] in self.sweepFootprints() }
        memoryWatch = try MemoryWatch(loop: loop) { [unowned self] in self.sampleMemory() }
        if confinement.standings.contains(.memory) {
            let reclaimer = try Reclaimer()
            self.reclaimer = reclaimer
            reclaimSource = try loop.watch(fd: reclaimer.fd) { [unowned self] _ in self.reclaimsDone() }
        }
        if let trigger = memory.trigger {
            triggerSource = try loop.watch(fd: trigger.fd, events: IOEvents.priority) { [unowned self] _ in
                self.sampleMemory(triggered: true)
            }
        }
        let front = CommandFront(target: self, permissions: Permissions(controlGroup: config.controlGroup))
        self.front = front
        guard !standalone else { return }
        signalSources.append(try loop.onSignal(SIGCHLD) { [unowned self] _ in self.reapChildren() })
        for s in [SIGTERM, SIGINT] {
            signalSources.append(
                try loop.onSignal(s) { [unowned self] info in
                    if info.ssi_signo == SIGTERM, self.leaveAppsForRestart() { return }
                    self.logger.notice("received \(Posix.signalName(Int32(info.ssi_signo))): stopping every app")
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
        let reading = Posix.monotonicNanoseconds()
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
        saveTimer = try loop.timer { [unowned self] in self.saveState() }
        reexecTimer = try loop.timer { [unowned self] in self.reexec() }
        try listenForResumes(handoff)
        let adopting = Posix.monotonicNanoseconds()
        makeNotifyDirectory()
        output = AppOutput(config: config, logger: logger)
        restoreState(loaded, handoff: handoff)
        restoreHistory()
        output?.reattach()
        sweepTimer?.arm(at: 0)  // on the loop's first turn: the start does not wait for 1,000 files
        removeStaleNotifySockets()
        startPhases["state-read-ms"] = "\(Self.ms(reading, adopting))"
        startPhases["adoption-ms"] = "\(Self.ms(adopting, Posix.monotonicNanoseconds()))"
        if restored {
            startKind = handoff != nil ? "reexec" : "restored"
            // At once: the rows of apps no longer configured go, and a
            // state.json of an earlier version is replaced.
            saveState()
        }
        if let decided = handoff?.decidedAt {
            let now = Posix.monotonicNanoseconds()
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
            try Posix.call("fcntl(F_SETFD)", "the kept control socket") { fcntl(handoff.control, F_SETFD, FD_CLOEXEC) }
            controlPath = handoff.controlPath
            controlIdentity = handoff.controlPath.flatMap(UnixSocket.identity)
            return handoff.control
        }
        if let fd = Systemd.listenFDs().first(where: UnixSocket.isListeningUnixStream) {
            try Posix.setNonBlocking(fd)
            try Posix.call("fcntl(F_SETFD)", "the activated socket") { fcntl(fd, F_SETFD, FD_CLOEXEC) }
            logger.info("control socket passed by socket activation")
            return fd
        }
        let path = options.controlSocket ?? config.controlSocket
        let dir = (path as NSString).deletingLastPathComponent
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
        if let fd = handoff?.privateControl, fcntl(fd, F_SETFD, FD_CLOEXEC) == 0 {
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

    /// Runs until SIGTERM and every app has stopped.
    public func run() throws {
        // Since exec: the process's start time (clock ticks since boot) against CLOCK_BOOTTIME.
        var boot = timespec()
        clock_gettime(CLOCK_BOOTTIME, &boot)
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let sinceExec =
            Double(boot.tv_sec) + Double(boot.tv_nsec) / 1e9 - Double(lc_process_start_time(getpid())) / ticks
        logger.info(
            "lifecycled ready",
            metadata: [
                "since-exec-ms": "\(Int(sinceExec * 1000))",
                "apps": "\(manifests.count)", "confinement": "\(confinement.summary)",
                "control-socket": "\(controlPath ?? "socket-activated")",
                "memory-accounting": "\(confinement.memoryAccounting.rawValue)",
                "psi-trigger": "\(memory.triggerDescription)", "descriptor-limit": "\(descriptorLimit)",
            ])
        if config.memory.monitor { memoryWatch?.arm(at: Posix.monotonicNanoseconds()) }
        status.send(self)
        Systemd.notify("READY=1")
        // After a restart the saved state is the truth: an app the user
        // stopped stays stopped.
        for name in manifests.keys.sorted() where !restored {
            if let mode = manifests[name]!.autostart {
                submit(mode == .foreground ? .activate(name) : .launch(name, .background))
            }
        }
        try loop.run()
        saveState()  // and what the last step held goes out (the state is removed below if nothing runs)
        if leavingApps {
            closeResumeSocket()
            control?.close()
            logger.info("lifecycled stopped; every app left running for the next daemon")
            return
        }
        store?.remove()  // every app has stopped: nothing to take back
        if let problem = history.flush() { logger.warning("\(problem)") }
        closeResumeSocket()
        control?.close()
        if let controlPath { UnixSocket.unlink(controlPath, ifStill: controlIdentity) }
        if let privateControl { UnixSocket.unlink(privateControl.path, ifStill: privateControl.identity) }
        confinement.leave()
        logger.info("lifecycled stopped")
    }

    func beginShutdown() {
        status.send(self)
        Systemd.notify("STOPPING=1")
        submit(.shutdown)
        if supervisor.allStopped { loop.exit() }
    }

    // MARK: - Feeding the core

    func now() -> Instant { Instant(nanoseconds: Posix.monotonicNanoseconds()) }

    /// Hands an input to the core and performs its effects. Inputs that
    /// arise while performing (a failed spawn) are queued, never nested.
    /// Returns the effects of this input. What the effects send out of the
    /// daemon waits for the save (State/Outbox.swift).
    @discardableResult
    func submit(_ input: Input) -> [Effect] { submit(input, found: false) }

    /// A fact an app reported (a message, its readiness, its exit): judged
    /// before any deadline that passed while it waited to be read.
    func report(_ input: Input) { submit(input, found: true) }

    @discardableResult
    private func submit(_ input: Input, found: Bool) -> [Effect] {
        if sweeping {
            sweepFound.append(input)
            return []
        }
        queue.append(Queued(input, found: found, origin: true))
        if draining { return [] }
        draining = true
        defer { draining = false }
        // This input's effects (facts read before deadlines may go first).
        var mine: [Effect] = []
        repeat {
            while !queue.isEmpty {
                let at = now()
                if !queue[0].found, let due = supervisor.nextDeadline(), due <= at {
                    // Deadlines passed since the last step: what was decided
                    // leaves first (an event that left late moves its
                    // deadline), then what the apps concerned have sent is
                    // read; both go first.
                    readBeforeDeadlines(at)
                }
                let next = queue.removeFirst()
                decidedAt = at
                let effects = supervisor.handle(next.input, now: at, beforeDeadlines: next.found)
                if next.origin { mine = effects }
                // A measurement or a tick that changed nothing visible is not
                // worth a write: the next daemon measures afresh.
                switch next.input {
                case .tick, .memory: if !effects.isEmpty { unsaved = true }
                default: unsaved = true
                }
                for e in effects { perform(e) }
            }
            decidedAt = nil
            if spawnedUnsaved {
                // A process the saved state does not name would be killed
                // by the next daemon as a leftover: saved before anything
                // else happens (what it releases may queue more).
                spawnedUnsaved = false
                saveState()
            }
        } while !queue.isEmpty
        if unsaved { saveTimer?.arm(at: Posix.monotonicNanoseconds()) }
        coreTimer?.arm(at: supervisor.nextDeadline()?.nanoseconds)
        status.changed(self)
        if supervisor.shuttingDown && supervisor.allStopped { loop.exit() }
        return mine
    }

    // MARK: - Records

    func record(
        _ id: AppID, _ kind: EventRecord.Kind, from: String? = nil, to: String? = nil,
        event: LifecycleEvent? = nil, sequence: UInt32? = nil, latency: Double? = nil,
        reason: String? = nil, detail: String? = nil, kill: KillRecord? = nil
    ) {
        guard records.wanted else { return }
        let at = decidedAt ?? now()
        records.append(
            EventRecord(
                time: Records.wallTime(at), monotonic: at.nanoseconds,
                app: id, kind: kind, pid: runs.pid(id), from: from, to: to,
                event: event, sequence: sequence, latencyMicroseconds: latency,
                reason: reason, detail: detail, kill: kill))
    }
}
