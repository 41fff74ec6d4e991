import ArgumentParser
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
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
            Reads the compositor (sway's IPC, or the wlr-foreign-toplevel protocol of labwc, Wayfire, river, \
            Hyprland, niri, cage) and sends lifecycled a snapshot of every window on every change and every \
            --interval seconds. Needs the same permission as `supervisorctl activate`. Ends when the \
            compositor does.
            """)

    enum Source: String, ExpressibleByArgument, CaseIterable {
        case auto, sway, wlr
    }

    @Option(help: "Control socket of lifecycled (default: $LIFECYCLED_SOCKET or /run/lifecycled/control.sock).")
    var socket: String?

    @Option(
        help:
            "Where windows come from: sway (its IPC, with each window's process), wlr (wlr-foreign-toplevel: apps matched by their manifest's app_id), or auto (sway when $SWAYSOCK or --sway-socket is given, else wlr)."
    )
    var source: Source = .auto

    @Option(name: .customLong("sway-socket"), help: "sway's IPC socket (default: $SWAYSOCK).")
    var swaySocket: String?

    @Option(
        name: .customLong("wayland-display"),
        help:
            "The Wayland display, for the wlr source, for keeping the clipboard and, with sway, for seeing at once a launcher take the keyboard (default: $WAYLAND_DISPLAY)."
    )
    var waylandDisplay: String?

    @Option(help: "Seconds between reports when nothing changes (the daemon calls a follower lost after twice this).")
    var interval: Double = 2

    @Flag(name: .customLong("print"), help: "Print one snapshot as JSON and exit.")
    var printOnce = false

    @Flag(
        inversion: .prefixedNo,
        help:
            "Keep the clipboard: take every new selection over, so that freezing the app that copied never hangs a paste (wlr-data-control; needs the Wayland display)."
    )
    var keepClipboard = true

    @Flag(
        inversion: .prefixedNo,
        help:
            "Follow the session's lock: while logind says it is locked (LockedHint, set by the screen locker), so are the followed displays."
    )
    var followLock = true

    @Flag(
        inversion: .prefixedNo,
        help: "Tell the daemon who plays audio through PipeWire (pw-dump), so that it never freezes them.")
    var followAudio = true

    func validate() throws {
        guard interval >= 0.5 && interval <= 30 else { throw ValidationError("--interval must be 0.5 to 30 seconds") }
    }

    func run() throws {
        let env = ProcessInfo.processInfo.environment
        let say: (String) -> Void = { text in
            let line = Array("lifecycled-follow: \(text)\n".utf8)
            _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        }
        let control = socket ?? env[ControlDefaults.socketEnvironmentKey] ?? ControlDefaults.socketPath
        let sway = swaySocket ?? env["SWAYSOCK"]
        let chosen: Source = source != .auto ? source : (sway != nil ? .sway : .wlr)
        do {
            let focus: any FocusSource
            switch chosen {
            case .sway, .auto:
                guard let sway else {
                    throw ValidationError("no sway socket: give --sway-socket or run inside sway's session ($SWAYSOCK)")
                }
                var hints: WlrSource?
                if let display = waylandDisplay ?? env["WAYLAND_DISPLAY"] {
                    do { hints = try WlrSource(display: display, say: say) } catch {
                        say("\(error): a launcher taking the keyboard is seen at the next heartbeat")
                    }
                }
                focus = try SwaySource(socket: sway, hints: hints, say: say)
            case .wlr:
                guard let display = waylandDisplay ?? env["WAYLAND_DISPLAY"] else {
                    throw ValidationError(
                        "no Wayland display: give --wayland-display or run in the session ($WAYLAND_DISPLAY)")
                }
                focus = try WlrSource(display: display, say: say)
            }
            var lock: SessionLock?
            if followLock {
                do { lock = try SessionLock(say: say) } catch { say("\(error): the session's lock is not followed") }
            }
            if printOnce {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                var snapshot = try focus.snapshot(interval: interval)
                snapshot.locked = lock?.locked
                print(String(decoding: try encoder.encode(snapshot), as: UTF8.self))
                return
            }
            var clipboard: ClipboardKeeper?
            if keepClipboard {
                if let display = waylandDisplay ?? env["WAYLAND_DISPLAY"] {
                    do { clipboard = try ClipboardKeeper(display: display, say: say) } catch { say("\(error)") }
                } else {
                    say("no Wayland display ($WAYLAND_DISPLAY, --wayland-display): the clipboard is not kept")
                }
            }
            signal(SIGPIPE, SIG_IGN)  // a paster that hangs up is its own business
            var audio: SoundServer?
            if followAudio {
                audio = SoundServer(say: say)
                if audio == nil { say("no pw-dump (package pipewire-bin): who plays through PipeWire is not seen") }
            }
            try Follower(
                FollowOptions(controlSocket: control, interval: interval), source: focus, clipboard: clipboard,
                lock: lock, audio: audio, say: say
            ).run()
        } catch let error as FollowError {
            say("\(error)")
            if error.ended { return }  // the compositor is gone: so is its follower
            throw ExitCode(1)
        }
    }
}
