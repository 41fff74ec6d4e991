import ArgumentParser
import Foundation
import LifecycleControl

// Commands that wait for their outcome, as systemctl does: `launch`,
// `activate`, `stop`, `home`, `lock` and `unlock` return once the change has
// happened (exit 0) or failed (exit 6, with the reason: the app ended
// instead), or after --timeout (exit 7). --no-block returns once the daemon
// accepted the command. How: follow the events of the apps concerned
// first, then send the command, then look at their status; each record
// about them is a reason to look again. Nothing is polled.

/// What waiting commands share.
struct Waiting: ParsableArguments {
    @Flag(help: "Return once the daemon accepted the command; do not wait for the outcome.")
    var noBlock = false
    @Option(help: "Seconds to wait for the outcome (exit 7 after).")
    var timeout: Double = 60
}

/// What a command is waiting for, judged on a status report.
enum Goal {
    /// The app is in front: active, or inactive under an interruption, and launched.
    case inFront(String)
    /// The app finished launching into the background (suspended, or running there).
    case launchedInBackground(String)
    /// The app has no process any more.
    case ended(String)
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

    var apps: [String] {
        switch self {
        case .inFront(let a), .launchedInBackground(let a), .ended(let a), .relaunched(let a, _, _),
            .sceneInFront(let a, _, _), .sceneGone(let a, _):
            [a]
        case .scenesLeft(let refs), .scenesBack(let refs):
            Array(Set(refs.map { String($0.split(separator: "/").first ?? "") }))
        }
    }

    func reached(_ r: StatusReport) -> Bool {
        func app(_ name: String) -> AppStatus? { r.apps.first { $0.name == name } }
        func interrupted(_ display: String) -> Bool {
            r.daemon.displays?.first { $0.name == display }.map { $0.interruptions > 0 } ?? (r.daemon.interruptions > 0)
        }
        func inFront(_ name: String) -> Bool {
            guard let a = app(name), a.launching != true, a.awaiting == nil else { return false }
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
        case .ended(let name): return app(name)?.state == .notRunning
        case .sceneInFront(let name, let sceneName, let display):
            guard let a = app(name), a.launching != true, a.awaiting == nil else { return false }
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

extension Connection {
    /// Sends `request` and waits for `goal` (computed from the status
    /// before the command, for home, lock and unlock).
    func requestAndWait(_ request: ControlRequest, _ waiting: Waiting, goal: (StatusReport) -> Goal) throws {
        guard !waiting.noBlock else {
            _ = try self.request(request)
            return
        }
        // An app that ended before this command was sent has not failed it.
        let sentAt = Date().timeIntervalSince1970
        let before = try status()
        let goal = goal(before)
        let follower = try client()
        follower.setReadTimeout(seconds: waiting.timeout)
        let following: ControlResponse
        do { following = try follower.send(ControlRequest(.events, apps: goal.apps, follow: true)) } catch {
            printError("cannot follow the daemon's events: \(error)")
            throw ExitCode(Exit.badResponse)
        }
        guard following.ok else { try fail(following.error) }  // an unknown app, say
        _ = try self.request(request)
        let giveUp = Date().addingTimeInterval(waiting.timeout)
        while true {
            let report = try status()
            if goal.reached(report) { return }
            if case .ended = goal {
            } else if let failed = goal.apps.compactMap({ name in report.apps.first { $0.name == name } })
                .first(where: { $0.state == .notRunning && ($0.lastTermination?.time ?? 0) >= sentAt })
            {
                let why = failed.lastTermination.map { "\($0.reason.rawValue): \($0.description)" } ?? "ended"
                printError("\(failed.name) ended instead: \(why)")
                throw ExitCode(Exit.failed)
            }
            // Wait for the next record about these apps, or the timeout.
            let left = giveUp.timeIntervalSinceNow
            guard left > 0 else { throw timedOut(request, waiting) }
            follower.setReadTimeout(seconds: left)
            do { _ = try follower.readResponse() } catch {
                guard giveUp.timeIntervalSinceNow <= 0 else {
                    printError(
                        "lifecycled went away while '\(request.command.rawValue)' was under way (a restart or "
                            + "a daemon-reexec?); supervisorctl status shows where it is")
                    throw ExitCode(Exit.noDaemon)
                }
                throw timedOut(request, waiting)
            }
        }
    }

    private func timedOut(_ request: ControlRequest, _ waiting: Waiting) -> ExitCode {
        printError(
            "'\(request.command.rawValue)' accepted, but not done within \(waiting.timeout) s (--timeout); "
                + "supervisorctl status shows where it is")
        return ExitCode(Exit.timedOut)
    }

    func status() throws -> StatusReport {
        guard let report = try request(ControlRequest(.status)).status else {
            printError("the daemon answered status without a report")
            throw ExitCode(Exit.badResponse)
        }
        return report
    }
}
