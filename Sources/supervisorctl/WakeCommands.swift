import ArgumentParser
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleControl

// The commands that wake apps for work in the background, or open a URL:
// fetch, push, open. They return once the daemon has taken the request; the
// app's answer shows in `events` (kind "wake").

struct Fetch: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fetch",
        abstract: "Give an app a background fetch now (as Xcode's Simulate Background Fetch).",
        discussion: """
            The app must declare the fetch background mode. A suspended app is thawed for it, one \
            that is not running is launched into the background; either gets performFetch and is \
            suspended again after its answer. Refused for an app in front, one the user quit, or one \
            already fetching. `supervisorctl events APP` shows the answer.
            """)
    @OptionGroup var connection: Connection
    @Argument(completion: .custom(appNames)) var app: String
    func run() throws { _ = try connection.request(ControlRequest(.fetch, app: app)) }
}

struct Push: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push",
        abstract: "Deliver a remote notification (a JSON object of at most 4 KiB) to an app.",
        discussion: """
            PAYLOAD is the JSON text itself, or - to read it from standard input; --file reads it \
            from a file. A running app gets didReceiveRemoteNotification at once; a suspended one \
            is thawed for it and a not-running one launched into the background (remote-notification \
            mode), within its budget of wake-ups per hour. Beyond the budget, without the mode, or \
            after the user quit the app, the newest payload is held and handed over later.
            """)
    @OptionGroup var connection: Connection
    @Option(name: .long, help: "Read the payload from this file.", completion: .file())
    var file: String?
    @Argument(completion: .custom(appNames)) var app: String
    @Argument(help: "The payload, or - for standard input.") var payload: String?

    func validate() throws {
        if (payload == nil) == (file == nil) {
            throw ValidationError("give the payload as an argument, as - (standard input), or with --file, once")
        }
    }

    func run() throws {
        let text: String
        if let file {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw ValidationError("cannot read \(file)")
            }
            text = String(decoding: data, as: UTF8.self)
        } else if payload == "-" {
            var bytes: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = read(0, &chunk, chunk.count)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                bytes += chunk[0..<n]
            }
            text = String(decoding: bytes, as: UTF8.self)
        } else {
            text = payload!
        }
        let trimmed = text.trimmed
        if case .failure(let problem) = PushPayload.check(trimmed) { throw ValidationError("\(problem)") }
        var request = ControlRequest(.push, app: app)
        request.payload = trimmed
        _ = try connection.request(request)
    }
}

struct Open: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "open",
        abstract: "Open a URL: the app that lists its scheme comes to the front and gets openURL.",
        discussion: """
            An app that is not running is launched into the foreground with the URL in its launch \
            options. A scheme no manifest lists (url_schemes) is an error.
            """)
    @OptionGroup var connection: Connection
    @Argument(help: "The URL (scheme:...).") var url: String
    func run() throws {
        var request = ControlRequest(.open)
        request.url = url
        _ = try connection.request(request)
    }
}
