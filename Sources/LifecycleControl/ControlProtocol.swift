import Foundation
// The fuzzers compile this module's files together with LifecycleModel's
// into one module, where there is nothing to import.
#if canImport(LifecycleModel)
    @_exported import LifecycleModel
#endif

// The control socket's protocol: one JSON object per line, each way.
// A request names a command; the daemon answers with one response line,
// except `events` with follow=true, which answers {"ok":true} and then
// streams one {"event":{...}} line per record until the client hangs up.
// docs/protocol.md describes every field.

public struct ControlRequest: Codable, Sendable, Equatable {
    public var command: Command
    public var app: String?
    public var apps: [String]?
    public var background: Bool?
    public var follow: Bool?
    /// `pressure`: normal, warning or critical.
    public var level: String?
    /// `jetsam`: at most this many records, the most recent.
    public var limit: Int?
    /// `reload`: say what would change without applying it.
    public var dryRun: Bool?
    /// `reload`: relaunch the running apps whose manifest changed, into the
    /// state they were in.
    public var restartChanged: Bool?
    /// `signal`: a name (TERM, SIGUSR1, RTMIN+3) or a number.
    public var signal: String?
    /// `tail`: the output that follows this byte of the log file (from an earlier answer).
    public var offset: UInt64?
    /// `push`: the remote notification's JSON payload (an object, at most 4 KiB).
    public var payload: String?
    /// `open`: the URL.
    public var url: String?
    /// `activate`, `home`, `lock`, `unlock`, `interruption-*`: one display
    /// (without it: `activate` the app's own, the others every display).
    public var display: String?
    /// `activate`, `discard`: the scene.
    public var scene: String?

    public init(
        _ command: Command, app: String? = nil, apps: [String]? = nil,
        background: Bool? = nil, follow: Bool? = nil, level: String? = nil, limit: Int? = nil
    ) {
        self.command = command
        self.app = app
        self.apps = apps
        self.background = background
        self.follow = follow
        self.level = level
        self.limit = limit
    }

    public enum Command: String, Codable, Sendable, CaseIterable {
        case status, launch, activate, home, stop, kill, lock, unlock, events, jetsam, pressure
        case interruptionBegin = "interruption-begin"
        case interruptionEnd = "interruption-end"
        case daemonReexec = "daemon-reexec"
        case reload, restart, signal, avail, tail, fetch, push, open, discard
    }
}

public struct ControlResponse: Codable, Sendable {
    public var ok: Bool
    public var error: ControlError?
    public var status: StatusReport?
    public var events: [EventRecord]?
    public var event: EventRecord?
    /// `jetsam`: kill records, oldest first.
    public var kills: [KillRecord]?
    /// `reload`: what was (or, with dryRun, would be) added, removed, changed.
    public var reload: ReloadReport?
    /// `avail`: every manifest, in force or not, by name.
    public var avail: [AvailableApp]?
    /// `tail`: an app's recent output.
    public var tail: TailReport?

    public init(
        ok: Bool, error: ControlError? = nil, status: StatusReport? = nil,
        events: [EventRecord]? = nil, event: EventRecord? = nil, kills: [KillRecord]? = nil
    ) {
        self.ok = ok
        self.error = error
        self.status = status
        self.events = events
        self.event = event
        self.kills = kills
    }

    public static func failure(_ code: ControlError.Code, _ message: String) -> ControlResponse {
        ControlResponse(ok: false, error: ControlError(code: code, message: message))
    }
}

public struct ControlError: Codable, Sendable, Error, CustomStringConvertible {
    public var code: Code
    public var message: String
    /// With `refused`: the daemon's stable refusal code (screen-locked,
    /// not-running, already-running, ...), for scripts.
    public var refusal: String?
    public var description: String { message }

    public init(code: Code, message: String, refusal: String? = nil) {
        self.code = code
        self.message = message
        self.refusal = refusal
    }

    public enum Code: String, Codable, Sendable {
        case badRequest = "bad-request"
        case unknownApp = "unknown-app"
        case refused
        case permissionDenied = "permission-denied"
    }
}

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

/// One memory measurement; every field may be missing on a given machine.
public struct MemoryReading: Codable, Sendable, Equatable {
    /// The available memory (MemAvailable plus the per-CPU free pages) and
    /// MemTotal, bytes.
    public var available: UInt64?
    public var total: UInt64?
    /// Percent of time some task stalled on memory since the sample before (PSI).
    public var stallPercent: Double?
    /// The managed apps' footprint together, and the configured budget, bytes.
    public var appsTotal: UInt64?
    public var budget: UInt64?
    /// SwapTotal and SwapFree, bytes (absent: no swap).
    public var swapTotal: UInt64?
    public var swapFree: UInt64?

    public init(
        available: UInt64?, total: UInt64?, stallPercent: Double?, appsTotal: UInt64?, budget: UInt64?,
        swapTotal: UInt64? = nil, swapFree: UInt64? = nil
    ) {
        self.available = available
        self.total = total
        self.stallPercent = stallPercent
        self.appsTotal = appsTotal
        self.budget = budget
        self.swapTotal = swapTotal
        self.swapFree = swapFree
    }
}

/// Why an app was killed for memory, and what led to it: `supervisorctl
/// jetsam`, the kill log under the state directory, and `events`.
public struct KillRecord: Codable, Sendable, Equatable {
    public struct Candidate: Codable, Sendable, Equatable {
        public var app: String
        public var state: LifecycleState
        public var band: MemoryBand
        public var footprint: UInt64?
        /// The part of the footprint on the swap device.
        public var swap: UInt64?
        public init(app: String, state: LifecycleState, band: MemoryBand, footprint: UInt64?, swap: UInt64? = nil) {
            self.app = app
            self.state = state
            self.band = band
            self.footprint = footprint
            self.swap = swap
        }
    }

    /// Wall-clock time, seconds since the epoch.
    public var time: Double
    public var app: String
    public var pid: Int32?
    /// memory-pressure, per-app-limit, kernel-oom or systemd-oomd.
    public var reason: TerminationCode
    /// In memory and on swap together (for the kernel's kill at the app's
    /// limit: the run's peak).
    public var footprint: UInt64?
    /// The part of the footprint on the swap device.
    public var swap: UInt64?
    public var limit: UInt64?
    /// Who killed it when lifecycled did not: "kernel" or "systemd-oomd".
    public var killer: String?
    /// The most the run used (memory.peak), for a kill by another killer.
    public var peak: UInt64?
    /// What the kill gave back, memory and swap (lifecycled's kills, where
    /// the memory controller measures it).
    public var freed: UInt64?
    /// The app's state and band when it was chosen.
    public var state: LifecycleState
    public var band: MemoryBand
    /// The memory level, whether it was simulated, and the measurements behind it.
    public var level: MemoryLevel
    public var simulated: Bool
    public var reading: MemoryReading
    /// Every app that could have been chosen, in kill order.
    public var candidates: [Candidate]
    /// Thawed and told willBeKilledForMemory first.
    public var lastNotice: Bool

    public init(
        time: Double, app: String, pid: Int32?, reason: TerminationCode, footprint: UInt64?, limit: UInt64?,
        state: LifecycleState, band: MemoryBand, level: MemoryLevel, simulated: Bool, reading: MemoryReading,
        candidates: [Candidate], lastNotice: Bool
    ) {
        self.time = time
        self.app = app
        self.pid = pid
        self.reason = reason
        self.footprint = footprint
        self.limit = limit
        self.state = state
        self.band = band
        self.level = level
        self.simulated = simulated
        self.reading = reading
        self.candidates = candidates
        self.lastNotice = lastNotice
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
    public var interruptions: Int

    public init(name: String, slots: Int, front: [String], locked: Bool, interruptions: Int) {
        self.name = name
        self.slots = slots
        self.front = front
        self.locked = locked
        self.interruptions = interruptions
    }
}

public struct AppStatus: Codable, Sendable {
    public var name: String
    public var state: LifecycleState
    public var pid: Int32?
    /// Seconds since the app entered its state.
    public var secondsInState: Double
    public var delivery: Delivery
    public var backgroundTasks: [TaskStatus]
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

    public init(
        name: String, state: LifecycleState, pid: Int32?, secondsInState: Double, delivery: Delivery,
        backgroundTasks: [TaskStatus], backgroundTimeRemaining: Double?, awaiting: LifecycleEvent?,
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

public struct TaskStatus: Codable, Sendable {
    public var id: UInt32
    public var name: String
    public init(id: UInt32, name: String) { self.id = id; self.name = name }
}

public struct TerminationInfo: Codable, Sendable, Equatable {
    /// A stable code: exited, signaled, launch-watchdog, stopped-by-user, ...
    public var reason: TerminationCode
    public var description: String
    /// Wall-clock time, seconds since the epoch.
    public var time: Double
    public var pid: Int32?

    public init(reason: TerminationCode, description: String, time: Double, pid: Int32?) {
        self.reason = reason
        self.description = description
        self.time = time
        self.pid = pid
    }
}

/// One entry of `supervisorctl events`: a transition, a delivered event, its
/// acknowledgement, or a termination.
public struct EventRecord: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable {
        case launched, transition, delivered, acknowledged, expiring, frozen, thawed, killed, terminated
        /// A kill for memory was decided (`kill` holds the record).
        case jetsam
        /// The memory level changed (app is "*"; `to` holds the level).
        case memoryLevel = "memory-level"
        /// A plain program said something on its NOTIFY_SOCKET (`detail`: READY=1, STATUS=..., STOPPING=1).
        case notified
        /// A restarted daemon took the app's process back (`detail`: pid and group).
        case adopted
        /// A library app took its channel back after the daemon restarted.
        case resumed
        /// It ended on its own and its `restart` policy relaunches it (`detail`: when, which attempt).
        case relaunching
        /// It ended too often: down until a user launches it (`reason`, `detail`).
        case failed
        /// An operator sent it a signal (`supervisorctl signal`; `detail`: its name).
        case signal
        /// A fetch, push or URL moved on (`reason`: fetch, fetch-skipped, push,
        /// push-held, push-handed-over, answered, unanswered, open-url,
        /// url-dropped; `detail` says more; `to`: an answer's result).
        case wake
        /// Its restoration data was saved, forgotten or discarded (`detail`).
        case restoration
        /// A scene was disconnected for memory (`reason`: shed; `detail`).
        case scene
        /// A suspended app's memory was pushed to swap before any kill
        /// (`detail`: how much, in how long, and why it stopped short).
        case reclaimed
    }

    /// The `app` of records about no app in particular (memory levels).
    public static let daemonWide = "*"

    /// Wall-clock time, seconds since the epoch.
    public var time: Double
    /// CLOCK_MONOTONIC nanoseconds (for latency measurements).
    public var monotonic: Int64
    public var app: String
    public var kind: Kind
    public var pid: Int32?
    public var from: String?
    public var to: String?
    public var event: LifecycleEvent?
    public var sequence: UInt32?
    /// For `acknowledged`: how long the app took, in microseconds. For
    /// `frozen`: from the freeze decision to the kernel's confirmation.
    public var latencyMicroseconds: Double?
    public var reason: String?
    public var detail: String?
    /// For `jetsam`: the whole kill record.
    public var kill: KillRecord?

    public init(
        time: Double, monotonic: Int64, app: String, kind: Kind, pid: Int32? = nil,
        from: String? = nil, to: String? = nil, event: LifecycleEvent? = nil, sequence: UInt32? = nil,
        latencyMicroseconds: Double? = nil, reason: String? = nil, detail: String? = nil,
        kill: KillRecord? = nil
    ) {
        self.kill = kill
        self.time = time
        self.monotonic = monotonic
        self.app = app
        self.kind = kind
        self.pid = pid
        self.from = from
        self.to = to
        self.event = event
        self.sequence = sequence
        self.latencyMicroseconds = latencyMicroseconds
        self.reason = reason
        self.detail = detail
    }
}

public enum ControlDefaults {
    public static let socketPath = "/run/lifecycled/control.sock"
    public static let socketEnvironmentKey = "LIFECYCLED_SOCKET"
    /// Beside the control socket, one only the daemon's own user (root)
    /// may open (mode 0600), as systemd keeps /run/systemd/private: its
    /// connections wait in a backlog of their own, never behind another
    /// user's flood of connections to the shared one.
    public static func privatePath(for controlSocket: String) -> String { controlSocket + ".private" }
}
