import Foundation
@preconcurrency import Glibc
import LifecycleControl
import CLifecycleShim
import LifecycleOS
import LifecycleTestKit
import Testing

/// Whatever arrives on an app channel or the control socket, however broken
/// or hostile, the daemon records it, deals with the offender, and carries on
/// with every other app.
@Suite struct HardeningTests {
    static let rogue = repositoryRoot + "/Tests/rogue/rogue.py"

    /// How each misbehaviour ends, as the record says it.
    static let cases: [(mode: String, reason: String)] = [
        ("garbage", "unsupported protocol version 153"),
        ("bad-version", "unsupported protocol version 2"),
        ("daemon-type", "is sent by the daemon, not apps"),
        ("truncated", "truncated: id needs 4 bytes"),
        ("trailing", "unexpected trailing bytes"),
        ("oversized", "message larger than 66560 bytes"),
        ("ack-unsent", "which was not awaiting an acknowledgement"),
        ("bad-name", "task name: not UTF-8"),
        ("flood", "flood: more than 2000 requests in one second"),
    ]

    @Test(arguments: cases.map(\.mode))
    func aBrokenAppIsKilledWithItsReasonAndNoOneElseNotices(mode: String) throws {
        let s = scratch()
        let d = try DaemonUnderTest(
            apps: [
                "good": recorder(s + "/good"),
                "rogue": "command = [\"/usr/bin/env\", \"python3\", \"\(Self.rogue)\", \"\(mode)\"]\n",
            ], daemon: "foreground_slots = 2")
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "good"))
        try f.acknowledged("good", "didBecomeActive")

        try d.command(ControlRequest(.launch, app: "rogue", background: true))
        let end = try f.terminated("rogue")
        let expected = Self.cases.first { $0.mode == mode }!.reason
        #expect(end.reason == "protocol-violation")
        #expect(end.detail?.contains(expected) == true, "\(mode): \(end.detail ?? "")")

        // The other app and the daemon carry on.
        try interruptAndResume(d, f, "good")
        #expect(try d.status("good").state == .active)
        #expect(try d.stop() == 0)
    }

    @Test func anAppAcknowledgingThousandsOfEventsIsNoFlood() throws {
        let d = try DaemonUnderTest(apps: ["a": recorder("/dev/null")])
        let f = try d.follow(["a"])
        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")
        let c = try d.client()
        let start = Date()
        var events = 0
        while events < 3000 || Date().timeIntervalSince(start) < 1 {
            _ = try c.send(ControlRequest(events % 2 == 0 ? .interruptionBegin : .interruptionEnd))
            events += 1
            if events >= 20_000 { break }
        }
        #expect(try d.status("a").pid != nil, "an app that only acknowledges is never a flood")
        #expect(try d.status("a").lastTermination == nil)
        #expect(try d.stop() == 0)
    }

    @Test func aClientThatNeverReadsIsDroppedAndOthersAreServed() throws {
        let d = try DaemonUnderTest(apps: ["a": recorder("/dev/null")])
        let stuck = try d.client()
        // Ask for status again and again, never reading an answer: the
        // daemon must not block on it, and drops it past its backlog.
        let line = Array("{\"command\":\"status\"}\n".utf8)
        var dropped = false
        for _ in 0..<200_000 {
            do { try stuck.writeRaw(line) } catch { dropped = true; break }
        }
        #expect(dropped, "a client that never reads must be disconnected")
        #expect(try d.command(ControlRequest(.status)).ok, "the daemon serves others meanwhile")
        #expect(try d.stop() == 0)
    }

    /// A follower that reads nothing while megabytes of records are made
    /// for it, then reads them all: every record, once, in order (what is
    /// left of a partial write is written next; the socket full, nothing is
    /// tried until it is writable).
    @Test func aFollowerThatFallsBehindMissesNothing() throws {
        let d = try DaemonUnderTest(apps: ["a": recorder("/dev/null")])
        let f = try d.follow(["a"])
        try d.command(ControlRequest(.activate, app: "a"))
        let c = try d.client()
        for i in 0..<1000 {  // about 1,000 bytes of records each: several socket buffers
            #expect(try c.send(ControlRequest(i % 2 == 0 ? .interruptionBegin : .interruptionEnd)).ok)
        }
        try d.command(ControlRequest(.home))  // after every interruption's records
        let last = try f.acknowledged("a", "didEnterBackground")
        #expect(f.seen.count > 2000)
        let delivered = f.seen.filter { $0.kind == .delivered }.compactMap(\.sequence)
        #expect(delivered == Array(1...last.sequence!), "each event once, in order")
        #expect(f.seen.filter { $0.kind == .acknowledged }.compactMap(\.sequence) == delivered)
        #expect(try d.stop() == 0)
    }

    /// A follower that stops reading, then goes away with megabytes owed
    /// to it: the daemon finds it writable and hung up at once, and must
    /// drop it without touching its closed descriptor again (it crashed
    /// there, two runs in three). Three followers in turn, to meet the race.
    @Test func aFollowerGoneWithABacklogCostsNothing() throws {
        let d = try DaemonUnderTest(apps: ["a": recorder("/dev/null")])
        try d.command(ControlRequest(.activate, app: "a"))
        let c = try d.client()
        for _ in 0..<3 {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            try #require(fd >= 0)
            var small: Int32 = 4096
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { p in
                for (i, b) in d.socket.utf8.enumerated() { p[i] = b }
            }
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            try #require(connected == 0)
            let follow = Array("{\"command\":\"events\",\"follow\":true}\n".utf8)
            try #require(write(fd, follow, follow.count) == follow.count)
            for i in 0..<600 {  // records well past what its socket holds
                #expect(try c.send(ControlRequest(i % 2 == 0 ? .interruptionBegin : .interruptionEnd)).ok)
            }
            close(fd)
            #expect(try c.send(ControlRequest(.status)).ok, "the daemon carries on")
        }
        #expect(try d.status("a").lastTermination == nil, "and so does its app")
        #expect(try d.stop() == 0)
    }

    @Test func aClientThatSendsHalfALineBlocksNobody() throws {
        let d = try DaemonUnderTest(apps: ["a": recorder("/dev/null")])
        let slow = try d.client()
        try slow.writeRaw(Array("{\"command\":\"sta".utf8))  // and then nothing
        #expect(try d.command(ControlRequest(.status)).ok)
        let long = try d.client()
        try? long.writeRaw([UInt8](repeating: 0x41, count: 70_000))
        #expect(try long.readResponse().error?.message.contains("longer than") == true)
        #expect(try d.command(ControlRequest(.status)).ok)
        #expect(try d.stop() == 0)
    }
}

/// Both sides agree on the protocol version before the first message: a
/// client told a version it does not speak refuses at once, clearly.
@Suite struct ProtocolVersionTests {
    @Test(arguments: Client.allCases)
    func aClientRefusesAVersionItDoesNotSpeak(client: Client) throws {
        let s = scratch()
        let (daemonEnd, appEnd) = try UnixSocket.channelPair()
        defer { close(daemonEnd) }
        let argv = client.command(s + "/log", [])
        let executable = argv[0].hasPrefix("/") ? argv[0] : binary(argv[0])
        var env = ProcessInfo.processInfo.environment
        env["LIFECYCLE_FD"] = "3"
        env["LIFECYCLE_PROTOCOL"] = "2"
        let err = open(s + "/stderr", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        let p = try Spawner.spawn(
            SpawnRequest(
                executable: executable, arguments: Array(argv.dropFirst()), environment: env, workingDirectory: nil,
                group: AppProcessGroup(), inherit: [(appEnd, 3), (err, 2)]))
        close(appEnd)
        close(err)
        var pfd = pollfd(fd: p.pidfd, events: Int16(POLLIN), revents: 0)
        let ended = poll(&pfd, 1, 20_000) == 1
        #expect(ended, "it must not wait for a message it could not read")
        if !ended { kill(p.pid, SIGKILL) }
        var st = lc_child_status()
        lc_reap(p.pid, &st)
        close(p.pidfd)
        #expect(st.exited != 0 && st.value != 0)
        let message = (try? String(contentsOfFile: s + "/stderr", encoding: .utf8)) ?? ""
        #expect(message.contains("protocol version"), "\(client): \(message)")
        #expect(lines(s + "/log").isEmpty, "no event was handled")
    }
}
