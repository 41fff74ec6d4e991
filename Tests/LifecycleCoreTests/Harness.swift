@testable import LifecycleCore

/// Drives a Supervisor with a manual clock, and acts as the apps: it
/// acknowledges events when told to and reports exits of killed processes.
struct Harness {
    var supervisor: Supervisor
    var now = Instant.zero
    /// Everything the core has emitted, in order.
    var log: [Effect] = []

    init(slots: Int = 1, _ apps: [AppID: AppPolicy]) {
        supervisor = Supervisor(foregroundSlots: slots, apps: apps)
    }

    init(displays: [DisplaySpec], _ apps: [AppID: AppPolicy]) {
        supervisor = Supervisor(displays: displays, apps: apps)
    }

    init(slots: Int = 1, apps names: [AppID], policy: AppPolicy = AppPolicy()) {
        self.init(slots: slots, Dictionary(uniqueKeysWithValues: names.map { ($0, policy) }))
    }

    /// The kernel confirms every freeze at once, as it does for an app that
    /// is not busy (FreezeFailureTests turn it off).
    var confirmsFreezes = true

    @discardableResult
    mutating func send(_ input: Input) -> [Effect] {
        let effects = supervisor.handle(input, now: now)
        log += effects
        if confirmsFreezes {
            for case .freeze(let id) in effects {
                log += supervisor.handle(.frozen(id, generation: generation(id)), now: now)
            }
        }
        return effects
    }

    @discardableResult
    mutating func advance(_ d: Duration) -> [Effect] {
        now = now + d
        return send(.tick)
    }

    func generation(_ id: AppID) -> UInt64 { supervisor.snapshot(id)!.generation }
    func state(_ id: AppID) -> LifecycleState { supervisor.snapshot(id)!.state }

    /// The event `id` must acknowledge next, with its sequence number (the
    /// first of those sent together, when a held prewarm's launch events were).
    func outstanding(_ id: AppID) -> Delivered? {
        guard let seq = supervisor.channelState(id)?.awaiting.first else { return nil }
        return log.reversed().compactMap { effect -> Delivered? in
            if case .deliver(id, let d) = effect, d.sequence == seq { return d } else { return nil }
        }.first
    }

    /// Acknowledges whatever `id` is waiting on, repeatedly, until it waits
    /// on nothing; returns the events it received in that time.
    @discardableResult
    mutating func ackAll(_ id: AppID) -> [LifecycleEvent] {
        var events: [LifecycleEvent] = []
        while let d = outstanding(id), d.event != .willTerminate {
            events.append(d.event)
            send(.acknowledged(id, generation: generation(id), sequence: d.sequence))
        }
        if let d = outstanding(id) { events.append(d.event) }
        return events
    }

    /// Events delivered to `id` in `effects`.
    static func events(_ id: AppID, in effects: [Effect]) -> [LifecycleEvent] {
        effects.compactMap { if case .deliver(id, let d) = $0 { d.event } else { nil } }
    }

    /// Acks until quiet and returns every event delivered to `id` meanwhile,
    /// starting with the effects given.
    @discardableResult
    mutating func eventsUntilQuiet(_ id: AppID, after effects: [Effect]) -> [LifecycleEvent] {
        let start = log.count - effects.count
        ackAll(id)
        return Harness.events(id, in: Array(log[start...]))
    }

    mutating func exit(_ id: AppID, _ status: ExitStatus = .exited(0)) {
        send(.exited(id, generation: generation(id), status))
    }

    /// The reason the last `.kill` effect for `id` gave.
    func killReason(_ id: AppID) -> TerminationReason? {
        log.reversed().compactMap { if case .kill(id, let r) = $0 { r } else { nil } }.first
    }

    func transitions(_ id: AppID) -> [LifecycleState] {
        log.compactMap { if case .transition(id, _, let to) = $0 { to } else { nil } }
    }

    /// Events delivered to `id` in `effects` as the recorders write them:
    /// `sceneWillEnterForeground nav centre`, `sceneWillConnect nav centre new`,
    /// `didDiscardSceneSessions a,b`, or the event's name.
    static func lines(_ id: AppID, in effects: [Effect]) -> [String] {
        effects.compactMap { effect -> String? in
            guard case .deliver(id, let d) = effect else { return nil }
            if let s = d.scene, d.event.isSceneEvent {
                let session = s.restored.map { $0 ? " restored" : " new" } ?? ""
                return "\(d.event.rawValue) \(s.scene) \(s.display)" + session
            }
            if let discarded = d.discarded { return "\(d.event.rawValue) \(discarded.joined(separator: ","))" }
            return d.event.rawValue
        }
    }

    /// Acks until quiet; the lines of every event delivered meanwhile.
    @discardableResult
    mutating func linesUntilQuiet(_ id: AppID, after effects: [Effect]) -> [String] {
        let start = log.count - effects.count
        ackAll(id)
        return Harness.lines(id, in: Array(log[start...]))
    }

    /// Launches `id` into the foreground and acks through to active.
    mutating func launchActive(_ id: AppID) {
        eventsUntilQuiet(id, after: send(.activate(id)))
    }
}

extension AppPolicy {
    static var plain: AppPolicy {
        var p = AppPolicy()
        p.delivery = .signals
        return p
    }
}
