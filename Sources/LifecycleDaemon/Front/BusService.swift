#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleControl
import LifecycleCore
import LifecycleModel
import LifecycleOS
import Logging

// The D-Bus interface (docs/dbus.md): a second transport over the same
// front as the JSON socket. A call becomes the JSON request it stands for,
// is checked by the same code (ControlServer.command) and executed by the
// same `CommandFront`, with the caller's credentials as the bus daemon
// gives them. A command that changes an app's place answers with an
// operation at once; the operation ends when LifecycleControl's `Goal`
// (supervisorctl's waiting judges by it too) says the change is done, or
// failed. After each save, the apps whose state changed are pushed to the
// bus half (LifecycleOS.BusFront), which signals only what changed.

/// What the daemon keeps for its D-Bus interface.
final class BusService: RecordSink {
    let front: BusFront
    /// Operations not yet finished, oldest first.
    var pending: [Operation] = []
    /// The apps whose object exists on the bus, with their scenes'.
    var published: Set<AppID> = []
    var scenes: [AppID: Set<String>] = [:]
    /// Every app is pushed again at the next publish (a reload, a new connection).
    var resync = true
    /// Apps whose shown state changed outside the core (frozen, thawed):
    /// pushed at the next publish, which no save may bring.
    var touched: Set<AppID> = []
    /// Judges the operations at the end of a turn that saved nothing (a
    /// command whose step saved before it returned: a failed spawn).
    var judgeTimer: EventLoop.Source?

    struct Operation {
        let id: UInt64
        /// Nil: done once accepted (fetch, push, open), told after the save.
        let goal: Goal?
        /// Wall-clock seconds: an app that ended before it did not fail it.
        let since: Double
        /// Loop time after which it ends failed, timed-out.
        let expires: Int64
        /// The display whose front it changes (nil: every display), when it changes one.
        var front: FrontChange? = nil
        /// A later command that changed the same front before this one's
        /// outcome was known (its JSON word): the outcome, unless the goal
        /// is reached at the next judgement, is `superseded`.
        var contested: String? = nil
    }

    /// Which display's front a command changes.
    struct FrontChange: Equatable {
        var display: DisplayID?
        func meets(_ other: FrontChange) -> Bool {
            display == nil || other.display == nil || display == other.display
        }
    }

    /// The polkit action that decides a method (dbus/io.lifecycled.Lifecycle1.policy).
    static func polkitAction(_ verb: String) -> String? {
        let action: String? =
            switch verb {
            case "Launch", "Activate", "OpenURL", "Home": "launch"
            case "Stop", "Kill", "Restart", "Signal", "Discard": "stop"
            case "Lock", "Unlock", "BeginInterruption": "display"
            case "ReportShown": "launch"  // what it changes, activate changes
            case "Fetch", "Push": "wake"
            default: nil
            }
        return action.map { "io.lifecycled.Lifecycle1." + $0 }
    }

    /// How long an operation may wait for its outcome.
    static let operationLimit: Int64 = 300_000_000_000

    /// Interruptions held by a descriptor (Display.BeginInterruption): the
    /// daemon's end of each lease, and its display.
    var leases: [Int32: (display: DisplayID, source: EventLoop.Source)] = [:]
    var leaseCounts: [DisplayID: Int] {
        leases.values.reduce(into: [:]) { $0[$1.display, default: 0] += 1 }
    }
    /// Records for the monitors, held until the save that made them.
    var records: [(app: AppID, json: String)] = []

    init(front: BusFront) { self.front = front }

    var wantsRecords: Bool { front.monitors > 0 }

    func deliver(_ record: EventRecord) {
        guard let json = try? record.sortedJSON() else { return }
        records.append((record.app, json))
    }
}

extension EventRecord {
    /// The record as the `Record` signal carries it: the object
    /// `supervisorctl events --json` prints, its keys sorted (docs/dbus.md).
    /// Written by hand (LifecycleModel/JSONWriting.swift), its kill record
    /// through JSONEncoder: Foundation's encoder with sorted keys cost a
    /// monitor more per record than the rest of the event
    /// (docs/performance.md). A field added to the record goes here too,
    /// in its place in the order; BusServiceTests holds the two to the same
    /// JSON, in this order.
    func sortedJSON() throws -> String {
        var w = JSONWriter(capacity: 256) { value, out in
            let e = JSONEncoder()
            e.outputFormatting = .sortedKeys
            out.bytes.append(contentsOf: try e.encode(value))
        }
        w.openObject()
        try w.field("app", app)
        try w.field("detail", ifPresent: detail)
        try w.field("event", ifPresent: event)
        try w.field("from", ifPresent: from)
        try w.field("kill", otherIfPresent: kill)
        try w.field("kind", kind)
        try w.field("latencyMicroseconds", ifPresent: latencyMicroseconds)
        try w.field("monotonic", monotonic)
        try w.field("pid", ifPresent: pid)
        try w.field("reason", ifPresent: reason)
        try w.field("sequence", ifPresent: sequence)
        try w.field("time", time)
        try w.field("to", ifPresent: to)
        w.closeObject()
        return String(decoding: w.out.bytes, as: UTF8.self)
    }
}

extension Daemon {
    /// Serves the interface, unless the daemon file turned it off. A bus that
    /// is not there now is looked for again now and then (BusFront).
    func openBus() {
        guard config.dbus else { return }
        do {
            let authorization = config.dbusAuthorization
            let front = try BusFront(
                loop: loop, version: LifecycleVersion.string, polkitRequired: authorization == .polkit,
                polkitAction: { [unowned self] call in
                    guard authorization != .group, let front = self.front,
                        !front.permissions.mayChange(Self.caller(call))
                    else { return nil }
                    return BusService.polkitAction(call.verb)
                },
                handle: { [unowned self] in self.busCall($0) },
                connected: { [unowned self] in
                    self.bus?.resync = true
                    // Nothing is published while the bus is gone: the
                    // objects are shown as they are now at once, before a
                    // client can ask (a change that waits for its save,
                    // after it).
                    self.publishOnceSaved()
                },
                log: { [unowned self] priority, message in
                    switch priority {
                    case LOG_ERR: self.logger.error("\(message)")
                    case LOG_WARNING: self.logger.warning("\(message)")
                    case LOG_NOTICE: self.logger.notice("\(message)")
                    default: self.logger.info("\(message)")
                    }
                })
            let service = BusService(front: front)
            service.judgeTimer = try loop.timer { [unowned self] in self.publishOnceSaved() }
            bus = service
            records.sinks.append(service)
        } catch {
            logger.error("cannot serve the D-Bus interface: \(error)")
        }
    }

    /// A method call: the JSON request it stands for, checked and executed
    /// as the socket's are.
    func busCall(_ call: BusFront.Request) -> BusFront.Answer {
        guard let bus, let front else { return .error(name: BusErrors.failed, message: "the daemon is starting") }
        // The reply is held until the save of what the call changed: this turn.
        defer { bus.judgeTimer?.arm(at: loop.now) }
        let request: ControlRequest
        switch Self.controlRequest(call) {
        case .failure(let problem): return .error(name: BusErrors.invalidArgs, message: problem.message)
        case .success(let r): request = r
        }
        let command: Command
        switch ControlServer.command(request) {
        case .failure(let f): return BusErrors.answer(f)
        case .success(let c): command = c
        }
        let caller = Self.caller(call)
        if case .shown(let report, _, _) = command {
            // Reported over the bus: this caller is the follower now, and what
            // the daemon asks back goes to it as CompositorRequest signals.
            let fresh = follower?.reporter != call.sender
            switch front.execute(.shown(report, fresh: fresh, reporter: call.sender), from: caller) {
            case .failure(let f): return BusErrors.answer(f)
            case .success:
                control?.forgetFollower()
                return .done
            }
        }
        let before = Goal.of(request, before: statusReport(request.app.map { [$0] } ?? [], shown: false))
        let since = wallTime(now())
        switch front.execute(command, from: caller) {
        case .failure(let f): return BusErrors.answer(f)
        case .success:
            if request.command == .signal { return .done }
            if request.command == .interruptionBegin, let display = request.display {
                return lease(display)
            }
            let id = bus.front.newOperation(verb: call.verb, app: call.app, requester: call.sender)
            guard id != 0 else { return .error(name: BusErrors.failed, message: "no memory for the operation") }
            let change = frontChange(request)
            if let change {
                // An earlier operation on the same front that asked for something else
                // is superseded by this one, unless its goal is reached in this turn.
                for i in bus.pending.indices
                where bus.pending[i].front?.meets(change) == true && bus.pending[i].goal != before {
                    bus.pending[i].contested = bus.pending[i].contested ?? request.command.rawValue
                }
            }
            bus.pending.append(
                BusService.Operation(
                    id: id, goal: before, since: since, expires: loop.now + BusService.operationLimit, front: change))
            return .operation(id)
        }
    }

    /// The display whose front a command changes, if it changes one: an
    /// activation or a launch into the front (the display named, or the
    /// app's), home, lock and unlock (the display named, or every one).
    func frontChange(_ r: ControlRequest) -> BusService.FrontChange? {
        switch r.command {
        case .launch where r.background == true: return nil
        case .activate, .launch:
            let app = r.app.flatMap { manifests[$0] }
            return .init(display: r.display ?? app?.policy.display ?? supervisor.displays.all.first?.name)
        case .home, .lock, .unlock: return .init(display: r.display)
        default: return nil
        }
    }

    static func caller(_ call: BusFront.Request) -> Caller {
        Caller(pid: call.pid, uid: call.uid, gid: nil, groups: call.groups, polkitAuthorized: call.authorized)
    }

    /// An interruption begun for a caller, held while it keeps the
    /// descriptor it gets: when every copy is closed (it ended it, or it
    /// died), the interruption ends.
    func lease(_ display: DisplayID) -> BusFront.Answer {
        guard let bus else { return .done }
        do {
            let (mine, theirs) = try UnixSocket.streamPair()
            // What a holder writes means nothing; only its end counts.
            let source = try loop.watch(fd: mine) { [unowned self] _ in
                if UnixSocket.peerClosed(mine) { self.leaseEnded(mine) }
            }
            bus.leases[mine] = (display, source)
            logger.info("interruption on \(display) held by a D-Bus lease (descriptor \(mine))")
            return .descriptor(theirs)
        } catch {
            // The interruption began: without a lease to hold it, it ends at once.
            _ = submit(.display(display, .interruptionEnded))
            return .error(name: BusErrors.failed, message: "cannot make the lease: \(error)")
        }
    }

    /// This daemon is going (`reason`: daemon-reexec, restart, shutdown):
    /// every operation not yet finished ends `lost`, so that a client
    /// waiting for it hears why rather than a disconnection. (A crash
    /// leaves them unanswered: their Wait fails with the connection.)
    func abandonOperations(_ reason: String) {
        guard let bus else { return }
        for op in bus.pending { bus.front.finish(op.id, result: "lost", reason: reason) }
        bus.pending = []
    }

    /// The earlier daemon's leases went with it: their interruptions end.
    func endLeasedInterruptions(_ leases: [DisplayID: Int]) {
        for (display, count) in leases.sorted(by: { $0.key < $1.key }) where count > 0 {
            logger.notice("ending \(count) interruption(s) on \(display) held by the earlier daemon's D-Bus leases")
            for _ in 0..<count { _ = submit(.display(display, .interruptionEnded)) }
        }
    }

    func leaseEnded(_ fd: Int32) {
        guard let bus, let lease = bus.leases.removeValue(forKey: fd) else { return }
        lease.source.cancel()
        Posix.close(fd)
        logger.info("interruption on \(lease.display): its D-Bus lease was closed")
        _ = submit(.display(lease.display, .interruptionEnded))
    }

    /// The JSON request a call stands for; options that do not apply to
    /// the verb are named.
    static func controlRequest(_ call: BusFront.Request) -> Result<ControlRequest, BadCall> {
        let commands: [String: ControlRequest.Command] = [
            "Launch": .launch, "Activate": .activate, "Stop": .stop, "Kill": .kill, "Restart": .restart,
            "Fetch": .fetch, "Push": .push, "Signal": .signal, "Home": .home, "Lock": .lock, "Unlock": .unlock,
            "OpenURL": .open, "Discard": .discard, "BeginInterruption": .interruptionBegin, "ReportShown": .shown,
        ]
        guard let command = commands[call.verb] else {
            return .failure(BadCall(message: "unknown method \(call.verb)"))
        }
        var r = ControlRequest(command, app: call.app)
        let takes: (scene: Bool, display: Bool, background: Bool) =
            switch command {
            case .activate: (true, true, false)
            case .discard: (true, false, false)
            case .launch: (false, false, true)
            case .home, .lock, .unlock, .interruptionBegin: (false, true, false)
            default: (false, false, false)
            }
        for (given, taken, name) in [
            (call.scene != nil, takes.scene, "scene"), (call.display != nil, takes.display, "display"),
            (call.background != nil, takes.background, "background"),
        ] where given && !taken {
            return .failure(BadCall(message: "option '\(name)' does not apply to \(call.verb)"))
        }
        r.scene = call.scene
        r.display = call.display
        r.background = call.background
        switch command {
        case .push: r.payload = call.argument
        case .signal: r.signal = call.argument
        case .open: r.url = call.argument
        case .shown:
            // The same JSON document as the socket's `shown` (docs/protocol.md).
            do { r.shown = try JSONDecoder().decode(ShownReport.self, from: Data((call.argument ?? "").utf8)) } catch {
                return .failure(BadCall(message: "the report is not a shown report (docs/protocol.md): \(error)"))
            }
        default: break
        }
        return .success(r)
    }

    /// Publishes now, or, when a step's change waits for its save, at that
    /// save (which publishes what it released).
    func publishOnceSaved() {
        if unsaved { saveTimer?.arm(at: loop.now) } else { publishToBus() }
    }

    /// After a save: the apps that changed, to the bus, and their signals
    /// out (one per changed object); then operations judged and finished.
    func publishToBus(changed: Set<AppID> = []) {
        guard let bus else { return }
        guard bus.front.serving else {
            // Nobody to tell: everything is pushed again once the bus is
            // back (`connected` asks for a resync), nothing is kept for it.
            bus.touched = []
            bus.records = []
            judgeOperations()
            return
        }
        var push = changed.union(bus.touched)
        bus.touched = []
        if bus.resync || bus.published.count != manifests.count {
            let now = Set(manifests.keys)
            for gone in bus.published.subtracting(now) {
                for scene in bus.scenes.removeValue(forKey: gone) ?? [] {
                    bus.front.removeScene(app: gone, name: scene)
                }
                bus.front.removeApp(gone)
            }
            push = now
            bus.published = now
            bus.resync = false
        }
        let at = now()
        for id in push where manifests[id] != nil { publish(id, appStatus(id, now: at, outputProblems: [:])) }
        // A handful: pushed every time, signalled only when changed.
        for d in supervisor.displays.all {
            bus.front.setDisplay(
                d.name, slots: d.slots, front: d.scenes.map(\.description), locked: d.isLocked,
                interruptions: d.interruptions)
        }
        // The apps' changes first: a client told an operation finished has
        // already been told the state that finished it.
        bus.front.flush()
        let held = bus.records
        bus.records = []
        for r in held { bus.front.record(app: r.app, json: r.json) }
        judgeOperations()
    }

    func judgeOperations() {
        guard let bus, !bus.pending.isEmpty else { return }
        // A stalled bus holds the apps' signals: their operations wait with them.
        if bus.front.stalled {
            bus.judgeTimer?.arm(at: loop.now + 100_000_000)
            return
        }
        let apps = Array(Set(bus.pending.flatMap { $0.goal?.apps ?? [] }).filter { manifests[$0] != nil })
        let report = statusReport(apps, shown: false)
        let now = loop.now
        bus.pending.removeAll { op in
            guard let goal = op.goal else {
                bus.front.finish(op.id, result: "done", reason: "")  // accepted is done: fetch, push, open
                return true
            }
            switch goal.outcome(report, since: op.since) {
            case .done?: bus.front.finish(op.id, result: "done", reason: "")
            case .failed(let f)?: bus.front.finish(op.id, result: "failed", reason: f.reason)
            case .superseded(let f)?: bus.front.finish(op.id, result: "superseded", reason: f.reason)
            case nil:
                if goal.apps.contains(where: { manifests[$0] == nil }) {
                    // A reload removed an app it waits for: nothing is left to wait for.
                    bus.front.finish(op.id, result: "canceled", reason: "app-removed")
                    return true
                }
                if let later = op.contested {
                    bus.front.finish(op.id, result: "superseded", reason: later)
                    return true
                }
                guard now >= op.expires else { return false }
                bus.front.finish(op.id, result: "failed", reason: "timed-out")
            }
            return true
        }
        // The next expiry, unless something happens first.
        if let next = bus.pending.map(\.expires).min() { bus.judgeTimer?.arm(at: next) }
    }

    /// The kernel changed what an app's object shows (frozen, thawed), not
    /// the core: published at the end of this turn, saved or not.
    func touchBus(_ id: AppID) {
        guard let bus else { return }
        bus.touched.insert(id)
        bus.judgeTimer?.arm(at: loop.now)
    }

    /// An app and its scenes, to the bus.
    func publish(_ id: AppID, _ s: AppStatus) {
        guard let bus else { return }
        bus.front.setApp(id, busProperties(id, s))
        let scenes = s.scenes ?? []
        for scene in scenes {
            bus.front.setScene(
                app: id, name: scene.name, display: scene.display, state: scene.state.rawValue,
                inFront: scene.inFront, discarding: scene.discarding == true, shed: scene.shed == true)
        }
        let now = Set(scenes.map(\.name))
        for gone in (bus.scenes[id] ?? []).subtracting(now) { bus.front.removeScene(app: id, name: gone) }
        bus.scenes[id] = now.isEmpty ? nil : now
    }

    /// An app's properties as the bus shows them: the words of `status --json`.
    func busProperties(_ id: AppID, _ s: AppStatus) -> BusFront.AppProperties {
        var p = BusFront.AppProperties()
        p.state = s.state.rawValue
        p.pid = UInt32(s.pid ?? 0)
        p.launching = s.launching == true
        p.frozen = s.frozen == true
        p.awaiting = s.awaiting?.rawValue ?? ""
        p.band = s.band?.rawValue ?? MemoryBand.normal.rawValue
        p.display =
            s.scenes?.first?.display ?? manifests[id]?.policy.display ?? supervisor.displays.all.first?.name ?? ""
        p.delivery = s.delivery.rawValue
        p.tasks = s.backgroundTasks.map { ($0.id, $0.name) }
        p.scenes = s.scenes?.map(\.name) ?? []
        if let end = s.lastTermination {
            p.endReason = end.reason.rawValue
            p.endDescription = end.description
            p.endTime = UInt64(max(0, end.time * 1e6))
            p.endPid = UInt32(end.pid ?? 0)
        }
        p.footprint = s.footprint ?? 0
        return p
    }
}

/// A call the bus half let through that the daemon cannot take.
struct BadCall: Error, Equatable {
    var message: String
}

/// D-Bus error names: the standard ones, and one per refusal code.
enum BusErrors {
    static let failed = "org.freedesktop.DBus.Error.Failed"
    static let invalidArgs = "org.freedesktop.DBus.Error.InvalidArgs"
    static let accessDenied = "org.freedesktop.DBus.Error.AccessDenied"
    static let noSuchApp = "io.lifecycled.Lifecycle1.Error.NoSuchApp"

    /// `io.lifecycled.Lifecycle1.Refused.ScreenLocked` for screen-locked.
    static func refused(_ code: String) -> String {
        "io.lifecycled.Lifecycle1.Refused."
            + code.split(separator: "-").map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
    }

    static func answer(_ f: CommandFailure) -> BusFront.Answer {
        switch f.code {
        case .badRequest: .error(name: invalidArgs, message: f.message)
        case .unknownApp: .error(name: noSuchApp, message: f.message)
        case .permissionDenied: .error(name: accessDenied, message: f.message)
        case .refused:
            // The message starts with the code, for scripts that match text.
            .error(name: refused(f.refusal ?? "refused"), message: "\(f.refusal ?? "refused"): \(f.message)")
        }
    }
}
