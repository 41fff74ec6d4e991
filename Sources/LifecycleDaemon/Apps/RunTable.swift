import LifecycleControl
import LifecycleCore
import LifecycleOS
import LifecycleWire

/// One running process of an app, and everything the shell holds for it.
final class Run {
    let generation: UInt64
    let pid: Int32
    let pidfd: Int32
    let group: any AppGroup
    /// The daemon's end of the app channel (library apps), or -1.
    var channel: Int32
    var channelSource: EventLoop.Source?
    /// Sent events by sequence number, with when they were sent (for ack latency).
    var sent: [UInt32: (event: LifecycleEvent, at: Int64)] = [:]
    /// The freezer: when the freeze began (nil once done), whether the
    /// kernel took the write, the back-off, what the kernel confirmed, and
    /// the last refusal while it is not over (shown by status).
    var freezeStarted: Int64?
    var freezeTimer: EventLoop.Source?
    var freezeAsked = false
    var freezeDelay: Int64 = 25_000
    var frozen = false
    var freezeProblem: String?
    /// Plain programs: their NOTIFY_SOCKET, and what they last said with STATUS=.
    var notify: Int32 = -1
    var notifySource: EventLoop.Source?
    /// Changed through the table (`said`), so that the save sees it.
    fileprivate(set) var statusLine: String?
    /// Messages received in the current one-second window (flood limit).
    var windowStart: Int64 = 0
    var windowCount = 0
    /// Identifies the process with its pid (saved for the next daemon).
    var startTime: UInt64 = 0
    /// The `oom_score_adj` its processes were last given (at the spawn, or
    /// by a transition's write); nil: not known (a run taken back after a
    /// restart), so the next transition writes it.
    var oomScoreAdjust: Int32?
    /// A plain program's NOTIFY_SOCKET: its path (an abstract name if an
    /// earlier daemon launched it).
    var notifyName: String?
    /// Senders of notifications that are not the app's, by pid: when one
    /// was last logged, and how many were dropped since.
    var strangers: [Int32: (said: Int64, dropped: Int)] = [:]
    /// The last event sent, after those sent together with it (launch
    /// events to a held prewarm), each sent again when a resumed channel
    /// still owes it. Changed through the table (`sent`), so that the save
    /// sees it.
    fileprivate(set) var lastEvents: [EventMessage] = []
    /// The fingerprint of the manifest it was launched with (nil: not known,
    /// taken back from a daemon before reload existed).
    var fingerprint: UInt64?
    /// Taken back from an earlier daemon: not our child, so its end comes
    /// through its pidfd rather than SIGCHLD.
    var adopted = false
    var exitSource: EventLoop.Source?
    /// What a kill for memory gave back (memory and swap), for its record.
    var memoryFreed: UInt64?

    init(generation: UInt64, pid: Int32, pidfd: Int32, group: any AppGroup, channel: Int32) {
        self.generation = generation
        self.pid = pid
        self.pidfd = pidfd
        self.group = group
        self.channel = channel
    }

    /// Taken back from the saved state, before it joins the table.
    func restore(statusLine: String?, lastEvents: [EventMessage]) {
        self.statusLine = statusLine
        self.lastEvents = lastEvents
    }

    /// What the next daemon needs of it.
    var saved: SavedRun {
        SavedRun(
            generation: generation, pid: pid, startTime: startTime, notifyName: notifyName, statusLine: statusLine,
            lastEvent: lastEvents.last, sentBefore: lastEvents.count > 1 ? lastEvents.dropLast() : nil,
            fingerprint: fingerprint)
    }
}

/// The table of running processes: by app, by pid, and the last pid of
/// each app (records about an ended run still name it). It knows which
/// apps' saved part (`Run.saved`) changed since the save took them
/// (`takeTouched`): a run that came or went, a STATUS= or an event sent,
/// so that a save looks at those alone, not at every running app.
struct RunTable {
    private(set) var byApp: [AppID: Run] = [:]
    private var byPID: [Int32: AppID] = [:]
    private(set) var lastPID: [AppID: Int32] = [:]
    private var touched: Set<AppID> = []

    subscript(_ id: AppID) -> Run? { byApp[id] }

    mutating func insert(_ run: Run, for id: AppID) {
        byApp[id] = run
        byPID[run.pid] = id
        lastPID[id] = run.pid
        touched.insert(id)
    }

    /// The app whose main process `pid` is, taken out of the table.
    mutating func removeMain(pid: Int32) -> (AppID, Run)? {
        guard let id = byPID.removeValue(forKey: pid), let run = byApp[id], run.pid == pid else { return nil }
        byApp[id] = nil
        touched.insert(id)
        return (id, run)
    }

    /// A plain program said STATUS=.
    mutating func said(status: String, on run: Run, of id: AppID) {
        run.statusLine = status
        if byApp[id] === run { touched.insert(id) }
    }

    /// An event went to the app (sent again if a resumed channel owes it);
    /// `behind` one still unacknowledged, which stays owed with it.
    mutating func sent(_ message: EventMessage, behind: Bool, on run: Run, of id: AppID) {
        if !behind { run.lastEvents.removeAll(keepingCapacity: true) }  // no allocation per event
        run.lastEvents.append(message)
        if byApp[id] === run { touched.insert(id) }
    }

    /// The apps whose saved part changed since the last call.
    mutating func takeTouched() -> Set<AppID> {
        defer { touched = [] }
        return touched
    }

    /// The app whose current run has this pid.
    func app(pid: Int32) -> AppID? { byPID[pid].flatMap { byApp[$0]?.pid == pid ? $0 : nil } }

    /// The pid of the app's current run, else of its last one.
    func pid(_ id: AppID) -> Int32? { byApp[id]?.pid ?? lastPID[id] }

    var groups: [AppID: any AppGroup] { byApp.mapValues(\.group) }

    /// The main process of every current run.
    var mainPIDs: [Int32] { byApp.values.map(\.pid) }
}

/// Why each app's last run ended, for `status` and the next daemon; like
/// the run table, it knows which apps' entry changed since the save took
/// them.
struct Terminations {
    private(set) var byApp: [AppID: TerminationInfo]
    private var touched: Set<AppID> = []

    init(_ byApp: [AppID: TerminationInfo] = [:]) {
        self.byApp = byApp
        touched = Set(byApp.keys)
    }

    subscript(_ id: AppID) -> TerminationInfo? {
        get { byApp[id] }
        set {
            byApp[id] = newValue
            touched.insert(id)
        }
    }

    /// The apps whose entry changed since the last call.
    mutating func takeTouched() -> Set<AppID> {
        defer { touched = [] }
        return touched
    }
}
