import ArgumentParser
@preconcurrency import Glibc
import LifecycleDaemon
import LifecycleOS
import Logging

struct Lifecycled: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lifecycled",
        abstract: "Gives ordinary Linux processes the iOS app lifecycle.",
        discussion: """
            Runs as a systemd service (Type=notify) or in a terminal. Apps are declared \
            by manifests in the config's apps directory; control them with supervisorctl.

            Exit codes: 0 clean shutdown, 1 runtime failure, 64 bad arguments, \
            78 bad configuration (the message names file, line and key).
            """)

    @Option(name: .shortAndLong, help: "The daemon configuration file.")
    var config = "/etc/lifecycled/lifecycled.toml"

    @Option(help: "Control socket path (overrides the config's control_socket).")
    var controlSocket: String?

    @Option(
        help:
            ArgumentHelp(
                "Cgroup subtree for the apps: an absolute cgroup path, \"auto\", or \"none\" "
                    + "for the process-group fallback (overrides cgroup_root).")
    )
    var cgroupRoot: String?

    @Flag(help: "Check the configuration and every app manifest, print what is wrong, and exit.")
    var checkConfig = false

    func run() throws {
        if checkConfig { return try check() }
        try? Posix.dieOnFatalSignals(name: "lifecycled")
        let level = (try? ConfigLoader.loadDaemon(path: config).logLevel).flatMap(Logger.Level.init(rawValue:)) ?? .info
        LoggingSystem.bootstrap { _ in
            var h = DaemonLogHandler(identifier: "lifecycled")
            h.logLevel = level
            return h
        }
        DaemonLogHandler(identifier: "lifecycled").sayDroppedLines()
        // Lines still queued (the log output would have waited for them) go out before the exit, for at most 2 s.
        defer { LogOutput.standardError.flush(seconds: 2) }
        let logger = Logger(label: "lifecycled")
        do {
            let daemon = try Daemon(
                options: .init(configPath: config, controlSocket: controlSocket, cgroupRoot: cgroupRoot),
                logger: logger)
            try daemon.run()
        } catch let e as ConfigError {
            logger.critical("configuration error: \(e)")
            throw ExitCode(78)
        } catch {
            logger.critical("cannot run: \(error)")
            throw ExitCode.failure
        }
    }

    func check() throws {
        do {
            let (valid, problems, notes) = try ConfigLoader.check(path: config)
            for p in problems { print("error: \(p)") }
            for n in notes { print("note: \(n)") }
            print("\(config): \(valid) app(s) valid, \(problems.count) invalid")
            if !problems.isEmpty { throw ExitCode(78) }
        } catch let e as ConfigError {
            print("error: \(e)")
            throw ExitCode(78)
        }
    }
}

// The process that holds the apps' systemd scope open (AppsScope) is this
// binary too, and never gets as far as parsing arguments.
if CommandLine.arguments.count == 2, CommandLine.arguments[1] == AppsScope.keeperArgument { AppsScope.keep() }
Lifecycled.main()
