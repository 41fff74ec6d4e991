// example-saver: counts while it is active and saves its state when it
// enters the background, restoring it at the next launch - what every iOS
// app does in applicationDidEnterBackground. Usage: example-saver --state FILE
@preconcurrency import Glibc
import LifecycleClient

final class Saver: ApplicationDelegate {
    let path: String
    var count = 0
    var ticking: Int?

    init(path: String) { self.path = path }

    func didFinishLaunching(_ app: Application, options: LaunchOptions) {
        if let f = fopen(path, "r") {
            var n = 0
            if fscanf_int(f, &n) { count = n }
            fclose(f)
        }
        fputs(
            "example-saver: restored count \(count)"
                + (options.previousTerminationReason.map { " (previous run: \($0))" } ?? "") + "\n", stderr)
    }

    func didBecomeActive(_ app: Application) { tick(app) }

    func tick(_ app: Application) {
        count += 1
        ticking = app.schedule(after: .milliseconds(100)) { [unowned self] in self.tick(app) }
    }

    func willResignActive(_ app: Application) {
        if let t = ticking { app.cancelScheduled(t) }
        ticking = nil
    }

    func didEnterBackground(_ app: Application) { save() }
    func willTerminate(_ app: Application) { save() }

    /// Write to a temporary file, fsync, rename: the state is never half-written.
    func save() {
        let tmp = path + ".tmp"
        guard let f = fopen(tmp, "w") else { return }
        fputs("\(count)\n", f)
        fflush(f)
        fsync(fileno(f))
        fclose(f)
        rename(tmp, path)
    }
}

func fscanf_int(_ f: UnsafeMutablePointer<FILE>, _ out: inout Int) -> Bool {
    var line = [CChar](repeating: 0, count: 64)
    guard fgets(&line, 64, f) != nil else { return false }
    let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        .trimmingCharacters()
    guard let n = Int(text) else { return false }
    out = n
    return true
}

extension String {
    func trimmingCharacters() -> String {
        String(self.drop(while: { $0 == " " }).prefix(while: { $0 != "\n" && $0 != " " }))
    }
}

let args = CommandLine.arguments
guard let i = args.firstIndex(of: "--state"), i + 1 < args.count else {
    fputs("usage: example-saver --state FILE\n", stderr)
    exit(2)
}
Application.main(delegate: Saver(path: args[i + 1]))
