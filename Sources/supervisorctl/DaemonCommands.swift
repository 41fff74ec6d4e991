import ArgumentParser
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleControl

// The commands about the daemon and its configuration: reload, avail,
// daemon-reexec, and pressure (a memory level injected for demos and tests).

struct Reload: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reload",
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

struct Avail: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "avail",
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

struct Pressure: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pressure",
        abstract:
            "Inject a memory level, for demos and tests: warning tells running apps, critical kills one app "
            + "as real pressure would. Recorded as simulated; the next real measurement takes over."
    )
    enum Level: String, ExpressibleByArgument, CaseIterable { case normal, warning, critical }
    @OptionGroup var connection: Connection
    @Argument(help: "normal, warning or critical") var level: Level
    func run() throws { _ = try connection.request(ControlRequest(.pressure, level: level.rawValue)) }
}
