import Foundation
@preconcurrency import Glibc
import LifecycleWire
import Testing
@testable import LifecycleClient

// The Swift client against a fake daemon on a real SOCK_SEQPACKET socket
// pair, for what it must do exactly as the C library (clib/src/lifecycle.c,
// the reference) does: end the task of a reply nobody waits for, bound the
// messages kept while a task reply is awaited, and tell a malformed message
// from a closed channel, in the same words. docs/protocol.md, "What the
// client libraries do".

/// The daemon's end of a socket pair, driven by the test itself. Nothing
/// sleeps: every wait is a poll on the socket.
final class FakeDaemon {
    let app: Int32
    let daemon: Int32

    init() throws {
        var sv: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &sv) == 0 else {
            throw POSIXError(.init(rawValue: errno) ?? .EIO)
        }
        app = sv[0]
        daemon = sv[1]
    }

    deinit {
        close(app)
        close(daemon)
    }

    var channel: Channel { Channel(fd: app, resumePath: nil, appName: "a") }

    func send(_ m: DaemonMessage) { sendRaw(m.encoded()) }

    func sendRaw(_ bytes: [UInt8]) {
        let n = bytes.withUnsafeBytes { Glibc.send(daemon, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        precondition(n == bytes.count, "send: \(String(cString: strerror(errno)))")
    }

    /// The app's next message, or nil when none comes within `timeout` ms.
    func take(timeout: Int32 = 2000) -> AppMessage? {
        var p = pollfd(fd: daemon, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, timeout) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: Wire.maxMessageSize)
        let n = recv(daemon, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        guard n > 0 else { return nil }
        return try? AppMessage.decode(Array(buffer[0..<n]))
    }

    /// True when the app sent nothing more (looked at without waiting).
    var quiet: Bool { take(timeout: 0) == nil }

    /// The daemon sends nothing more: the app reads the end of the channel
    /// after what is queued, and can still send.
    func stopSending() { shutdown(daemon, Int32(SHUT_WR)) }
}

@MainActor final class Recorder: ApplicationDelegate {
    var log: [String] = []
    func didEnterBackground(_ application: Application) { log.append("didEnterBackground") }
    func didReceiveMemoryWarning(_ application: Application) { log.append("didReceiveMemoryWarning") }
}

/// Bytes of Tests/golden/vectors.txt's reject.daemon.reply-truncated, and the text Wire.swift
/// and wire.c give for them.
let truncatedReply: [UInt8] = [
    0x01, 0x02, 0x00, 0x00, 0x2a, 0x00, 0x00, 0x00,
    0x03, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
]
let truncatedReplyError = "truncated: budget end needs 8 bytes at offset 12, 7 left"

let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

@MainActor @Suite struct LateTaskReplyTests {
    @Test func aReplyAfterBeginGaveUpHasItsTaskEndedByTheLoop() throws {
        let d = try FakeDaemon()
        let app = Application(delegate: Recorder(), channel: d.channel)
        app.taskReplyTimeoutMilliseconds = 50
        let start = monotonicNanoseconds()
        #expect(app.beginBackgroundTask(name: "upload") == .invalid)
        #expect(monotonicNanoseconds() - start >= 50_000_000, "it waited the whole timeout")
        let begin = try #require(d.take())
        guard case .beginBackgroundTask(let request, "upload") = begin else {
            Issue.record("expected beginBackgroundTask upload, got \(begin)")
            return
        }
        // The reply comes after all: the daemon holds task 7 for an app that does not know it.
        d.send(.backgroundTaskReply(request: request, task: 7, budgetEnd: nil))
        d.stopSending()
        #expect(app.run() == .closed)
        #expect(d.take() == .endBackgroundTask(task: 7))
        #expect(d.quiet)
    }

    @Test func aLateReplyWhileAnotherRequestWaitsIsEndedNotQueued() throws {
        let d = try FakeDaemon()
        let app = Application(delegate: Recorder(), channel: d.channel)
        app.taskReplyTimeoutMilliseconds = 20
        #expect(app.beginBackgroundTask(name: "first") == .invalid)
        // Request ids count from 1: the late reply to the first, an invalid
        // one nobody asked for (nothing to end), then the second's reply.
        d.send(.backgroundTaskReply(request: 1, task: 7, budgetEnd: nil))
        d.send(.backgroundTaskReply(request: 1000, task: nil, budgetEnd: nil))
        d.send(.backgroundTaskReply(request: 2, task: 8, budgetEnd: nil))
        app.taskReplyTimeoutMilliseconds = 5000
        #expect(app.beginBackgroundTask(name: "second") == BackgroundTaskIdentifier(rawValue: 8))
        #expect(d.take() == .beginBackgroundTask(request: 1, name: "first"))
        #expect(d.take() == .beginBackgroundTask(request: 2, name: "second"))
        #expect(d.take() == .endBackgroundTask(task: 7))
        #expect(d.quiet)
        #expect(app.pending.isEmpty, "a stale reply is not kept for the loop")
    }

    @Test func theDefaultTimeoutIsTheCLibrarys() throws {
        let header = try String(
            contentsOf: repository.appendingPathComponent("clib/include/lifecycle.h"), encoding: .utf8)
        let d = try FakeDaemon()
        let app = Application(delegate: Recorder(), channel: d.channel)
        #expect(header.contains("#define LIFECYCLE_TASK_REPLY_TIMEOUT_MS \(app.taskReplyTimeoutMilliseconds)\n"))
    }
}

@Suite struct AsyncAPILateTaskReplyTests {
    @Test func theEventSequenceEndsATaskNobodyAskedFor() async throws {
        let d = try FakeDaemon()
        let events = LifecycleEvents(channel: d.channel)
        d.send(.backgroundTaskReply(request: 5, task: 9, budgetEnd: nil))
        d.send(.event(EventMessage(sequence: 1, event: .didBecomeActive, deadline: nil, budgetEnd: nil)))
        var iterator = events.makeAsyncIterator()
        let event = await iterator.next()
        #expect(event?.name == "didBecomeActive")
        #expect(d.take() == .endBackgroundTask(task: 9))
        #expect(d.quiet, "not acknowledged before the next call")
    }

    @Test func aMalformedMessageEndsTheSequence() async throws {
        let d = try FakeDaemon()
        let events = LifecycleEvents(channel: d.channel)
        d.sendRaw(truncatedReply)
        var iterator = events.makeAsyncIterator()
        #expect(await iterator.next() == nil)
        #expect(iterator.ended)
    }
}

@MainActor @Suite struct QueueBoundTests {
    @Test func theBoundIsTheCLibrarys() throws {
        let header = try String(
            contentsOf: repository.appendingPathComponent("clib/include/lifecycle.h"), encoding: .utf8)
        #expect(header.contains("#define LIFECYCLE_MAX_QUEUED \(Wire.maxQueuedWhileWaiting)\n"))
    }

    @Test func asManyAsTheBoundAreKeptAndDeliveredInOrder() throws {
        let d = try FakeDaemon()
        let recorder = Recorder()
        let app = Application(delegate: recorder, channel: d.channel)
        d.send(.event(EventMessage(sequence: 1, event: .didEnterBackground, deadline: nil, budgetEnd: nil)))
        for i in 1..<Wire.maxQueuedWhileWaiting { d.send(.backgroundTasksExpiring([UInt32(i)])) }
        d.send(.backgroundTaskReply(request: 1, task: 5, budgetEnd: nil))
        #expect(app.beginBackgroundTask(name: "x") == BackgroundTaskIdentifier(rawValue: 5))
        #expect(app.pending.count == Wire.maxQueuedWhileWaiting)
        #expect(app.channelError == nil)
        #expect(recorder.log.isEmpty, "kept, not delivered during begin")
        d.send(.event(EventMessage(sequence: 2, event: .didReceiveMemoryWarning, deadline: nil, budgetEnd: nil)))
        d.stopSending()
        #expect(app.run() == .closed)
        #expect(recorder.log == ["didEnterBackground", "didReceiveMemoryWarning"])
        #expect(d.take() == .beginBackgroundTask(request: 1, name: "x"))
        #expect(d.take() == .acknowledge(sequence: 1))
        #expect(d.take() == .acknowledge(sequence: 2))
    }

    @Test func oneMoreIsAChannelError() throws {
        let d = try FakeDaemon()
        let recorder = Recorder()
        let app = Application(delegate: recorder, channel: d.channel)
        d.send(.event(EventMessage(sequence: 1, event: .didEnterBackground, deadline: nil, budgetEnd: nil)))
        for i in 1...Wire.maxQueuedWhileWaiting { d.send(.backgroundTasksExpiring([UInt32(i)])) }
        d.send(.backgroundTaskReply(request: 1, task: 6, budgetEnd: nil))
        #expect(app.beginBackgroundTask(name: "x") == .invalid)
        try #require(app.channelError == .tooManyQueued)  // else run() would wait for the daemon
        #expect(
            "\(ChannelError.tooManyQueued)" == "more than 64 messages arrived while waiting for a background task reply"
        )
        // Final: the loop ends at once with it (main exits 1), nothing more is sent.
        #expect(app.run() == .tooManyQueued)
        #expect(recorder.log.isEmpty)
        app.endBackgroundTask(BackgroundTaskIdentifier(rawValue: 6))
        #expect(app.beginBackgroundTask(name: "y") == .invalid)
        #expect(d.take() == .beginBackgroundTask(request: 1, name: "x"))
        #expect(d.quiet)
    }
}

@MainActor @Suite struct MalformedMessageTests {
    @Test func aMalformedMessageIsAProtocolViolationNotAClosedChannel() throws {
        let d = try FakeDaemon()
        let app = Application(delegate: Recorder(), channel: d.channel)
        d.sendRaw(truncatedReply)
        let error = app.run()
        #expect(error == .protocolViolation(truncatedReplyError))
        #expect(error?.description == "protocol violation by the daemon: " + truncatedReplyError)
        #expect(error?.notice(app: "saver") == "protocol violation by the daemon: \(truncatedReplyError) (saver)")
    }

    @Test func anOversizedDatagramIsAProtocolViolation() throws {
        let d = try FakeDaemon()
        let app = Application(delegate: Recorder(), channel: d.channel)
        var big = DaemonMessage.event(EventMessage(sequence: 1, event: .didBecomeActive, deadline: nil, budgetEnd: nil))
            .encoded()
        big += [UInt8](repeating: 0, count: Wire.maxMessageSize + 1 - big.count)
        d.sendRaw(big)
        #expect(app.run()?.description == "protocol violation by the daemon: message of 66561 bytes exceeds 66560")
    }

    @Test func aClosedChannelIsSaidSo() throws {
        let d = try FakeDaemon()
        let app = Application(delegate: Recorder(), channel: d.channel)
        d.stopSending()
        let error = app.run()
        #expect(error == .closed)
        #expect(error?.description == "lifecycled closed the channel")
    }

    @Test func aMalformedMessageWhileBeginWaitsIsAChannelError() throws {
        let d = try FakeDaemon()
        let app = Application(delegate: Recorder(), channel: d.channel)
        d.sendRaw(truncatedReply)
        #expect(app.beginBackgroundTask(name: "x") == .invalid)
        #expect(app.channelError == .protocolViolation(truncatedReplyError))
        #expect(app.run() == .protocolViolation(truncatedReplyError))
    }

    /// Each text is the one the C library's lifecycle_last_error() gives.
    @Test func theWordsAreTheCLibrarys() throws {
        let c = try String(contentsOf: repository.appendingPathComponent("clib/src/lifecycle.c"), encoding: .utf8)
        let cases: [(ChannelError, format: String, argument: String)] = [
            (.closed, "lifecycled closed the channel", ""),
            (.protocolViolation("unknown event 10"), "protocol violation by the daemon: %s", "unknown event 10"),
            (.tooManyQueued, "more than %d messages arrived while waiting for a background task reply", "64"),
        ]
        for (error, format, argument) in cases {
            #expect(c.contains("\"\(format)\""), "lifecycle.c says \(format)")
            let expected = format.replacingOccurrences(of: "%s", with: argument)
                .replacingOccurrences(of: "%d", with: argument)
            #expect(error.description == expected)
        }
    }
}

/// example-recorder (a Swift app) as lifecycled starts it: the channel as
/// fd 3. What it writes on stderr and how it exits.
@Suite struct ClientExitTests {
    struct Outcome {
        var status: Int32
        var stderr: String
    }

    /// Runs example-recorder with `arguments` on a fresh channel, sends it
    /// `bytes` (nil: the daemon's end stops sending), and waits for it to exit.
    func run(_ arguments: [String], sending bytes: [UInt8]?) throws -> Outcome {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
        var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
        while dir.path != "/"
            && !FileManager.default.fileExists(atPath: dir.appendingPathComponent("example-recorder").path)
        {
            dir = dir.deletingLastPathComponent()
        }
        let recorder = dir.appendingPathComponent("example-recorder").path
        try #require(
            FileManager.default.isExecutableFile(atPath: recorder),
            "example-recorder beside the test binary (swift build --build-tests builds it)")
        let d = try FakeDaemon()
        var errors: [Int32] = [-1, -1]
        // Its stderr: a stream socket, created close-on-exec (no pipe2 in Glibc's Swift overlay).
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &errors) == 0 else {
            throw POSIXError(.init(rawValue: errno) ?? .EIO)
        }
        defer { close(errors[0]) }
        let log = NSTemporaryDirectory() + "/client-exit-\(getpid())-\(UUID().uuidString)"
        defer { unlink(log) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // d.app is never 3 here (a test process has more fds open), so dup2 clears its close-on-exec.
        try #require(d.app != 3)
        posix_spawn_file_actions_adddup2(&actions, d.app, 3)
        posix_spawn_file_actions_adddup2(&actions, errors[1], 2)
        let environment: [String] = ["LIFECYCLE_FD=3", "LIFECYCLE_APP=probe", "LIFECYCLE_PROTOCOL=\(Wire.version)"]
        let argv = ([recorder, "--log", log] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, recorder, &actions, nil, argv, envp)
        close(errors[1])
        guard spawned == 0 else { throw POSIXError(.init(rawValue: spawned) ?? .EIO) }
        if let bytes { d.sendRaw(bytes) } else { d.stopSending() }
        var text = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(errors[0], &chunk, chunk.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            text += chunk[0..<n]
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let exited = status & 0x7f == 0
        return Outcome(status: exited ? (status >> 8) & 0xff : -1, stderr: String(decoding: text, as: UTF8.self))
    }

    @Test func aMalformedMessageExits1WithTheViolationOnStderr() throws {
        let o = try run([], sending: truncatedReply)
        #expect(o.status == 1)
        #expect(o.stderr == "protocol violation by the daemon: \(truncatedReplyError) (probe); exiting\n")
    }

    @Test func aClosedChannelExits1AndSaysSo() throws {
        let o = try run([], sending: nil)
        #expect(o.status == 1)
        #expect(o.stderr == "lifecycled closed the channel (probe); exiting\n")
    }

    @Test func theAsyncAPISaysTheSame() throws {
        let o = try run(["--async"], sending: truncatedReply)
        #expect(o.stderr == "protocol violation by the daemon: \(truncatedReplyError) (probe)\n")
    }
}
