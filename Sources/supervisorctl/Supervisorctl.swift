import ArgumentParser
import Foundation
@preconcurrency import Glibc
import LifecycleControl

/// Exit codes, documented in `supervisorctl --help` and the README.
enum Exit {
    static let refused: Int32 = 1
    static let unknownApp: Int32 = 2
    static let permissionDenied: Int32 = 3
    static let noDaemon: Int32 = 4
    static let badResponse: Int32 = 5
    /// A waiting command's change failed: the app ended instead (the reason is printed);
    /// or `status APP` of an app its crash policy left failed.
    static let failed: Int32 = 6
    /// A waiting command's change did not happen within --timeout.
    static let timedOut: Int32 = 7
}

struct Connection: ParsableArguments {
    @Option(
        name: .long,
        help:
            "Control socket of lifecycled (default: $LIFECYCLED_SOCKET or /run/lifecycled/control.sock); its owner (root) goes through PATH.private beside it when it can."
    )
    var socket: String?

    var path: String {
        socket ?? ProcessInfo.processInfo.environment[ControlDefaults.socketEnvironmentKey]
            ?? ControlDefaults.socketPath
    }

    func client(quietly: Bool = false) throws -> ControlClient {
        do { return try ControlClient.preferringPrivate(path: path) } catch {
            if !quietly { printError("\(error)") }
            throw ExitCode(Exit.noDaemon)
        }
    }

    /// Sends a request; turns a failure into its message and exit code.
    func request(_ r: ControlRequest) throws -> ControlResponse {
        let client = try client()
        let response: ControlResponse
        do { response = try client.send(r) } catch {
            printError("\(error)")
            throw ExitCode(Exit.badResponse)
        }
        guard response.ok else { try fail(response.error) }
        return response
    }
}

func printError(_ s: String) {
    FileHandle.standardError.write(Data("supervisorctl: \(s)\n".utf8))
}

func fail(_ error: ControlError?) throws -> Never {
    printError(error?.message ?? "the daemon refused without a reason")
    switch error?.code {
    case .unknownApp?: throw ExitCode(Exit.unknownApp)
    case .permissionDenied?: throw ExitCode(Exit.permissionDenied)
    case .badRequest?: throw ExitCode(Exit.badResponse)
    default: throw ExitCode(Exit.refused)
    }
}

@main
struct Supervisorctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "supervisorctl",
        abstract: "Control and observe lifecycled.",
        discussion: """
            launch, activate, stop, home, lock and unlock wait until the change has happened, \
            as systemctl does (--no-block: return once accepted; --timeout SECONDS, default 60).

            Exit codes: 0 success; 1 the daemon refused the command (the message says why); \
            2 unknown app; 3 permission denied; 4 no daemon at the socket (or it went away \
            while a command waited); 5 a bad request or an unreadable response; 6 the change \
            failed: the app ended instead (the reason is printed), or `status APP` of an app \
            its crash policy left failed; 7 not done within \
            --timeout; 64 bad arguments.
            """,
        subcommands: [
            Status.self, Launch.self, Activate.self, Home.self, Interruption.self,
            Lock.self, Unlock.self, Stop.self, Restart.self, Kill.self, Signal.self, Pid.self, Tail.self, Events.self,
            Jetsam.self, Pressure.self, Avail.self, Reload.self, DaemonReexec.self,
        ])
}

struct Reload: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Read the daemon file and every manifest again, and apply them app by app.",
        discussion: """
            A new manifest's app appears (and autostarts if it says so); a removed one is stopped as \
            if the user quit it, then goes; a changed one applies at the app's next launch while it \
            keeps running; a broken one keeps the app's previous manifest. A broken daemon file \
            changes nothing (exit 1). Daemon settings that cannot change live are named. Prints what \
            was added, removed, changed, unchanged and failed.
            """)
    @Flag(help: "Print what would change without applying it.")
    var dryRun = false
    @Flag(help: "Relaunch the running apps whose manifest changed, into the state they were in.")
    var restartChanged = false
    @Flag(help: "Print the report as JSON.")
    var json = false
    @OptionGroup var connection: Connection

    func run() throws {
        var request = ControlRequest(.reload)
        request.dryRun = dryRun
        request.restartChanged = restartChanged
        guard let report = try connection.request(request).reload else {
            printError("the daemon answered without a report")
            throw ExitCode(Exit.badResponse)
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try encoder.encode(report), as: UTF8.self))
            return
        }
        print(Self.describe(report), terminator: "")
    }

    static func describe(_ r: ReloadReport) -> String {
        var out = r.dryRun ? "dry run: nothing applied\n" : ""
        func line(_ label: String, _ apps: [String], _ note: String = "") {
            guard !apps.isEmpty else { return }
            out += "\(label): \(apps.joined(separator: " "))\(note)\n"
        }
        line("added", r.added)
        line("removed", r.removed, " (stopped as if quit, then gone)")
        line("changed", r.changed, " (at each running app's next launch)")
        line("restarting", r.restarting)
        out += "unchanged: \(r.unchanged.count)\n"
        for f in r.failed { out += "failed: \(f.description) (the app keeps its previous manifest)\n" }
        line("needs a daemon restart", r.needRestart)
        return out
    }
}

struct DaemonReexec: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "daemon-reexec",
        abstract: "Replace the running lifecycled with the binary now installed at its path, keeping every app.",
        discussion: """
            The daemon saves its state, keeps its sockets and every app's channel open across \
            execve, and carries on in the new binary with the same pid. Returns once the new \
            daemon answers (at most 30 s).
            """)
    @OptionGroup var connection: Connection
    func run() throws {
        let before = try connection.request(ControlRequest(.status)).status?.daemon
        _ = try connection.request(ControlRequest(.daemonReexec))
        // The control socket stays open across the exec: the new daemon answers once it runs.
        let giveUp = Date().addingTimeInterval(30)
        while Date() < giveUp {
            if let client = try? ControlClient.preferringPrivate(path: connection.path) {
                client.setReadTimeout(seconds: 30)
                // The old image may still answer once before it execs: wait for the new one.
                if let r = try? client.send(ControlRequest(.status)), let now = r.status?.daemon,
                    now.started != before?.started || now.pid != before?.pid
                {
                    print("lifecycled re-executed (pid \(now.pid), \(now.start ?? "?"))")
                    return
                }
            }
            usleep(20_000)  // the new daemon is starting: connecting is refused until it listens again
        }
        printError("lifecycled did not answer within 30 s of re-executing")
        throw ExitCode(Exit.noDaemon)
    }
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Show every app (or the ones named): state, pid, time in state, background tasks, memory footprint and band, last termination; and the memory level."
    )
    @OptionGroup var connection: Connection
    @Flag(help: "One JSON object: {daemon, apps:[{name,state,pid,...}]}.") var json = false
    @Argument(help: "Apps to show (default: all).", completion: .custom(appNames)) var apps: [String] = []

    func run() throws {
        let report = try connection.request(ControlRequest(.status, apps: apps.isEmpty ? nil : apps)).status!
        if json {
            let e = JSONEncoder()
            e.outputFormatting = [.sortedKeys]
            print(String(decoding: try e.encode(report), as: UTF8.self))
        } else {
            print(StatusTable.render(report))
        }
        // Like `systemctl status`: a script learns from the exit code that a named app gave up.
        if !apps.isEmpty, report.apps.contains(where: { $0.failed != nil }) { throw ExitCode(Exit.failed) }
    }
}

enum StatusTable {
    static func render(_ report: StatusReport) -> String {
        var rows = [["NAME", "STATE", "PID", "SINCE", "BG TASKS", "MEMORY", "BAND", "STATUS LINE", "LAST TERMINATION"]]
        for a in report.apps {
            var tasks = a.backgroundTasks.isEmpty ? "-" : "\(a.backgroundTasks.count)"
            if let left = a.backgroundTimeRemaining, !a.backgroundTasks.isEmpty { tasks += " (\(duration(left)) left)" }
            var memory = a.footprint.map(bytes) ?? "-"
            if let limit = a.memoryLimit { memory += " / \(bytes(limit))" }
            var state = a.state.rawValue
            if a.failed != nil {
                state = "failed"
            } else if let wait = a.relaunchIn {
                state += " (relaunch in \(duration(wait)))"
            }
            if a.removing == true {
                state += " (removed)"
            } else if a.changePending == true {
                state += " (changed)"
            }
            rows.append([
                a.name, state, a.pid.map { String($0) } ?? "-",
                a.state == .notRunning && a.lastTermination == nil ? "-" : duration(a.secondsInState),
                tasks, memory, a.band?.rawValue ?? "-", a.statusLine.map { "\"\($0)\"" } ?? "-",
                a.failed.map { "\($0.description); down until launched" } ?? a.lastTermination?.description ?? "-",
            ])
        }
        var out = [Table.render(rows)]
        let d = report.daemon
        var footer =
            "foreground: \(d.foreground.isEmpty ? "-" : d.foreground.joined(separator: ", ")) (\(d.foregroundSlots) slot\(d.foregroundSlots == 1 ? "" : "s"))"
        if d.locked { footer += ", locked" }
        if d.interruptions > 0 { footer += ", interrupted" }
        if d.shuttingDown { footer += ", shutting down" }
        out.append(footer)
        if let m = d.memory {
            var line = "memory: \(m.level.rawValue)\(m.simulated ? " (simulated)" : "")"
            if let a = m.reading.available, let t = m.reading.total {
                line +=
                    ", available \(bytes(a)) of \(bytes(t)) (\(String(format: "%.0f", Double(a) * 100 / Double(max(t, 1)))) %)"
            }
            if let s = m.reading.stallPercent { line += ", stall \(String(format: "%.1f", s)) %" }
            if let u = m.reading.appsTotal, let b = m.reading.budget {
                line += ", apps \(bytes(u)) of \(bytes(b)) budget"
            }
            line += "; accounted by \(m.accounting)"
            if let quiet = m.quiet, let n = m.quietSamples {
                line += "; sampling \(quiet ? "quietly" : "in full") (\(n) quiet sample\(n == 1 ? "" : "s"))"
            }
            out.append(line)
        }
        return out.joined(separator: "\n")
    }

    static func bytes(_ n: UInt64) -> String { formatBytesCompact(n) }

    /// "4.2s", "3m07s", "2h05m" (without Foundation's formatter: 1,000 rows).
    static func duration(_ s: Double) -> String {
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        if s < 60 {
            let tenths = Int((max(0, s) * 10).rounded())
            return "\(tenths / 10).\(tenths % 10)s"
        }
        let t = Int(s)
        if t < 3600 { return "\(t / 60)m\(two(t % 60))s" }
        return "\(t / 3600)h\(two(t % 3600 / 60))m"
    }
}

struct Launch: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Launch an app: into the foreground, or with --background into the background.")
    @OptionGroup var connection: Connection
    @OptionGroup var waiting: Waiting
    @Flag(help: "Launch into the background (willFinishLaunching, didFinishLaunching, didEnterBackground).")
    var background = false
    @Argument(completion: .custom(appNames)) var app: String
    func run() throws {
        try connection.requestAndWait(ControlRequest(.launch, app: app, background: background), waiting) { _ in
            background ? .launchedInBackground(app) : .inFront(app)
        }
    }
}

struct Activate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Bring an app to the foreground, launching it when needed.")
    @OptionGroup var connection: Connection
    @OptionGroup var waiting: Waiting
    @Argument(completion: .custom(appNames)) var app: String
    func run() throws {
        try connection.requestAndWait(ControlRequest(.activate, app: app), waiting) { _ in .inFront(app) }
    }
}

struct Home: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Send every foreground app to the background.")
    @OptionGroup var connection: Connection
    @OptionGroup var waiting: Waiting
    func run() throws {
        try connection.requestAndWait(ControlRequest(.home), waiting) { .leftFront($0.daemon.foreground) }
    }
}

struct Interruption: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A temporary interruption (alert, call banner): begin or end.")
    enum Phase: String, ExpressibleByArgument, CaseIterable { case begin, end }
    @OptionGroup var connection: Connection
    @Argument(help: "begin or end") var phase: Phase
    func run() throws {
        _ = try connection.request(ControlRequest(phase == .begin ? .interruptionBegin : .interruptionEnd))
    }
}

struct Lock: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Lock the screen: foreground apps go to the background until unlock.")
    @OptionGroup var connection: Connection
    @OptionGroup var waiting: Waiting
    func run() throws {
        try connection.requestAndWait(ControlRequest(.lock), waiting) { .leftFront($0.daemon.foreground) }
    }
}

struct Unlock: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Unlock the screen: the apps in front come back.")
    @OptionGroup var connection: Connection
    @OptionGroup var waiting: Waiting
    func run() throws {
        try connection.requestAndWait(ControlRequest(.unlock), waiting) { .backInFront($0.daemon.foreground) }
    }
}

struct Stop: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Quit an app as the user would (willTerminate; killed if suspended).")
    @OptionGroup var connection: Connection
    @OptionGroup var waiting: Waiting
    @Argument(completion: .custom(appNames)) var app: String
    func run() throws {
        try connection.requestAndWait(ControlRequest(.stop, app: app), waiting) { _ in .ended(app) }
    }
}

struct Restart: ParsableCommand {
    static let configuration = CommandConfiguration(
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
        try connection.requestAndWait(ControlRequest(.restart, app: app), waiting) { before in
            let was = before.apps.first { $0.name == app }
            let inFront = was.map { $0.state == .active || $0.state == .inactive } ?? false
            return .relaunched(app, after: was?.pid, inFront: inFront || was?.state == .notRunning)
        }
    }
}

struct Signal: ParsableCommand {
    static let configuration = CommandConfiguration(
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

struct Pid: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print an app's main pid (exit 1 when it is not running), or the daemon's with no app.")
    @OptionGroup var connection: Connection
    @Argument(completion: .custom(appNames)) var app: String?
    func run() throws {
        let report = try connection.request(ControlRequest(.status, apps: app.map { [$0] })).status!
        guard let app else { return print(report.daemon.pid) }
        guard let pid = report.apps.first?.pid else {
            printError("'\(app)' is not running")
            throw ExitCode(Exit.refused)
        }
        print(pid)
    }
}

struct Avail: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List every manifest of the apps directory, what a reload would do to it, and its load error.",
        discussion: """
            CONFIG is ok (in force), changed (a reload applies it), new (a reload adds the app), \
            gone (a reload removes it) or broken (the error says file, line and key; the app keeps \
            its previous manifest). Exit 1 when a file is broken.
            """)
    @OptionGroup var connection: Connection
    @Flag(help: "A JSON array.") var json = false
    func run() throws {
        let apps = try connection.request(ControlRequest(.avail)).avail ?? []
        if json {
            let e = JSONEncoder()
            e.outputFormatting = [.sortedKeys]
            print(String(decoding: try e.encode(apps), as: UTF8.self))
        } else {
            var rows = [["NAME", "CONFIG", "IN FORCE", "RESTART", "AUTOSTART", "FILE / ERROR"]]
            for a in apps {
                rows.append([
                    a.name, a.config.rawValue, a.inForce ? "yes" : "no", a.restart ?? "-", a.autostart ?? "-",
                    a.error ?? a.file,
                ])
            }
            print(Table.render(rows))
        }
        if apps.contains(where: { $0.config == .broken }) { throw ExitCode(Exit.refused) }
    }
}

/// The apps the daemon knows, for shell completion (nothing when it does not answer).
func appNames(_ words: [String], _ index: Int, _ prefix: String) -> [String] {
    guard let connection = try? Connection.parse([]), let client = try? connection.client(quietly: true),
        let report = try? client.send(ControlRequest(.status)).status
    else { return [] }
    return report.apps.map(\.name).filter { $0.hasPrefix(prefix) }
}

enum Table {
    /// Columns padded to their widest cell; the last one is not.
    static func render(_ rows: [[String]]) -> String {
        let widths = (0..<rows[0].count).map { c in rows.map { $0[c].count }.max()! }
        var out = ""
        for (n, r) in rows.enumerated() {
            if n > 0 { out += "\n" }
            for (i, s) in r.enumerated() {
                out += s
                if i < r.count - 1 { out += String(repeating: " ", count: widths[i] - s.count + 2) }
            }
        }
        return out
    }
}

struct Tail: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show an app's recent output (stdout and stderr, each line with its time); -f follows it.",
        discussion: """
            With output going to files (the daemon file's `output`), the daemon reads the app's log \
            file; under journald this runs journalctl -t APP. An app that has written nothing yet is \
            an error (exit 1). Needs the same permission as a command that changes something.
            """)
    @OptionGroup var connection: Connection
    @Flag(name: .shortAndLong, help: "Keep printing new output as it comes.") var follow = false
    @Option(name: .short, help: "How many lines to show first.") var n: Int = 10
    @Argument(completion: .custom(appNames)) var app: String

    func validate() throws {
        if n < 0 || n > 100_000 { throw ValidationError("-n takes 0 to 100000 lines") }
    }

    func run() throws {
        var request = ControlRequest(.tail, app: app, limit: n)
        var report = try connection.request(request).tail!
        if report.journal { try journal() }
        for line in report.lines { print(line) }
        fflush(nil)
        guard follow else { return }
        // The daemon answers what follows the offset; a rotated file starts again from its beginning.
        var lostSince: Date?
        while true {
            usleep(200_000)
            request.offset = report.offset
            guard let client = try? connection.client(quietly: true), let r = try? client.send(request), r.ok,
                let next = r.tail
            else {
                // A restarting daemon: wait for the next one, for a while.
                let since = lostSince ?? Date()
                lostSince = since
                if Date().timeIntervalSince(since) > 30 {
                    printError("lifecycled has not answered for 30 s")
                    throw ExitCode(Exit.noDaemon)
                }
                continue
            }
            lostSince = nil
            report = next
            for line in report.lines { print(line) }
            fflush(nil)
        }
    }

    /// Under journald the lines are in the journal, with the app's name as SYSLOG_IDENTIFIER.
    func journal() throws -> Never {
        var argv = ["journalctl", "--no-pager", "-o", "short-precise", "-n", String(n), "SYSLOG_IDENTIFIER=\(app)"]
        if follow { argv.append("-f") }
        let c = argv.map { strdup($0) } + [nil]
        execvp("journalctl", c)
        printError("cannot run journalctl: \(String(cString: strerror(errno)))")
        throw ExitCode(Exit.refused)
    }
}

struct Kill: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "SIGKILL every process of an app at once.")
    @OptionGroup var connection: Connection
    @Argument(completion: .custom(appNames)) var app: String
    func run() throws { _ = try connection.request(ControlRequest(.kill, app: app)) }
}

struct Events: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Recent transitions and delivered events, with acknowledgement times; --follow streams new ones.")
    @OptionGroup var connection: Connection
    @Flag(name: .shortAndLong, help: "Keep streaming new records.") var follow = false
    @Flag(help: "One JSON object per line.") var json = false
    @Argument(help: "Apps to show (default: all).", completion: .custom(appNames)) var apps: [String] = []

    func run() throws {
        let filter = apps.isEmpty ? nil : apps
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let show = { (r: EventRecord) in
            if json {
                print(String(decoding: (try? encoder.encode(r)) ?? Data(), as: UTF8.self))
            } else {
                print(Self.line(r))
            }
            fflush(nil)
        }
        if !follow {
            for r in try connection.request(ControlRequest(.events, apps: filter)).events ?? [] { show(r) }
            return
        }
        let client = try connection.client()
        do {
            let first = try client.send(ControlRequest(.events, apps: filter, follow: true))
            guard first.ok else { try fail(first.error) }
            while true {
                if let e = try client.readResponse().event { show(e) }
            }
        } catch let e as ControlClient.Failure {
            printError("\(e)")
            throw ExitCode(Exit.noDaemon)
        }
    }

    static let formatter: DateFormatter = {
        let f = DateFormatter()
        f.dateFormat = "HH:mm:ss.SSS"
        return f
    }()

    static func line(_ r: EventRecord) -> String {
        var s = "\(formatter.string(from: Date(timeIntervalSince1970: r.time)))  \(r.app)  "
        switch r.kind {
        case .transition: s += "\(r.from ?? "?") -> \(r.to ?? "?")"
        case .delivered: s += "delivered \(r.event?.rawValue ?? "?")" + (r.sequence.map { " #\($0)" } ?? "")
        case .acknowledged:
            s += "acknowledged \(r.event?.rawValue ?? "?") in \(String(format: "%.0f", r.latencyMicroseconds ?? 0)) µs"
        case .frozen: s += "frozen in \(String(format: "%.0f", r.latencyMicroseconds ?? 0)) µs"
        case .memoryLevel: s += "memory \(r.from ?? "?") -> \(r.to ?? "?")"
        case .jetsam: s += "jetsam"
        default: s += r.kind.rawValue
        }
        if let p = r.pid { s += "  pid \(p)" }
        if let d = r.detail { s += "  (\(d))" }
        return s
    }
}

struct Jetsam: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Recent kills for memory: who, when, why, its footprint, and the measurements that led to it.")
    @OptionGroup var connection: Connection
    @Flag(help: "A JSON array of kill records.") var json = false
    @Option(name: .shortAndLong, help: "Show at most this many, the most recent.") var limit: Int?

    func validate() throws {
        if let limit, limit < 0 { throw ValidationError("--limit must not be negative") }
    }

    func run() throws {
        let kills = try connection.request(ControlRequest(.jetsam, limit: limit)).kills ?? []
        if json {
            let e = JSONEncoder()
            e.outputFormatting = [.sortedKeys]
            print(String(decoding: try e.encode(kills), as: UTF8.self))
            return
        }
        if kills.isEmpty { return print("no kills for memory recorded") }
        var rows = [
            ["TIME", "APP", "PID", "REASON", "FOOTPRINT", "STATE", "BAND", "LEVEL", "MEMORY", "NEXT CANDIDATES"]
        ]
        for k in kills {
            var reading = [String]()
            if let a = k.reading.available { reading.append("avail \(StatusTable.bytes(a))") }
            if let s = k.reading.stallPercent { reading.append("stall \(String(format: "%.0f", s))%") }
            if let u = k.reading.appsTotal, let b = k.reading.budget {
                reading.append("apps \(StatusTable.bytes(u))/\(StatusTable.bytes(b))")
            }
            var footprint = k.footprint.map(StatusTable.bytes) ?? "-"
            if let l = k.limit { footprint += " > \(StatusTable.bytes(l))" }
            let others = k.candidates.filter { $0.app != k.app }.prefix(3).map(\.app)
            rows.append([
                Events.formatter.string(from: Date(timeIntervalSince1970: k.time)), k.app,
                k.pid.map { String($0) } ?? "-",
                k.reason.rawValue + (k.lastNotice ? " (noticed)" : ""), footprint, k.state.rawValue, k.band.rawValue,
                k.level.rawValue + (k.simulated ? " (simulated)" : ""),
                reading.isEmpty ? "-" : reading.joined(separator: ", "),
                others.isEmpty ? "-" : others.joined(separator: ", "),
            ])
        }
        print(Table.render(rows))
    }
}

struct Pressure: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Inject a memory level, for demos and tests: warning tells running apps, critical kills one app as real pressure would. Recorded as simulated; the next real measurement takes over."
    )
    enum Level: String, ExpressibleByArgument, CaseIterable { case normal, warning, critical }
    @OptionGroup var connection: Connection
    @Argument(help: "normal, warning or critical") var level: Level
    func run() throws { _ = try connection.request(ControlRequest(.pressure, level: level.rawValue)) }
}
