import Foundation
@preconcurrency import Glibc
import LifecycleControl

// The follower's loop: reads the compositor, reports what it shows to the
// daemon as a whole snapshot, at once on every event that may change what
// is shown (a window focused, moved, made fullscreen, a workspace
// switched, an output added) and every `interval` seconds when nothing
// happens (the heartbeat the daemon judges it by). A burst of events makes
// one report: whatever is waiting is read before the tree is asked for.
// The daemon going away (a restart) is waited out: the next report after
// it is back carries everything. The compositor going away ends the loop.

public struct FollowOptions: Sendable {
    public var controlSocket: String
    public var swaySocket: String
    public var interval: Double
    public init(controlSocket: String, swaySocket: String, interval: Double) {
        self.controlSocket = controlSocket
        self.swaySocket = swaySocket
        self.interval = interval
    }
}

public final class Follower {
    let options: FollowOptions
    let events: SwayConnection
    let tree: SwayConnection
    var daemon: ControlClient?
    var daemonLost = false
    /// The last refusal said (said once, not every report).
    var refused: String?
    let say: (String) -> Void

    public init(_ options: FollowOptions, say: @escaping (String) -> Void) throws(FollowError) {
        self.options = options
        self.say = say
        events = try SwayConnection(path: options.swaySocket)
        tree = try SwayConnection(path: options.swaySocket)
        let reply = try events.call(.subscribe, #"["window","workspace","shutdown"]"#)
        guard String(decoding: reply, as: UTF8.self).contains("\"success\": true")
            || String(decoding: reply, as: UTF8.self).contains("\"success\":true")
        else {
            throw FollowError("sway refused the subscription: \(String(decoding: reply, as: UTF8.self))")
        }
    }

    /// What sway shows now.
    public func snapshot() throws(FollowError) -> ShownReport {
        try SwayTree.report(try tree.call(.getTree, ""), interval: options.interval)
    }

    /// Runs until sway goes away (returns) or cannot be read (throws).
    public func run() throws(FollowError) {
        var due = true
        var last = Date.distantPast
        while true {
            if due {
                report(try snapshot())
                last = Date()
                due = false
            }
            let left = options.interval - Date().timeIntervalSince(last)
            if let daemon, daemon.hasBufferedLine {
                try readDaemon()
                continue
            }
            var fds = [pollfd(fd: events.fd, events: Int16(POLLIN), revents: 0)]
            if let daemon { fds.append(pollfd(fd: daemon.fileDescriptor, events: Int16(POLLIN), revents: 0)) }
            let r = poll(&fds, nfds_t(fds.count), Int32(max(0, left) * 1000))
            if r < 0 && errno == EINTR { continue }
            if r == 0 {
                due = true  // the heartbeat
                continue
            }
            if fds.count > 1 && fds[1].revents != 0 { try readDaemon() }
            guard fds[0].revents != 0 else { continue }
            // Everything waiting now, then one report.
            repeat {
                let event = try events.receive()
                if event.type == SwayConnection.shutdownEvent {
                    say("sway is shutting down: the follower ends")
                    return
                }
                due = true
            } while events.readable(within: 0)
        }
    }

    /// Sends the report and reads its answer (carrying out any raise that
    /// comes first); a daemon that is not there is said once and looked for
    /// again with the next report.
    func report(_ r: ShownReport) {
        var request = ControlRequest(.shown)
        request.shown = r
        do {
            if daemon == nil { daemon = try ControlClient.preferringPrivate(path: options.controlSocket) }
            try daemon!.write(request)
            while true {
                let answer = try daemon!.readResponse()
                if answer.raise != nil || answer.run != nil {
                    carryOut(answer)
                    continue
                }
                if !answer.ok, answer.error?.message != refused {
                    refused = answer.error?.message
                    say("the daemon refused the report: \(refused ?? "no reason given")")
                }
                if answer.ok { refused = nil }
                break
            }
            if daemonLost { say("the daemon is back") }
            daemonLost = false
        } catch {
            daemon = nil
            if !daemonLost { say("\(error); trying again every \(options.interval) s") }
            daemonLost = true
        }
    }

    /// A line the daemon sent unasked: a raise.
    func readDaemon() throws(FollowError) {
        guard let daemon else { return }
        do {
            carryOut(try daemon.readResponse())
        } catch {
            self.daemon = nil
            if !daemonLost { say("\(error); trying again every \(options.interval) s") }
            daemonLost = true
        }
    }

    /// What the daemon asked, unasked: a raise, or a home command.
    func carryOut(_ line: ControlResponse) {
        if let raise = line.raise { self.raise(raise) }
        if let run = line.run { sway([run.command]) }
    }

    /// Shows a window, focused: out of the scratchpad if it is there,
    /// moved to `output` when given, then focused. sway's events that
    /// follow make the next report.
    func raise(_ r: RaiseRequest) {
        guard let id = Int(r.window) else { return say("the daemon asked to raise window '\(r.window)', not one of sway's") }
        var commands: [String] = []
        if let output = r.output { commands.append("[con_id=\(id)] move container to output \(output)") }
        commands.append("[con_id=\(id)] focus")
        sway(commands)
    }

    /// Runs sway commands, saying what sway refused.
    func sway(_ commands: [String]) {
        for command in commands {
            do {
                let reply = String(decoding: try tree.call(.runCommand, command), as: UTF8.self)
                if reply.contains("\"success\": false") || reply.contains("\"success\":false") {
                    say("sway: \(command): \(reply)")
                }
            } catch {
                say("sway: \(command): \(error)")
            }
        }
    }
}
