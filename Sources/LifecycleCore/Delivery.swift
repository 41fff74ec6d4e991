// Delivery: one event at a time. Sending an event moves the app's told
// position, arms the deadline of its acknowledgement (library apps) and the
// timers the new position needs (budget, grace, terminate, notice). The one
// exception: a held prewarm's launch events go together (`together`), and
// are awaited in the order sent (`awaiting`, then `queued`), each deadline
// from the acknowledgement before it.

extension Supervisor {
    /// Sends one event and moves the app's told position accordingly.
    mutating func deliver(
        _ id: AppID, _ event: LifecycleEvent, silent: Bool = false, payload: String? = nil, url: String? = nil,
        scene: SceneContext? = nil, discarded: [SceneID]? = nil
    ) {
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
        case .didEnterBackground:
            app.phase = .running(.background)
            app.budgetEnd = app.policy.continuousBackground ? nil : now + app.policy.backgroundTaskBudget
        case .willTerminate: app.phase = .terminating
        case .didReceiveMemoryWarning: app.warningPending = false
        case .willBeKilledForMemory, .performFetch, .didReceiveRemoteNotification, .openURL: break
        case .sceneWillConnect, .sceneWillEnterForeground, .sceneDidBecomeActive, .sceneWillResignActive,
            .sceneDidEnterBackground, .sceneDidDisconnect, .didDiscardSceneSessions:
            break  // the scene's state moved (Scenes.swift); the app's stays
        }
        let library = app.policy.delivery == .library
        let behind = app.awaiting != nil  // only a library app awaits
        var deadline: Instant? = nil
        if library {
            deadline = ackDeadline(app, event)
            if app.awaiting == nil {
                app.awaiting = Awaiting(event: event, sequence: app.sequence)
            } else {
                app.queued.append(event)
            }
        }
        let delivered = Delivered(
            event: event, sequence: app.sequence, deadline: deadline,
            budgetEnd: app.phase == .running(.background) ? app.budgetEnd : nil,
            mode: app.launchMode, previous: event.isLaunchEvent ? app.last : nil,
            launch: event.isLaunchEvent
                ? LaunchContext(reason: app.launchReason, url: app.launchURL, pushPayload: app.launchPush?.payload)
                : nil,
            payload: payload, url: url, scene: scene, discarded: discarded, behind: behind)
        apps[id] = app
        if !silent { effects.append(.deliver(id, delivered)) }
        sync(id)

        switch event {
        case .willEnterForeground:
            timers.cancel(id, .expiration, .budget, .grace)
        case .didEnterBackground:
            armBudget(id)
            if app.policy.delivery == .signals { timers.arm(id, .grace, at: now + app.policy.backgroundGrace) }
        case .willTerminate:
            timers.arm(id, .terminate, at: now + app.policy.terminateTimeout)
            timers.cancel(id, .expiration, .budget, .grace)
            return  // its acknowledgement is not awaited by a timer: the exit is
        case .willBeKilledForMemory:
            // Acknowledged or not, the kill comes at the deadline (plain
            // programs cannot acknowledge).
            timers.arm(id, .notice, at: now + app.policy.memory.lastNoticeTimeout)
            return
        case .willFinishLaunching, .didFinishLaunching, .didBecomeActive, .willResignActive,
            .didReceiveMemoryWarning, .performFetch, .didReceiveRemoteNotification, .openURL, .sceneWillConnect,
            .sceneWillEnterForeground, .sceneDidBecomeActive, .sceneWillResignActive, .sceneDidEnterBackground,
            .sceneDidDisconnect, .didDiscardSceneSessions:
            break
        }
        if let deadline, !behind { timers.arm(id, .ack, at: deadline) }
    }

    /// The event awaited was answered: the next one sent with it (launch
    /// events that went together) is awaited now, its deadline its whole
    /// timeout from now, as it could not be handled before this answer.
    mutating func answeredHead(_ id: AppID) {
        timers.cancel(id, .ack)
        var next: Awaiting? = nil
        update(id) { app in
            if let head = app.awaiting { app.awaiting = app.queued.removeFirst(after: head) }
            next = app.awaiting
        }
        guard let next else { return }  // the common case: no copy of the record
        timers.arm(id, .ack, at: ackDeadline(apps[id]!, next.event))
    }

    /// When the acknowledgement of `event`, handled from now, is due: its
    /// timeout, and a didEnterBackground with tasks open not before the
    /// budget ends.
    private func ackDeadline(_ app: AppRecord, _ event: LifecycleEvent) -> Instant {
        let due = now + app.policy.timeout(for: event)
        if event == .didEnterBackground, !app.tasks.isEmpty, let end = app.budgetEnd { return max(due, end) }
        return due
    }

    /// Launch events go together to a held prewarm (its library holds an
    /// event that comes while another is unacknowledged): while it is
    /// launching, and for the first position after, one the app's own state
    /// takes (a scene app's scenes go one at a time).
    func together(_ app: AppRecord) -> Bool {
        guard app.together, app.queued.count < Behind.capacity, app.stop == nil, app.killing == nil,
            app.lastNotice == nil
        else { return false }
        switch app.phase {
        case .launching: return true
        case .running(.launched): return !app.policy.scenes
        default: return false
        }
    }
}

extension Supervisor {
    /// The event `sequence` left the shell at `at`, later than it was
    /// decided: the deadline that waits on it (its acknowledgement's, or
    /// after willTerminate the exit's) is at least its whole timeout from
    /// then. A deadline judges the app, and the app could not see the event
    /// before it left.
    mutating func left(_ id: AppID, _ sequence: UInt32, at: Instant) {
        guard let app = apps[id], let awaiting = app.awaiting, awaiting.sequence == sequence else { return }
        let timeout: Duration
        switch awaiting.event.awaited {
        case .acknowledgement: timeout = app.policy.timeout(for: awaiting.event)
        case .exit: timeout = app.policy.terminateTimeout
        case .notice: return  // memory is short: the kill comes when it was due
        }
        let kind = TimerKind(awaiting: awaiting.event)
        if let deadline = timers.deadline(id, kind), deadline < at + timeout { timers.arm(id, kind, at: at + timeout) }
    }
}
