import Foundation
import LifecycleControl
@testable import LifecycleCore
import LifecycleWire
import Testing

@testable import LifecycleDaemon

/// The one-pass encoder writes what JSONEncoder writes (the same JSON
/// value; spacing and escapes aside), and JSONDecoder reads it back.
@Suite struct JSONStreamEncoderTests {
    enum Colour: String, Codable, Equatable, CodingKeyRepresentable { case red, green }
    struct Point: Codable, Hashable { var x: Int32, y: Int32 }

    /// A part encoded into the same encoder first, then the rest (as CoreState does).
    struct Split: Codable, Equatable {
        var inner: [String: String]
        var outer: String
        enum Keys: String, CodingKey { case outer }
        init(inner: [String: String], outer: String) {
            self.inner = inner
            self.outer = outer
        }
        init(from decoder: any Decoder) throws {
            inner = try [String: String](from: decoder).filter { $0.key != "outer" }
            outer = try decoder.container(keyedBy: Keys.self).decode(String.self, forKey: .outer)
        }
        func encode(to encoder: any Encoder) throws {
            try inner.encode(to: encoder)
            var c = encoder.container(keyedBy: Keys.self)
            try c.encode(outer, forKey: .outer)
        }
    }

    /// Nested containers and a super encoder, by hand.
    struct ByHand: Codable, Equatable {
        var a: [Int]
        var b: [String: Bool]
        var parent: String
        enum Keys: String, CodingKey { case a, b, `super`, after }
        init(a: [Int], b: [String: Bool], parent: String) {
            (self.a, self.b, self.parent) = (a, b, parent)
        }
        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: Keys.self)
            var u = try c.nestedUnkeyedContainer(forKey: .a)
            a = []
            while !u.isAtEnd { a.append(try u.decode(Int.self)) }
            b = try c.decode([String: Bool].self, forKey: .b)
            parent = try String(from: try c.superDecoder())
            #expect(try c.decode(Int.self, forKey: .after) == 1)
        }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Keys.self)
            var u = c.nestedUnkeyedContainer(forKey: .a)
            for x in a { try u.encode(x) }
            var k = c.nestedContainer(keyedBy: AnyKey.self, forKey: .b)
            for (key, v) in b.sorted(by: { $0.key < $1.key }) { try k.encode(v, forKey: AnyKey(key)) }
            try parent.encode(to: c.superEncoder())
            try c.encode(1, forKey: .after)
        }
    }

    struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ s: String) { stringValue = s }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    struct Empty: Codable, Equatable {}

    struct Everything: Codable, Equatable {
        var bool = true
        var text = "quote \" backslash \\ newline \n tab \t control \u{1} slash / é 🙂"
        var int = Int.min
        var int8 = Int8.min
        var int16 = Int16.max
        var int32 = Int32.min
        var int64 = Int64.max
        var uint = UInt.max
        var uint8 = UInt8.max
        var uint16 = UInt16.max
        var uint32 = UInt32.max
        var uint64 = UInt64.max
        var doubles = [0.0, -0.0, -0.5, 0.1, 1e-7, 1e300, 123_456_789.125, 2.0, -3e15]
        var float: Float = 1.25
        var none: String? = nil
        var some: String? = "x"
        var optionals: [Int?] = [1, nil, 3]
        var nested: [[String: [Point]]] = [["p": [Point(x: 1, y: -2)]], [:]]
        var byString: [String: Int] = ["a": 1, "b": 2]
        var byInt: [Int: String] = [1: "one", -2: "minus two"]
        var byColour: [Colour: Int] = [.red: 1, .green: 2]
        var byPoint: [Point: String] = [Point(x: 1, y: 2): "a point"]
        var colour = Colour.green
        var data = Data([0, 1, 2, 254, 255])
        var date = Date(timeIntervalSinceReferenceDate: 12.5)
        var url = URL(string: "file:///run/lifecycled/state.db")!
        var empty = Empty()
        var empties: [Empty] = [Empty(), Empty()]
        var split = Split(inner: ["k": "v"], outer: "o")
        var byHand = ByHand(a: [1, 2], b: ["t": true, "f": false], parent: "p")
        var noList: [Int] = []
        var noMap: [String: Int] = [:]
    }

    /// The same JSON value: both parsed, written again with sorted keys.
    func sameJSON(_ a: Data, _ b: Data) throws -> Bool {
        func canonical(_ d: Data) throws -> Data {
            try JSONSerialization.data(
                withJSONObject: JSONSerialization.jsonObject(with: d, options: [.fragmentsAllowed]),
                options: [.sortedKeys, .fragmentsAllowed])
        }
        return try canonical(a) == canonical(b)
    }

    /// A value's own writer (LifecycleModel/JSONWriting.swift) writes
    /// what its Codable conformance writes through JSONStreamEncoder.
    func same<T: JSONWritable>(_ value: T) throws {
        let encoder = JSONStreamEncoder()
        let (hand, codable) = (try encoder.writeBytes(value), try encoder.encodeBytes(value))
        #expect(
            hand == codable, "\(String(decoding: hand, as: UTF8.self))\n\(String(decoding: codable, as: UTF8.self))")
    }

    func agrees<T: Codable & Equatable>(_ value: T) throws {
        let ours = try JSONStreamEncoder().encode(value)
        let theirs = try JSONEncoder().encode(value)
        #expect(try sameJSON(ours, theirs), "\(String(decoding: ours, as: UTF8.self))")
        #expect(try JSONDecoder().decode(T.self, from: ours) == value)
    }

    @Test func everyKindOfValueAsJSONEncoderWritesIt() throws {
        try agrees(Everything())
        try agrees(Empty())
        try agrees([Everything(), Everything()])
        try agrees("top-level string")
        try agrees(42)
        try agrees([String: Everything]())
        try agrees(Optional<Int>.none)
    }

    /// Negative zero stays negative (the status reader's fuzzer found a
    /// status whose -0 came back as 0; Fuzz/corpus/status-reader/negative-zero.json).
    @Test func negativeZeroIsWrittenAsSuch() throws {
        let bytes = try JSONStreamEncoder().encode([-0.0, 0.0])
        #expect(String(decoding: bytes, as: UTF8.self) == "[-0,0]")
        #expect(try JSONDecoder().decode([Double].self, from: bytes).map(\.sign) == [.minus, .plus])
    }

    @Test func aNumberJSONCannotHoldIsRefused() {
        #expect(throws: EncodingError.self) { try JSONStreamEncoder().encode([Double.nan]) }
        #expect(throws: EncodingError.self) { try JSONStreamEncoder().encode(["x": Double.infinity]) }
    }

    /// Two objects joined are the one object a container writing both
    /// makes (the state store writes the shared part so, from its parts).
    @Test func twoObjectsJoinAsOne() {
        func join(_ a: String, _ b: String) -> String {
            String(decoding: JSONStreamEncoder.joinObjects(Array(a.utf8), Array(b.utf8)), as: UTF8.self)
        }
        #expect(join(#"{"a":1}"#, #"{"b":[2,{}]}"#) == #"{"a":1,"b":[2,{}]}"#)
        #expect(join("{}", #"{"b":2}"#) == #"{"b":2}"#)
        #expect(join(#"{"a":1}"#, "{}") == #"{"a":1}"#)
        #expect(join("{}", "{}") == "{}")
    }

    /// The daemon's own saved state, through a core that ran: the rows the
    /// store writes, read back equal (the simulation reads a core back from
    /// these bytes on every run, LifecycleCoreTests/SimulationTests).
    @Test func theSavedStateAsJSONEncoderWritesIt() throws {
        var policy = AppPolicy()
        policy.scenes = true
        var core = Supervisor(apps: ["a": policy, "b": AppPolicy()])
        _ = core.handle(.launch("a", .foreground), now: .zero)
        _ = core.handle(.launch("b", .background), now: Instant(nanoseconds: 5_000_000))
        let saved = core.saved
        for id in ["a", "b"] {
            let app = SavedApp(
                core: saved.app(id),
                run: SavedRun(generation: 1, pid: 7, startTime: 99, notifyName: "n", statusLine: "ready \"ok\""),
                termination: TerminationInfo(reason: .exited, description: "exited 1", time: 1.5, pid: 6))
            try agrees(app)
        }
        let ours = try JSONStreamEncoder().encode(saved.shared)
        #expect(try sameJSON(ours, JSONEncoder().encode(saved.shared)))
    }

    /// The keys of an object `value` encodes to, and the names of its stored
    /// properties: the same set when every field is set.
    func keysAndFields<T: Encodable>(_ value: T) throws -> (keys: Set<String>, fields: Set<String>) {
        let object = try JSONSerialization.jsonObject(with: JSONStreamEncoder().encode(value)) as? [String: Any]
        return (Set((object ?? [:]).keys), Set(Mirror(reflecting: value).children.compactMap(\.label)))
    }

    /// The encoders written out for their optional fields' sake
    /// (LifecycleModel/Encoding.swift) write every field that is set, and
    /// the synthesized decoders read them back equal: a field added to one
    /// of these types and not to its encoder fails here.
    @Test func theEncodersWrittenOutLeaveNoFieldBehind() throws {
        let at = Instant(nanoseconds: 5_000_000_000)
        let event = EventMessage(
            sequence: 3, event: .didEnterBackground, launchedInBackground: true, deadline: 9, budgetEnd: 10,
            options: [KeyValue("launch.mode", "background")])
        let run = SavedRun(
            generation: 2, pid: 7, startTime: 99, notifyName: "n", statusLine: "ready", lastEvent: event,
            sentBefore: [event], fingerprint: 42)
        var history = AppHistory()
        history.quit = true
        history.lastFetch = at
        history.window = FetchWindow(earliest: at, latest: at + .seconds(60))
        history.noData = 1
        history.strikes = 2
        history.uses = [at]
        history.pushWakes = [at]
        history.held = Push(payload: "{}", at: at)
        history.prewarmFootprint = 1 << 20
        history.prewarmRefusal = "ended at its first event"
        var core = Supervisor(apps: ["a": AppPolicy()])
        _ = core.handle(.launch("a", .foreground), now: .zero)
        let saved = SavedApp(
            core: core.saved.app("a"), run: run,
            termination: TerminationInfo(reason: .exited, description: "exited 1", time: 1.5, pid: 6), crashes: 2)
        let durable = DurableApp(
            history: history, last: TerminationRecord(reason: .exited(code: 1), generation: 2, at: at))
        let kill = KillRecord(
            time: 1, app: "a", pid: 7, reason: .memoryPressure, footprint: 1, swap: 2, limit: 3, killer: .kernel,
            peak: 4, state: .suspended, band: .high, level: .critical, simulated: true,
            reading: MemoryReading(available: 1, total: 2), candidates: [], lastNotice: true)
        let record = EventRecord(
            time: 1.25, monotonic: 2, app: "a", kind: .jetsam, pid: 7, from: "suspended", to: "not-running",
            event: .willTerminate, sequence: 4, latencyMicroseconds: 5.5, reason: "memory-pressure", detail: "d",
            kill: kill)
        for (keys, fields) in [
            try keysAndFields(run), try keysAndFields(history), try keysAndFields(saved),
            try keysAndFields(durable), try keysAndFields(record),
        ] {
            #expect(keys == fields)
        }
        try agrees(run)
        try agrees(history)
        try agrees(saved)
        try agrees(durable)
        try agrees(record)
        var response = ControlResponse(
            ok: true, error: ControlError(code: .refused, message: "no", refusal: "screen-locked"),
            status: StatusReport(
                daemon: DaemonStatus(
                    pid: 1, foregroundSlots: 1, foreground: [], locked: false, interruptions: 0, confinement: "x",
                    shuttingDown: false),
                apps: []),
            events: [record], event: record, kills: [kill])
        response.reload = ReloadReport(dryRun: true)
        response.avail = []
        response.tail = TailReport(journal: true)
        response.raise = RaiseRequest(window: "2", output: nil, sequence: 1)
        response.run = CompositorCommand(command: "home", display: "tv", sequence: 1)
        let (keys, fields) = try keysAndFields(response)
        #expect(keys == fields)
        let theirs = try JSONEncoder().encode(response)
        #expect(try sameJSON(JSONStreamEncoder().encode(response), theirs))
    }

    /// The save's own writers (LifecycleModel/JSONWriting.swift) write the
    /// bytes the Codable conformances write, for rows with every field set
    /// (every case of the phase) and with none: the simulation checks the
    /// parts its runs reach, this the rest of the daemon's row.
    @Test func theSavesOwnWritersWriteWhatCodableWrites() throws {
        let at = Instant(nanoseconds: 5_000_000_000)
        let encoder = JSONStreamEncoder()
        var record = AppRecord()
        record.phase = .suspended
        record.state = .background
        record.since = at
        record.generation = 3
        record.generationFloor = 2
        record.launchMode = .background
        record.sequence = 9
        record.awaiting = Awaiting(event: .didEnterBackground, sequence: 9)
        record.queued.append(.didFinishLaunching)
        record.queued.append(.openURL)
        record.together = true
        record.tasks = [1: "upload", 2: "sync \"quoted\""]
        record.nextTask = 3
        record.expired = [1]
        record.budgetEnd = at + .seconds(30)
        record.stop = .user
        record.freezeRefusal = "held"
        record.killing = .stoppedByUser(killedAfterDeadline: false)
        record.last = TerminationRecord(reason: .exited(code: 1), generation: 2, at: at)
        record.warningPending = true
        record.lastUsed = at
        record.lastNotice = .memoryPressure(footprint: 1 << 20, simulated: false)
        record.restarts = Restarts()
        record.restarts?.ends = [at]
        record.restarts?.due = Restarts.Due(inFront: true, attempt: 2)
        record.restartTo = .foreground
        record.wakes.fetch = true
        record.wakes.url = "https://example.org/a?b"
        record.history.uses = [at, at + .seconds(1)]
        record.history.pushWakes = [at]
        record.history.lastFetch = at
        record.history.held = Push(payload: "{}", at: at)
        record.history.prewarmFootprint = 1 << 20
        record.history.prewarmRefusal = "ended at its first event"
        record.launchReason = .url
        record.launchURL = "https://example.org/"
        record.launchPush = Push(payload: "{\"k\":1}", at: at)
        var scene = SceneRecord(display: "tv")
        scene.leaving = "car"
        scene.told = .active
        record.scenes = ["main": scene, "second\n": SceneRecord(display: "tv")]
        record.discarded = ["old"]
        record.reclaimed = true
        record.prewarmUntil = at + .seconds(60)
        let notSaved: Set<String> = ["policy", "pending", "removing", "holds"]
        let (keys, fields) = try keysAndFields(record)
        #expect(keys == fields.subtracting(notSaved), "a field of AppRecord is not set here, or not saved")
        for phase: Phase in [
            .notRunning, .launching(step: 2), .awaitingReady, .running(.launched), .running(.inactive),
            .running(.active), .running(.background), .suspended, .terminating, .prewarming, .prewarmed,
        ] {
            record.phase = phase
            try same(record)
        }
        try same(AppRecord())
        let event = EventMessage(
            sequence: 3, event: .didEnterBackground, launchedInBackground: true, deadline: -9, budgetEnd: 10,
            options: [KeyValue("launch.mode", "background"), KeyValue("url", "a\tb")])
        let run = SavedRun(
            generation: 2, pid: 7, startTime: 99, notifyName: "n", statusLine: "ready \u{1}", lastEvent: event,
            sentBefore: [event, event], fingerprint: UInt64.max)
        try same(
            SavedApp(
                core: CoreState.App(record, footprint: 1 << 30, swapped: 4096), run: run,
                termination: TerminationInfo(reason: .exited, description: "exited 1", time: 1.5, pid: 6), crashes: 2))
        try same(SavedApp())
        try same(SavedApp(core: CoreState.App(AppRecord(), footprint: nil, swapped: nil), run: nil, termination: nil))
        try same(SavedRun(generation: 0, pid: 0, startTime: 0))
        let displaysJSON =
            #"{"all":[{"name":"tv","slots":2,"scenes":[{"app":"a","scene":"main"},{"app":"b","scene":"s"}],"#
            + #""interruptions":1,"locked":true,"followed":true,"focus":{"app":"a","scene":"main"},"#
            + #""overlaid":true,"sessionLocked":true},{"name":"car","slots":1}]}"#
        let displays = try JSONDecoder().decode(Displays.self, from: Data(displaysJSON.utf8))
        let (frontKeys, frontFields) = try keysAndFields(displays.all[0])
        #expect(frontKeys == frontFields, "a field of Foreground is not set here")
        try same(displays)
        try same(Instant(nanoseconds: -1))
        // One of each way a run ends, optionals both ways.
        let reasons: [TerminationReason] = [
            .exited(code: -1), .signaled(signal: 9), .launchFailed(message: "no \"such\" file"), .launchWatchdog,
            .eventWatchdog(event: .didEnterBackground), .backgroundWatchdog, .backgroundTaskExpired,
            .stoppedByUser(killedAfterDeadline: true), .killedByUser, .exitedOnSuspend(killedAfterDeadline: false),
            .shutdown(killedAfterDeadline: true), .protocolViolation(message: "bad"),
            .memoryPressure(footprint: nil, simulated: true), .memoryPressure(footprint: 7, simulated: false),
            .memoryLimit(footprint: 9, limit: 8), .oomKilled(by: .kernel, peak: nil),
            .oomKilled(by: .systemdOOMD, peak: 3),
            .exitUnknown(whileAway: true), .notAdopted(why: "w"), .freezeFailed(why: "f"), .prewarmDropped(why: "p"),
        ]
        #expect(Set(reasons.map(\.code)) == Set(TerminationCode.allCases), "a way to end is missing here")
        for reason in reasons {
            try same(TerminationRecord(reason: reason, generation: 4, at: at))
            try same(
                DurableApp(history: record.history, last: TerminationRecord(reason: reason, generation: 1, at: at)))
        }
        try same(DurableApp(history: AppHistory(), last: nil))
        try same(TerminationInfo(reason: .kernelOOM, description: "d", time: 1_764_000_000.123, pid: nil))
        #expect(throws: EncodingError.self) {
            try encoder.writeBytes(TerminationInfo(reason: .exited, description: "", time: .nan, pid: 1))
        }
        try same(EventMessage(sequence: 1, event: .didBecomeActive, deadline: nil, budgetEnd: nil))
    }

    /// What goes to every follower and answers a request, written by hand
    /// (EventRecord, ControlResponse, ControlError): the bytes the Codable
    /// conformances write, with every field set, with none, for every kind
    /// of record, and with each rarer part of an answer.
    @Test func theRecordsAndAnswersOwnWritersWriteWhatCodableWrites() throws {
        let encoder = JSONStreamEncoder()
        let kill = KillRecord(
            time: 1, app: "a", pid: 7, reason: .memoryPressure, footprint: 1, swap: 2, limit: 3, killer: .kernel,
            peak: 4, state: .suspended, band: .high, level: .critical, simulated: true,
            reading: MemoryReading(available: 1, total: 2), candidates: [], lastNotice: true)
        let full = EventRecord(
            time: 1_764_288_000.123456, monotonic: 2, app: "a \"quoted\"", kind: .jetsam, pid: 7, from: "suspended",
            to: "not-running", event: .willTerminate, sequence: 4, latencyMicroseconds: 5.5, reason: "memory-pressure",
            detail: "line\nbreak", kill: kill)
        try same(full)
        for kind in EventRecord.Kind.allCases {
            try same(EventRecord(time: 0.5, monotonic: -1, app: "*", kind: kind))
        }
        try same(ControlResponse(ok: true, event: full))
        try same(
            ControlResponse(ok: true, events: [full, EventRecord(time: 1, monotonic: 1, app: "b", kind: .thawed)]))
        try same(ControlResponse(ok: true, events: []))
        try same(ControlResponse.failure(.unknownApp, "no app named x"))
        try same(
            ControlResponse(ok: false, error: ControlError(code: .refused, message: "no", refusal: "screen-locked")))
        var rare = ControlResponse(
            ok: true,
            status: StatusReport(
                daemon: DaemonStatus(
                    pid: 1, foregroundSlots: 1, foreground: [], locked: false, interruptions: 0, confinement: "x",
                    shuttingDown: false),
                apps: []), kills: [kill])
        rare.reload = ReloadReport(dryRun: true)
        rare.avail = []
        rare.tail = TailReport(journal: true)
        rare.raise = RaiseRequest(window: "2", output: nil, sequence: 1)
        rare.run = CompositorCommand(command: "home", display: "tv", sequence: 1)
        try same(rare)
        #expect(throws: (any Error).self) {
            try encoder.writeBytes(EventRecord(time: .nan, monotonic: 0, app: "a", kind: .launched))
        }
    }
}
