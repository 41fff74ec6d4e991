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
            guard events.readable(within: Int32(max(0, left) * 1000)) else {
                due = true  // the heartbeat
                continue
            }
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

    /// Sends the report; a daemon that is not there is said once and
    /// looked for again with the next report.
    func report(_ r: ShownReport) {
        var request = ControlRequest(.shown)
        request.shown = r
        do {
            if daemon == nil { daemon = try ControlClient.preferringPrivate(path: options.controlSocket) }
            let answer = try daemon!.send(request)
            if !answer.ok { say("the daemon refused the report: \(answer.error?.message ?? "no reason given")") }
            if daemonLost { say("the daemon is back") }
            daemonLost = false
        } catch {
            daemon = nil
            if !daemonLost { say("\(error); trying again every \(options.interval) s") }
            daemonLost = true
        }
    }
}
