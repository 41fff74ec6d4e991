import Foundation
@preconcurrency import Glibc
import LifecycleWire
import Testing

@testable import LifecycleClient

// The Swift client taking its channel back after lifecycled restarts, as
// docs/protocol.md ("Resuming the channel") says and as the C library does
// (clib/tests/test_lifecycle.c has the same cases): a real listening socket
// plays the new daemon, on a thread of its own, since the app blocks while
// it resumes.

/// A listening SOCK_SEQPACKET socket in a fresh directory: the resume socket.
final class ResumeListener: @unchecked Sendable {
    let path: String
    let fd: Int32

    init() throws {
        path = FileManager.default.temporaryDirectory.path + "/resume-\(UUID().uuidString.prefix(8)).sock"
        fd = socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() { raw[i] = b }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, listen(fd, 4) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
    }

    /// Stops listening: a connect is refused from now on.
    func close() {
        Glibc.close(fd)
        unlink(path)
    }

    /// The next connection (a bounded wait: nil is a failure, not a sync).
    func accept(timeout: Int32 = 10_000) -> Int32? {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, timeout) == 1 else { return nil }
        let c = Glibc.accept(fd, nil, nil)
        return c >= 0 ? c : nil
    }
}

/// One message from `fd`, or nil when none comes within `timeout` ms.
func takeAppMessage(_ fd: Int32, timeout: Int32 = 10_000) -> AppMessage? {
    var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    guard poll(&p, 1, timeout) == 1 else { return nil }
    var buffer = [UInt8](repeating: 0, count: Wire.maxMessageSize)
    let n = recv(fd, &buffer, buffer.count, 0)
    guard n > 0 else { return nil }
    return try? AppMessage.decode(Array(buffer[0..<n]))
}

func sendDaemonMessage(_ fd: Int32, _ m: DaemonMessage) {
    let bytes = m.encoded()
    _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
}

/// What the new daemon's thread saw, read by the test after joining it.
final class Seen: @unchecked Sendable {
    var messages: [AppMessage] = []
}

func onThread(_ body: @escaping @Sendable () -> Void) -> Thread {
    let t = Thread(block: body)
    t.start()
    return t
}

@MainActor @Suite struct ResumeTests {
    @Test func aBrokenChannelIsTakenBackOnTheSameDescriptor() throws {
        let d = try FakeDaemon()
        let listener = try ResumeListener()
        let recorder = Recorder()
        let channel = Channel(fd: d.app, resumePath: listener.path, appName: "a")
        channel.resumeWaitMilliseconds = 300
        let app = Application(delegate: recorder, channel: channel)
        d.send(.event(EventMessage(sequence: 1, event: .didEnterBackground, deadline: nil, budgetEnd: nil)))
        d.send(.backgroundTaskReply(request: 1, task: 4, budgetEnd: nil))
        #expect(app.beginBackgroundTask(name: "upload") == BackgroundTaskIdentifier(rawValue: 4))
        // The old daemon dies: its end of the pair goes away.
        shutdown(d.daemon, Int32(SHUT_RDWR))

        let seen = Seen()
        let done = DispatchSemaphore(value: 0)
        _ = onThread {
            defer { done.signal() }
            guard let c = listener.accept() else { return }
            seen.messages.append(takeAppMessage(c) ?? .acknowledge(sequence: 999))
            sendDaemonMessage(c, .resumed)
            sendDaemonMessage(
                c, .event(EventMessage(sequence: 2, event: .didReceiveMemoryWarning, deadline: nil, budgetEnd: nil)))
            seen.messages.append(takeAppMessage(c) ?? .acknowledge(sequence: 999))
            // This daemon goes too, and nobody listens any more.
            listener.close()
            close(c)
        }
        let start = monotonicNanoseconds()
        #expect(app.run() == .closed)
        done.wait()
        #expect(recorder.log == ["didEnterBackground", "didReceiveMemoryWarning"])
        #expect(
            seen.messages == [
                .resume(lastAcknowledged: 1, app: "a", tasks: [4]),
                .acknowledge(sequence: 2),
            ], "event 1 was handled after the break: its acknowledgement is lost, and named by the resume")
        #expect(monotonicNanoseconds() - start >= 300_000_000, "it tried to resume for the whole wait")
        #expect(d.take() == .beginBackgroundTask(request: 1, name: "upload"))
        #expect(d.quiet)
    }

    /// Its acknowledgement was sent (or named by the resume): a second one
    /// would be an acknowledgement for an event not awaiting one.
    @Test func aRepeatedEventIsIgnored() throws {
        let d = try FakeDaemon()
        let recorder = Recorder()
        let app = Application(delegate: recorder, channel: d.channel)
        d.send(.event(EventMessage(sequence: 1, event: .didEnterBackground, deadline: nil, budgetEnd: nil)))
        d.send(.event(EventMessage(sequence: 1, event: .didEnterBackground, deadline: nil, budgetEnd: nil)))
        d.send(.event(EventMessage(sequence: 2, event: .didReceiveMemoryWarning, deadline: nil, budgetEnd: nil)))
        d.stopSending()
        #expect(app.run() == .closed)
        #expect(recorder.log == ["didEnterBackground", "didReceiveMemoryWarning"])
        #expect(d.take() == .acknowledge(sequence: 1))
        #expect(d.take() == .acknowledge(sequence: 2))
        #expect(d.quiet)
    }

    @Test func aRepeatedExpirationRunsItsHandlerOnce() throws {
        let d = try FakeDaemon()
        let app = Application(delegate: Recorder(), channel: d.channel)
        d.send(.backgroundTaskReply(request: 1, task: 5, budgetEnd: nil))
        var expired = 0
        _ = app.beginBackgroundTask(name: "x") { expired += 1 }
        d.send(.backgroundTasksExpiring([5]))
        d.send(.backgroundTasksExpiring([5]))
        d.stopSending()
        #expect(app.run() == .closed)
        #expect(expired == 1)
    }

    @Test func nobodyListeningMeansTheBreakIsFinalAfterTheWait() throws {
        let d = try FakeDaemon()
        let channel = Channel(fd: d.app, resumePath: "/nonexistent/lifecycled-apps.sock", appName: "a")
        channel.resumeWaitMilliseconds = 200
        let app = Application(delegate: Recorder(), channel: channel)
        shutdown(d.daemon, Int32(SHUT_RDWR))
        let start = monotonicNanoseconds()
        #expect(app.run() == .closed)
        #expect(monotonicNanoseconds() - start >= 200_000_000)
        #expect("\(ChannelError.closed)" == "lifecycled closed the channel")
    }

    @Test func anythingButResumedFirstIsAProtocolViolation() throws {
        let d = try FakeDaemon()
        let listener = try ResumeListener()
        defer { listener.close() }
        let channel = Channel(fd: d.app, resumePath: listener.path, appName: "a")
        let app = Application(delegate: Recorder(), channel: channel)
        shutdown(d.daemon, Int32(SHUT_RDWR))
        let done = DispatchSemaphore(value: 0)
        _ = onThread {
            defer { done.signal() }
            guard let c = listener.accept() else { return }
            _ = takeAppMessage(c)
            sendDaemonMessage(c, .backgroundTasksExpiring([1]))
        }
        #expect(app.run() == .protocolViolation("message type 0x3 before resumed"))
        done.wait()
    }

    @Test func aBeginWaitingWhenTheChannelBreaksReturnsTheInvalidIDOnceResumed() throws {
        let d = try FakeDaemon()
        let listener = try ResumeListener()
        defer { listener.close() }
        let channel = Channel(fd: d.app, resumePath: listener.path, appName: "a")
        let app = Application(delegate: Recorder(), channel: channel)
        let seen = Seen()
        let daemonEnd = d.daemon
        let done = DispatchSemaphore(value: 0)
        _ = onThread {
            defer { done.signal() }
            seen.messages.append(takeAppMessage(daemonEnd) ?? .acknowledge(sequence: 999))
            shutdown(daemonEnd, Int32(SHUT_RDWR))  // dies before it answers
            guard let c = listener.accept() else { return }
            seen.messages.append(takeAppMessage(c) ?? .acknowledge(sequence: 999))
            sendDaemonMessage(c, .resumed)
        }
        #expect(app.beginBackgroundTask(name: "upload") == .invalid)
        done.wait()
        #expect(app.channelError == nil, "the channel is back")
        #expect(
            seen.messages == [
                .beginBackgroundTask(request: 1, name: "upload"),
                .resume(lastAcknowledged: 0, app: "a", tasks: []),
            ])
    }
}
