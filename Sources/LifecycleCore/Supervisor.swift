// The lifecycle core. Everything that decides what happens to an app lives
// here, and nothing here reads a clock, touches a process or does I/O:
//
//   handle(input, now) -> [Effect]     one step; effects are performed by the shell
//   nextDeadline()                     when the shell must call handle(.tick, now)
//
// How transitions are computed: each app has a *target* derived from the
// facts (is it in a foreground slot, is an interruption on top, does it hold a
// background task or a continuous mode, was it asked to stop). The planner
// (`advance`) compares where the app has been *told* it is with the target and
// sends one event at a time; a library app must acknowledge an event before
// the next is planned, a plain program is not asked to. Every wait has a timer
// in one table, and every timer ends in progress or a kill.

public struct Supervisor: Sendable {
    public static let maxBackgroundTasks = 64

    /// How many apps may be in the foreground at once.
    public let foregroundSlots: Int
    public private(set) var now: Instant = .zero

    var apps: [AppID: AppRecord] = [:]
    /// Apps holding a foreground slot, least recently activated first.
    public private(set) var foreground: [AppID] = []
    public private(set) var interruptions = 0
    public private(set) var locked = false
    public private(set) var shuttingDown = false
    var timers: [TimerKey: Instant] = [:]

    /// The level of the last memory sample, and whether it was simulated.
    public private(set) var memoryLevel: MemoryLevel = .normal
    public private(set) var memorySimulated = false
    /// The last known footprint of each running app, bytes.
    public private(set) var footprints: [AppID: UInt64] = [:]
    /// The app killed for pressure whose end is awaited before the next
    /// decision: one kill at a time, each on fresh measurements.
    public private(set) var pressureVictim: AppID?
    /// The last measurement (kill records made between samples cite it).
    var lastSample = MemorySample(level: .normal)

    private var effects: [Effect] = []
    private var touched: Set<AppID> = []

    public init(foregroundSlots: Int = 1, apps: [AppID: AppPolicy]) {
        precondition(foregroundSlots >= 1, "at least one foreground slot")
        self.foregroundSlots = foregroundSlots
        for (id, policy) in apps { self.apps[id] = AppRecord(policy: policy) }
    }

    // MARK: - The one entry point

    public mutating func handle(_ input: Input, now: Instant) -> [Effect] {
        self.now = max(self.now, now)
        effects = []
        touched = []
        fireDueTimers()      // a deadline that passed before the input wins
        apply(input)
        fireDueTimers()      // timers armed in the past by the input
        for id in foreground where apps[id]!.state != .active { advance(id) }  // a slot may have freed
        for id in touched.sorted() { sync(id) }   // lock, unlock, interruptions
        return effects
    }

    /// The earliest pending deadline, if any.
    public func nextDeadline() -> Instant? { timers.values.min() }

    /// True when no app has a process.
    public var allStopped: Bool { apps.values.allSatisfy { $0.phase == .notRunning } }

    public var appIDs: [AppID] { apps.keys.sorted() }

    public func snapshot(_ id: AppID) -> AppSnapshot? {
        guard let app = apps[id] else { return nil }
        return AppSnapshot(
            id: id, state: app.state, since: app.since, generation: app.generation,
            tasks: app.tasks.sorted { $0.key < $1.key }.map { BackgroundTask(id: $0.key, name: $0.value) },
            budgetEnd: app.phase == .running(.background) ? app.budgetEnd : nil,
            awaiting: app.awaiting?.event, stopping: app.stop != nil || app.killing != nil || app.lastNotice != nil,
            last: app.last, footprint: footprints[id], band: app.policy.memory.band)
    }

    // MARK: - Inputs

    private mutating func apply(_ input: Input) {
        switch input {
        case .tick: break
        case .launch(let id, let mode): command(id) { $0.launch(id, mode) }
        case .activate(let id): command(id) { $0.activate(id) }
        case .home: guardNotShuttingDown { $0.goHome() }
        case .interruptionBegan: guardNotShuttingDown { $0.beginInterruption() }
        case .interruptionEnded: guardNotShuttingDown { $0.endInterruption() }
        case .lock: guardNotShuttingDown { $0.setLocked(true) }
        case .unlock: guardNotShuttingDown { $0.setLocked(false) }
        case .stop(let id): command(id) { $0.stop(id, cause: .user) }
        case .kill(let id): command(id) { $0.userKill(id) }
        case .shutdown: shutdown()
        case .launchFailed(let id, let gen, let message):
            if isCurrent(id, gen) { ended(id, reason: .launchFailed(message: message)) }
        case .exited(let id, let gen, let status):
            if isCurrent(id, gen) { exited(id, status) }
        case .acknowledged(let id, let gen, let seq):
            if isCurrent(id, gen) { acknowledged(id, seq) }
        case .beginBackgroundTask(let id, let gen, let request, let name):
            if isCurrent(id, gen) { beginTask(id, request: request, name: name) }
        case .endBackgroundTask(let id, let gen, let task):
            if isCurrent(id, gen) { endTask(id, task) }
        case .protocolViolation(let id, let gen, let message):
            if isCurrent(id, gen) { kill(id, .protocolViolation(message: message)) }
        case .memory(let sample): memory(sample)
        case .ready(let id, let gen):
            if isCurrent(id, gen), apps[id]!.phase == .awaitingReady {
                cancel(id, .ready)
                update(id) { $0.phase = .running(.launched) }
                advance(id)
            }
        }
    }

    private func isCurrent(_ id: AppID, _ generation: UInt64) -> Bool {
        guard let app = apps[id] else { return false }
        return app.generation == generation && app.phase != .notRunning
    }

    private mutating func refuse(_ why: String) { effects.append(.refused(why)) }

    private mutating func guardNotShuttingDown(_ body: (inout Supervisor) -> Void) {
        if shuttingDown { return refuse("the daemon is shutting down") }
        body(&self)
    }

    private mutating func command(_ id: AppID, _ body: (inout Supervisor) -> Void) {
        guard apps[id] != nil else { return refuse("unknown app '\(id)'") }
        guardNotShuttingDown(body)
    }

    // MARK: - Commands

    private mutating func launch(_ id: AppID, _ mode: LaunchMode) {
        let app = apps[id]!
        guard app.phase == .notRunning else {
            return refuse("'\(id)' is already running (\(app.state.rawValue))")
        }
        if mode == .foreground && locked { return refuse("the screen is locked") }
        if mode == .foreground { takeForegroundSlot(id) }
        effects.append(.spawn(id, generation: app.generation + 1, mode: mode))
        let now = now
        update(id) {
            $0.generation += 1
            $0.phase = $0.policy.delivery == .library ? .launching(step: 0)
                : $0.policy.awaitsReadiness ? .awaitingReady : .running(.launched)
            $0.launchMode = mode
            $0.lastUsed = now
        }
        if apps[id]!.phase == .awaitingReady { timers[TimerKey(id, .ready)] = now + apps[id]!.policy.launchTimeout }
        advance(id)
    }

    private mutating func activate(_ id: AppID) {
        let app = apps[id]!
        if locked { return refuse("the screen is locked") }
        if app.phase == .notRunning { return launch(id, .foreground) }
        if app.stop != nil || app.killing != nil { return refuse("'\(id)' is stopping") }
        takeForegroundSlot(id)
        advance(id)
    }

    /// Puts `id` in the most recent foreground slot, sending the least
    /// recently activated app to the background when the slots are full.
    private mutating func takeForegroundSlot(_ id: AppID) {
        foreground.removeAll { $0 == id }
        foreground.append(id)
        sync(id)
        while foreground.count > foregroundSlots {
            let evicted = foreground.removeFirst()
            sync(evicted)
            advance(evicted)
        }
    }

    private mutating func goHome() {
        let was = foreground
        foreground = []
        for id in was { sync(id); advance(id) }
    }

    private mutating func beginInterruption() {
        interruptions += 1
        if interruptions == 1 { advanceForeground() }
    }

    private mutating func endInterruption() {
        guard interruptions > 0 else { return refuse("no interruption is in progress") }
        interruptions -= 1
        if interruptions == 0 { advanceForeground() }
    }

    private mutating func setLocked(_ value: Bool) {
        guard locked != value else { return refuse(value ? "already locked" : "not locked") }
        locked = value
        advanceForeground()
    }

    private mutating func advanceForeground() {
        for id in foreground { sync(id); advance(id) }
    }

    private mutating func stop(_ id: AppID, cause: StopCause) {
        guard apps[id]!.phase != .notRunning else { return refuse("'\(id)' is not running") }
        if apps[id]!.stop == nil { update(id) { $0.stop = cause } }
        foreground.removeAll { $0 == id }
        sync(id)
        advance(id)
    }

    private mutating func userKill(_ id: AppID) {
        guard apps[id]!.phase != .notRunning else { return refuse("'\(id)' is not running") }
        kill(id, .killedByUser)
    }

    private mutating func shutdown() {
        shuttingDown = true
        for id in appIDs where apps[id]!.phase != .notRunning {
            if apps[id]!.stop == nil { update(id) { $0.stop = .shutdown } }
            foreground.removeAll { $0 == id }
            sync(id)
            advance(id)
        }
    }

    // MARK: - Reports from the app

    private mutating func acknowledged(_ id: AppID, _ seq: UInt32) {
        let app = apps[id]!
        if app.killing != nil { return }
        guard let awaiting = app.awaiting, awaiting.sequence == seq else {
            return kill(id, .protocolViolation(
                message: "acknowledged event \(seq), which was not awaiting an acknowledgement"))
        }
        update(id) { $0.awaiting = nil }
        cancel(id, .ack)
        switch awaiting.event {
        case .willTerminate: break                       // the exit completes it
        case .willBeKilledForMemory: kill(id, app.lastNotice!)
        default: advance(id)
        }
    }

    private mutating func beginTask(_ id: AppID, request: UInt32, name: String) {
        let app = apps[id]!
        let inBackground = app.phase == .running(.background)
        let budgetEnd = inBackground && !app.policy.continuousBackground ? app.budgetEnd : nil
        let running: Bool
        switch app.phase {
        case .launching, .running: running = app.stop == nil && app.killing == nil
        default: running = false
        }
        let exhausted = budgetEnd.map { now >= $0 } ?? false
        guard running, !exhausted, app.tasks.count < Self.maxBackgroundTasks else {
            effects.append(.backgroundTaskReply(id, request: request, task: nil, budgetEnd: budgetEnd))
            return
        }
        let task = app.nextTask
        update(id) {
            $0.tasks[task] = name
            $0.nextTask &+= 1
        }
        effects.append(.backgroundTaskReply(id, request: request, task: task, budgetEnd: budgetEnd))
        if inBackground {
            armBudget(id)
            // A task begun inside didEnterBackground lifts its 5 s watchdog:
            // the budget bounds the app from now on.
            if app.awaiting?.event == .didEnterBackground, let end = budgetEnd {
                timers[TimerKey(id, .ack)] = max(timers[TimerKey(id, .ack)] ?? end, end)
            }
        }
    }

    private mutating func endTask(_ id: AppID, _ task: TaskID) {
        guard apps[id]!.tasks[task] != nil else { return }  // like iOS: ending an unknown task is ignored
        update(id) {
            $0.tasks[task] = nil
            $0.expired.remove(task)
        }
        if apps[id]!.tasks.isEmpty {
            cancel(id, .expiration)
            cancel(id, .budget)
        }
        advance(id)
    }

    // MARK: - Process ends

    private mutating func exited(_ id: AppID, _ status: ExitStatus) {
        let app = apps[id]!
        let reason: TerminationReason
        if let killing = app.killing {
            reason = killing
        } else if app.phase == .terminating, let stop = app.stop {
            reason = stop.reason(killedAfterDeadline: false)
        } else {
            switch status {
            case .exited(let code): reason = .exited(code: code)
            case .signaled(let signal): reason = .signaled(signal: signal)
            case .outOfMemory:
                if let limit = app.policy.memory.limit {
                    // The kernel enforced the manifest's limit: a kill for memory like ours.
                    effects.append(.memoryKill(killRecord(id, .perAppLimit, lastSample, candidates: [id], notice: false)))
                    reason = .memoryLimit(footprint: footprints[id] ?? limit, limit: limit)
                } else {
                    reason = .signaled(signal: 9)
                }
            }
        }
        ended(id, reason: reason)
    }

    private mutating func ended(_ id: AppID, reason: TerminationReason) {
        let record = TerminationRecord(reason: reason, generation: apps[id]!.generation, at: now)
        for kind in TimerKind.allCases { cancel(id, kind) }
        foreground.removeAll { $0 == id }
        footprints[id] = nil
        update(id) {
            var fresh = AppRecord(policy: $0.policy)
            fresh.generation = $0.generation
            fresh.state = $0.state          // so that sync() publishes the change
            fresh.since = $0.since
            fresh.last = record
            $0 = fresh
        }
        effects.append(.terminated(id, record))
        if pressureVictim == id {
            pressureVictim = nil
            effects.append(.remeasure)
        }
    }

    /// SIGKILL the app; the process exit report completes the termination.
    private mutating func kill(_ id: AppID, _ reason: TerminationReason) {
        guard apps[id]!.killing == nil else { return }
        for kind in TimerKind.allCases { cancel(id, kind) }
        update(id) {
            $0.killing = reason
            $0.awaiting = nil
        }
        effects.append(.kill(id, reason))
    }

    // MARK: - Memory

    private mutating func memory(_ sample: MemorySample) {
        for (id, bytes) in sample.footprints where apps[id].map(isAlive) == true { footprints[id] = bytes }
        let previous = memoryLevel
        lastSample = sample
        memoryLevel = sample.level
        memorySimulated = sample.simulated
        // An app over its own limit is killed whatever the level.
        for id in appIDs {
            let app = apps[id]!
            guard let limit = app.policy.memory.limit, let bytes = footprints[id], bytes > limit,
                  killable(app) else { continue }
            // The record after the kill: the shell signals first, then writes.
            let record = killRecord(id, .perAppLimit, sample, candidates: [id], notice: false)
            kill(id, .memoryLimit(footprint: bytes, limit: limit))
            effects.append(.memoryKill(record))
        }
        if sample.level > previous { warnRunningApps() }
        if sample.level == .critical && pressureVictim == nil { killForPressure(sample) }
    }

    private func isAlive(_ app: AppRecord) -> Bool { app.phase != .notRunning }

    /// Alive and not already on its way to a kill.
    private func killable(_ app: AppRecord) -> Bool {
        isAlive(app) && app.killing == nil && app.lastNotice == nil
    }

    /// didReceiveMemoryWarning to every running app (suspended apps are not
    /// told); delivered as soon as each app is idle.
    private mutating func warnRunningApps() {
        for id in appIDs {
            let app = apps[id]!
            switch app.phase {
            case .launching, .awaitingReady, .running: break
            case .notRunning, .suspended, .terminating: continue
            }
            guard killable(app), app.stop == nil else { continue }
            update(id) { $0.warningPending = true }
            advance(id)
        }
    }

    /// The kill order: suspended apps, then background apps, then the
    /// foreground last; within each, the lowest band first, then the least
    /// recently used.
    public func memoryKillOrder() -> [AppID] {
        func tier(_ state: LifecycleState) -> Int {
            switch state {
            case .suspended: 0
            case .background: 1
            case .inactive, .active, .notRunning: 2
            }
        }
        return appIDs.filter { killable(apps[$0]!) }.sorted { a, b in
            let x = apps[a]!, y = apps[b]!
            return (tier(x.state), x.policy.memory.band.rank, x.lastUsed.nanoseconds, a)
                < (tier(y.state), y.policy.memory.band.rank, y.lastUsed.nanoseconds, b)
        }
    }

    private mutating func killForPressure(_ sample: MemorySample) {
        let order = memoryKillOrder()
        guard let victim = order.first else { return }
        let app = apps[victim]!
        // A busy app (owing an acknowledgement) cannot be told anything more.
        let notice = app.policy.memory.lastNotice && app.awaiting == nil
        let record = killRecord(victim, .memoryPressure, sample, candidates: order, notice: notice)
        pressureVictim = victim
        let reason = TerminationReason.memoryPressure(footprint: footprints[victim], simulated: sample.simulated)
        guard notice else {
            // The record after the kill: the shell signals and frees first, then writes.
            kill(victim, reason)
            return effects.append(.memoryKill(record))
        }
        effects.append(.memoryKill(record))
        if app.phase == .suspended {
            effects.append(.thaw(victim))
            update(victim) { $0.phase = .running(.background) }
        }
        update(victim) {
            $0.lastNotice = reason
            $0.warningPending = false
        }
        for kind in [TimerKind.grace, .expiration, .budget] { cancel(victim, kind) }
        deliver(victim, .willBeKilledForMemory)
    }

    private func killRecord(_ id: AppID, _ cause: MemoryKill.Cause, _ sample: MemorySample,
                            candidates: [AppID], notice: Bool) -> MemoryKill {
        let app = apps[id]!
        return MemoryKill(
            app: id, cause: cause, footprint: footprints[id],
            limit: cause == .perAppLimit ? app.policy.memory.limit : nil,
            state: app.state, band: app.policy.memory.band, level: sample.level, simulated: sample.simulated,
            measurements: sample.measurements,
            candidates: candidates.map {
                MemoryKill.Candidate(app: $0, state: apps[$0]!.state, band: apps[$0]!.policy.memory.band,
                                     footprint: footprints[$0])
            },
            lastNotice: notice)
    }

    // MARK: - Timers

    private mutating func fireDueTimers() {
        while let (key, _) = timers.filter({ $0.value <= now }).min(by: { ($0.value, $0.key) < ($1.value, $1.key) }) {
            timers[key] = nil
            fire(key)
        }
    }

    private mutating func fire(_ key: TimerKey) {
        let id = key.app
        guard let app = apps[id] else { return }
        switch key.kind {
        case .ack:
            switch app.awaiting?.event {
            case .willFinishLaunching?, .didFinishLaunching?: kill(id, .launchWatchdog)
            case .didEnterBackground?: kill(id, .backgroundWatchdog)
            case let event?: kill(id, .eventWatchdog(event: event))
            case nil: break
            }
        case .grace:
            update(id) { $0.graceEnd = nil }
            advance(id)
        case .expiration:
            let open = app.tasks.keys.filter { !app.expired.contains($0) }.sorted()
            guard !open.isEmpty else { return }
            update(id) { $0.expired.formUnion(open) }
            effects.append(.expireBackgroundTasks(id, open))
        case .budget:
            if !app.tasks.isEmpty { kill(id, .backgroundTaskExpired) }
        case .terminate:
            kill(id, (app.stop ?? .user).reason(killedAfterDeadline: true))
        case .notice:
            if let reason = app.lastNotice { kill(id, reason) }
        case .ready:
            if app.phase == .awaitingReady { kill(id, .launchWatchdog) }
        }
    }

    private mutating func cancel(_ id: AppID, _ kind: TimerKind) {
        timers[TimerKey(id, kind)] = nil
    }

    /// Arms the expiration notice and the end of the background budget, when
    /// the app is in the background with open tasks and the budget applies.
    private mutating func armBudget(_ id: AppID) {
        let app = apps[id]!
        guard let end = app.budgetEnd, !app.policy.continuousBackground, !app.tasks.isEmpty else { return }
        timers[TimerKey(id, .budget)] = end
        if app.tasks.keys.contains(where: { !app.expired.contains($0) }) {
            timers[TimerKey(id, .expiration)] = max(now, end - app.policy.expirationWarning)
        }
    }

    // MARK: - The planner

    private enum Target: Equatable { case active, inactive, background, suspended, terminated }

    private func target(_ id: AppID) -> Target {
        let app = apps[id]!
        if app.stop != nil { return .terminated }
        if !locked && foreground.contains(id) { return interruptions > 0 ? .inactive : .active }
        if app.policy.continuousBackground || !app.tasks.isEmpty { return .background }
        if let grace = app.graceEnd, now < grace { return .background }
        return .suspended
    }

    /// Moves the app one event (or, for plain programs, as many as it takes)
    /// towards its target.
    private mutating func advance(_ id: AppID) {
        while let app = apps[id], app.awaiting == nil, app.killing == nil, app.lastNotice == nil {
            if app.warningPending, case .running = app.phase {
                deliver(id, .didReceiveMemoryWarning)
                continue
            }
            let goal = target(id)
            switch app.phase {
            case .notRunning, .terminating:
                return
            case .awaitingReady:
                // Nothing to tell it before it is ready, but that it must go.
                if app.stop != nil { deliver(id, .willTerminate); continue }
                return
            case .launching(let step):
                if app.stop != nil { deliver(id, .willTerminate); continue }
                switch step {
                case 0: deliver(id, .willFinishLaunching)
                case 1: deliver(id, .didFinishLaunching)
                default: update(id) { $0.phase = .running(.launched) }
                }
            case .suspended:
                switch goal {
                case .suspended: return
                case .terminated: kill(id, app.stop!.reason(killedAfterDeadline: false)); return
                case .active, .inactive, .background:
                    effects.append(.thaw(id))
                    update(id) { $0.phase = .running(.background) }
                }
            case .running(let told):
                if !step(id, told: told, goal: goal) { return }
            }
        }
    }

    /// One step from `told` towards `goal`; false when there is nothing to do.
    private mutating func step(_ id: AppID, told: Told, goal: Target) -> Bool {
        // A plain program reaches its first position after launch silently,
        // as it gets no launch events: a signal microseconds after exec would
        // arrive before it could install a handler, and kill it.
        let silent = told == .launched && apps[id]!.policy.delivery == .signals
        switch (told, goal) {
        case (.active, .active), (.inactive, .inactive), (.background, .background):
            return false
        case (.active, _):
            deliver(id, .willResignActive)
        case (.inactive, .active), (.launched, .active):
            // Never more active apps than slots: wait until the app this one
            // displaced has resigned (it may still owe an acknowledgement).
            let others = apps.lazy.filter { $0.key != id && $0.value.state == .active }.count
            if others >= foregroundSlots { return false }
            deliver(id, .didBecomeActive, silent: silent)
        case (.launched, .inactive):
            update(id) { $0.phase = .running(.inactive) }
        case (.launched, .terminated):
            deliver(id, .willTerminate)
        case (.inactive, _), (.launched, _):
            deliver(id, .didEnterBackground, silent: silent)
        case (.background, .active), (.background, .inactive):
            deliver(id, .willEnterForeground)
        case (.background, .suspended) where apps[id]!.policy.exitsOnSuspend:
            update(id) { $0.stop = .exitsOnSuspend }
            deliver(id, .willTerminate)
        case (.background, .suspended):
            effects.append(.freeze(id))
            update(id) {
                $0.phase = .suspended
                $0.warningPending = false     // running apps only
            }
            return false
        case (.background, .terminated):
            deliver(id, .willTerminate)
        }
        return true
    }

    /// Sends one event and moves the app's told position accordingly.
    private mutating func deliver(_ id: AppID, _ event: LifecycleEvent, silent: Bool = false) {
        var app = apps[id]!
        app.sequence &+= 1
        switch event {
        case .willFinishLaunching: app.phase = .launching(step: 1)
        case .didFinishLaunching: app.phase = .launching(step: 2)
        case .willResignActive: app.phase = .running(.inactive)
        case .didBecomeActive: app.phase = .running(.active)
        case .willEnterForeground:
            app.phase = .running(.inactive)
            app.budgetEnd = nil
            app.expired = []
            app.graceEnd = nil
        case .didEnterBackground:
            app.phase = .running(.background)
            app.budgetEnd = app.policy.continuousBackground ? nil : now + app.policy.backgroundTaskBudget
            if app.policy.delivery == .signals { app.graceEnd = now + app.policy.backgroundGrace }
        case .willTerminate: app.phase = .terminating
        case .didReceiveMemoryWarning: app.warningPending = false
        case .willBeKilledForMemory: break
        }
        let library = app.policy.delivery == .library
        var deadline: Instant? = nil
        if library {
            deadline = now + app.policy.timeout(for: event)
            if event == .didEnterBackground, !app.tasks.isEmpty, let end = app.budgetEnd {
                deadline = max(deadline!, end)
            }
            app.awaiting = Awaiting(event: event, sequence: app.sequence)
        }
        let launchEvent = event == .willFinishLaunching || event == .didFinishLaunching
        let delivered = Delivered(
            event: event, sequence: app.sequence, deadline: deadline,
            budgetEnd: app.phase == .running(.background) ? app.budgetEnd : nil,
            mode: app.launchMode, previous: launchEvent ? app.last : nil)
        apps[id] = app
        if !silent { effects.append(.deliver(id, delivered)) }
        sync(id)

        switch event {
        case .willEnterForeground:
            cancel(id, .expiration); cancel(id, .budget); cancel(id, .grace)
        case .didEnterBackground:
            armBudget(id)
            if let grace = app.graceEnd { timers[TimerKey(id, .grace)] = grace }
        case .willTerminate:
            timers[TimerKey(id, .terminate)] = now + app.policy.terminateTimeout
            cancel(id, .expiration); cancel(id, .budget); cancel(id, .grace)
            return  // its acknowledgement is not awaited by a timer: the exit is
        case .willBeKilledForMemory:
            // Acknowledged or not, the kill comes at the deadline (plain
            // programs cannot acknowledge).
            timers[TimerKey(id, .notice)] = now + app.policy.memory.lastNoticeTimeout
            return
        default: break
        }
        if let deadline { timers[TimerKey(id, .ack)] = deadline }
    }

    // MARK: - Bookkeeping

    private mutating func update(_ id: AppID, _ body: (inout AppRecord) -> Void) {
        body(&apps[id]!)
        sync(id)
    }

    /// Emits a `.transition` when the app's public state changed. Called
    /// after every change, so each step shows (active, inactive, background
    /// for a plain program that passes through all three in one input), and
    /// always after the spawn, delivery, freeze or thaw that caused it.
    private mutating func sync(_ id: AppID) {
        touched.insert(id)
        guard var app = apps[id] else { return }
        let state = publicState(id, app)
        guard state != app.state else { return }
        effects.append(.transition(id, from: app.state, to: state))
        if app.state == .active || state == .active { app.lastUsed = now }
        app.state = state
        app.since = now
        apps[id] = app
    }

    private func publicState(_ id: AppID, _ app: AppRecord) -> LifecycleState {
        switch app.phase {
        case .notRunning: return .notRunning
        case .launching, .awaitingReady, .running(.launched):
            return !locked && foreground.contains(id) ? .inactive : .background
        case .running(.inactive): return .inactive
        case .running(.active): return .active
        case .running(.background), .terminating: return .background
        case .suspended: return .suspended
        }
    }
}

// MARK: - Per-app records

enum Told: Equatable, Sendable {
    /// Launch events done; not yet told it is active or in the background.
    case launched
    case inactive
    case active
    case background
}

enum Phase: Equatable, Sendable {
    case notRunning
    case launching(step: Int)
    /// A plain program started, not yet READY=1 (sd_notify readiness).
    case awaitingReady
    case running(Told)
    case suspended
    /// willTerminate sent (or SIGTERM); waiting for the exit.
    case terminating
}

enum StopCause: Sendable {
    case user, shutdown, exitsOnSuspend

    func reason(killedAfterDeadline k: Bool) -> TerminationReason {
        switch self {
        case .user: .stoppedByUser(killedAfterDeadline: k)
        case .shutdown: .shutdown(killedAfterDeadline: k)
        case .exitsOnSuspend: .exitedOnSuspend(killedAfterDeadline: k)
        }
    }
}

struct Awaiting: Equatable, Sendable {
    var event: LifecycleEvent
    var sequence: UInt32
}

struct AppRecord: Sendable {
    var policy: AppPolicy
    var phase: Phase = .notRunning
    var state: LifecycleState = .notRunning
    var since: Instant = .zero
    var generation: UInt64 = 0
    var launchMode: LaunchMode = .foreground
    var sequence: UInt32 = 0
    var awaiting: Awaiting?
    var tasks: [TaskID: String] = [:]
    var nextTask: TaskID = 1
    var expired: Set<TaskID> = []
    var budgetEnd: Instant?
    var graceEnd: Instant?
    var stop: StopCause?
    var killing: TerminationReason?
    var last: TerminationRecord?
    /// didReceiveMemoryWarning is owed, once the app is idle.
    var warningPending = false
    /// When it was last active (or launched): least recently used dies first.
    var lastUsed: Instant = .zero
    /// Told willBeKilledForMemory; killed with this reason at ack or deadline.
    var lastNotice: TerminationReason?
}

enum TimerKind: Int, CaseIterable, Comparable, Sendable {
    case ack, grace, expiration, budget, terminate, notice, ready
    static func < (a: TimerKind, b: TimerKind) -> Bool { a.rawValue < b.rawValue }
}

struct TimerKey: Hashable, Comparable, Sendable {
    var app: AppID
    var kind: TimerKind
    init(_ app: AppID, _ kind: TimerKind) { self.app = app; self.kind = kind }
    static func < (a: TimerKey, b: TimerKey) -> Bool { (a.app, a.kind) < (b.app, b.kind) }
}

extension AppPolicy {
    func timeout(for event: LifecycleEvent) -> Duration {
        switch event {
        case .willFinishLaunching, .didFinishLaunching: launchTimeout
        case .didEnterBackground: backgroundTimeout
        case .willTerminate: terminateTimeout
        case .willBeKilledForMemory: memory.lastNoticeTimeout
        default: eventTimeout
        }
    }
}

/// What `supervisorctl status` shows of one app.
public struct AppSnapshot: Sendable, Equatable {
    public var id: AppID
    public var state: LifecycleState
    public var since: Instant
    public var generation: UInt64
    public var tasks: [BackgroundTask]
    /// In the background with the budget running: when it ends.
    public var budgetEnd: Instant?
    /// The event the app has not acknowledged yet.
    public var awaiting: LifecycleEvent?
    public var stopping: Bool
    public var last: TerminationRecord?
    /// Last measured footprint, bytes.
    public var footprint: UInt64?
    public var band: MemoryBand
}

public struct BackgroundTask: Sendable, Equatable, Codable {
    public var id: TaskID
    public var name: String
}
