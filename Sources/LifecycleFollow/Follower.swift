#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleControl

// The follower's loop: reads the compositor (a `FocusSource`), reports what
// it shows to the daemon as a whole snapshot, at once on every event that
// may change what is shown (a window focused, moved, made fullscreen, a
// workspace switched) and every `interval` seconds when nothing happens
// (the heartbeat the daemon judges it by). A burst of events makes one
// report: whatever is waiting is read first. The daemon going away (a
// restart) is waited out: the next report after it is back carries
// everything. The compositor going away ends the loop. What the daemon
// asks back on the same connection (a raise, a home command) is carried
// out by the source.

/// What a compositor offers the follower.
public protocol FocusSource: AnyObject {
    /// "sway", "wlr-foreign-toplevel".
    var name: String { get }
    /// Readable when the compositor has something to say.
    var descriptor: Int32 { get }
    /// Reads what is waiting; true when what is shown may have changed.
    /// Throws when the compositor is gone (a `FollowError` saying so).
    func readEvents() throws(FollowError) -> Bool
    /// Everything shown now.
    func snapshot(interval: Double) throws(FollowError) -> ShownReport
    /// Shows a window, focused (on an output, where the source can move it).
    func raise(_ request: RaiseRequest)
    /// A display's home command.
    func run(_ command: CompositorCommand)
    /// What it is asked is done when the call returns, so a snapshot taken
    /// right after shows it (sway's RUN_COMMAND); else the compositor's
    /// events will say (Wayland requests are answered by events later).
    var carriesOutAtOnce: Bool { get }
    /// A second descriptor whose events only hint that the focus moved
    /// (-1: none), and their reader: true when a snapshot is due.
    var hintDescriptor: Int32 { get }
    func readHints() throws(FollowError) -> Bool
}

extension FocusSource {
    public var hintDescriptor: Int32 { -1 }
    public func readHints() throws(FollowError) -> Bool { false }
}

public struct FollowOptions: Sendable {
    public var controlSocket: String
    public var interval: Double
    public init(controlSocket: String, interval: Double) {
        self.controlSocket = controlSocket
        self.interval = interval
    }
}

public final class Follower {
    let options: FollowOptions
    let source: any FocusSource
    var daemon: ControlClient?
    var daemonLost = false
    /// The last refusal said (said once, not every report).
    var refused: String?
    /// The daemon's latest request carried out (ShownReport.carriedOut),
    /// and a report owed that says what came of it.
    var carriedOut: UInt64 = 0
    var reportSoon = false
    let say: (String) -> Void

    /// Keeps the clipboard (Clipboard.swift), when the compositor allows.
    let clipboard: ClipboardKeeper?
    /// The session's lock from logind (SessionLock.swift), when there is one.
    let lock: SessionLock?
    /// Who plays through PipeWire (PipeWire.swift), when it can be read.
    let audio: SoundServer?

    public init(
        _ options: FollowOptions, source: any FocusSource, clipboard: ClipboardKeeper? = nil, lock: SessionLock? = nil,
        audio: SoundServer? = nil, say: @escaping (String) -> Void
    ) {
        self.options = options
        self.source = source
        self.clipboard = clipboard
        self.lock = lock
        self.audio = audio
        self.say = say
    }

    /// Runs until the compositor goes away (returns) or cannot be read (throws).
    public func run() throws(FollowError) {
        var due = true
        var last = Date.distantPast
        while true {
            if reportSoon {  // the daemon asked something: what came of it
                due = true
                reportSoon = false
            }
            if due {
                var snapshot = try source.snapshot(interval: options.interval)
                snapshot.carriedOut = carriedOut
                snapshot.locked = lock?.locked
                audio?.keepRunning()
                snapshot.playing = audio?.playing
                report(snapshot)
                last = Date()
                due = false
            }
            let left = options.interval - Date().timeIntervalSince(last)
            if let daemon, daemon.hasBufferedLine {
                readDaemon()
                continue
            }
            var fds = [
                pollfd(fd: source.descriptor, events: Int16(POLLIN), revents: 0),
                pollfd(fd: clipboard?.descriptor ?? -1, events: Int16(POLLIN), revents: 0),
                pollfd(fd: daemon?.fileDescriptor ?? -1, events: Int16(POLLIN), revents: 0),
                pollfd(fd: source.hintDescriptor, events: Int16(POLLIN), revents: 0),
                pollfd(fd: lock?.descriptor ?? -1, events: Int16(POLLIN), revents: 0),
                pollfd(fd: audio?.descriptor ?? -1, events: Int16(POLLIN), revents: 0),
            ]
            let r = poll(&fds, nfds_t(fds.count), Int32(max(0, left) * 1000))
            if r < 0 && errno == EINTR { continue }
            if r == 0 {
                due = true  // the heartbeat
                continue
            }
            if fds[2].revents != 0 { readDaemon() }
            if fds[1].revents != 0 { try clipboard?.readEvents() }
            if fds[0].revents != 0, try source.readEvents() { due = true }
            if fds[3].revents != 0, try source.readHints() { due = true }
            if fds[4].revents != 0, lock?.readEvents() == true { due = true }
            if fds[5].revents != 0, audio?.readEvents() == true { due = true }
        }
    }

    /// Sends the report and reads its answer (carrying out what the daemon
    /// asks first); a daemon that is not there is said once and looked
    /// for again with the next report.
    func report(_ r: ShownReport) {
        var request = ControlRequest(.shown)
        request.shown = r
        do {
            if daemon == nil { daemon = try ControlClient.preferringPrivate(path: options.controlSocket) }
            try daemon!.write(request)
            while true {
                let answer = try daemon!.readResponse()
                if carryOut(answer) {
                    reportSoon = true
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
            lostDaemon(error)
        }
    }

    /// A line the daemon sent unasked.
    func readDaemon() {
        guard let daemon else { return }
        do { reportSoon = try carryOut(daemon.readResponse()) || reportSoon } catch { lostDaemon(error) }
    }

    func lostDaemon(_ error: any Error) {
        daemon = nil
        if !daemonLost { say("\(error); trying again every \(options.interval) s") }
        daemonLost = true
    }

    /// What the daemon asked: done, and counted; the next report (taken
    /// after it) says what came of it.
    func carryOut(_ line: ControlResponse) -> Bool {
        if let raise = line.raise {
            source.raise(raise)
            carriedOut = max(carriedOut, raise.sequence)
        }
        if let run = line.run {
            source.run(run)
            carriedOut = max(carriedOut, run.sequence)
        }
        return (line.raise != nil || line.run != nil) && source.carriesOutAtOnce
    }
}

public struct FollowError: Error, CustomStringConvertible {
    public var description: String
    /// The compositor ended (sway's shutdown event, its socket closed).
    public var ended = false
    init(_ description: String, ended: Bool = false) {
        self.description = description
        self.ended = ended
    }
}
