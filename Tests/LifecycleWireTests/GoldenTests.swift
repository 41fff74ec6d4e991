import Foundation
import Testing
import LifecycleWire

/// Golden byte vectors: the format of docs/protocol.md, byte for byte. Every
/// implementation of the protocol is tested against these same bytes.
@Suite struct GoldenVectorTests {
    static let event: [UInt8] = [
        0x01, 0x01, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00,  // v1, event, flags, seq 7
        0x05, 0x00, 0x01, 0x00,  // didEnterBackground, fg, 1 option
        0x00, 0xCA, 0x9A, 0x3B, 0x00, 0x00, 0x00, 0x00,  // deadline 1_000_000_000
        0x00, 0x5E, 0xD0, 0xB2, 0x00, 0x00, 0x00, 0x00,  // budget end 3_000_000_000
        0x01, 0x00, 0x6B, 0x02, 0x00, 0x76, 0x31,  // "k" = "v1"
    ]

    @Test func eventMessage() throws {
        let m = DaemonMessage.event(
            EventMessage(
                sequence: 7, event: .didEnterBackground, deadline: 1_000_000_000,
                budgetEnd: 3_000_000_000, options: [KeyValue("k", "v1")]))
        #expect(m.encoded() == Self.event)
        #expect(try DaemonMessage.decode(Self.event) == m)
    }

    @Test func eventWithoutDeadline() throws {
        let bytes: [UInt8] =
            [
                0x01, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
                0x03, 0x01, 0x00, 0x00,
            ] + Array(repeating: 0xFF, count: 16)
        let m = DaemonMessage.event(
            EventMessage(
                sequence: 1, event: .didBecomeActive,
                launchedInBackground: true, deadline: nil, budgetEnd: nil))
        #expect(m.encoded() == bytes)
        #expect(try DaemonMessage.decode(bytes) == m)
    }

    @Test func memoryEvents() throws {
        let warning: [UInt8] =
            [
                0x01, 0x01, 0x00, 0x00, 0x0C, 0x00, 0x00, 0x00,
                0x08, 0x00, 0x00, 0x00,  // didReceiveMemoryWarning
                0x00, 0xCA, 0x9A, 0x3B, 0x00, 0x00, 0x00, 0x00,
            ]  // deadline 1 s
            + Array(repeating: 0xFF, count: 8)
        let notice: [UInt8] =
            [
                0x01, 0x01, 0x00, 0x00, 0x0D, 0x00, 0x00, 0x00,
                0x09, 0x00, 0x00, 0x00,  // willBeKilledForMemory
                0x80, 0xB2, 0xE6, 0x0E, 0x00, 0x00, 0x00, 0x00,
            ]  // deadline 250 ms
            + Array(repeating: 0xFF, count: 8)
        let w = DaemonMessage.event(
            EventMessage(
                sequence: 12, event: .didReceiveMemoryWarning,
                deadline: 1_000_000_000, budgetEnd: nil))
        let n = DaemonMessage.event(
            EventMessage(
                sequence: 13, event: .willBeKilledForMemory,
                deadline: 250_000_000, budgetEnd: nil))
        #expect(w.encoded() == warning)
        #expect(n.encoded() == notice)
        #expect(try DaemonMessage.decode(warning) == w)
        #expect(try DaemonMessage.decode(notice) == n)
    }

    @Test func backgroundTaskReply() throws {
        let bytes: [UInt8] =
            [
                0x01, 0x02, 0x00, 0x00, 0x2A, 0x00, 0x00, 0x00,
                0x03, 0x00, 0x00, 0x00,
            ] + Array(repeating: 0xFF, count: 8)
        #expect(DaemonMessage.backgroundTaskReply(request: 42, task: 3, budgetEnd: nil).encoded() == bytes)
        #expect(try DaemonMessage.decode(bytes) == .backgroundTaskReply(request: 42, task: 3, budgetEnd: nil))
        let invalid: [UInt8] =
            [
                0x01, 0x02, 0x00, 0x00, 0x2A, 0x00, 0x00, 0x00,
                0x00, 0x00, 0x00, 0x00,
            ] + Array(repeating: 0xFF, count: 8)
        #expect(try DaemonMessage.decode(invalid) == .backgroundTaskReply(request: 42, task: nil, budgetEnd: nil))
    }

    @Test func expiring() throws {
        let bytes: [UInt8] = [
            0x01, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x02, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,
        ]
        #expect(DaemonMessage.backgroundTasksExpiring([1, 2]).encoded() == bytes)
        #expect(try DaemonMessage.decode(bytes) == .backgroundTasksExpiring([1, 2]))
    }

    @Test func appMessages() throws {
        let ack: [UInt8] = [0x01, 0x81, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00]
        let begin: [UInt8] = [0x01, 0x82, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00, 0x04, 0x00, 0x73, 0x61, 0x76, 0x65]
        let end: [UInt8] = [0x01, 0x83, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00]
        #expect(AppMessage.acknowledge(sequence: 7).encoded() == ack)
        #expect(AppMessage.beginBackgroundTask(request: 9, name: "save").encoded() == begin)
        #expect(AppMessage.endBackgroundTask(task: 3).encoded() == end)
        #expect(try AppMessage.decode(ack) == .acknowledge(sequence: 7))
        #expect(try AppMessage.decode(begin) == .beginBackgroundTask(request: 9, name: "save"))
        #expect(try AppMessage.decode(end) == .endBackgroundTask(task: 3))
    }
}

@Suite struct MalformedInputTests {
    func rejects(_ bytes: [UInt8], _ message: String) {
        #expect(throws: WireError(message)) { try AppMessage.decode(bytes) }
    }

    @Test func errorsNameWhatIsWrong() {
        rejects([], "truncated: version needs 1 bytes at offset 0, 0 left")
        rejects([0x02, 0x81, 0, 0, 0, 0, 0, 0], "unsupported protocol version 2 (this side speaks 1)")
        rejects([0x01, 0x99, 0, 0, 0, 0, 0, 0], "unknown message type 0x99")
        rejects([0x01, 0x81, 1, 0, 0, 0, 0, 0], "unknown flags 0x1")
        rejects([0x01, 0x81, 0, 0, 0, 0, 0], "truncated: id needs 4 bytes at offset 4, 3 left")
        rejects([0x01, 0x81, 0, 0, 0, 0, 0, 0, 0xAA], "1 unexpected trailing bytes")
        rejects([0x01, 0x01, 0, 0, 0, 0, 0, 0], "message type 0x1 is sent by the daemon, not apps")
        rejects([0x01, 0x82, 0, 0, 0, 0, 0, 0, 0x02, 0x00, 0xFF, 0xFE], "task name: not UTF-8")
        rejects([0x01, 0x82, 0, 0, 0, 0, 0, 0, 0x05, 0x01], "task name: 261 bytes, more than 256")
        rejects(Array(repeating: 1, count: 66561), "message of 66561 bytes exceeds 66560")
    }

    @Test func everyTruncationOfAValidMessageIsRejected() {
        for n in 0..<GoldenVectorTests.event.count {
            #expect(throws: WireError.self) { try DaemonMessage.decode(Array(GoldenVectorTests.event.prefix(n))) }
        }
    }

    @Test func longTaskNamesAreCutOnACharacterBoundary() throws {
        let name = String(repeating: "é", count: 200)  // 400 bytes
        guard
            case .beginBackgroundTask(_, let decoded) = try AppMessage.decode(
                AppMessage.beginBackgroundTask(request: 1, name: name).encoded())
        else { Issue.record(); return }
        #expect(decoded.utf8.count == 256)
    }
}

/// The shared vectors of Tests/golden/vectors.txt, which the C library's
/// tests read too: one set of bytes for every implementation.
@Suite struct SharedVectorTests {
    struct Vector {
        var name: String
        var bytes: [UInt8]
        var error: String?
    }

    static let vectors: [Vector] = {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("golden/vectors.txt").path
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line -> Vector? in
            guard !line.hasPrefix("#"), !line.trimmingCharacters(in: .whitespaces).isEmpty else { return nil }
            let parts = line.split(separator: " ", maxSplits: 2).map(String.init)
            guard parts.count >= 2 else { return nil }
            let hex = parts[1] == "-" ? "" : parts[1]
            let bytes = stride(from: 0, to: hex.count, by: 2).compactMap { i -> UInt8? in
                let start = hex.index(hex.startIndex, offsetBy: i)
                return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16)
            }
            return Vector(name: parts[0], bytes: bytes, error: parts.count > 2 ? parts[2] : nil)
        }
    }()

    @Test func theFileIsThere() {
        #expect(Self.vectors.filter { $0.name.hasPrefix("daemon.") }.count >= 7)
        #expect(Self.vectors.filter { $0.name.hasPrefix("app.") }.count >= 3)
        #expect(Self.vectors.filter { $0.name.hasPrefix("reject.") }.count >= 5)
    }

    @Test func everyValidVectorRoundTrips() throws {
        for v in Self.vectors where v.name.hasPrefix("daemon.") {
            #expect(try DaemonMessage.decode(v.bytes).encoded() == v.bytes, "\(v.name)")
        }
        for v in Self.vectors where v.name.hasPrefix("app.") {
            #expect(try AppMessage.decode(v.bytes).encoded() == v.bytes, "\(v.name)")
        }
    }

    @Test func theResumeVectorsSayWhatTheirCommentsSay() throws {
        func bytes(_ name: String) throws -> [UInt8] { try #require(Self.vectors.first { $0.name == name }).bytes }
        #expect(
            try AppMessage.decode(bytes("app.resume"))
                == .resume(lastAcknowledged: 7, app: "recorder", tasks: [1, 3]))
        #expect(
            try AppMessage.decode(bytes("app.resume-no-tasks"))
                == .resume(lastAcknowledged: 0, app: "recorder", tasks: []))
        #expect(try DaemonMessage.decode(bytes("daemon.resumed")) == .resumed)
        #expect(try AppMessage.decode(bytes("app.prewarmed")) == .prewarmed)
    }

    @Test func theSceneVectorsSayWhatTheirCommentsSay() throws {
        func bytes(_ name: String) throws -> [UInt8] { try #require(Self.vectors.first { $0.name == name }).bytes }
        #expect(
            try DaemonMessage.decode(bytes("daemon.scene-will-connect"))
                == .event(
                    EventMessage(
                        sequence: 30, event: .sceneWillConnect, deadline: 5_000_000_000, budgetEnd: nil,
                        options: [
                            KeyValue("scene", "nav"), KeyValue("display", "centre"), KeyValue("session", "new"),
                        ])))
        #expect(
            try DaemonMessage.decode(bytes("daemon.discard-scenes"))
                == .event(
                    EventMessage(
                        sequence: 31, event: .didDiscardSceneSessions, deadline: 5_000_000_000, budgetEnd: nil,
                        options: [KeyValue("scenes", "nav,media")])))
    }

    @Test func everyRejectedVectorIsRejectedWithItsReason() {
        for v in Self.vectors where v.name.hasPrefix("reject.") {
            do {
                if v.name.hasPrefix("reject.app.") {
                    _ = try AppMessage.decode(v.bytes)
                } else {
                    _ = try DaemonMessage.decode(v.bytes)
                }
                Issue.record("\(v.name) was accepted")
            } catch {
                #expect(error.description == v.error, "\(v.name)")
            }
        }
    }
}
