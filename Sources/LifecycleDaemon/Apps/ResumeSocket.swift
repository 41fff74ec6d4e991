#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleCore
import LifecycleOS
import LifecycleWire
import Logging
import LifecycleControl

// The resume socket: where a library app takes its channel back after the
// daemon restarted (docs/protocol.md, "Resuming the channel"). A connection
// is kept only from the process of a library app whose channel is down
// (checked at accept); its first message must be a resume naming that app.
// Anything else is closed without an answer.

extension Daemon {
    /// The resume socket: where it is, its listener and the loop's source
    /// for it, and the connections accepted and not yet resumed.
    struct ResumeDoor {
        var path: String?
        var listener: Int32 = -1
        var source: EventLoop.Source?
        var pending: [Int32: EventLoop.Source] = [:]
    }

    func listenForResumes(_ handoff: Handoff?) throws {
        let path = config.runtimeDirectory + "/apps.sock"
        if let handoff, handoff.resume >= 0 {
            try Posix.setCloseOnExec(handoff.resume)
            resume.listener = handoff.resume
        } else {
            try? FileManager.default.createDirectory(
                atPath: config.runtimeDirectory, withIntermediateDirectories: true)
            resume.listener = try UnixSocket.listen(path: path, mode: 0o666, packets: true)
        }
        resume.path = path
        resume.source = try loop.watch(fd: resume.listener) { [unowned self] _ in self.acceptResumes() }
    }

    func closeResumeSocket() {
        resume.source?.cancel()
        for (fd, source) in resume.pending {
            source.cancel()
            Posix.close(fd)
        }
        resume.pending = [:]
        if resume.listener >= 0 { Posix.close(resume.listener) }
        if let path = resume.path { Posix.unlink(path) }
    }

    /// The resumes that have arrived, taken now rather than when the loop
    /// would run them: before deadlines are judged (State/Outbox.swift), an
    /// app that was taking its channel back must not lose the race.
    func takeWaitingResumes() {
        acceptResumes()
        for fd in resume.pending.keys.sorted() {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&p, 1, 0) == 1 { resume(fd) }
        }
    }

    private func acceptResumes() {
        while let fd = (try? UnixSocket.accept(resume.listener)).flatMap({ $0 }) {
            // Only the process of a library app whose channel is down may
            // wait here (anyone else is closed at once), and at most 64 at once.
            let expected =
                UnixSocket.peerCredentials(fd).flatMap { runs.app(pid: $0.pid) }.map { id in
                    runs[id]!.channel < 0 && manifests[id]?.policy.delivery == .library
                } ?? false
            guard expected, resume.pending.count < 64,
                let source = try? loop.watch(fd: fd, { [unowned self] _ in self.resume(fd) })
            else {
                Posix.close(fd)
                continue
            }
            resume.pending[fd] = source
        }
    }

    private func resume(_ fd: Int32) {
        resume.pending.removeValue(forKey: fd)?.cancel()
        var buffer = [UInt8](repeating: 0, count: Wire.maxMessageSize)
        guard case .message(let bytes) = UnixSocket.receive(fd, into: &buffer),
            case .resume(let last, let id, let tasks)? = try? AppMessage.decode(bytes)
        else {
            logger.warning("resume socket: a connection that did not start with a resume, closed")
            return Posix.close(fd)
        }
        let peer = UnixSocket.peerCredentials(fd)
        guard let run = runs[id], run.channel < 0, manifests[id]?.policy.delivery == .library,
            let pid = peer?.pid, pid == run.pid
        else {
            let from = peer.map { String($0.pid) } ?? "?"
            let why = "not its process, or its channel is not down"
            logger.warning(
                "resume socket: refused a resume for \(id) from pid \(from) (\(why))", metadata: ["app": "\(id)"])
            return Posix.close(fd)
        }
        run.channel = fd
        run.channelSource = try? loop.watch(fd: fd) { [unowned self, unowned run] _ in self.readChannel(id, run) }
        record(id, .resumed, sequence: last, detail: "tasks \(tasks.map(String.init).joined(separator: ","))")
        logger.info("\(id) resumed its channel", metadata: metadata(id))
        // `resumed` first, at once (the handshake, not a decision): whatever
        // the inputs below make the core send, and what is held for the
        // save, must follow it.
        send(id, .resumed)
        guard let owed = supervisor.channelState(id) else { return }
        // Acknowledged, but the acknowledgements were lost with the old
        // socket; the rest never received, or received and still being
        // handled: sent again, in order, with the restoration data that goes
        // before willFinishLaunching. After the save, as every event
        // (State/Outbox.swift); queued before the acknowledgements go in, so
        // that what they make the core send follows these.
        let acknowledged = last == 0 ? 0 : owed.awaiting.prefix { $0 <= last }.count
        let again = owed.awaiting.dropFirst(acknowledged).compactMap { seq in
            run.lastEvents.first { $0.sequence == seq }
        }
        if let first = again.first {
            let blob =
                again.contains {
                    $0.event == .willFinishLaunching
                        && $0.options.contains(where: { $0.key == LaunchOptionKey.restorationSize.rawValue })
                }
                ? history.blobs[id] : nil
            outward(id) { [unowned self] run in
                for event in again {
                    if event.event == .willFinishLaunching, let blob { self.send(id, .restoration(blob)) }
                    self.send(id, .event(event))
                    run.sent[event.sequence] = (event.event, self.loop.now)  // its answer is recorded
                }
                // It could not see the event before now: its whole time from now.
                self.report(.left(id, generation: run.generation, sequence: first.sequence, at: self.now()))
            }
        }
        for seq in owed.awaiting.prefix(acknowledged) {
            report(.acknowledged(id, generation: run.generation, sequence: seq))
        }
        // Tasks whose reply, or whose end, was lost with the old socket.
        for task in owed.tasks where !tasks.contains(task) {
            report(.endBackgroundTask(id, generation: run.generation, task: task))
        }
        if let now = supervisor.channelState(id), !now.warned.isEmpty {
            outward(id) { [unowned self] _ in self.send(id, .backgroundTasksExpiring(now.warned)) }
        }
    }
}
