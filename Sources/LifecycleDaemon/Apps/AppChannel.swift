#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleControl
import LifecycleCore
import LifecycleOS
import LifecycleWire
import Logging

// The app channel of library apps: events out (one datagram each, never
// blocking the loop), acknowledgements and background-task requests in,
// decoded and handed to the core as reports. Plain programs get the signal
// their manifest maps instead.

extension Daemon {
    func deliver(_ id: AppID, _ d: Delivered) {
        guard let run = runs[id] else { return }
        let m = manifests[id]!
        if m.policy.delivery == .library {
            var options: [KeyValue] = []
            func option(_ key: LaunchOptionKey, _ value: String) { options.append(KeyValue(key.rawValue, value)) }
            var restoration: [UInt8]? = nil
            if d.event.isLaunchEvent {
                option(.launchMode, d.mode.rawValue)
                if let p = d.previous {
                    option(.previousReason, p.reason.code.rawValue)
                    option(.previousDescription, p.reason.description)
                    option(.previousTime, String(wallTime(p.at)))
                }
                if let launch = d.launch {
                    option(.reason, launch.reason.rawValue)
                    if let url = launch.url { option(.url, url) }
                    if let payload = launch.pushPayload { option(.pushPayload, payload) }
                }
                if d.event == .willFinishLaunching, let blob = history.blobs[id] {
                    option(.restorationSize, String(blob.count))
                    restoration = blob
                }
            }
            if let payload = d.payload { option(.pushPayload, payload) }
            if let url = d.url { options.append(KeyValue(LaunchOptionKey.eventURL, url)) }
            if let scene = d.scene {
                options.append(KeyValue(SceneOptionKey.scene, scene.scene))
                options.append(KeyValue(SceneOptionKey.display, scene.display))
                if let restored = scene.restored {
                    options.append(KeyValue(SceneOptionKey.session, restored ? "restored" : "new"))
                }
            }
            if let discarded = d.discarded {
                options.append(KeyValue(SceneOptionKey.scenes, discarded.joined(separator: ",")))
            }
            let message = EventMessage(
                sequence: d.sequence, event: d.event,
                launchedInBackground: d.mode == .background, deadline: d.deadline?.nanoseconds,
                budgetEnd: d.budgetEnd?.nanoseconds, options: options)
            runs.sent(message, behind: d.behind, on: run, of: id)
            if run.channel < 0 && run.adopted {
                // Re-adopted, its channel not yet taken back: sent on resume.
                run.sent[d.sequence] = (d.event, loop.now)
                logger.info(
                    "\(id): \(d.event.rawValue) waits for the app to resume its channel; its deadline applies",
                    metadata: ["app": "\(id)"])
            } else {
                // After the save (State/Outbox.swift); the restoration data
                // first: the event's restoration.size names it.
                let decided = decidedAt?.nanoseconds ?? loop.now
                outward(id) { [unowned self] run in
                    // Stamped as it leaves: the round trip is the app's, not the save's.
                    let left = loop.now
                    run.sent[d.sequence] = (d.event, left)
                    // Left late (the daemon stalled before the save): the app
                    // gets its whole time from now, and is told so.
                    var message = message
                    let late = left - decided
                    if late > Self.leftLate, let deadline = message.deadline {
                        message.deadline = deadline + late
                        self.report(
                            .left(id, generation: run.generation, sequence: d.sequence, at: Instant(nanoseconds: left)))
                    }
                    if let restoration, !self.send(id, .restoration(restoration)) {
                        self.logger.warning(
                            "\(id): cannot hand over its restoration data (channel full or closed)",
                            metadata: ["app": "\(id)"])
                    }
                    if !self.send(id, .event(message)) {
                        let what = "\(id): cannot deliver \(d.event.rawValue) (channel full or closed)"
                        self.logger.warning("\(what); its deadline still applies", metadata: ["app": "\(id)"])
                    }
                }
            }
            record(id, .delivered, event: d.event, sequence: d.sequence, detail: Self.sceneDetail(d))
        } else {
            let signal = m.signals[d.event]
            if let signal { outward(id) { run in Posix.signal(pidfd: run.pidfd, signal) } }
            record(
                id, .delivered, event: d.event, sequence: d.sequence,
                detail: signal.map { "signal \(Posix.signalName($0))" } ?? "no signal mapped")
        }
    }

    /// An event that leaves this long after it was decided (the daemon
    /// stalled between the decision and the save) moves its deadline.
    static var leftLate: Int64 { 50_000_000 }

    /// What `events` shows of a scene event: "scene nav on centre".
    static func sceneDetail(_ d: Delivered) -> String? {
        if let s = d.scene { return "scene \(s.scene) on \(s.display)" + (s.restored == true ? " (restored)" : "") }
        if let discarded = d.discarded { return "scenes \(discarded.joined(separator: ","))" }
        return nil
    }

    @discardableResult
    func send(_ id: AppID, _ message: DaemonMessage) -> Bool {
        guard let run = runs[id], run.channel >= 0 else { return false }
        return UnixSocket.send(run.channel, message.encoded())
    }

    /// More background-task requests than this in one second is a flood: no
    /// honest app needs it (it has at most 64 tasks open). Acknowledgements
    /// do not count: the daemon paces them, one event at a time.
    static var floodLimit: Int { 2000 }
    /// Messages (or notifications) handled per wake-up: the rest wait for the
    /// next turn of the loop, so one chatty app cannot starve the others.
    static var messagesPerTurn: Int { 64 }

    func readChannel(_ id: AppID, _ run: Run) {
        // Taken, not copied (a copy of 65 KiB per read would be the cost).
        var buffer: [UInt8] = []
        swap(&buffer, &channelBuffer)
        if buffer.isEmpty { buffer = [UInt8](repeating: 0, count: Wire.maxMessageSize) }
        defer { channelBuffer = buffer }
        var turn = 0
        while runs[id] === run, turn < Self.messagesPerTurn {
            turn += 1
            switch UnixSocket.receive(run.channel, into: &buffer) {
            case .wouldBlock: return
            case .closed:
                // The process may be exiting; its exit is reported by SIGCHLD
                // (or its pidfd). Should it live on without its channel, the
                // deadline of the next event it cannot acknowledge applies,
                // and it may take the channel back on the resume socket.
                run.channelSource?.cancel()
                run.channelSource = nil
                Posix.close(run.channel)
                run.channel = -1
                return
            case .oversized:
                report(
                    .protocolViolation(
                        id, generation: run.generation,
                        message: "message larger than \(Wire.maxMessageSize) bytes"))
            case .message(let bytes):
                do {
                    let message = try AppMessage.decode(bytes)
                    switch message {
                    case .acknowledge, .complete: break
                    default:
                        guard flooding(run) else { break }
                        report(
                            .protocolViolation(
                                id, generation: run.generation,
                                message: "flood: more than \(Self.floodLimit) requests in one second"))
                        return
                    }
                    switch message {
                    case .acknowledge(let seq):
                        if let sent = run.sent.removeValue(forKey: seq) {
                            let latency = Double(loop.now - sent.at) / 1000
                            record(id, .acknowledged, event: sent.event, sequence: seq, latency: latency)
                        }
                        report(.acknowledged(id, generation: run.generation, sequence: seq))
                    case .complete(let seq, let result):
                        if let sent = run.sent.removeValue(forKey: seq) {
                            let latency = Double(loop.now - sent.at) / 1000
                            record(
                                id, .acknowledged, to: result.rawValue, event: sent.event, sequence: seq,
                                latency: latency)
                        }
                        report(.completed(id, generation: run.generation, sequence: seq, result: result))
                    case .saveRestoration(let data):
                        saveRestoration(id, data)
                    case .beginBackgroundTask(let request, let name):
                        report(.beginBackgroundTask(id, generation: run.generation, request: request, name: name))
                    case .endBackgroundTask(let task):
                        report(.endBackgroundTask(id, generation: run.generation, task: task))
                    case .prewarmed:
                        // Said by a prewarmed app at its first event (the core
                        // freezes it there); said otherwise, it changes nothing.
                        report(.prewarmed(id, generation: run.generation))
                    case .resume:
                        report(
                            .protocolViolation(
                                id, generation: run.generation,
                                message: "resume sent on an open channel (it belongs on the resume socket)"))
                    }
                } catch {
                    report(.protocolViolation(id, generation: run.generation, message: error.description))
                }
            }
        }
    }

    /// Counts one request in the current one-second window.
    func flooding(_ run: Run) -> Bool {
        let now = loop.now
        if now - run.windowStart > 1_000_000_000 {
            run.windowStart = now
            run.windowCount = 0
        }
        run.windowCount += 1
        return run.windowCount > Self.floodLimit
    }
}
