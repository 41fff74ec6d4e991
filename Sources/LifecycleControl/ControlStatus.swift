#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
// The fuzzers compile this module's files together with LifecycleModel's
// into one module, where there is nothing to import.
#if canImport(LifecycleModel)
    import LifecycleModel
#endif

// What the control protocol reports (ControlProtocol.swift carries it):
// `status` of the daemon and of every app, and the answers of `avail`,
// `tail` and `reload`. docs/protocol.md describes every field.

public struct StatusReport: Codable, Sendable {
    public var daemon: DaemonStatus
    public var apps: [AppStatus]
    public init(daemon: DaemonStatus, apps: [AppStatus]) { self.daemon = daemon; self.apps = apps }
}

public struct DaemonStatus: Codable, Sendable {
    public var pid: Int32
    public var foregroundSlots: Int
    public var foreground: [String]
    public var locked: Bool
    public var interruptions: Int
    /// "cgroup-v2 /sys/fs/cgroup/unified/lifecycled" or "process-groups (...)".
    public var confinement: String
    public var shuttingDown: Bool
    public var memory: MemoryStatus?
    /// When this daemon's image started (seconds since the epoch): changes
    /// with a restart or a daemon-reexec, which keeps the pid.
    public var started: Double?
    /// How it started: "fresh", "restored" (took over an earlier daemon's
    /// apps after a crash or restart) or "reexec".
    public var start: String?
    /// Log lines dropped because the log output did not keep up (its
    /// reader stopped reading): the daemon's loop never waits for it.
    public var logLinesDropped: Int?
    /// Kill records the disk did not take yet (kept in memory, retried),
    /// and whether the last save of the state failed (it is retried too).
    public var killRecordsUnsaved: Int?
    public var stateUnsaved: Bool?
    /// Every display, in the configuration's order (the first is the one
    /// `foregroundSlots`, `foreground`, `locked` and `interruptions` describe).
    public var displays: [DisplayStatus]?
    /// A compositor's follower reports what is shown (docs/focus.md); nil: none ever did.
    public var follower: FollowerStatus?

    public init(
        pid: Int32, foregroundSlots: Int, foreground: [String], locked: Bool,
        interruptions: Int, confinement: String, shuttingDown: Bool, memory: MemoryStatus? = nil
    ) {
        self.pid = pid
        self.foregroundSlots = foregroundSlots
        self.foreground = foreground
        self.locked = locked
        self.interruptions = interruptions
        self.confinement = confinement
        self.shuttingDown = shuttingDown
        self.memory = memory
    }
}

/// What the daemon knows of memory right now.
public struct MemoryStatus: Codable, Sendable {
    public var level: MemoryLevel
    /// The level was injected with `supervisorctl pressure`.
    public var simulated: Bool
    /// How app footprints are measured: cgroup v2, cgroup v1 or /proc PSS.
    public var accounting: String
    /// What of the cgroup controllers could not be set up, and why (the
    /// reason a fallback was taken); absent when nothing is wrong.
    public var problems: [String]?
    /// Memory pushed to swap before kills: where swap has room and the
    /// configuration allows it.
    public var reclaim: Bool?
    /// The PSI trigger in use ("some 100000 2000000"), or why there is none.
    public var trigger: String
    public var reading: MemoryReading
    /// Samples are being taken on the quiet path (in C, without running Swift),
    /// and how many it has taken since the daemon started.
    public var quiet: Bool?
    public var quietSamples: UInt64?

    public init(
        level: MemoryLevel, simulated: Bool, accounting: String, trigger: String, reading: MemoryReading,
        quiet: Bool? = nil, quietSamples: UInt64? = nil
    ) {
        self.level = level
        self.simulated = simulated
        self.accounting = accounting
        self.trigger = trigger
        self.reading = reading
        self.quiet = quiet
        self.quietSamples = quietSamples
    }
}

/// One display, in `status`.
public struct DisplayStatus: Codable, Sendable, Equatable {
    public var name: String
    public var slots: Int
    /// The scenes in its slots, least recently activated first: `app`, or
    /// `app/scene` for a scene other than main.
    public var front: [String]
    public var locked: Bool
    /// Interruptions operators began (`interruption begin`) and have not ended.
    public var interruptions: Int
    /// True while the compositor's follower says something that is not a
    /// window has the keyboard here (a launcher, an on-screen keyboard):
    /// the compositor's interruption (docs/focus.md). Absent: not so.
    public var overlay: Bool?
    /// True while the user's session is locked (the follower reads it from
    /// logind): `locked` is then true too, and `unlock` is the locker's.
    public var sessionLocked: Bool?

    public init(
        name: String, slots: Int, front: [String], locked: Bool, interruptions: Int, overlay: Bool? = nil,
        sessionLocked: Bool? = nil
    ) {
        self.sessionLocked = sessionLocked
        self.name = name
        self.slots = slots
        self.front = front
        self.locked = locked
        self.interruptions = interruptions
        self.overlay = overlay
    }

    /// Its shown apps are inactive: an operator's interruption or the compositor's.
    public var interrupted: Bool { interruptions > 0 || overlay == true }
}

public struct AppStatus: Codable, Sendable {
    public var name: String
    public var state: LifecycleState
    public var pid: Int32?
    /// Seconds since the app entered its state.
    public var secondsInState: Double
    public var delivery: Delivery
    public var backgroundTasks: [BackgroundTask]
    /// Seconds of background-task budget left, while it runs.
    public var backgroundTimeRemaining: Double?
    /// The event sent and not yet acknowledged.
    public var awaiting: LifecycleEvent?
    public var lastTermination: TerminationInfo?
    /// Memory: the last measured footprint (bytes), the priority band, the limit.
    public var footprint: UInt64?
    public var band: MemoryBand?
    public var memoryLimit: UInt64?
    /// What a plain program last said with STATUS= on its NOTIFY_SOCKET.
    public var statusLine: String?
    /// Still launching: launch events not yet acknowledged, or a plain
    /// program not yet READY=1 (supervisorctl waits for the end of it).
    public var launching: Bool?
    /// Whether the kernel confirmed its freeze (nil when it has no process):
    /// the truth, where `state` is the intent.
    public var frozen: Bool?
    /// Why the last freeze or thaw was refused, while it is being retried.
    public var freezeProblem: String?
    /// A reload changed its manifest while it ran: the new one applies at
    /// its next launch (`reload --restart-changed` relaunches it now).
    public var changePending: Bool?
    /// A reload removed its manifest: it is stopping, then goes.
    public var removing: Bool?
    /// It ended on its own and its `restart` policy relaunches it in this many seconds.
    public var relaunchIn: Double?
    /// Ends relaunched within its restart window (absent: none).
    public var recentEnds: Int?
    /// It ended too often within its window: down until a user launches it.
    public var failed: FailureInfo?
    /// Its output is being lost, and why (a full disk, a read-only log directory).
    public var outputProblem: String?
    /// Its next background fetch may come in this many seconds (fetch mode).
    public var nextFetchIn: Double?
    /// The user quit it: no fetch or push wake-ups until it is launched.
    public var quit: Bool?
    /// A push waits for it (held, or coalesced over its budget).
    public var heldPush: Bool?
    /// The wake-up it is working on: performFetch or didReceiveRemoteNotification.
    public var waking: LifecycleEvent?
    /// The size of the restoration data kept for it, bytes (absent: none).
    public var restorationBytes: Int?
    /// Its scenes (an app without scenes: `main`, once shown; absent: none).
    public var scenes: [SceneStatus]?
    /// What the compositor's follower last said of its windows: "focused"
    /// (one has the seat's focus), "shown", "hidden"; absent: no follower,
    /// or no window (docs/focus.md).
    public var window: String?
    /// What holds it from freezing, beyond tasks and modes: "audio" (a
    /// playback device open), "follower-lost" (docs/focus.md, "Holds").
    public var held: [String]?
    /// Prewarming (docs/lifecycle.md), while it does not run: "waiting for
    /// room" in the budget, "in N s" to a predicted use's prewarm, or why
    /// it is not prewarmed again ("refused: ..."); absent: nothing to say.
    public var prewarm: String?

    public init(
        name: String, state: LifecycleState, pid: Int32?, secondsInState: Double, delivery: Delivery,
        backgroundTasks: [BackgroundTask], backgroundTimeRemaining: Double?, awaiting: LifecycleEvent?,
        lastTermination: TerminationInfo?, footprint: UInt64? = nil, band: MemoryBand? = nil,
        memoryLimit: UInt64? = nil, statusLine: String? = nil
    ) {
        self.statusLine = statusLine
        self.footprint = footprint
        self.band = band
        self.memoryLimit = memoryLimit
        self.name = name
        self.state = state
        self.pid = pid
        self.secondsInState = secondsInState
        self.delivery = delivery
        self.backgroundTasks = backgroundTasks
        self.backgroundTimeRemaining = backgroundTimeRemaining
        self.awaiting = awaiting
        self.lastTermination = lastTermination
    }
}

/// One manifest as `avail` lists it: what the apps directory holds now,
/// against what is in force (what a reload would do to it).
public struct AvailableApp: Codable, Sendable, Equatable {
    public enum Config: String, Codable, Sendable {
        /// The file is what is in force.
        case ok
        /// The file changed since it was read: a reload applies it.
        case changed
        /// A new file: a reload adds the app.
        case new
        /// The file is gone: a reload removes the app.
        case gone
        /// The file cannot be read (`error` says where and why): the app,
        /// if it is in force, keeps its previous manifest.
        case broken
    }

    public var name: String
    public var file: String
    public var config: Config
    /// Whether the app is known to the daemon now (in force, or kept).
    public var inForce: Bool
    /// The manifest's `restart` and `autostart`, from the file (or what is in force when it is broken).
    public var restart: String?
    public var autostart: String?
    public var error: String?

    public init(name: String, file: String, config: Config, inForce: Bool) {
        self.name = name
        self.file = file
        self.config = config
        self.inForce = inForce
    }
}

/// An app's recent output (`tail`). Under journald the daemon holds none:
/// `journal` says so, and the client reads the journal (`journalctl -t APP`).
public struct TailReport: Codable, Sendable, Equatable {
    public var journal: Bool
    /// The log file, when output goes to files.
    public var file: String?
    /// Whole lines, each with its time, oldest first.
    public var lines: [String]
    /// Where the next `tail` with `offset` goes on from.
    public var offset: UInt64

    public init(journal: Bool, file: String? = nil, lines: [String] = [], offset: UInt64 = 0) {
        self.journal = journal
        self.file = file
        self.lines = lines
        self.offset = offset
    }
}

/// Why an app was left failed by its crash policy.
public struct FailureInfo: Codable, Sendable, Equatable {
    /// The end that made it give up.
    public var reason: String
    public var description: String
    /// Ends within the window, that one included.
    public var ends: Int
    public var windowSeconds: Double
    /// Wall-clock seconds since the epoch.
    public var time: Double

    public init(reason: String, description: String, ends: Int, windowSeconds: Double, time: Double) {
        self.reason = reason
        self.description = description
        self.ends = ends
        self.windowSeconds = windowSeconds
        self.time = time
    }
}

/// What a reload did, app by app (docs/configuration.md, "Reload").
public struct ReloadReport: Codable, Sendable, Equatable {
    public var dryRun: Bool
    public var added: [String] = []
    /// Stopped as if the user quit them, then gone.
    public var removed: [String] = []
    /// Not running: in force now; running: at their next launch.
    public var changed: [String] = []
    public var unchanged: [String] = []
    /// Manifests that could not be read: each app keeps its previous one.
    public var failed: [ReloadProblem] = []
    /// Daemon settings that changed but take effect only at the next start.
    public var needRestart: [String] = []
    /// With restartChanged: running apps stopped to be launched again.
    public var restarting: [String] = []

    public init(dryRun: Bool) { self.dryRun = dryRun }
}

public struct ReloadProblem: Codable, Sendable, Equatable {
    public var file: String
    public var line: Int?
    public var key: String?
    public var message: String
    /// The whole error as a sentence (file, line, key, message).
    public var description: String

    public init(file: String, line: Int?, key: String?, message: String, description: String) {
        self.file = file
        self.line = line
        self.key = key
        self.message = message
        self.description = description
    }
}

public struct TerminationInfo: Codable, Sendable, Equatable, JSONWritable {
    /// A stable code: exited, signaled, launch-watchdog, stopped-by-user, ...
    public var reason: TerminationCode
    public var description: String
    /// Wall-clock time, seconds since the epoch.
    public var time: Double
    public var pid: Int32?

    /// As synthesized, by hand (LifecycleModel/JSONWriting.swift): the
    /// daemon saves it with the row of every app that ended once.
    public func write(json w: inout JSONWriter) throws {
        w.openObject()
        try w.field("reason", reason)
        try w.field("description", description)
        try w.field("time", time)
        try w.field("pid", ifPresent: pid)
        w.closeObject()
    }

    public init(reason: TerminationCode, description: String, time: Double, pid: Int32?) {
        self.reason = reason
        self.description = description
        self.time = time
        self.pid = pid
    }
}
