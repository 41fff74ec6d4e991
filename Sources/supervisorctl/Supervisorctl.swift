import ArgumentParser
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleControl

// supervisorctl: the entry point, the connection to the daemon, exit codes and
// errors. The commands live by what they do: LifeCommands.swift (change where
// apps are), Observing.swift (look), DaemonCommands.swift (the daemon and its
// configuration); Waiting.swift waits for an outcome.

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
            ArgumentHelp(
                "Control socket of lifecycled (default: $LIFECYCLED_SOCKET or /run/lifecycled/control.sock); "
                    + "its owner (root) goes through PATH.private beside it when it can.")
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
    let line = Array("supervisorctl: \(s)\n".utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
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
            Lock.self, Unlock.self, Discard.self, Scenes.self, Stop.self, Restart.self, Kill.self, Signal.self,
            Fetch.self, Push.self, Open.self,
            Pid.self,
            Tail.self, Events.self,
            Jetsam.self, Pressure.self, Avail.self, Reload.self, DaemonReexec.self,
        ])
}

/// The apps the daemon knows, for shell completion (nothing when it does not answer).
func appNames(_ words: [String], _ index: Int, _ prefix: String) -> [String] {
    guard let connection = try? Connection.parse([]), let client = try? connection.client(quietly: true),
        let report = try? client.send(ControlRequest(.status)).status
    else { return [] }
    return report.apps.map(\.name).filter { $0.hasPrefix(prefix) }
}
