import ArgumentParser
import Foundation
import LifecycleControl
import LifecycleFollow

/// lifecycled-follow: the compositor drives the lifecycle (docs/focus.md).
/// Run in the user's graphical session, beside the compositor.
@main
struct FollowCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lifecycled-follow",
        abstract: "Report what the compositor shows to lifecycled, so that the apps the user sees are in front.",
        discussion: """
            Reads sway's IPC ($SWAYSOCK) and sends lifecycled a snapshot of every window (its process, \
            output, focus and visibility) on every change and every --interval seconds. Needs the same \
            permission as `supervisorctl activate`. Ends when the compositor does.
            """)

    @Option(help: "Control socket of lifecycled (default: $LIFECYCLED_SOCKET or /run/lifecycled/control.sock).")
    var socket: String?

    @Option(name: .customLong("sway-socket"), help: "sway's IPC socket (default: $SWAYSOCK).")
    var swaySocket: String?

    @Option(help: "Seconds between reports when nothing changes (the daemon calls a follower lost after twice this).")
    var interval: Double = 2

    @Flag(name: .customLong("print"), help: "Print one snapshot as JSON and exit.")
    var printOnce = false

    func validate() throws {
        guard interval >= 0.5 && interval <= 30 else { throw ValidationError("--interval must be 0.5 to 30 seconds") }
    }

    func run() throws {
        let env = ProcessInfo.processInfo.environment
        guard let sway = swaySocket ?? env["SWAYSOCK"] else {
            throw ValidationError("no sway socket: give --sway-socket or run inside sway's session ($SWAYSOCK)")
        }
        let control = socket ?? env[ControlDefaults.socketEnvironmentKey] ?? ControlDefaults.socketPath
        let say: (String) -> Void = { FileHandle.standardError.write(Data("lifecycled-follow: \($0)\n".utf8)) }
        do {
            let follower = try Follower(
                FollowOptions(controlSocket: control, swaySocket: sway, interval: interval), say: say)
            if printOnce {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                print(String(decoding: try encoder.encode(try follower.snapshot()), as: UTF8.self))
                return
            }
            try follower.run()
        } catch let error as FollowError {
            say("\(error)")
            throw ExitCode(1)
        }
    }
}
