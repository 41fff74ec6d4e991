// What a command that changes an app's or a display's place is waiting
// for, judged on a status report: shared by supervisorctl's waiting
// commands and the daemon's D-Bus operations, so that both call a change
// done, or failed, by the same rule.

/// What a command is waiting for, judged on a status report.
public enum Goal: Sendable, Equatable {
    /// The app is in front: active, or inactive under an interruption, and launched.
    case inFront(String)
    /// The app finished launching into the background (suspended, or running there).
    case launchedInBackground(String)
    /// The app's process `after` (the one the command found) has ended:
    /// the app is not running, or a new process of it is prewarmed (an
    /// `always` app is prewarmed again as soon as its run ends).
    case ended(String, after: Int32?)
    /// A new run of the app (not the process `after`) is in front (or, when
    /// the front was taken meanwhile, launched into the background).
    case relaunched(String, after: Int32?, inFront: Bool)
    /// A scene of the app (the one named, or any) is in front of the
    /// display named (or any), and the app launched.
    case sceneInFront(String, scene: String?, display: String?)
    /// None of these scenes (`app` or `app/scene`, as a display's front
    /// names them) is in the foreground any more, and their apps have
    /// acknowledged what they were told.
    case scenesLeft([String])
    /// Every one of these scenes is in front again.
    case scenesBack([String])
    /// The scene is gone from the app (discarded).
    case sceneGone(String, scene: String)

    public var apps: [String] {
        switch self {
        case .inFront(let a), .launchedInBackground(let a), .ended(let a, _), .relaunched(let a, _, _),
            .sceneInFront(let a, _, _), .sceneGone(let a, _):
            [a]
        case .scenesLeft(let refs), .scenesBack(let refs):
            Array(Set(refs.map { String($0.split(separator: "/").first ?? "") }))
        }
    }

    public func reached(_ r: StatusReport) -> Bool {
        func app(_ name: String) -> AppStatus? { r.apps.first { $0.name == name } }
        func interrupted(_ display: String) -> Bool {
            r.daemon.displays?.first { $0.name == display }.map(\.interrupted) ?? (r.daemon.interruptions > 0)
        }
        func inFront(_ name: String) -> Bool {
            // With a compositor's follower, in front is also shown by it (docs/focus.md).
            guard let a = app(name), a.launching != true, a.awaiting == nil, a.window != "hidden" else { return false }
            let interruptedScene =
                a.scenes?.contains { $0.inFront && interrupted($0.display) } ?? (r.daemon.interruptions > 0)
            return a.state == .active || (a.state == .inactive && interruptedScene)
        }
        /// `app` or `app/scene`: the app and its scene.
        func scene(_ ref: String) -> (AppStatus, SceneStatus)? {
            let parts = ref.split(separator: "/", maxSplits: 1).map(String.init)
            guard let a = app(parts[0]) else { return nil }
            let name = parts.count > 1 ? parts[1] : "main"
            return a.scenes?.first { $0.name == name }.map { (a, $0) }
        }
        func shown(_ s: SceneStatus) -> Bool { s.state == .active || (s.state == .inactive && interrupted(s.display)) }
        switch self {
        case .inFront(let name): return inFront(name)
        case .launchedInBackground(let name):
            guard let a = app(name), a.launching != true, a.awaiting == nil else { return false }
            return a.state == .background || a.state == .suspended
        case .ended(let name, let after):
            guard let a = app(name) else { return false }
            return a.state == .notRunning || (a.state == .prewarmed && a.pid != after)
        case .sceneInFront(let name, let sceneName, let display):
            guard let a = app(name), a.launching != true, a.awaiting == nil, a.window != "hidden" else { return false }
            return a.scenes?.contains { s in
                (sceneName == nil || s.name == sceneName) && (display == nil || s.display == display) && s.inFront
                    && shown(s)
            } == true
        case .scenesLeft(let refs):
            return refs.allSatisfy { ref in scene(ref).map { $0.0.awaiting == nil && $0.1.state < .inactive } ?? true }
        case .scenesBack(let refs):
            return refs.allSatisfy { ref in
                scene(ref).map { $0.0.awaiting == nil && shown($0.1) } ?? false
            }
        case .sceneGone(let name, let sceneName):
            return app(name).map { a in a.awaiting == nil && !(a.scenes ?? []).contains { $0.name == sceneName } }
                ?? true
        case .relaunched(let name, let old, let front):
            guard let a = app(name), a.pid != nil, a.pid != old else { return false }
            return (front && inFront(name)) || Goal.launchedInBackground(name).reached(r)
        }
    }
}

extension Goal {
    /// Why the change failed: an app it concerns ended (after `since`,
    /// seconds since the epoch) instead of reaching it. Nil when none did,
    /// and always for `ended`, which an app's end reaches.
    public func failure(_ r: StatusReport, since: Double) -> Failure? {
        if case .ended = self { return nil }
        for name in apps {
            guard let a = r.apps.first(where: { $0.name == name }), a.state == .notRunning,
                let end = a.lastTermination, end.time >= since
            else { continue }
            return Failure(app: name, reason: end.reason.rawValue, description: end.description)
        }
        return nil
    }

    /// The change's outcome, once known: reached, or an app it concerns
    /// ended instead (a stop or kill by a user meanwhile supersedes it).
    public func outcome(_ r: StatusReport, since: Double) -> Outcome? {
        if reached(r) { return .done }
        guard let f = failure(r, since: since) else { return nil }
        let user =
            f.reason == TerminationCode.stoppedByUser.rawValue || f.reason == TerminationCode.killedByUser.rawValue
        return user ? .superseded(f) : .failed(f)
    }

    public enum Outcome: Sendable, Equatable {
        case done
        case failed(Failure)
        case superseded(Failure)
    }

    public struct Failure: Sendable, Equatable {
        public var app: String
        /// The termination code (launch-failed, exited, ...).
        public var reason: String
        public var description: String
    }

    /// What a request waits for, given the status before it was sent; nil
    /// for requests that are done once the daemon accepted them.
    public static func of(_ request: ControlRequest, before: StatusReport) -> Goal? {
        func front() -> [String] {
            guard let displays = before.daemon.displays else { return before.daemon.foreground }  // a daemon before displays
            return displays.filter { request.display == nil || $0.name == request.display }.flatMap(\.front)
        }
        let app = request.app ?? ""
        switch request.command {
        case .launch: return request.background == true ? .launchedInBackground(app) : .inFront(app)
        case .activate:
            return request.scene == nil && request.display == nil
                ? .inFront(app) : .sceneInFront(app, scene: request.scene, display: request.display)
        case .stop, .kill: return .ended(app, after: before.apps.first { $0.name == app }?.pid)
        case .restart:
            let was = before.apps.first { $0.name == app }
            // A prewarmed process is launched as it is (the same pid), in front.
            if was?.state == .prewarmed { return .inFront(app) }
            let inFront = was.map { $0.state == .active || $0.state == .inactive } ?? false
            return .relaunched(app, after: was?.pid, inFront: inFront || was?.state == .notRunning)
        case .discard:
            // A suspended app is told when it next runs: nothing to wait for now.
            if before.apps.first(where: { $0.name == app })?.state == .suspended { return nil }
            return request.scene.map { .sceneGone(app, scene: $0) }
        case .home, .lock: return .scenesLeft(front())
        case .unlock: return .scenesBack(front())
        default: return nil
        }
    }
}
