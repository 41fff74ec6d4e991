// The lifecycle core: the only room where rules live. Nothing here reads a
// clock, touches a process or does I/O; everything that affects an app's
// lifecycle is decided here, and the shell only performs and reports.
//
//   handle(input, now) -> [Effect]     one step; effects are performed by the shell
//   nextDeadline()                     when the shell must call handle(.tick, now)
//
// The rules, and the file each lives in:
//
//   Commands.swift       what users ask: launch, activate, home, lock, interruptions, stop, kill
//   Configuration.swift  a reload: apps appear, change (at their next launch) and go
//   Restarts.swift       the crash policy: relaunches with backoff, and giving up
//   Wakeups.swift        wake-ups: their data, delivery and answers; each kind in its own
//                        file: FetchWakeups.swift (the schedule), PushWakeups.swift, OpenURL.swift
//   Reports.swift        what the world reports: acknowledgements, tasks, readiness, exits
//   Planner.swift        each app's target, and the next step towards it
//   Delivery.swift       one event at a time, with its deadline
//   Foreground.swift     displays: slots, lock, interruptions, where a scene belongs
//   Scenes.swift         scenes: which one, their events' order, moves, discards, shedding
//   Prewarm.swift        apps started ahead of use, held at their first event, taken over by a use
//   MemoryPolicy.swift   levels with hysteresis, warnings, limits, one victim at a time
//   Timers.swift         the only code that touches deadlines, and what each one does
//   AppRecord.swift      what the core knows of one app
//   Snapshot.swift       what `status` shows
//
// How transitions are computed: each app has a *target* derived from the
// facts (is it in a foreground slot, is an interruption on top, does it hold a
// background task or a continuous mode, was it asked to stop). The planner
// compares where the app has been *told* it is with the target and sends one
// event at a time; a library app must acknowledge an event before the next is
// planned, a plain program is not asked to. Every wait has a timer, and every
// timer ends in progress or a kill.
//
// Invariants are asserted after every step (`checkInvariants`): at most one
// pressure victim, which is on its way out; never more active apps than
// slots; only live apps in front; every awaited acknowledgement has a timer.

public struct Supervisor: Sendable {
    public static let maxBackgroundTasks = 64
    /// How long the kernel may take to confirm a freeze, retries included,
    /// before the app is treated as one that missed its deadline.
    public static let freezeDeadline: Duration = .seconds(5)

    /// Everything the core knows that is not one app's, as one value: what
    /// is saved of it is this (Persistence.swift), so that a field added
    /// there cannot be left out of a save. The properties at the end of
    /// this file forward to it, in place.
    var shared: CoreState.Shared
    var apps = AppTable()
    /// The last known footprint of each running app, bytes: in memory and
    /// on swap together.
    public internal(set) var footprints: [AppID: UInt64] = [:]
    /// The part of each footprint on the swap device (absent: none).
    public internal(set) var swapped: [AppID: UInt64] = [:]
    /// Push a suspended app's memory to swap before any kill, where swap
    /// has room (the daemon file's `memory.reclaim`).
    public var reclaimEnabled = true
    /// The kernel holds each app's memory in RAM to its limit (cgroup v2
    /// `memory.max`): the daemon kills at a limit only for what swap adds.
    public var kernelEnforcesLimits = false
    /// Apps whose policy in force sets a memory limit, in name order.
    var limited: [AppID]

    /// The effects of the step in progress, and the apps it touched.
    var effects: [Effect] = []
    var touched: Set<AppID> = []
    /// Apps a restore under a changed config left out of the front: the
    /// first step plans them (a restore itself emits nothing).
    var replan: [AppID] = []
    /// Apps a restore after a crash found with a kill decided and not seen
    /// through (the daemon may have died between the save and the kill):
    /// the first step kills them again, so that a kill decided is never lost.
    var rekill: [AppID] = []
    /// Fetches due within this window of each other wake the machine once
    /// (the daemon's `fetch_window`); zero: each app on its own.
    public var fetchWindow: Duration = .seconds(300)
    /// Apps whose fetch schedule is made at the next step, when the time
    /// is known: every app of a fresh core; of a restored one, those the
    /// configuration it runs under gave or took the fetch mode.
    var unscheduled: Set<AppID> = []
    /// Memory the prewarmed processes may hold, bytes (the daemon's
    /// `prewarm_budget`); 0: nothing is prewarmed (Prewarm.swift).
    /// Set through `setPrewarmBudget` (a change plans every app again).
    public internal(set) var prewarmBudget: UInt64 = 0
    /// Apps whose prewarm is planned at the next step: every app of a
    /// fresh or restored core, and those a reload changed.
    var unplanned: Set<AppID> = []

    public init(foregroundSlots: Int = 1, apps: [AppID: AppPolicy], memory: MemoryThresholds = MemoryThresholds()) {
        self.init(displays: DisplaySpec.single(slots: foregroundSlots), apps: apps, memory: memory)
    }

    public init(displays specs: [DisplaySpec], apps: [AppID: AppPolicy], memory: MemoryThresholds = MemoryThresholds())
    {
        shared = CoreState.Shared(displays: Displays(specs), gauge: MemoryGauge(thresholds: memory))
        for (id, policy) in apps { self.apps[id] = AppRecord(policy: policy) }
        unscheduled = Set(apps.keys)
        unplanned = Set(apps.keys)
        limited = apps.filter { $0.value.memory.limit != nil }.keys.sorted()  // the policies given
    }

    // MARK: - The one entry point

    /// `beforeDeadlines`: a fact the shell found waiting, which may have
    /// arrived before deadlines that have passed since (a daemon stalled,
    /// or late to its timer): it is judged before them, since nothing says
    /// it came after, and no deadline fires in this step (the next one
    /// without the flag, a tick at the latest, fires what is then due).
    /// Otherwise a deadline that passed before the input wins.
    public mutating func handle(_ input: Input, now: Instant, beforeDeadlines: Bool = false) -> [Effect] {
        self.now = max(self.now, now)
        effects = []
        touched = []
        for id in unscheduled.sorted() where apps[id] != nil { scheduleFetch(id) }
        unscheduled = []
        if !beforeDeadlines { fireDueTimers() }
        apply(input)
        if !unplanned.isEmpty {  // a fresh or restored core, a reload
            let ids = unplanned.sorted()
            unplanned = []
            planPrewarm(ids)
        }
        for id in replan where apps[id] != nil { advance(id) }
        replan = []
        for id in rekill {
            if let reason = apps[id]?.killing, apps[id]?.phase != .notRunning { effects.append(.kill(id, reason)) }
        }
        rekill = []
        if !beforeDeadlines { fireDueTimers() }  // timers armed in the past by the input
        // A slot may have freed (an app with several scenes in front is
        // advanced once per scene: the second finds nothing to do).
        for d in displays.all {
            for ref in d.scenes where apps[ref.app]!.state != .active || apps[ref.app]!.policy.scenes {
                advance(ref.app)
            }
        }
        for id in touched.sorted() { sync(id) }  // lock, unlock, interruptions
        // Whatever the step did to an app without a process (it ended, its
        // relaunch was cancelled, a user's launch lifted a quit...) may let
        // it be prewarmed: the apps it touched are planned (Prewarm.swift).
        if prewarmBudget > 0 { planPrewarm(touched.filter { apps[$0]?.phase == .notRunning }.sorted()) }
        checkInvariants()
        return effects
    }

    /// The earliest pending deadline, if any.
    public func nextDeadline() -> Instant? { timers.next }

    /// The apps with a deadline due at `now`: what the shell reads from
    /// first, so that an answer already sent is judged before its deadline.
    public func appsWithDeadlinesDue(at now: Instant) -> [AppID] { timers.apps(dueAt: now) }

    private mutating func apply(_ input: Input) {
        switch input {
        case .tick: break
        case .launch(let id, let mode): command(id) { $0.launch(id, mode) }
        case .activate(let id): command(id) { $0.activate(id) }
        case .activateScene(let id, let scene, let display):
            command(id) { $0.activateScene(id, scene: scene, display: display) }
        case .display(let d?, let c): unlessShuttingDown { $0.displayCommand(d, c) }
        case .display(nil, let c): unlessShuttingDown { $0.everyDisplay(c) }
        case .shown(let d, let front): unlessShuttingDown { $0.shown(d, front) }
        case .discard(let id, let scene): command(id) { $0.discard(id, scene) }
        case .stop(let id): command(id) { $0.userStop(id) }
        case .kill(let id): command(id) { $0.userKill(id) }
        case .restart(let id): command(id) { $0.restart(id) }
        case .shutdown: shutdown()
        case .fetch(let id): command(id) { $0.fetchNow(id) }
        case .push(let id, let payload): command(id) { $0.push(id, payload) }
        case .openURL(let url): unlessShuttingDown { $0.openURL(url) }
        case .reconfigure(let policies): reconfigure(policies)
        case .launchFailed(let id, let gen, let message):
            if isCurrent(id, gen) { ended(id, reason: .launchFailed(message: message)) }
        case .exited(let id, let gen, let status):
            if isCurrent(id, gen) { exited(id, status) }
        case .acknowledged(let id, let gen, let seq):
            if isCurrent(id, gen) { acknowledged(id, seq) }
        case .left(let id, let gen, let seq, let at):
            if isCurrent(id, gen) { left(id, seq, at: at) }
        case .completed(let id, let gen, let seq, let result):
            if isCurrent(id, gen) { completed(id, seq, result) }
        case .beginBackgroundTask(let id, let gen, let request, let name):
            if isCurrent(id, gen) { beginTask(id, request: request, name: name) }
        case .endBackgroundTask(let id, let gen, let task):
            if isCurrent(id, gen) { endTask(id, task) }
        case .protocolViolation(let id, let gen, let message):
            if isCurrent(id, gen) { kill(id, .protocolViolation(message: message)) }
        case .ready(let id, let gen):
            if isCurrent(id, gen) { ready(id) }
        case .prewarmed(let id, let gen):
            if isCurrent(id, gen) { prewarmHeld(id) }
        case .measured(let id, let gen, let footprint):
            if isCurrent(id, gen) { prewarmMeasured(id, footprint) }
        case .frozen(let id, let gen):
            if isCurrent(id, gen) { frozen(id) }
        case .hold(let id, let gen, let hold, let on):
            if isCurrent(id, gen), apps[id]!.holds.contains(hold) != on {
                update(id) {
                    if on { $0.holds.insert(hold) } else { $0.holds.remove(hold) }
                }
                advance(id)
            }
        case .freezeRefused(let id, let gen, let why):
            if isCurrent(id, gen), apps[id]?.phase == .suspended { update(id) { $0.freezeRefusal = why } }
        case .reclaimed(let id, let gen): if reclaiming == id, apps[id]?.generation == gen { reclaimDone() }
        case .memory(let report): memory(report, simulated: nil)
        case .simulateMemoryLevel(let level, let report): memory(report, simulated: level)
        }
    }

    /// A report about the app's current run (not a late one about an earlier run).
    private func isCurrent(_ id: AppID, _ generation: UInt64) -> Bool {
        guard let app = apps[id] else { return false }
        return app.generation == generation && app.phase != .notRunning
    }

    // MARK: - Queries

    /// True when no app has a process.
    public var allStopped: Bool { apps.values.allSatisfy { $0.phase == .notRunning } }

    public var appIDs: [AppID] { apps.keys.sorted() }

    /// How many scenes may be in the foreground of the first display at once.
    public var foregroundSlots: Int { displays.all[0].slots }
    /// Apps with a scene in a foreground slot of any display, display by
    /// display, least recently activated first.
    public var foreground: [AppID] {
        var seen: Set<AppID> = []
        return displays.all.flatMap(\.apps).filter { seen.insert($0).inserted }
    }
    /// The first display's interruptions and lock.
    public var interruptions: Int { displays.all[0].interruptions }
    public var locked: Bool { displays.all[0].isLocked }

    // MARK: - Bookkeeping

    mutating func update(_ id: AppID, _ body: (inout AppRecord) -> Void) {
        body(&apps[id]!)
        sync(id)
    }

    /// Emits a `.transition` when the app's public state changed. Called
    /// after every change, so each step shows (active, inactive, background
    /// for a plain program that passes through all three in one input), and
    /// always after the spawn, delivery, freeze or thaw that caused it.
    mutating func sync(_ id: AppID) {
        touched.insert(id)
        guard var app = apps[id] else { return }
        let state = publicState(id, app)
        guard state != app.state else { return }
        effects.append(.transition(id, from: app.state, to: state))
        if app.state == .active || state == .active { app.lastUsed = now }
        if state != .suspended { app.reclaimed = false }  // thawed: its memory comes back as it is touched
        app.state = state
        app.since = now
        apps[id] = app
    }

    private func publicState(_ id: AppID, _ app: AppRecord) -> LifecycleState {
        switch app.phase {
        case .notRunning: .notRunning
        case .launching, .awaitingReady, .running(.launched): launchedInFront(id) ? .inactive : .background
        case .running(.inactive): .inactive
        case .running(.active): .active
        case .running(.background), .terminating: .background
        case .suspended: .suspended
        case .prewarming, .prewarmed: .prewarmed
        }
    }

    // MARK: - Invariants

    /// Checked after every step in debug builds and tests (the simulation
    /// runs thousands of random steps through them). Release builds skip
    /// them for now: until the daemon can re-adopt its apps after a crash,
    /// a trap would end every app (docs/architecture.md).
    private func checkInvariants() {
        assert(
            displays.all.allSatisfy { activeScenes(on: $0.name) <= $0.slots },
            "never more active scenes on a display than its slots")
        assert(
            displays.all.allSatisfy { activeScenes(on: $0.name) == activeScenesOfEveryApp(on: $0.name) },
            "the active apps hold every active scene")
        assert(
            apps.active == Set(apps.records.keys.filter { apps.records[$0]!.state == .active })
                && apps.restartingToFront
                    == Set(apps.records.keys.filter { apps.records[$0]!.restartTo == .foreground }),
            "the table's indexes hold what its records say")
        assert(
            displays.all.allSatisfy { $0.followed || $0.scenes.count <= $0.slots },
            "never more scenes in front than slots, unless a compositor shows them (Follow.swift)")
        assert(
            displays.all.allSatisfy { d in
                d.scenes.allSatisfy { ref in
                    apps[ref.app].map {
                        $0.phase != .notRunning && $0.stop == nil && $0.scenes[ref.scene]?.display == d.name
                    }
                        == true
                }
            }, "only scenes of running apps that are not stopping hold a slot, on their own display")
        assert(
            apps.values.allSatisfy { app in
                let level =
                    app.state == .suspended || app.state == .notRunning
                    ? (app.state == .suspended ? 0 : -1)
                    : app.state == .active ? 2 : app.state == .inactive ? 1 : 0
                return app.scenes.values.allSatisfy { $0.told.level <= level }
                    && (app.phase != .notRunning || app.scenes.values.allSatisfy { $0.told == .unattached })
            }, "an app is never less active than any of its scenes, and has none connected when not running")
        assert(
            pressureVictim.map { v in apps[v].map { $0.killing != nil || $0.lastNotice != nil } == true } ?? true,
            "the one pressure victim is on its way out")
        assert(
            reclaiming.map { apps[$0].map { $0.phase != .notRunning } == true } ?? true,
            "the app being reclaimed runs (it may have been thawed since: the shell stops short)")
        assert(
            apps.allSatisfy { id, app in
                guard let awaiting = app.awaiting else { return true }
                return timers.deadline(id, TimerKind(awaiting: awaiting.event)) != nil
            }, "every awaited acknowledgement has a deadline")
        assert(
            apps.values.allSatisfy { $0.phase != .notRunning || ($0.awaiting == nil && $0.tasks.isEmpty) },
            "an app with no process awaits nothing and holds no task")
        assert(
            apps.values.allSatisfy { app in
                app.queued.isEmpty
                    || (app.awaiting.map { $0.sequence + UInt32(app.queued.count) <= app.sequence } == true)
            }, "events are behind only one awaited, numbered on from it (a crash's gap may follow them)")
        assert(
            apps.values.allSatisfy { $0.phase != .notRunning || $0.restartTo == nil },
            "only a running app has a restart under way (home looks for one among the running apps)")
        assert(
            apps.allSatisfy { id, app in
                timers.deadline(id, .budget).map { $0 == app.budgetEnd } ?? true
                    && timers.deadline(id, .expiration).map { end in app.budgetEnd.map { end <= $0 } ?? false } ?? true
            }, "the budget's timers fire at the budget's end (the expiration notice before it), never without one")
        assert(
            apps.allSatisfy { id, app in
                timers.deadline(id, .freeze) == nil || app.phase == .suspended || app.phase == .prewarmed
            }, "a freeze is awaited only for a suspended (or prewarmed) app")
        assert(
            apps.values.allSatisfy { app in
                !app.phase.isPrewarm
                    || (app.awaiting == nil && app.tasks.isEmpty && app.launchReason == .prewarm
                        && app.scenes.values.allSatisfy { $0.told == .unattached })
            }, "a prewarmed app has been told nothing, holds nothing, and is nobody's launch")
        assert(
            apps.allSatisfy { id, app in
                timers.deadline(id, .grace) == nil || (app.policy.delivery == .signals && app.phase != .notRunning)
            }, "only a running plain program has a background grace")
        assert(
            apps.allSatisfy { id, app in
                (timers.deadline(id, .restart) != nil) == (app.restarts?.due != nil)
                    && (app.restarts?.due == nil || app.phase == .notRunning)
            }, "a relaunch is due exactly when its timer runs, and only for an app with no process")
        assert(
            apps.allSatisfy { id, app in
                timers.deadline(id, .fetch) == app.history.window?.latest
                    && (app.history.window == nil || (app.policy.declares(.fetch) && !app.history.quit))
            }, "a fetch is scheduled exactly when its timer runs at the window's end, never after a quit")
        assert(
            apps.values.allSatisfy { app in
                (app.awaiting?.event.isWake != true || app.wakes.inFlight != nil)
                    && (app.wakes.inFlight == nil || app.awaiting?.event.isWake == true || app.killing != nil)
                    && (app.phase != .notRunning || app.wakes == Wakes())
            }, "a wake-up is in flight exactly while its answer is awaited (or the app is being killed), only in a run")
        assert(
            apps.values.allSatisfy { app in
                app.history.pushWakes.filter { now - $0 < Self.hour }.count <= max(app.policy.push.budget, 0)
            }, "no more push wake-ups within an hour than the budget")
    }
}

// The shared state's fields, each read and changed in place (`_modify`: the
// timers or the displays changed through a plain setter would be copied
// whole at every change).
extension Supervisor {
    /// The time of the step in progress (the latest seen: it never goes back).
    public internal(set) var now: Instant {
        get { shared.now }
        _modify { yield &shared.now }
    }
    /// Every display's foreground.
    public internal(set) var displays: Displays {
        get { shared.displays }
        _modify { yield &shared.displays }
    }
    public internal(set) var shuttingDown: Bool {
        get { shared.shuttingDown }
        _modify { yield &shared.shuttingDown }
    }
    var timers: TimerTable {
        get { shared.timers }
        _modify { yield &shared.timers }
    }
    /// Turns measurements into the measured level, with hysteresis.
    public internal(set) var gauge: MemoryGauge {
        get { shared.gauge }
        _modify { yield &shared.gauge }
    }
    /// The level in force (measured, or injected), and whether it was injected.
    public internal(set) var memoryLevel: MemoryLevel {
        get { shared.memoryLevel }
        _modify { yield &shared.memoryLevel }
    }
    public internal(set) var memorySimulated: Bool {
        get { shared.memorySimulated }
        _modify { yield &shared.memorySimulated }
    }
    /// The suspended app whose memory is being pushed to swap: one at a time,
    /// the next decided on fresh measurements.
    public internal(set) var reclaiming: AppID? {
        get { shared.reclaiming }
        _modify { yield &shared.reclaiming }
    }
    /// The app killed for pressure whose end is awaited before the next
    /// decision: one kill at a time, each on fresh measurements.
    public internal(set) var pressureVictim: AppID? {
        get { shared.pressureVictim }
        _modify { yield &shared.pressureVictim }
    }
    /// Apps waiting for room in the prewarm budget (Prewarm.swift).
    var prewarmWaiting: Set<AppID>? {
        get { shared.prewarmWaiting }
        _modify { yield &shared.prewarmWaiting }
    }
    /// The last measurement (kill records made between samples cite it).
    var lastSample: MemorySample {
        get { shared.lastSample }
        _modify { yield &shared.lastSample }
    }
}
