// What the core knows of one app: its policy, where it has been told it is
// (Phase), what it owes (an acknowledgement), what it holds (background
// tasks), and how it is ending (a stop, a kill, a last notice).

enum Told: Equatable, Sendable, Codable {
    /// Launch events done; not yet told it is active or in the background.
    case launched
    case inactive
    case active
    case background
}

enum Phase: Equatable, Sendable, Codable {
    case notRunning
    case launching(step: Int)
    /// A plain program started, not yet READY=1 (sd_notify readiness).
    case awaitingReady
    case running(Told)
    case suspended
    /// willTerminate sent (or SIGTERM); waiting for the exit.
    case terminating
    /// Started ahead of use (Prewarm.swift), not yet at its first event:
    /// a library app says when it is there, a plain program says READY=1.
    case prewarming
    /// Held there, frozen, told nothing: a use thaws it and it launches.
    case prewarmed

    /// Started ahead of use, not taken over by a use yet.
    var isPrewarm: Bool { self == .prewarming || self == .prewarmed }
}

enum StopCause: Sendable, Equatable, Codable {
    case user, shutdown, exitsOnSuspend

    func reason(killedAfterDeadline k: Bool) -> TerminationReason {
        switch self {
        case .user: .stoppedByUser(killedAfterDeadline: k)
        case .shutdown: .shutdown(killedAfterDeadline: k)
        case .exitsOnSuspend: .exitedOnSuspend(killedAfterDeadline: k)
        }
    }
}

struct Awaiting: Equatable, Sendable, Codable {
    var event: LifecycleEvent
    var sequence: UInt32
}

/// The events sent behind the one awaited and not yet acknowledged, oldest
/// first: at most two (a held prewarm's three launch events go together,
/// Delivery.swift), numbered on from the one awaited. Two bytes, with
/// nothing to allocate or retain: the record is copied on every step, and
/// an array here made every event's count 2 % higher (docs/performance.md,
/// "The launch events together"). Saved as the events' names.
struct Behind: Equatable, Sendable {
    static let capacity = 2
    private var first: LifecycleEvent?
    private var second: LifecycleEvent?

    init() {}

    var isEmpty: Bool { first == nil }
    var count: Int { second != nil ? 2 : first != nil ? 1 : 0 }
    var events: [LifecycleEvent] { [first, second].compactMap { $0 } }

    /// Each with its number: on from `head`'s.
    func elements(after head: Awaiting) -> [Awaiting] {
        events.enumerated().map { Awaiting(event: $1, sequence: head.sequence &+ UInt32($0) &+ 1) }
    }

    /// The caller keeps to `capacity` (`Supervisor.together`) and sends
    /// each event numbered next after the last.
    mutating func append(_ event: LifecycleEvent) {
        if first == nil {
            first = event
        } else {
            precondition(second == nil, "more than \(Self.capacity) events behind the one awaited")
            second = event
        }
    }

    /// The next to await, after `head` was answered.
    mutating func removeFirst(after head: Awaiting) -> Awaiting? {
        defer { (first, second) = (second, nil) }
        return first.map { Awaiting(event: $0, sequence: head.sequence &+ 1) }
    }
}

extension Behind: Codable {
    init(from decoder: any Decoder) throws {
        let events = try [LifecycleEvent](from: decoder)
        guard events.count <= Self.capacity else {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: decoder.codingPath,
                    debugDescription: "\(events.count) events behind the one awaited, at most \(Self.capacity)"))
        }
        self.init()
        for event in events { append(event) }
    }

    func encode(to encoder: any Encoder) throws { try events.encode(to: encoder) }
}

struct AppRecord: Sendable, Equatable, Codable {
    /// Not saved: a restored core takes each app's policy from the
    /// configuration it runs under.
    var policy: AppPolicy = AppPolicy()
    var phase: Phase = .notRunning
    var state: LifecycleState = .notRunning
    var since: Instant = .zero
    var generation: UInt64 = 0
    /// The next run's generation is above this: raised after a crash past
    /// any generation a run started after the last save may have taken
    /// (`Supervisor.generationGapAfterCrash`), so that no two runs of an
    /// app ever share a generation, or a group's name.
    var generationFloor: UInt64 = 0
    var launchMode: LaunchMode = .foreground
    var sequence: UInt32 = 0
    var awaiting: Awaiting?
    /// Events sent after `awaiting` and not yet acknowledged, in order:
    /// the launch events of a held prewarm go together (Delivery.swift).
    var queued = Behind()
    /// This run's launch events go together: a held prewarm, whose library
    /// said it was held (0x87 prewarmed), holds an event that comes while
    /// another is unacknowledged.
    var together = false
    var tasks: [TaskID: String] = [:]
    var nextTask: TaskID = 1
    var expired: Set<TaskID> = []
    /// When the background budget ends (from didEnterBackground), for
    /// every answer that names it; the `.budget` timer, armed while tasks
    /// are open, fires at this instant (an invariant holds the two equal).
    /// A plain program's background grace is the `.grace` timer alone.
    var budgetEnd: Instant?
    var stop: StopCause?
    /// Why the kernel refused the freeze in progress (the reason a kill at
    /// the freeze deadline gives).
    var freezeRefusal: String?
    var killing: TerminationReason?
    var last: TerminationRecord?
    /// didReceiveMemoryWarning is owed, once the app is idle.
    var warningPending = false
    /// When it was last active (or launched): least recently used dies first.
    var lastUsed: Instant = .zero
    /// Told willBeKilledForMemory; killed with this reason at ack or deadline.
    var lastNotice: TerminationReason?
    /// A reload changed the app's policy while it ran: in force at its
    /// next launch. Not saved, like the policy (a restored core takes
    /// today's configuration).
    var pending: AppPolicy?
    /// A reload removed the app while it ran: it is stopping, and goes when
    /// it has ended. Not saved: a restarted daemon does not configure it.
    var removing = false
    /// Ends it was not asked for, lately: a relaunch due, or failed
    /// (Restarts.swift). Saved: a restarted daemon keeps counting.
    var restarts: Restarts?
    /// `restart`: launched again into this place once the stop has ended it.
    var restartTo: LaunchMode?
    /// Fetches, pushes and URLs of this run (Wakeups.swift).
    var wakes = Wakes()
    /// What the next boot needs of its wake-ups: kept durably by the shell.
    var history = AppHistory()
    /// Why this run was launched, and what for (its launch options).
    var launchReason: LaunchReason = .user
    var launchURL: String?
    var launchPush: Push?
    /// Its scene sessions, by name (an app that does not use scenes has at
    /// most one, `main`, which says on which display it is).
    var scenes: [SceneID: SceneRecord] = [:]
    /// Sessions discarded and not yet told (didDiscardSceneSessions).
    var discarded: [SceneID] = []
    /// Its memory was pushed to swap since it was last suspended
    /// (MemoryPolicy.swift): not again until it has been thawed.
    var reclaimed = false
    /// What the shell holds it from freezing for (audio found playing, a
    /// compositor's follower lost while its window was hidden): held in
    /// the background, as a declared audio mode is. Not saved: the next
    /// daemon finds them again before it would freeze it.
    var holds: Set<Hold> = []
    /// A predicted use's prewarm is given up at this instant, unused
    /// (Prewarm.swift); nil: an `always` one, or none.
    var prewarmUntil: Instant?

    private enum CodingKeys: String, CodingKey {
        case phase, state, since, generation, generationFloor, launchMode, sequence, awaiting, queued, together, tasks
        case nextTask
        case expired, budgetEnd
        case stop, freezeRefusal, killing, last, warningPending, lastUsed, lastNotice, restarts, restartTo
        case wakes, history, launchReason, launchURL, launchPush, scenes, discarded, reclaimed, prewarmUntil
    }

    init(policy: AppPolicy = AppPolicy()) { self.policy = policy }

    /// Every key may be missing: a record saved by an earlier daemon (an
    /// upgrade with apps running) lacks what was added since.
    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        func get<T: Decodable>(_ key: CodingKeys, _ fallback: T) throws -> T {
            try c.decodeIfPresent(T.self, forKey: key) ?? fallback
        }
        phase = try get(.phase, .notRunning)
        state = try get(.state, .notRunning)
        since = try get(.since, .zero)
        generation = try get(.generation, 0)
        generationFloor = try get(.generationFloor, 0)
        launchMode = try get(.launchMode, .foreground)
        sequence = try get(.sequence, 0)
        awaiting = try c.decodeIfPresent(Awaiting.self, forKey: .awaiting)
        queued = try get(.queued, Behind())
        together = try get(.together, false)
        tasks = try get(.tasks, [:])
        nextTask = try get(.nextTask, 1)
        expired = try get(.expired, [])
        budgetEnd = try c.decodeIfPresent(Instant.self, forKey: .budgetEnd)
        stop = try c.decodeIfPresent(StopCause.self, forKey: .stop)
        freezeRefusal = try c.decodeIfPresent(String.self, forKey: .freezeRefusal)
        killing = try c.decodeIfPresent(TerminationReason.self, forKey: .killing)
        last = try c.decodeIfPresent(TerminationRecord.self, forKey: .last)
        warningPending = try get(.warningPending, false)
        lastUsed = try get(.lastUsed, .zero)
        lastNotice = try c.decodeIfPresent(TerminationReason.self, forKey: .lastNotice)
        restarts = try c.decodeIfPresent(Restarts.self, forKey: .restarts)
        restartTo = try c.decodeIfPresent(LaunchMode.self, forKey: .restartTo)
        wakes = try get(.wakes, Wakes())
        history = try get(.history, AppHistory())
        launchReason = try get(.launchReason, .user)
        launchURL = try c.decodeIfPresent(String.self, forKey: .launchURL)
        launchPush = try c.decodeIfPresent(Push.self, forKey: .launchPush)
        scenes = try get(.scenes, [:])
        discarded = try get(.discarded, [])
        reclaimed = try get(.reclaimed, false)
        prewarmUntil = try c.decodeIfPresent(Instant.self, forKey: .prewarmUntil)
    }

    /// The decoder's mirror: a field at the value the decoder falls back
    /// to is left out. The row written on every step that touches the app
    /// is then the part that says something (issue 31: the save was most of
    /// an event's cost), and it reads back the same, here and in daemons
    /// before this one, whose decoders have the same fallbacks.
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        func put<T: Encodable & Equatable>(_ value: T, _ key: CodingKeys, unless fallback: T) throws {
            if value != fallback { try c.encode(value, forKey: key) }
        }
        try put(phase, .phase, unless: .notRunning)
        try put(state, .state, unless: .notRunning)
        try put(since, .since, unless: .zero)
        try put(generation, .generation, unless: 0)
        try put(generationFloor, .generationFloor, unless: 0)
        try put(launchMode, .launchMode, unless: .foreground)
        try put(sequence, .sequence, unless: 0)
        try c.encode(ifPresent: awaiting, forKey: .awaiting)
        try put(queued, .queued, unless: Behind())
        try put(together, .together, unless: false)
        try put(tasks, .tasks, unless: [:])
        try put(nextTask, .nextTask, unless: 1)
        try put(expired, .expired, unless: [])
        try c.encode(ifPresent: budgetEnd, forKey: .budgetEnd)
        try c.encode(ifPresent: stop, forKey: .stop)
        try c.encode(ifPresent: freezeRefusal, forKey: .freezeRefusal)
        try c.encode(ifPresent: killing, forKey: .killing)
        try c.encode(ifPresent: last, forKey: .last)
        try put(warningPending, .warningPending, unless: false)
        try put(lastUsed, .lastUsed, unless: .zero)
        try c.encode(ifPresent: lastNotice, forKey: .lastNotice)
        try c.encode(ifPresent: restarts, forKey: .restarts)
        try c.encode(ifPresent: restartTo, forKey: .restartTo)
        try put(wakes, .wakes, unless: Wakes())
        try put(history, .history, unless: AppHistory())
        try put(launchReason, .launchReason, unless: .user)
        try c.encode(ifPresent: launchURL, forKey: .launchURL)
        try c.encode(ifPresent: launchPush, forKey: .launchPush)
        try put(scenes, .scenes, unless: [:])
        try put(discarded, .discarded, unless: [])
        try put(reclaimed, .reclaimed, unless: false)
        try c.encode(ifPresent: prewarmUntil, forKey: .prewarmUntil)
    }
}

// The save's own writers (LifecycleModel/JSONWriting.swift): byte for byte
// what the conformances above write. A field added to `encode(to:)` goes
// here too, in the same place; the simulation holds the two to the same
// bytes at every step of its runs.

extension Told: JSONWritable {
    func write(json w: inout JSONWriter) {
        switch self {
        case .launched: w.enumCase("launched")
        case .inactive: w.enumCase("inactive")
        case .active: w.enumCase("active")
        case .background: w.enumCase("background")
        }
    }
}

extension Phase: JSONWritable {
    func write(json w: inout JSONWriter) throws {
        switch self {
        case .notRunning: w.enumCase("notRunning")
        case .launching(let step): try w.enumCase("launching") { try $0.field("step", step) }
        case .awaitingReady: w.enumCase("awaitingReady")
        case .running(let told): try w.enumCase("running") { try $0.field("_0", told) }
        case .suspended: w.enumCase("suspended")
        case .terminating: w.enumCase("terminating")
        case .prewarming: w.enumCase("prewarming")
        case .prewarmed: w.enumCase("prewarmed")
        }
    }
}

extension Awaiting: JSONWritable {
    func write(json w: inout JSONWriter) throws {
        w.openObject()
        try w.field("event", event)
        try w.field("sequence", sequence)
        w.closeObject()
    }
}

extension AppRecord: JSONWritable {
    func write(json w: inout JSONWriter) throws {
        w.openObject()
        try w.field("phase", phase, unless: .notRunning)
        try w.field("state", state, unless: .notRunning)
        try w.field("since", since, unless: .zero)
        try w.field("generation", generation, unless: 0)
        try w.field("generationFloor", generationFloor, unless: 0)
        try w.field("launchMode", launchMode, unless: .foreground)
        try w.field("sequence", sequence, unless: 0)
        try w.field("awaiting", ifPresent: awaiting)
        if !queued.isEmpty {
            w.key("queued")
            try w.array(queued.events)
        }
        try w.field("together", together, unless: false)
        if !tasks.isEmpty { try w.field("tasks", other: tasks) }
        try w.field("nextTask", nextTask, unless: 1)
        if !expired.isEmpty { try w.field("expired", other: expired) }
        try w.field("budgetEnd", ifPresent: budgetEnd)
        try w.field("stop", otherIfPresent: stop)
        try w.field("freezeRefusal", ifPresent: freezeRefusal)
        try w.field("killing", ifPresent: killing)
        try w.field("last", ifPresent: last)
        try w.field("warningPending", warningPending, unless: false)
        try w.field("lastUsed", lastUsed, unless: .zero)
        try w.field("lastNotice", ifPresent: lastNotice)
        try w.field("restarts", otherIfPresent: restarts)
        try w.field("restartTo", ifPresent: restartTo)
        if wakes != Wakes() { try w.field("wakes", other: wakes) }
        try w.field("history", history, unless: AppHistory())
        try w.field("launchReason", launchReason, unless: .user)
        try w.field("launchURL", ifPresent: launchURL)
        try w.field("launchPush", otherIfPresent: launchPush)
        if !scenes.isEmpty {
            w.key("scenes")
            try w.object(scenes)
        }
        if !discarded.isEmpty {
            w.key("discarded")
            try w.array(discarded)
        }
        try w.field("reclaimed", reclaimed, unless: false)
        try w.field("prewarmUntil", ifPresent: prewarmUntil)
        w.closeObject()
    }
}

extension AppPolicy {
    func timeout(for event: LifecycleEvent) -> Duration {
        switch event {
        case .willFinishLaunching, .didFinishLaunching: launchTimeout
        case .didEnterBackground: backgroundTimeout
        case .willTerminate: terminateTimeout
        case .willBeKilledForMemory: memory.lastNoticeTimeout
        case .performFetch: fetch.timeout
        case .didReceiveRemoteNotification: push.timeout
        case .didBecomeActive, .willResignActive, .willEnterForeground, .didReceiveMemoryWarning, .openURL,
            .sceneWillConnect, .sceneWillEnterForeground, .sceneDidBecomeActive, .sceneWillResignActive,
            .sceneDidEnterBackground, .sceneDidDisconnect, .didDiscardSceneSessions:
            eventTimeout
        }
    }
}

/// Every app's record, by app, and which records were written since the
/// shell last saved: a save then costs the apps a step changed, not all of
/// them. Every write goes through the subscript, so none can be missed (the
/// seeded simulation restores from saves made this way and would diverge).
struct AppTable: Sendable, Sequence {
    private(set) var records: [AppID: AppRecord] = [:]
    private(set) var changed: Set<AppID> = []
    /// The apps in state active: the only ones that hold an active scene
    /// (an app with scenes is active while one of its scenes is). What the
    /// count of a display's active scenes walks, at every activate and
    /// interruption: not every configured app, nor every running one (a
    /// walk over 1,000 suspended apps, each record copied, was 850 k
    /// instructions an event). Kept here, where every change to a record
    /// passes; held to the count over the whole table after every step in
    /// debug builds (Supervisor.checkInvariants).
    private(set) var active: Set<AppID> = []
    /// The apps whose relaunch brings them back in front (restartTo
    /// foreground; only a running app has one): what a home walks.
    private(set) var restartingToFront: Set<AppID> = []

    subscript(id: AppID) -> AppRecord? {
        get { records[id] }
        set {
            changed.insert(id)
            note(id, newValue)
            records[id] = newValue
        }
        _modify {
            changed.insert(id)
            yield &records[id]
            note(id, records[id])
        }
    }

    private mutating func note(_ id: AppID, _ record: AppRecord?) {
        if record?.state == .active { active.insert(id) } else { active.remove(id) }
        if record?.restartTo == .foreground {
            restartingToFront.insert(id)
        } else if !restartingToFront.isEmpty {  // nearly always empty: no name hashed
            restartingToFront.remove(id)
        }
    }

    /// A change that is saved with the app's record (its footprint).
    mutating func markChanged(_ id: AppID) { changed.insert(id) }

    mutating func takeChanged() -> Set<AppID> {
        defer { changed = [] }
        return changed
    }

    var keys: Dictionary<AppID, AppRecord>.Keys { records.keys }
    var values: Dictionary<AppID, AppRecord>.Values { records.values }
    func makeIterator() -> Dictionary<AppID, AppRecord>.Iterator { records.makeIterator() }
}
