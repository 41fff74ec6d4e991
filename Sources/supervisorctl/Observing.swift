import ArgumentParser
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleControl

// The commands that look: status (and its table), pid, tail, events, jetsam.

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract:
            "Show every app (or the ones named): state, pid, time in state, background tasks, "
            + "memory footprint and band, last termination; and the memory level."
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
    /// What waits for the app: its wake-up in progress, next fetch, a held
    /// push, a user quit, restoration data.
    static func wakeups(_ a: AppStatus) -> String {
        var parts: [String] = []
        switch a.waking?.wake {
        case .fetch?: parts.append("fetching")
        case .push?: parts.append("push")
        case nil: break
        }
        if a.quit == true { parts.append("quit") }
        if let next = a.nextFetchIn { parts.append("fetch in \(duration(next))") }
        if a.heldPush == true { parts.append("push held") }
        if let size = a.restorationBytes { parts.append("restore \(bytes(UInt64(size)))") }
        if let prewarm = a.prewarm { parts.append("prewarm \(prewarm)") }

        return parts.isEmpty ? "-" : parts.joined(separator: ", ")
    }

    static func render(_ report: StatusReport) -> String {
        var rows = [
            [
                "NAME", "STATE", "PID", "SINCE", "BG TASKS", "MEMORY", "BAND", "WAKE-UPS", "STATUS LINE",
                "LAST TERMINATION",
            ]
        ]
        // Several displays, or an app with scenes: a SCENES column, "nav@centre active".
        let showScenes =
            (report.daemon.displays?.count ?? 1) > 1
            || report.apps.contains { ($0.scenes ?? []).contains { $0.name != "main" } }
        if showScenes { rows[0].insert("SCENES", at: 2) }
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
            if let held = a.held { state += " (held: \(held.joined(separator: ", ")))" }
            if a.window == "hidden" { state += " (hidden)" }
            rows.append([
                a.name, state, a.pid.map { String($0) } ?? "-",
                a.state == .notRunning && a.lastTermination == nil ? "-" : duration(a.secondsInState),
                tasks, memory, a.band?.rawValue ?? "-", wakeups(a), a.statusLine.map { "\"\($0)\"" } ?? "-",
                a.failed.map { "\($0.description); down until launched" } ?? a.lastTermination?.description ?? "-",
            ])
            if showScenes {
                let scenes = (a.scenes ?? []).map { "\($0.name)@\($0.display) \($0.state.rawValue)" }
                rows[rows.count - 1].insert(scenes.isEmpty ? "-" : scenes.joined(separator: ", "), at: 2)
            }
        }
        var out = [Table.render(rows)]
        let d = report.daemon
        let severalDisplays = (d.displays?.count ?? 1) > 1
        var footer =
            "foreground: \(d.foreground.isEmpty ? "-" : d.foreground.joined(separator: ", ")) "
            + "(\(d.foregroundSlots) slot\(d.foregroundSlots == 1 ? "" : "s"))"
        if d.locked { footer += d.displays?.first?.sessionLocked == true ? ", locked (session)" : ", locked" }
        if d.interruptions > 0 { footer += ", interrupted" }
        if d.displays?.first?.overlay == true { footer += ", overlay" }
        if d.shuttingDown { footer += ", shutting down" }
        if !severalDisplays { out.append(footer) }
        // Several displays: each one's front instead.
        if let displays = d.displays, severalDisplays {
            if d.shuttingDown { out.append("shutting down") }
            for display in displays {
                var line =
                    "display \(display.name): \(display.front.isEmpty ? "-" : display.front.joined(separator: ", ")) "
                    + "(\(display.slots) slot\(display.slots == 1 ? "" : "s"))"
                if display.locked { line += display.sessionLocked == true ? ", locked (session)" : ", locked" }
                if display.interruptions > 0 { line += ", interrupted" }
                if display.overlay == true { line += ", overlay" }
                out.append(line)
            }
        }
        if let f = d.follower {
            out.append(
                "follower: \(f.state) (\(f.source): \(f.windows) window\(f.windows == 1 ? "" : "s"), "
                    + "\(f.unmanaged) unmanaged\(f.playing.map { ", \($0.count) playing audio" } ?? ""))")
        }
        if let m = d.memory {
            var line = "memory: \(m.level.rawValue)\(m.simulated ? " (simulated)" : "")"
            if let a = m.reading.available, let t = m.reading.total {
                line +=
                    ", available \(bytes(a)) of \(bytes(t)) "
                    + "(\(fixed(Double(a) * 100 / Double(max(t, 1)))) %)"
            }
            if let s = m.reading.stallPercent { line += ", stall \(fixed(s, 1)) %" }
            if let u = m.reading.appsTotal, let b = m.reading.budget {
                line += ", apps \(bytes(u)) of \(bytes(b)) budget"
            }
            if let t = m.reading.swapTotal, let f = m.reading.swapFree {
                line += ", swap \(bytes(f)) free of \(bytes(t))"
                line += m.reclaim == true ? " (suspended apps go there first)" : ""
            }
            line += "; accounted by \(m.accounting)"
            if let quiet = m.quiet, let n = m.quietSamples {
                line += "; sampling \(quiet ? "quietly" : "in full") (\(n) quiet sample\(n == 1 ? "" : "s"))"
            }
            out.append(line)
            for problem in m.problems ?? [] { out.append("memory: \(problem)") }
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

enum Table {
    /// Columns padded to their widest cell; the last one is not. A cell's
    /// width is its count of characters, counted once; for an ASCII cell
    /// (nearly all of them) that is its count of bytes, read without
    /// breaking it into characters. The text is built as bytes, the padding
    /// appended in place: with 1,000 apps, counting each cell's characters
    /// and making a padding string for it were two fifths of `status`
    /// (docs/performance.md, "A quicker table").
    static func render(_ rows: [[String]]) -> String {
        let counts = rows.map { $0.map(width) }
        let widths = (0..<rows[0].count).map { c in counts.map { $0[c] }.max()! }
        var out: [UInt8] = []
        out.reserveCapacity(rows.count * (widths.reduce(0, +) + 2 * widths.count + 1))
        for n in rows.indices {
            if n > 0 { out.append(0x0A) }
            let r = rows[n]
            for i in r.indices {
                var cell = r[i]
                cell.withUTF8 { out.append(contentsOf: $0) }  // a copy of its bytes, not a walk of its view
                if i < r.count - 1 {
                    for _ in 0..<(widths[i] - counts[n][i] + 2) { out.append(0x20) }  // the capacity is reserved
                }
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Characters, as `count` says; an ASCII string's are its bytes.
    static func width(_ s: String) -> Int {
        s.utf8.allSatisfy { $0 < 0x80 } ? s.utf8.count : s.count
    }
}

struct Pid: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pid",
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

struct Tail: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tail",
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

struct Events: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
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

    /// "HH:mm:ss.SSS" in local time (localtime_r: no date formatter, no ICU).
    static func clock(_ time: Double) -> String {
        var seconds = time_t(time.rounded(.down))
        var t = tm()
        localtime_r(&seconds, &t)
        let ms = min(999, Int((time - time.rounded(.down)) * 1000))
        func pad(_ v: Int, _ width: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(Int(t.tm_hour), 2)):\(pad(Int(t.tm_min), 2)):\(pad(Int(t.tm_sec), 2)).\(pad(ms, 3))"
    }

    static func line(_ r: EventRecord) -> String {
        var s = "\(clock(r.time))  \(r.app)  "
        switch r.kind {
        case .transition: s += "\(r.from ?? "?") -> \(r.to ?? "?")"
        case .delivered: s += "delivered \(r.event?.rawValue ?? "?")" + (r.sequence.map { " #\($0)" } ?? "")
        case .acknowledged:
            s += "acknowledged \(r.event?.rawValue ?? "?") in \(fixed(r.latencyMicroseconds ?? 0)) µs"
        case .frozen: s += "frozen in \(fixed(r.latencyMicroseconds ?? 0)) µs"
        case .memoryLevel: s += "memory \(r.from ?? "?") -> \(r.to ?? "?")"
        case .window: s += "window \(r.from ?? "?") -> \(r.to ?? "?")"
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
        commandName: "jetsam",
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
            [
                "TIME", "APP", "PID", "REASON", "FOOTPRINT", "FREED", "STATE", "BAND", "LEVEL", "MEMORY",
                "NEXT CANDIDATES",
            ]
        ]
        for k in kills {
            var reading = [String]()
            if let a = k.reading.available { reading.append("avail \(StatusTable.bytes(a))") }
            if let s = k.reading.stallPercent { reading.append("stall \(fixed(s))%") }
            if let u = k.reading.appsTotal, let b = k.reading.budget {
                reading.append("apps \(StatusTable.bytes(u))/\(StatusTable.bytes(b))")
            }
            var footprint = k.footprint.map(StatusTable.bytes) ?? "-"
            if let swap = k.swap, swap > 0 { footprint += " (\(StatusTable.bytes(swap)) swap)" }
            if let l = k.limit { footprint += " > \(StatusTable.bytes(l))" }
            let others = k.candidates.filter { $0.app != k.app }.prefix(3).map(\.app)
            rows.append([
                Events.clock(k.time), k.app,
                k.pid.map { String($0) } ?? "-",
                k.reason.rawValue + (k.lastNotice ? " (noticed)" : "") + (k.killer.map { " (\($0.rawValue))" } ?? ""),
                footprint,
                k.freed.map(StatusTable.bytes) ?? "-", k.state.rawValue, k.band.rawValue,
                k.level.rawValue + (k.simulated ? " (simulated)" : ""),
                reading.isEmpty ? "-" : reading.joined(separator: ", "),
                others.isEmpty ? "-" : others.joined(separator: ", "),
            ])
        }
        print(Table.render(rows))
    }
}
