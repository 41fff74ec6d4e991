import Foundation
@preconcurrency import Glibc
import LifecycleControl
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
        ("oversized", "message larger than 4096 bytes"),
        ("ack-unsent", "which was not awaiting an acknowledgement"),
        ("bad-name", "task name: not UTF-8"),
        ("flood", "flood: more than 2000 messages in one second"),
    ]

    @Test(arguments: cases.map(\.mode))
    func aBrokenAppIsKilledWithItsReasonAndNoOneElseNotices(mode: String) throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: [
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
        try d.command(ControlRequest(.interruptionBegin))
        try f.acknowledged("good", "willResignActive")
        try d.command(ControlRequest(.interruptionEnd))
        try f.acknowledged("good", "didBecomeActive")
        #expect(try d.status("good").state == "active")
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

    @Test func aClientThatSendsHalfALineBlocksNobody() throws {
        let d = try DaemonUnderTest(apps: ["a": recorder("/dev/null")])
        let slow = try d.client()
        try slow.writeRaw(Array("{\"command\":\"sta".utf8))    // and then nothing
        #expect(try d.command(ControlRequest(.status)).ok)
        let long = try d.client()
        try? long.writeRaw([UInt8](repeating: 0x41, count: 70_000))
        #expect(try long.readResponse().error?.message.contains("longer than") == true)
        #expect(try d.command(ControlRequest(.status)).ok)
        #expect(try d.stop() == 0)
    }
}
