#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleControl
import LifecycleCore
import LifecycleOS
import Logging

// A control request as a command for the front: each JSON command and its
// arguments checked, with a clear error naming what is wrong.

extension ControlServer {
    /// The JSON request as a typed command; what the JSON leaves out or
    /// gets wrong is a bad request, named.
    static func command(_ r: ControlRequest) -> Result<Command, CommandFailure> {
        func app() -> Result<AppID, CommandFailure> {
            guard let app = r.app else {
                return .failure(CommandFailure(code: .badRequest, message: "'\(r.command.rawValue)' needs an app"))
            }
            return .success(app)
        }
        switch r.command {
        case .status: return .success(.status(apps: r.apps))
        case .events: return .success(.events(apps: r.apps, follow: r.follow == true))
        case .launch: return app().map { .launch($0, r.background == true ? .background : .foreground) }
        case .activate: return app().map { .activate($0, scene: r.scene, display: r.display) }
        case .discard:
            guard let scene = r.scene else {
                return .failure(CommandFailure(code: .badRequest, message: "'discard' needs a scene"))
            }
            return app().map { .discard($0, scene) }
        case .stop: return app().map { .stop($0) }
        case .kill: return app().map { .kill($0) }
        case .restart: return app().map { .restart($0) }
        case .fetch: return app().map { .fetch($0) }
        case .push:
            guard let text = r.payload else {
                return .failure(CommandFailure(code: .badRequest, message: "'push' needs a payload"))
            }
            switch PushPayload.check(text) {
            case .failure(let problem): return .failure(CommandFailure(code: .badRequest, message: "\(problem)"))
            case .success(let payload): return app().map { .push($0, payload: payload) }
            }
        case .open:
            guard let url = r.url, !url.isEmpty else {
                return .failure(CommandFailure(code: .badRequest, message: "'open' needs a URL"))
            }
            guard url.utf8.count <= 2048 else {
                return .failure(CommandFailure(code: .badRequest, message: "URL longer than 2048 bytes"))
            }
            return .success(.open(url: url))
        case .avail: return .success(.avail)
        case .shown:
            guard let report = r.shown else {
                return .failure(CommandFailure(code: .badRequest, message: "'shown' needs a report"))
            }
            guard report.outputs.count <= 64, (report.overlaid?.count ?? 0) <= 64, report.windows.count <= 1024 else {
                return .failure(
                    CommandFailure(
                        code: .badRequest,
                        message: "a report names at most 64 outputs (and 64 overlaid) and 1024 windows "
                            + "(got \(report.outputs.count), \(report.overlaid?.count ?? 0) and \(report.windows.count))"
                    ))
            }
            if let playing = report.playing, playing.count > 1024 || playing.contains(where: { $0 <= 0 }) {
                return .failure(
                    CommandFailure(code: .badRequest, message: "'playing' names at most 1024 pids, each above 0"))
            }
            if let w = report.windows.first(where: { $0.rank < 0 || ($0.pid ?? 1) <= 0 }) {
                return .failure(
                    CommandFailure(code: .badRequest, message: "window \(w.id): a rank below 0 or a pid not above 0"))
            }
            return .success(.shown(report))
        case .tail:
            if let n = r.limit, n < 0 || n > 100_000 {
                return .failure(CommandFailure(code: .badRequest, message: "'tail' shows 0 to 100000 lines, not \(n)"))
            }
            return app().map { .tail($0, lines: r.limit ?? 10, offset: r.offset) }
        case .signal:
            guard let text = r.signal else {
                return .failure(CommandFailure(code: .badRequest, message: "'signal' needs a signal"))
            }
            switch SignalNames.check(text) {
            case .failure(let problem): return .failure(CommandFailure(code: .badRequest, message: "\(problem)"))
            case .success(let number): return app().map { .signal($0, number) }
            }
        case .home: return .success(.display(r.display, .home))
        case .lock: return .success(.display(r.display, .lock))
        case .unlock: return .success(.display(r.display, .unlock))
        case .interruptionBegin: return .success(.display(r.display, .interruptionBegan))
        case .interruptionEnd: return .success(.display(r.display, .interruptionEnded))
        case .daemonReexec: return .success(.daemonReexec)
        case .reload: return .success(.reload(dryRun: r.dryRun == true, restartChanged: r.restartChanged == true))
        case .jetsam: return .success(.jetsam(limit: r.limit))
        case .pressure:
            guard let level = r.level.flatMap(MemoryLevel.init(rawValue:)) else {
                let got = r.level.map { "'\($0)'" } ?? "none"
                return .failure(
                    CommandFailure(
                        code: .badRequest,
                        message: "'pressure' needs a level: normal, warning or critical (got \(got))"))
            }
            return .success(.pressure(level))
        }
    }
}
