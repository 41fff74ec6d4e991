// example-news: a news reader in the background-fetch style. It declares the
// fetch mode (config/apps/news.toml): while the user is elsewhere the daemon
// wakes it now and then with performFetch, and it "fetches" the next headline
// (a counter, so no network is needed), answering new-data. While it is in
// front it reads on: its place moves one article every 100 ms. It saves its
// place as restoration data in didEnterBackground, so that when it is killed
// while suspended (for memory, say) it comes back where it was: the next
// launch's options hand the data back. Each step is one line in --log FILE:
//   launched reason=REASON place=N fetched=N   (restored=yes when data came back)
//   fetch headline=N        place N             saved
@preconcurrency import Glibc
import LifecycleClient

/// What the app saves and restores: "place fetched".
struct Place: Equatable {
    var article = 0
    var headlines = 0

    var encoded: [UInt8] { Array("\(article) \(headlines)".utf8) }

    init() {}
    init?(_ bytes: [UInt8]) {
        let parts = String(decoding: bytes, as: UTF8.self).split(separator: " ").compactMap { Int($0) }
        guard parts.count == 2 else { return nil }
        article = parts[0]
        headlines = parts[1]
    }
}

final class News: ApplicationDelegate {
    let fd: Int32
    var place = Place()
    var reading: Int?

    init(log: String) {
        fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        if fd < 0 { fputs("example-news: cannot open \(log)\n", stderr); exit(2) }
    }

    func note(_ line: String) {
        let text = line + "\n"
        _ = text.withCString { write(fd, $0, strlen($0)) }
    }

    func didFinishLaunching(_ app: Application, options: LaunchOptions) {
        var restored = false
        if let data = options.restorationData, let saved = Place(data) {
            place = saved
            restored = true
        }
        note(
            "launched reason=\(options.reason ?? "user") place=\(place.article) fetched=\(place.headlines)"
                + (restored ? " restored=yes" : ""))
    }

    func didBecomeActive(_ app: Application) { read(app) }

    func read(_ app: Application) {
        place.article += 1
        reading = app.schedule(after: .milliseconds(100)) { [unowned self] in self.read(app) }
    }

    func willResignActive(_ app: Application) {
        if let r = reading { app.cancelScheduled(r) }
        reading = nil
    }

    func didEnterBackground(_ app: Application) {
        app.saveRestorationData(place.encoded)
        note("saved place \(place.article)")
    }

    func performFetch(_ app: Application) -> FetchResult {
        place.headlines += 1
        note("fetch headline=\(place.headlines)")
        app.saveRestorationData(place.encoded)  // a kill while suspended keeps what was fetched
        return .newData
    }
}

let args = CommandLine.arguments
guard let i = args.firstIndex(of: "--log"), i + 1 < args.count else {
    fputs("usage: example-news --log FILE\n", stderr)
    exit(2)
}
Application.main(delegate: News(log: args[i + 1]))
