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

/// The daemon shell: one sd-event loop that turns kernel and socket events
/// into inputs for the pure core, and performs the effects the core returns.
/// Every decision is the core's. The shell's rooms, each an extension or a
/// type of its own with one job:
///
///   Daemon.swift            the shell's state, grouped by owner; running; the submit drain
///   Startup.swift           start-up, the loop's sources (one list)
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

    // MARK: - The daemon's state, by owner

    // The configuration (Settings.swift, Config/Reload.swift).
    let options: Options
    /// The configuration as last read (at start, or by a reload).
    var settings: Settings
    var config: DaemonConfig { settings.config }
    /// Each app's manifest in force: the one its run was launched with,
    /// else the configured one. A reload's change to a running app waits
    /// here for its next launch; a removed app stays until it has ended.
    /// Changed through `setManifest`, which keeps `limits` with it.
    var manifests: [AppID: AppManifest] { didSet { sortedIDs = nil } }
    /// Their names in order, kept until they change: a `status` of every
    /// app sorted 1,000 names for each request (6 % of it, counted).
    private var sortedIDs: [AppID]?
    var appIDsInOrder: [AppID] {
        if let sortedIDs { return sortedIDs }
        let ids = manifests.keys.sorted()
        sortedIDs = ids
        return ids
    }
    /// Apps whose manifest in force sets memory.limit (read at every memory sample).
    var limits: [AppID: UInt64] = [:]

    // The core, and what feeds it (this file; State/Outbox.swift).
    var supervisor: Supervisor
    /// Inputs that arise while performing effects wait here, never nested;
    /// `found`: a fact from an app, judged before deadlines that passed
    /// while it waited (State/Outbox.swift).
    var queue: [Queued] = []
    var draining = false
    /// Reading what apps sent before deadlines are judged: what is read
    /// goes here, then to the front of the queue.
    var sweeping = false
    var sweepFound: [Input] = []
    /// What reaches outside the daemon, held until the state that caused
    /// it is saved (State/Outbox.swift).
    var outbox: [() -> Void] = []
    /// The `now` of the input being handled: records carry the time of the
    /// decision that caused them.
    var decidedAt: Instant?
    /// The core's next deadline.
    var coreTimer: EventLoop.Source?

    // The state saved for the next daemon (State/).
    /// Where the state is saved (nil in shell tests).
    var store: StateStore?
    /// What outlives a reboot: wake-up history, restoration data (State/History.swift).
    var history: HistoryStore
    /// Writes the history's queued rows `historyDelay` after the first
    /// change since the last write (State/History.swift).
    var historyTimer: EventLoop.Source?
    /// Rows a restored daemon queued from the earlier one's state (`catchUpHistory`), said once written.
    var historyCatchUp = 0
    /// A step since the last save changed something worth saving; the save
    /// runs once per turn of the loop (a timer due at once), not per step.
    var unsaved = false
    var saveTimer: EventLoop.Source?
    /// A process was started: saved before the drain returns.
    var spawnedUnsaved = false
    /// Retries kill records and the state while the disk refuses them.
    var unsavedRetry: EventLoop.Source?
    /// True when this daemon carried on from an earlier one's state.
    var restored = false
    var reexecTimer: EventLoop.Source?

    // The apps' processes and channels (Apps/).
    let confinement: any Confinement
    let starter: any ProcessStarter
    var runs = RunTable()
    /// Whether every ended child is ours to reap (we are the child
    /// subreaper) or only our apps' main processes (Apps/Reaper.swift).
    var reapsEveryChild = false
    /// Why each app's last run ended, for `status`.
    var terminations = Terminations()
    /// Every running app's saved part (`Run.saved`), brought up to date at
    /// each save for the apps whose part changed: a save costs what
    /// changed, not the number of running apps.
    var savedRuns: [AppID: SavedRun] = [:]
    /// Retries of cgroup removal, by path.
    var cleanupTimers: [String: EventLoop.Source] = [:]
    /// What every app's environment starts from (Launcher.swift): read
    /// once, at the first launch. The daemon's own environment does not
    /// change while it runs (a re-exec sets one variable for the next
    /// image only, and no launch comes between).
    lazy var baseAppEnvironment: [String: String] = appEnvironment()
    /// Where app messages are received, one at a time (as large as the largest).
    var channelBuffer = [UInt8](repeating: 0, count: Wire.maxMessageSize)
    /// The resume socket of library apps (Apps/ResumeSocket.swift).
    var resume = ResumeDoor()
    /// Where apps' stdout and stderr go (nil in shell tests: inherited).
    var output: AppOutput?
    /// Set when this daemon exits leaving its apps to the next one.
    var leavingApps = false

    // Memory (Memory/).
    let memory: MemoryMonitor
    var memoryWatch: MemoryWatch?
    var triggerSource: EventLoop.Source?
    /// Pushes suspended apps' memory to swap off the loop (Memory/Reclaim.swift).
    var reclaim = ReclaimJobs()
    /// What `status` shows of each running app's footprint (Memory/MemorySampling.swift).
    var sweep = FootprintSweep()

    // What is recorded and told (Records/).
    var logger: Logger
    let records: Records
    let killLog: KillLog
    let status = StatusLine()
    var statusTimer: EventLoop.Source?

    // The control sockets (Front/).
    var control: ControlServer?
    var front: CommandFront?
    /// The D-Bus interface, when served (Front/BusService.swift).
    var bus: BusService?
    /// A compositor's follower, once one reported (Front/Follower.swift).
    var follower: FollowerState?
    /// Apps held from freezing because they play audio, looked at again
    /// by `audioTimer` (Apps/Freezer.swift).
    var playing: Set<AppID> = []
    /// Apps held from freezing because the follower was lost while their
    /// windows were hidden (Front/Follower.swift).
    var unseen: Set<AppID> = []
    var audioTimer: EventLoop.Source?
    /// Where cgroup v2 is mounted, when apps are in cgroups (a window's
    /// process is matched to its app's group by it).
    var cgroupMount: String? { (confinement as? Cgroups)?.mount }
    /// The control socket file this daemon bound, and its identity
    /// (removed at exit only if still it).
    var controlPath: String?
    var controlIdentity: [UInt64]?
    /// The private socket beside it, as bound (removed at exit only if still it).
    var privateControl: (path: String, identity: [UInt64]?)?

    // The process itself (Startup.swift).
    let loop: EventLoop
    var signalSources: [EventLoop.Source] = []
    /// When this image started, and how (status shows both).
    let startedAt = Date().timeIntervalSince1970
    var startKind = "fresh"
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
    /// Kept for the moment the daemon runs out of descriptors (ControlServer, Freezer).
    let reserve = DescriptorReserve()

    /// Tells a new core what this machine and configuration allow: the
    /// fetch window; suspended apps' memory may go to swap (the
    /// configuration allows it and the groups have memory.reclaim); the
    /// kernel holds each app to its limit (memory.max). Both need the
    /// cgroup v2 memory controller.
    func tellCore() {
        let memoryController = confinement.standings.contains(.memory)
        supervisor.fetchWindow = config.fetchWindow
        supervisor.setPrewarmBudget(config.prewarmBudget.bytes(memTotal: MemoryMonitor.memTotal()))
        supervisor.reclaimEnabled = config.memory.reclaim && memoryController
        supervisor.kernelEnforcesLimits = memoryController
    }

    /// The shell with its parts given: the real ones from the public init, or
    /// a test's fakes. `standalone` (tests) takes no signals and no control
    /// socket, so that the shell can be driven without a kernel to answer;
    /// `loop`: a test's loop driven by hand (`EventLoop.manual()`).
    init(
        settings: Settings, confinement: any Confinement, starter: any ProcessStarter, options: Options,
        logger: Logger, standalone: Bool, loop: EventLoop? = nil
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
        self.loop = try loop ?? EventLoop()
        memory = MemoryMonitor(config: settings.config.memory, confinement: confinement, logger: logger)
        killLog = KillLog(
            directory: settings.config.stateDirectory, keep: settings.config.memory.killHistory,
            logger: logger)
        records = Records(keep: settings.config.eventHistory)
        history = HistoryStore(directory: settings.config.stateDirectory)
        tellCore()
        try start(standalone: standalone)
    }

    /// Runs until SIGTERM and every app has stopped.
    public func run() throws {
        let sinceExec = Processes.secondsSinceStart()
        logger.info(
            "lifecycled ready",
            metadata: [
                "since-exec-ms": "\(Int(sinceExec * 1000))",
                "apps": "\(manifests.count)", "confinement": "\(confinement.summary)",
                "control-socket": "\(controlPath ?? "socket-activated")",
                "memory-accounting": "\(confinement.memoryAccounting.rawValue)",
                "psi-trigger": "\(memory.triggerDescription)", "descriptor-limit": "\(descriptorLimit)",
            ])
        if config.memory.monitor { memoryWatch?.arm(at: loop.now) }
        status.send(self)
        Systemd.notify("READY=1")
        // After a restart the saved state is the truth: an app the user
        // stopped stays stopped.
        for name in appIDsInOrder where !restored {
            if let mode = manifests[name]!.autostart {
                submit(mode == .foreground ? .activate(name) : .launch(name, .background))
            }
        }
        try loop.run()
        saveState()  // and what the last step held goes out (the state is removed below if nothing runs)
        abandonOperations(leavingApps ? "restart" : "shutdown")
        // The history's queued rows, whether the apps stop or stay for the next daemon.
        if let problem = history.flush() { logger.warning("\(problem)") }
        if leavingApps {
            closeResumeSocket()
            control?.close()
            logger.info("lifecycled stopped; every app left running for the next daemon")
            return
        }
        store?.remove()  // every app has stopped: nothing to take back
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

    /// The loop's clock, as the core's instants: the one clock the shell
    /// reads (a manual loop's in the shell's tests).
    func now() -> Instant { Instant(nanoseconds: loop.now) }

    /// Wall-clock seconds of an instant of the loop's clock (records show wall time).
    func wallTime(_ at: Instant) -> Double {
        Date().timeIntervalSince1970 - Double(loop.now - at.nanoseconds) / 1e9
    }

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
        if unsaved { saveTimer?.arm(at: loop.now) }
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
                time: wallTime(at), monotonic: at.nanoseconds,
                app: id, kind: kind, pid: runs.pid(id), from: from, to: to,
                event: event, sequence: sequence, latencyMicroseconds: latency,
                reason: reason, detail: detail, kill: kill))
    }
}
