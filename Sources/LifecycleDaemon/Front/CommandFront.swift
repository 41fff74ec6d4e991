@preconcurrency import Glibc
import LifecycleControl
import LifecycleCore
import LifecycleOS

// The front: what any transport hands the daemon. A caller (with the
// credentials its transport vouches for) and a typed command in; a typed
// result out. The JSON control socket is one transport over it; a D-Bus
// object can be another without copying any of this. Which commands need
// permission, and who has it, is decided here, once.

/// Who asks, as the kernel told the transport (SO_PEERCRED, or a bus's
/// credentials). Nil fields: not known, which grants nothing.
struct Caller: Sendable, Equatable {
    var pid: Int32?
    var uid: UInt32?
    var gid: UInt32?
    /// Every group, when the transport says (a bus daemon's UnixGroupIDs);
    /// nil: read from /proc for `pid`.
    var groups: [UInt32]? = nil
    /// polkit said yes to this very call (the D-Bus transport).
    var polkitAuthorized = false

    static let unknown = Caller()
}

/// Everything that can be asked.
enum Command: Sendable, Equatable {
    case status(apps: [AppID]?)
    case events(apps: [AppID]?, follow: Bool)
    case launch(AppID, LaunchMode)
    /// Its scene (nil: its most recent) to the front of a display (nil: the scene's own).
    case activate(AppID, scene: SceneID? = nil, display: DisplayID? = nil)
    /// home, interruptions or the lock on one display; nil: on every display.
    case display(DisplayID?, DisplayCommand)
    /// The app switcher's swipe of one scene.
    case discard(AppID, SceneID)
    case stop(AppID)
    case kill(AppID)
    /// Stop, then launch into the same place.
    case restart(AppID)
    /// Send a signal to the app's main process.
    case signal(AppID, Int32)
    /// Every manifest in the apps directory, and whether it is in force.
    case avail
    /// An app's recent output: the last `lines`, or what follows `offset`.
    case tail(AppID, lines: Int, offset: UInt64?)
    /// A background fetch now (Xcode's "Simulate Background Fetch").
    case fetch(AppID)
    /// A remote notification, with its (checked) JSON payload.
    case push(AppID, payload: String)
    /// Route a URL to the app that lists its scheme.
    case open(url: String)
    /// The most recent kill records, at most `limit`.
    case jetsam(limit: Int?)
    /// Inject a memory level, for demos and tests.
    case pressure(MemoryLevel)
    /// Replace the running daemon with the binary now at its path, keeping
    /// every app (an upgrade).
    case daemonReexec
    /// Read the configuration again and apply it app by app.
    case reload(dryRun: Bool, restartChanged: Bool)
    /// What the compositor shows, from its follower (Follower.swift);
    /// `fresh`: the first report on its connection (a follower started,
    /// or come back), whose count of requests carried out starts anew.
    /// `reporter`: the bus name of a compositor that reports over D-Bus
    /// (nil: over the control socket).
    case shown(ShownReport, fresh: Bool = false, reporter: String? = nil)

    /// Commands that change something need permission, and so does an
    /// app's output (it may hold what only its operators should read); the rest only read.
    var changes: Bool {
        switch self {
        case .status, .events, .jetsam, .avail: false
        case .launch, .activate, .stop, .kill, .restart, .signal, .tail, .pressure, .fetch, .push, .open, .display,
            .discard, .daemonReexec, .reload, .shown:
            true
        }
    }

    /// The apps it names, which must all be known.
    var apps: [AppID] {
        switch self {
        case .status(let apps?), .events(let apps?, _): apps
        case .launch(let id, _), .activate(let id, _, _), .discard(let id, _), .stop(let id), .kill(let id),
            .restart(let id), .signal(let id, _),
            .tail(let id, _, _), .fetch(let id), .push(let id, _):
            [id]
        default: []
        }
    }
}

enum CommandResult {
    case done
    case status(StatusReport)
    case events([EventRecord])
    /// The caller wants every record from now on, for these apps (empty: all).
    case follow(Set<AppID>)
    case kills([KillRecord])
    case reload(ReloadReport)
    case avail([AvailableApp])
    case tail(TailReport)
}

struct CommandFailure: Error, Equatable {
    var code: ControlError.Code
    var message: String
    /// The core's refusal code, when the core refused.
    var refusal: String?
}

/// What the front needs of the daemon.
protocol CommandTarget: AnyObject {
    func knows(_ app: AppID) -> Bool
    /// Hands an input to the core, performs its effects, returns them.
    func submit(_ input: Input) -> [Effect]
    func statusReport(_ apps: [AppID]?) -> StatusReport
    func recentRecords(apps: Set<AppID>) -> [EventRecord]
    func kills(limit: Int?) -> [KillRecord]
    /// Injects a level with fresh footprints; returns the core's effects.
    func simulateMemoryLevel(_ level: MemoryLevel) -> [Effect]
    /// Schedules the re-execution once the answer is out; a reason when it cannot.
    func scheduleReexec() -> String?
    /// Reads the configuration again; applies it unless `dryRun`. Fails,
    /// changing nothing, when the daemon file is broken.
    func reload(dryRun: Bool, restartChanged: Bool) -> Result<ReloadReport, ConfigError>
    /// Sends `signal` to the app's main process; a refusal when it has none.
    func sendSignal(_ id: AppID, _ signal: Int32) -> Refusal?
    /// The apps directory as a reload would read it now, against what is in force.
    func available() -> Result<[AvailableApp], ConfigError>
    /// An app's recent output, or why there is none to show.
    func tail(_ id: AppID, lines: Int, offset: UInt64?) -> Result<TailReport, CommandFailure>
    /// A follower's report of what the compositor shows; the core's effects.
    func shown(_ report: ShownReport, fresh: Bool, reporter: String?) -> [Effect]
    /// An activation was accepted: the compositor is asked to show the app.
    func raise(_ id: AppID, display: DisplayID?, scene: SceneID?)
    /// A home was accepted: the compositor is asked to show the display's home.
    func home(_ display: DisplayID?)
}

/// Root may change things, and so may members of the control group (as
/// primary group, or as a supplementary group of the calling process, read
/// from /proc as the kernel has it); anyone who can reach a transport may read.
struct Permissions {
    let controlGID: gid_t?

    init(controlGroup: String?) {
        controlGID = controlGroup.flatMap { getgrnam($0)?.pointee.gr_gid }
    }

    func mayChange(_ caller: Caller) -> Bool {
        if caller.polkitAuthorized { return true }
        guard let uid = caller.uid else { return false }
        if uid == 0 { return true }
        guard let gid = controlGID else { return false }
        if caller.gid == gid { return true }
        if let groups = caller.groups { return groups.contains(gid) }
        guard let pid = caller.pid, let status = try? Posix.readFile("/proc/\(pid)/status") else { return false }
        for line in status.split(separator: "\n") where line.hasPrefix("Groups:") {
            // "Groups:\t1 24 27 " - tab after the colon, spaces between.
            return line.dropFirst(7).split(whereSeparator: { $0 == " " || $0 == "\t" }).contains { gid_t($0) == gid }
        }
        return false
    }
}

final class CommandFront {
    unowned let target: any CommandTarget
    var permissions: Permissions

    init(target: any CommandTarget, permissions: Permissions) {
        self.target = target
        self.permissions = permissions
    }

    func execute(_ command: Command, from caller: Caller) -> Result<CommandResult, CommandFailure> {
        if command.changes && !permissions.mayChange(caller) {
            return .failure(
                CommandFailure(
                    code: .permissionDenied,
                    message: "permission denied: '\(command.name)' needs root or membership of the control group"))
        }
        if let unknown = command.apps.first(where: { !target.knows($0) }) {
            return .failure(CommandFailure(code: .unknownApp, message: "unknown app '\(unknown)'"))
        }
        switch command {
        case .status(let apps): return .success(.status(target.statusReport(apps)))
        case .events(let apps, let follow):
            let filter = Set(apps ?? [])
            return .success(follow ? .follow(filter) : .events(target.recentRecords(apps: filter)))
        case .jetsam(let limit):
            if let limit, limit < 0 {
                return .failure(CommandFailure(code: .badRequest, message: "limit must not be negative"))
            }
            return .success(.kills(target.kills(limit: limit)))
        case .pressure(let level): return outcome(target.simulateMemoryLevel(level))
        case .launch(let id, let mode): return outcome(target.submit(.launch(id, mode)))
        case .activate(let id, let scene, let display):
            let input: Input =
                scene == nil && display == nil ? .activate(id) : .activateScene(id, scene: scene, display: display)
            let result = outcome(target.submit(input))
            if case .success = result { target.raise(id, display: display, scene: scene) }
            return result
        case .display(let d, let c):
            let result = outcome(target.submit(.display(d, c)))
            if case .success = result, c == .home { target.home(d) }
            return result
        case .discard(let id, let scene): return outcome(target.submit(.discard(id, scene)))
        case .stop(let id): return outcome(target.submit(.stop(id)))
        case .kill(let id): return outcome(target.submit(.kill(id)))
        case .restart(let id): return outcome(target.submit(.restart(id)))
        case .fetch(let id): return outcome(target.submit(.fetch(id)))
        case .push(let id, let payload): return outcome(target.submit(.push(id, payload: payload)))
        case .open(let url): return outcome(target.submit(.openURL(url)))
        case .shown(let report, let fresh, let reporter):
            return outcome(target.shown(report, fresh: fresh, reporter: reporter))
        case .signal(let id, let number):
            if let why = target.sendSignal(id, number) { return outcome([.refused(why)]) }
            return .success(.done)
        case .tail(let id, let lines, let offset):
            return target.tail(id, lines: lines, offset: offset).map { .tail($0) }
        case .avail:
            switch target.available() {
            case .success(let apps): return .success(.avail(apps))
            case .failure(let e): return badConfig(e)
            }
        case .daemonReexec:
            if let why = target.scheduleReexec() {
                return .failure(CommandFailure(code: .refused, message: why, refusal: "cannot-reexec"))
            }
            return .success(.done)
        case .reload(let dryRun, let restartChanged):
            switch target.reload(dryRun: dryRun, restartChanged: restartChanged) {
            case .success(let report): return .success(.reload(report))
            case .failure(let e): return badConfig(e)
            }
        }
    }

    private func badConfig(_ e: ConfigError) -> Result<CommandResult, CommandFailure> {
        .failure(
            CommandFailure(
                code: .refused, message: "the daemon file is broken, nothing changed: \(e)", refusal: "bad-config"))
    }

    private func outcome(_ effects: [Effect]) -> Result<CommandResult, CommandFailure> {
        for case .refused(let why) in effects {
            let code: ControlError.Code = if case .unknownApp = why { .unknownApp } else { .refused }
            return .failure(CommandFailure(code: code, message: why.description, refusal: why.code))
        }
        return .success(.done)
    }
}

extension Command {
    /// The command's name as users type it.
    var name: String {
        switch self {
        case .status: "status"
        case .events: "events"
        case .launch: "launch"
        case .activate: "activate"
        case .stop: "stop"
        case .kill: "kill"
        case .restart: "restart"
        case .signal: "signal"
        case .avail: "avail"
        case .tail: "tail"
        case .jetsam: "jetsam"
        case .pressure: "pressure"
        case .daemonReexec: "daemon-reexec"
        case .reload: "reload"
        case .fetch: "fetch"
        case .push: "push"
        case .open: "open"
        case .discard: "discard"
        case .shown: "shown"
        case .display(_, let c): c.name
        }
    }
}
