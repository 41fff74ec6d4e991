// example-worker: finishes its work in the background with a background
// task, then ends the task so it can be suspended. Usage:
//   example-worker --log FILE [--work-ms N] [--ignore-expiration]
// Logs events and "task began N", "task ended", "task expired" to FILE.
// --work-ms longer than the budget shows the expiration handler and the kill.
@preconcurrency import Glibc
import LifecycleClient

final class Worker: ApplicationDelegate {
    let fd: Int32
    let workMilliseconds: Int
    let ignoreExpiration: Bool
    var task = BackgroundTaskIdentifier.invalid

    init(log: String, workMilliseconds: Int, ignoreExpiration: Bool) {
        fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        self.workMilliseconds = workMilliseconds
        self.ignoreExpiration = ignoreExpiration
    }

    func note(_ line: String) {
        let text = line + "\n"
        _ = text.withCString { write(fd, $0, strlen($0)) }
    }

    func didBecomeActive(_ app: Application) { note("didBecomeActive") }
    func willResignActive(_ app: Application) { note("willResignActive") }
    func willEnterForeground(_ app: Application) { note("willEnterForeground") }
    func willTerminate(_ app: Application) { note("willTerminate") }

    func didEnterBackground(_ app: Application) {
        note("didEnterBackground")
        task = app.beginBackgroundTask(name: "finish-work") { [unowned self] in
            self.note("task expired")
            if !self.ignoreExpiration { self.finish(app) }
        }
        guard task != .invalid else { return note("task invalid") }
        let left = app.backgroundTimeRemaining.map { "\($0.components.seconds)s" } ?? "unlimited"
        note("task began \(task.rawValue) (\(left) left)")
        app.schedule(after: .milliseconds(workMilliseconds)) { [unowned self] in self.finish(app) }
    }

    func finish(_ app: Application) {
        guard task != .invalid else { return }
        note("task ended")
        app.endBackgroundTask(task)
        task = .invalid
    }
}

let args = CommandLine.arguments
func option(_ name: String) -> String? {
    guard let i = args.firstIndex(of: name), i + 1 < args.count else { return nil }
    return args[i + 1]
}
guard let log = option("--log") else {
    fputs("usage: example-worker --log FILE [--work-ms N] [--ignore-expiration]\n", stderr)
    exit(2)
}
Application.main(
    delegate: Worker(
        log: log, workMilliseconds: option("--work-ms").flatMap(Int.init) ?? 1000,
        ignoreExpiration: args.contains("--ignore-expiration")))
