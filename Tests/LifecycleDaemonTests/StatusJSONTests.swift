import Foundation
import LifecycleControl
import LifecycleTestKit
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
            a.scenes = [
                SceneStatus(name: "main", display: "tv", state: .active, inFront: true, discarding: true, shed: false)
            ]
            a.window = "shown"
            a.held = ["audio"]
            a.prewarm = "waiting for room"
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
        let line = try report.responseLine()
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

    /// Every stored property of each status object has its row in the
    /// table, under the key Codable gives it: a field added without one
    /// fails here.
    @Test func everyFieldHasItsRow() throws {
        func keys<T: Encodable>(_ value: T) throws -> Set<String> {
            let object = try JSONSerialization.jsonObject(with: JSONEncoder().encode(value)) as? [String: Any]
            return Set(try #require(object).keys)
        }
        func labels(_ value: Any) -> Set<String> { Set(Mirror(reflecting: value).children.compactMap(\.label)) }
        func rows<T: StatusJSONObject>(_: T.Type) -> Set<String> { Set(T.Field.all.map(\.rawValue)) }
        func required<T: StatusJSONObject>(_: T.Type) -> Set<String> { Set(T.Field.required.map(\.rawValue)) }
        let full = app(0, full: true)
        #expect(try keys(full) == rows(AppStatus.self) && labels(full) == rows(AppStatus.self))
        let t = try #require(full.lastTermination)
        #expect(try keys(t) == rows(TerminationInfo.self) && labels(t) == rows(TerminationInfo.self))
        let f = try #require(full.failed)
        #expect(try keys(f) == rows(FailureInfo.self) && labels(f) == rows(FailureInfo.self))
        let scene = try #require(full.scenes?.first)
        #expect(try keys(scene) == rows(SceneStatus.self) && labels(scene) == rows(SceneStatus.self))
        let task = full.backgroundTasks[0]
        #expect(try keys(task) == rows(BackgroundTask.self) && labels(task) == rows(BackgroundTask.self))
        // The required fields are exactly those a value with every optional nil still has.
        #expect(try keys(AppStatus.blank) == required(AppStatus.self))
        #expect(try keys(TerminationInfo.blank) == required(TerminationInfo.self))
        #expect(try keys(FailureInfo.blank) == required(FailureInfo.self))
        #expect(try keys(SceneStatus.blank) == required(SceneStatus.self))
        #expect(try keys(BackgroundTask.blank) == required(BackgroundTask.self))
    }

    /// A malformed number is refused, never a trap: a negative or a
    /// fraction in a whole or unsigned field, one too large; and so are a
    /// word not in the vocabulary, a required field missing, a misspelt
    /// literal. The hand reader gives up, and JSONDecoder says what is wrong.
    @Test func malformedValuesAreRefusedNotTrapped() throws {
        let daemon =
            #"{"pid":1,"foregroundSlots":1,"foreground":[],"locked":false,"interruptions":0,"#
            + #""confinement":"x","shuttingDown":false}"#
        let common = #""name":"a","state":"active","secondsInState":1,"delivery":"library""#
        let base = common + #","backgroundTasks":[]"#
        func line(_ app: String) -> [UInt8] {
            Array(#"{"ok":true,"status":{"daemon":\#(daemon),"apps":[{\#(app)}]}}"#.utf8)
        }
        #expect(StatusReport.fromResponseLine(line(base))?.apps.first?.name == "a")
        #expect(StatusReport.fromResponseLine(line(base + #","footprint":18446744073709551615"#)) != nil)
        let bad = [
            #","footprint":-1"#, #","footprint":18446744073709551616"#, #","pid":2147483648"#, #","pid":1.5"#,
            #","band":"huge""#,
            #","frozen":tru"#, #","frozen":fals"#, #","lastTermination":{"reason":"exited","time":1}"#,
            #","scenes":[{"name":"main"}]"#,
        ]
        for extra in bad {
            let bytes = line(base + extra)
            #expect(StatusReport.fromResponseLine(bytes) == nil, "\(extra)")
            #expect(throws: (any Error).self, "\(extra)") {
                try JSONDecoder().decode(ControlResponse.self, from: Data(bytes))
            }
        }
        #expect(StatusReport.fromResponseLine(line(#""state":"active""#)) == nil, "no name")
        let negativeTask = line(common + #","backgroundTasks":[{"id":-3,"name":"x"}]"#)
        #expect(StatusReport.fromResponseLine(negativeTask) == nil)
        #expect(throws: (any Error).self) { try JSONDecoder().decode(ControlResponse.self, from: Data(negativeTask)) }
        // Stricter than JSONDecoder, never laxer: a whole number written
        // with an exponent is left to it.
        let exponent = line(base + #","recentEnds":1e3"#)
        #expect(StatusReport.fromResponseLine(exponent) == nil)
        #expect(try JSONDecoder().decode(ControlResponse.self, from: Data(exponent)).status?.apps[0].recentEnds == 1000)
        // The most negative Int32 reads (a pid is signed).
        let min = StatusReport.fromResponseLine(line(base + #","pid":-2147483648"#))
        #expect(min?.apps.first?.pid == Int32.min)
    }

    /// The reader's short path for decimals (at most 15 digits, no
    /// exponent) gives the very Double the full parse gives: every value the
    /// daemon writes, and texts it never writes, bit for bit.
    @Test func decimalsReadToTheSameBits() throws {
        let daemon = DaemonStatus(
            pid: 1, foregroundSlots: 1, foreground: [], locked: false, interruptions: 0, confinement: "x",
            shuttingDown: false)
        var random = SplitMix64(state: 31)
        var values: [Double] = [0, -0.0, 0.1, 0.2, 0.3, 1.5e-05, 899.5, 12.345678, 1_790_000_000.25, 1e15, 1e16]
        for _ in 0..<3000 {
            let magnitude = Double(Int(random.next() % 24) - 8)  // 1e-8 to 1e15
            values.append(Double(random.next() % 1_000_000_000) / 1e9 * Foundation.pow(10, magnitude))
            values.append(Double(bitPattern: random.next() >> 2))  // any finite positive Double
        }
        let apps = values.map {
            AppStatus(
                name: "a", state: .active, pid: nil, secondsInState: $0, delivery: .library, backgroundTasks: [],
                backgroundTimeRemaining: nil, awaiting: nil, lastTermination: nil)
        }
        let read = try #require(
            StatusReport.fromResponseLine(try StatusReport(daemon: daemon, apps: apps).responseLine().dropLast()))
        for (value, app) in zip(values, read.apps) where app.secondsInState.bitPattern != value.bitPattern {
            Issue.record("\(value) read as \(app.secondsInState)")
        }
        // Texts of every shape the short path takes or leaves to the full parse.
        let texts = [
            "7", "-7", "007", "0.5", "-0.5", "123456789012345", "1234567890123456", "0.000000000000001",
            "0.30000000000000004", "99999999999999.9", "9007199254740993", "1.", "-0", "-0.0", "4.35", "2.675",
        ]
        let base = #""name":"a","state":"active","delivery":"library","backgroundTasks":[]"#
        for text in texts {
            let line = Array(
                (#"{"ok":true,"status":{"daemon":\#(String(decoding: try JSONEncoder().encode(daemon), as: UTF8.self)),"#
                    + #""apps":[{\#(base),"secondsInState":\#(text)}]}}"#).utf8)
            let got = StatusReport.fromResponseLine(line)?.apps.first?.secondsInState
            #expect(got?.bitPattern == Double(text)?.bitPattern, "\(text): \(String(describing: got))")
        }
    }
}
