import ArgumentParser
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleControl

// The commands that change where apps are: launch, activate, home, interruptions,
// lock, stop, restart, kill, signal. The waiting ones return once the change has
// happened (Waiting.swift).

struct Launch: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "launch",
        abstract: "Launch an app: into the foreground, or with --background into the background.")
    @OptionGroup var connection: Connection
    @OptionGroup var waiting: Waiting
    @Flag(help: "Launch into the background (willFinishLaunching, didFinishLaunching, didEnterBackground).")
    var background = false
    @Argument(completion: .custom(appNames)) var app: String
    func run() throws {
        try connection.requestAndWait(ControlRequest(.launch, app: app, background: background), waiting)
    }
}

struct Activate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "activate",
        abstract: "Bring an app (one of its scenes) to the foreground of a display, launching it when needed.",
        discussion: """
            Without --scene: the app's most recent scene (an app without scenes has one, main). \
            A new --scene name creates the scene (apps whose manifest sets scenes = true). \
            Without --display: the scene's own display, or the app's manifest display, or the first. \
            A scene shown on another display moves there through the background.
            """)
    @OptionGroup var connection: Connection
    @OptionGroup var waiting: Waiting
    @Option(help: "The display (as the daemon file names it).") var display: String?
    @Option(help: "The scene (created when new).") var scene: String?
    @Argument(completion: .custom(appNames)) var app: String
    func run() throws {
        var request = ControlRequest(.activate, app: app)
        request.display = display
        request.scene = scene
        try connection.requestAndWait(request, waiting)
    }
}

/// `--display D`: one display; without it, every display.
struct DisplayOption: ParsableArguments {
    @Option(help: "One display (default: every display).") var display: String?

    func apply(_ request: inout ControlRequest) { request.display = display }
}

struct Home: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "home",
        abstract: "Send every foreground app (or scene, on one display) to the background.")
    @OptionGroup var connection: Connection
    @OptionGroup var waiting: Waiting
    @OptionGroup var on: DisplayOption
    func run() throws {
        var request = ControlRequest(.home)
        on.apply(&request)
        try connection.requestAndWait(request, waiting)
    }
}

struct Interruption: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "interruption",
        abstract: "A temporary interruption (alert, call banner) on every display or one: begin or end.")
    enum Phase: String, ExpressibleByArgument, CaseIterable { case begin, end }
    @OptionGroup var connection: Connection
    @OptionGroup var on: DisplayOption
    @Argument(help: "begin or end") var phase: Phase
    func run() throws {
        var request = ControlRequest(phase == .begin ? .interruptionBegin : .interruptionEnd)
        on.apply(&request)
        _ = try connection.request(request)
    }
}

struct Lock: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lock",
        abstract: "Lock the screen (every display, or one): what is in front goes to the background until unlock.")
    @OptionGroup var connection: Connection
    @OptionGroup var waiting: Waiting
    @OptionGroup var on: DisplayOption
    func run() throws {
        var request = ControlRequest(.lock)
        on.apply(&request)
        try connection.requestAndWait(request, waiting)
    }
}

struct Unlock: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unlock",
        abstract: "Unlock the screen (every display, or one): what is in front comes back.")
    @OptionGroup var connection: Connection
    @OptionGroup var waiting: Waiting
    @OptionGroup var on: DisplayOption
    func run() throws {
        var request = ControlRequest(.unlock)
        on.apply(&request)
        try connection.requestAndWait(request, waiting)
    }
}

struct Stop: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stop",
        abstract: "Quit an app as the user would (willTerminate; killed if suspended).")
    @OptionGroup var connection: Connection
    @OptionGroup var waiting: Waiting
    @Argument(completion: .custom(appNames)) var app: String
    func run() throws {
        try connection.requestAndWait(ControlRequest(.stop, app: app), waiting)
    }
}

struct Restart: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restart",
        abstract: "Quit an app as the user would, then launch it again into the place it had.",
        discussion: """
            In front if it held a foreground slot, else in the background; an app that is not \
            running is launched into the foreground. Waits until the new run is in its place. \
            The daemon carries it out even if it restarts meanwhile; a stop or kill meanwhile wins.
            """)
    @OptionGroup var connection: Connection
    @OptionGroup var waiting: Waiting
    @Argument(completion: .custom(appNames)) var app: String
    func run() throws {
        try connection.requestAndWait(ControlRequest(.restart, app: app), waiting)
    }
}

struct Kill: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kill", abstract: "SIGKILL every process of an app at once.")
    @OptionGroup var connection: Connection
    @Argument(completion: .custom(appNames)) var app: String
    func run() throws { _ = try connection.request(ControlRequest(.kill, app: app)) }
}

struct Signal: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signal",
        abstract: "Send a signal to an app's main process.",
        discussion: """
            SIG is a name as kill -l gives it (TERM, SIGUSR1, RTMIN+3) or a number. STOP, CONT, \
            TSTP, TTIN and TTOU are refused: lifecycled freezes and thaws apps itself. A suspended \
            app takes the signal when it is next thawed (KILL at once). An app that dies of it \
            is relaunched if its crash policy says so (HUP, INT, TERM and PIPE count as clean).
            """)
    @OptionGroup var connection: Connection
    @Argument(help: "The signal.", completion: .list(["TERM", "HUP", "INT", "USR1", "USR2", "KILL", "QUIT", "WINCH"]))
    var signal: String
    @Argument(completion: .custom(appNames)) var app: String

    func validate() throws {
        if case .failure(let problem) = SignalNames.check(signal) { throw ValidationError("\(problem)") }
    }

    func run() throws {
        var request = ControlRequest(.signal, app: app)
        request.signal = signal
        _ = try connection.request(request)
    }
}
