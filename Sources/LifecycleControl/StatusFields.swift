#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
// The fuzzers compile this module's files together with LifecycleModel's
// into one module, where there is nothing to import.
#if canImport(LifecycleModel)
    import LifecycleModel
#endif

// Every field of an app's status, described once: each object of the status
// answer has an enum of its fields (its table: the keys, in the order they
// are written, and which are required), and one switch that writes a field
// and one that reads it, which the compiler holds to every case. The
// hand-written JSON writer and reader (StatusJSON.swift) walk the table;
// the D-Bus properties will walk it next. Adding a status field: the
// property (ControlStatus.swift), its case here and its line in both
// switches (the compiler names them), the daemon filling it
// (DaemonTarget.swift), and docs/protocol.md; StatusJSONTests fails until
// the case is there. (A table of closures walked the same way cost twice
// the time of this, in retains: docs/performance.md.)

/// A value the hand-written status JSON knows how to write and read.
public protocol StatusJSONValue {
    func writeJSON(to j: inout JSONBytes)
    static func readJSON(_ r: inout JSONReader) throws -> Self
}

/// The fields of one kind of object: its keys, in the order written.
public protocol StatusFieldTable: CaseIterable, RawRepresentable, Hashable, Sendable
where RawValue == String, AllCases == [Self] {
    /// Every field, in the order written: `allCases`, kept (an enum's
    /// `allCases` is a new array at each call).
    static var all: [Self] { get }
    /// The fields every such object has; the rest are left out when nil.
    static var required: [Self] { get }
}

/// An object of the status answer, written and read through its table.
public protocol StatusJSONObject: StatusJSONValue {
    associatedtype Field: StatusFieldTable
    /// A value to read into: every field its blank.
    static var blank: Self { get }
    /// Writes `,"key":value` (no comma when `first`); false, writing
    /// nothing, when the field is absent.
    func write(_ field: Field, to j: inout JSONBytes, first: Bool) -> Bool
    mutating func read(_ field: Field, from r: inout JSONReader) throws
}

extension StatusJSONObject {
    public func writeJSON(to j: inout JSONBytes) {
        j.raw("{")
        var first = true
        for field in Field.all where write(field, to: &j, first: first) { first = false }
        j.raw("}")
    }

    /// A key it does not know, a value of another type, a required field
    /// missing: the reader gives up (the caller then decodes with
    /// JSONDecoder, which says what is wrong). A null is an absent value.
    public static func readJSON(_ r: inout JSONReader) throws -> Self {
        var value = blank
        var seen: UInt64 = 0  // the required fields read, by their place in `required`
        let required = Field.required, all = Field.all
        var next = 0  // the daemon writes the fields in the table's order: looked for from there first
        try r.object(key: { try $0.key() }) { r, key in
            var found: Field?
            for i in next..<all.count where r.key(key, is: all[i].rawValue) {
                found = all[i]
                next = i + 1
                break
            }
            guard let field = found ?? Field(rawValue: r.text(key)) else { throw JSONReader.Unexpected() }
            if r.null() { return }
            try value.read(field, from: &r)
            if let k = required.firstIndex(of: field), k < 64 { seen |= 1 << UInt64(k) }
        }
        guard required.count <= 64, seen == (required.count == 64 ? .max : (1 << UInt64(required.count)) - 1) else {
            throw JSONReader.Unexpected()
        }
        return value
    }
}

extension JSONBytes {
    /// A present value: its key and itself.
    @inline(__always)
    mutating func put<V: StatusJSONValue, F: StatusFieldTable>(_ field: F, _ value: V, _ first: Bool) -> Bool {
        key(field.rawValue, first: first)
        value.writeJSON(to: &self)
        return true
    }

    /// An optional value: nothing when nil.
    @inline(__always)
    mutating func put<V: StatusJSONValue, F: StatusFieldTable>(_ field: F, _ value: V?, _ first: Bool) -> Bool {
        guard let value else { return false }
        return put(field, value, first)
    }
}

extension String: StatusJSONValue {
    public func writeJSON(to j: inout JSONBytes) { j.string(self) }
    public static func readJSON(_ r: inout JSONReader) throws -> String { try r.string() }
}

extension Bool: StatusJSONValue {
    public func writeJSON(to j: inout JSONBytes) { j.bool(self) }
    public static func readJSON(_ r: inout JSONReader) throws -> Bool { try r.bool() }
}

extension Double: StatusJSONValue {
    public func writeJSON(to j: inout JSONBytes) { j.number(self) }
    public static func readJSON(_ r: inout JSONReader) throws -> Double { try r.double() }
}

/// Whole numbers: read only when the value fits (no sign in an unsigned field).
public protocol StatusJSONInteger: StatusJSONValue, FixedWidthInteger {}
extension StatusJSONInteger {
    public func writeJSON(to j: inout JSONBytes) { j.number(self) }
    public static func readJSON(_ r: inout JSONReader) throws -> Self { try r.integer(Self.self) }
}
extension Int: StatusJSONInteger {}
extension Int32: StatusJSONInteger {}
extension UInt32: StatusJSONInteger {}
extension UInt64: StatusJSONInteger {}

/// The vocabulary's words, by their raw value.
public protocol StatusJSONWord: StatusJSONValue, RawRepresentable where RawValue == String {}
extension StatusJSONWord {
    public func writeJSON(to j: inout JSONBytes) { j.string(rawValue) }
    public static func readJSON(_ r: inout JSONReader) throws -> Self {
        guard let v = Self(rawValue: try r.string()) else { throw JSONReader.Unexpected() }
        return v
    }
}
extension LifecycleState: StatusJSONWord {}
extension LifecycleEvent: StatusJSONWord {}
extension Delivery: StatusJSONWord {}
extension TerminationCode: StatusJSONWord {}
extension MemoryBand: StatusJSONWord {}
extension SceneState: StatusJSONWord {}

extension Array: StatusJSONValue where Element: StatusJSONValue {
    public func writeJSON(to j: inout JSONBytes) {
        j.raw("[")
        for (i, e) in enumerated() {
            if i > 0 { j.raw(",") }
            e.writeJSON(to: &j)
        }
        j.raw("]")
    }

    public static func readJSON(_ r: inout JSONReader) throws -> [Element] {
        var list: [Element] = []
        try r.array { r in list.append(try Element.readJSON(&r)) }
        return list
    }
}

// MARK: - The tables

extension AppStatus: StatusJSONObject {
    public enum Field: String, StatusFieldTable {
        case name, state, pid, secondsInState, delivery, backgroundTasks, backgroundTimeRemaining, awaiting
        case lastTermination, footprint, band, memoryLimit, statusLine, launching, frozen, freezeProblem
        case changePending, removing, relaunchIn, recentEnds, failed, outputProblem, nextFetchIn, quit, heldPush
        case waking, restorationBytes, scenes, window, held, prewarm

        public static let all = allCases

        public static let required: [Field] = [.name, .state, .secondsInState, .delivery, .backgroundTasks]
    }

    public static var blank: AppStatus {
        AppStatus(
            name: "", state: .notRunning, pid: nil, secondsInState: 0, delivery: .library, backgroundTasks: [],
            backgroundTimeRemaining: nil, awaiting: nil, lastTermination: nil)
    }

    public func write(_ f: Field, to j: inout JSONBytes, first: Bool) -> Bool {
        switch f {
        case .name: j.put(f, name, first)
        case .state: j.put(f, state, first)
        case .pid: j.put(f, pid, first)
        case .secondsInState: j.put(f, secondsInState, first)
        case .delivery: j.put(f, delivery, first)
        case .backgroundTasks: j.put(f, backgroundTasks, first)
        case .backgroundTimeRemaining: j.put(f, backgroundTimeRemaining, first)
        case .awaiting: j.put(f, awaiting, first)
        case .lastTermination: j.put(f, lastTermination, first)
        case .footprint: j.put(f, footprint, first)
        case .band: j.put(f, band, first)
        case .memoryLimit: j.put(f, memoryLimit, first)
        case .statusLine: j.put(f, statusLine, first)
        case .launching: j.put(f, launching, first)
        case .frozen: j.put(f, frozen, first)
        case .freezeProblem: j.put(f, freezeProblem, first)
        case .changePending: j.put(f, changePending, first)
        case .removing: j.put(f, removing, first)
        case .relaunchIn: j.put(f, relaunchIn, first)
        case .recentEnds: j.put(f, recentEnds, first)
        case .failed: j.put(f, failed, first)
        case .outputProblem: j.put(f, outputProblem, first)
        case .nextFetchIn: j.put(f, nextFetchIn, first)
        case .quit: j.put(f, quit, first)
        case .heldPush: j.put(f, heldPush, first)
        case .waking: j.put(f, waking, first)
        case .restorationBytes: j.put(f, restorationBytes, first)
        case .scenes: j.put(f, scenes, first)
        case .window: j.put(f, window, first)
        case .held: j.put(f, held, first)
        case .prewarm: j.put(f, prewarm, first)
        }
    }

    public mutating func read(_ f: Field, from r: inout JSONReader) throws {
        switch f {
        case .name: name = try .readJSON(&r)
        case .state: state = try .readJSON(&r)
        case .pid: pid = try Int32.readJSON(&r)
        case .secondsInState: secondsInState = try .readJSON(&r)
        case .delivery: delivery = try .readJSON(&r)
        case .backgroundTasks: backgroundTasks = try .readJSON(&r)
        case .backgroundTimeRemaining: backgroundTimeRemaining = try Double.readJSON(&r)
        case .awaiting: awaiting = try LifecycleEvent.readJSON(&r)
        case .lastTermination: lastTermination = try TerminationInfo.readJSON(&r)
        case .footprint: footprint = try UInt64.readJSON(&r)
        case .band: band = try MemoryBand.readJSON(&r)
        case .memoryLimit: memoryLimit = try UInt64.readJSON(&r)
        case .statusLine: statusLine = try String.readJSON(&r)
        case .launching: launching = try Bool.readJSON(&r)
        case .frozen: frozen = try Bool.readJSON(&r)
        case .freezeProblem: freezeProblem = try String.readJSON(&r)
        case .changePending: changePending = try Bool.readJSON(&r)
        case .removing: removing = try Bool.readJSON(&r)
        case .relaunchIn: relaunchIn = try Double.readJSON(&r)
        case .recentEnds: recentEnds = try Int.readJSON(&r)
        case .failed: failed = try FailureInfo.readJSON(&r)
        case .outputProblem: outputProblem = try String.readJSON(&r)
        case .nextFetchIn: nextFetchIn = try Double.readJSON(&r)
        case .quit: quit = try Bool.readJSON(&r)
        case .heldPush: heldPush = try Bool.readJSON(&r)
        case .waking: waking = try LifecycleEvent.readJSON(&r)
        case .restorationBytes: restorationBytes = try Int.readJSON(&r)
        case .scenes: scenes = try [SceneStatus].readJSON(&r)
        case .window: window = try String.readJSON(&r)
        case .held: held = try [String].readJSON(&r)
        case .prewarm: prewarm = try String.readJSON(&r)
        }
    }
}

extension BackgroundTask: StatusJSONObject {
    public enum Field: String, StatusFieldTable {
        case id, name
        public static let all = allCases
        public static let required: [Field] = [.id, .name]
    }

    public static var blank: BackgroundTask { BackgroundTask(id: 0, name: "") }

    public func write(_ f: Field, to j: inout JSONBytes, first: Bool) -> Bool {
        switch f {
        case .id: j.put(f, id, first)
        case .name: j.put(f, name, first)
        }
    }

    public mutating func read(_ f: Field, from r: inout JSONReader) throws {
        switch f {
        case .id: id = try .readJSON(&r)
        case .name: name = try .readJSON(&r)
        }
    }
}

extension TerminationInfo: StatusJSONObject {
    public enum Field: String, StatusFieldTable {
        case reason, description, time, pid
        public static let all = allCases
        public static let required: [Field] = [.reason, .description, .time]
    }

    public static var blank: TerminationInfo { TerminationInfo(reason: .exited, description: "", time: 0, pid: nil) }

    public func write(_ f: Field, to j: inout JSONBytes, first: Bool) -> Bool {
        switch f {
        case .reason: j.put(f, reason, first)
        case .description: j.put(f, description, first)
        case .time: j.put(f, time, first)
        case .pid: j.put(f, pid, first)
        }
    }

    public mutating func read(_ f: Field, from r: inout JSONReader) throws {
        switch f {
        case .reason: reason = try .readJSON(&r)
        case .description: description = try .readJSON(&r)
        case .time: time = try .readJSON(&r)
        case .pid: pid = try Int32.readJSON(&r)
        }
    }
}

extension FailureInfo: StatusJSONObject {
    public enum Field: String, StatusFieldTable {
        case reason, description, ends, windowSeconds, time
        public static let all = allCases
        public static let required: [Field] = all
    }

    public static var blank: FailureInfo {
        FailureInfo(reason: "", description: "", ends: 0, windowSeconds: 0, time: 0)
    }

    public func write(_ f: Field, to j: inout JSONBytes, first: Bool) -> Bool {
        switch f {
        case .reason: j.put(f, reason, first)
        case .description: j.put(f, description, first)
        case .ends: j.put(f, ends, first)
        case .windowSeconds: j.put(f, windowSeconds, first)
        case .time: j.put(f, time, first)
        }
    }

    public mutating func read(_ f: Field, from r: inout JSONReader) throws {
        switch f {
        case .reason: reason = try .readJSON(&r)
        case .description: description = try .readJSON(&r)
        case .ends: ends = try .readJSON(&r)
        case .windowSeconds: windowSeconds = try .readJSON(&r)
        case .time: time = try .readJSON(&r)
        }
    }
}

extension SceneStatus: StatusJSONObject {
    public enum Field: String, StatusFieldTable {
        case name, display, state, inFront, discarding, shed
        public static let all = allCases
        public static let required: [Field] = [.name, .display, .state, .inFront]
    }

    public static var blank: SceneStatus {
        SceneStatus(name: "", display: "", state: .unattached, inFront: false, discarding: nil, shed: nil)
    }

    public func write(_ f: Field, to j: inout JSONBytes, first: Bool) -> Bool {
        switch f {
        case .name: j.put(f, name, first)
        case .display: j.put(f, display, first)
        case .state: j.put(f, state, first)
        case .inFront: j.put(f, inFront, first)
        case .discarding: j.put(f, discarding, first)
        case .shed: j.put(f, shed, first)
        }
    }

    public mutating func read(_ f: Field, from r: inout JSONReader) throws {
        switch f {
        case .name: name = try .readJSON(&r)
        case .display: display = try .readJSON(&r)
        case .state: state = try .readJSON(&r)
        case .inFront: inFront = try .readJSON(&r)
        case .discarding: discarding = try Bool.readJSON(&r)
        case .shed: shed = try Bool.readJSON(&r)
        }
    }
}
