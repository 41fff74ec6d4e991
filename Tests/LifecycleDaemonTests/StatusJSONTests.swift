import Foundation
import LifecycleControl
import Testing

/// The hand-written status answer says what JSONEncoder says.
@Suite struct StatusJSONTests {
    func app(_ i: Int, full: Bool) -> AppStatus {
        var a = AppStatus(
            name: "app\(i) \"quoted\" \\ \n\t\u{1}é", state: .suspended, pid: full ? Int32(1000 + i) : nil,
            secondsInState: full ? 12.345678 : 0, delivery: full ? .library : .signals,
            backgroundTasks: full ? [BackgroundTask(id: 3, name: "save"), BackgroundTask(id: 4, name: "")] : [],
            backgroundTimeRemaining: full ? 1.5e-05 : nil, awaiting: full ? .didEnterBackground : nil,
            lastTermination: full
                ? TerminationInfo(reason: .memoryPressure, description: "killed", time: 1_790_000_000.25, pid: 7) : nil,
            footprint: full ? 123_456_789 : nil, band: full ? .high : nil, memoryLimit: full ? 1 << 30 : nil,
            statusLine: full ? "ready" : nil)
        if full {
            a.launching = true
            a.frozen = false
            a.freezeProblem = "EBUSY"
            a.changePending = true
            a.removing = false
            a.relaunchIn = 2.5
            a.recentEnds = 3
            a.failed = FailureInfo(reason: "exited", description: "failed", ends: 6, windowSeconds: 600, time: 1.0)
            a.outputProblem = "disk full"
            a.nextFetchIn = 899.5
            a.quit = true
            a.heldPush = true
            a.waking = .performFetch
            a.restorationBytes = 2048
        }
        return a
    }

    @Test func theSameValueAsJSONEncoder() throws {
        let report = StatusReport(
            daemon: DaemonStatus(
                pid: 1, foregroundSlots: 2, foreground: ["a"], locked: true, interruptions: 1, confinement: "x",
                shuttingDown: false),
            apps: (0..<4).map { app($0, full: $0 % 2 == 0) })
        let encoder = JSONEncoder()
        let line = try report.responseLine(daemonEncoder: encoder)
        #expect(line.last == 0x0A)
        let byHand = try JSONDecoder().decode(ControlResponse.self, from: Data(line.dropLast()))
        let byCodable = try JSONDecoder().decode(
            ControlResponse.self, from: encoder.encode(ControlResponse(ok: true, status: report)))
        encoder.outputFormatting = [.sortedKeys]
        #expect(byHand.ok)
        #expect(try encoder.encode(byHand.status) == encoder.encode(byCodable.status))
        // And read back by hand, to the same value.
        let read = try #require(StatusReport.fromResponseLine(line.dropLast().map { $0 }))
        #expect(try encoder.encode(read) == encoder.encode(byCodable.status))
        // JSONEncoder's own output (escaped slashes, another key order) reads the same.
        let other = try JSONEncoder().encode(ControlResponse(ok: true, status: report))
        if let viaOther = StatusReport.fromResponseLine(Array(other)) {
            #expect(try encoder.encode(viaOther) == encoder.encode(byCodable.status))
        }
        #expect(
            StatusReport.fromResponseLine(Array(#"{"ok":false,"error":{"code":"refused","message":"x"}}"#.utf8)) == nil)
        #expect(
            StatusReport.fromResponseLine(Array(#"{"ok":true,"status":{"daemon":{},"apps":[{"bogus":1}]}}"#.utf8))
                == nil)
    }
}
