import Foundation
// The fuzzers compile this module's files together with LifecycleModel's
// into one module, where there is nothing to import.
#if canImport(LifecycleModel)
    import LifecycleModel
#endif

// Every field of an app's status, described once: its key, how it is read
// from the value and set on it. The hand-written JSON writer and reader
// (StatusJSON.swift) walk these tables; the D-Bus properties will walk them
// next. Adding a status field: the property (ControlStatus.swift), its row
// here, the daemon filling it (DaemonTarget.swift), and docs/protocol.md;
// StatusFieldTests fails until the row is there.

/// A value the hand-written status JSON knows how to write and read.
public protocol StatusJSONValue: SendableMetatype {
    func writeJSON(to j: inout JSONBytes)
    static func readJSON(_ r: inout JSONReader) throws -> Self
}

/// An object of the status answer: its fields, in the order written.
public protocol StatusJSONObject: StatusJSONValue {
    static var fields: [StatusField<Self>] { get }
    /// The fields by key, for the reader.
    static var fieldIndex: [String: Int] { get }
    /// A value to read into: every field its blank.
    static var blank: Self { get }
}

/// One field: its key, whether an object lacks it when nil (optional) or
/// must have it, how its value is written and read.
public struct StatusField<Root>: Sendable {
    public let key: StaticString
    public let optional: Bool
    /// Writes `,"key":value` (no comma when `first`); false, writing
    /// nothing, when the value is absent.
    let write: @Sendable (Root, inout JSONBytes, _ first: Bool) -> Bool
    let read: @Sendable (inout JSONReader, inout Root) throws -> Void

    public static func required<V: StatusJSONValue>(
        _ key: StaticString, _ get: @escaping @Sendable (Root) -> V, _ set: @escaping @Sendable (inout Root, V) -> Void
    ) -> Self {
        StatusField(
            key: key, optional: false,
            write: { root, j, first in
                j.key(key, first: first)
                get(root).writeJSON(to: &j)
                return true
            },
            read: { r, root in set(&root, try V.readJSON(&r)) })
    }

    public static func optional<V: StatusJSONValue>(
        _ key: StaticString, _ get: @escaping @Sendable (Root) -> V?, _ set: @escaping @Sendable (inout Root, V) -> Void
    ) -> Self {
        StatusField(
            key: key, optional: true,
            write: { root, j, first in
                guard let v = get(root) else { return false }
                j.key(key, first: first)
                v.writeJSON(to: &j)
                return true
            },
            read: { r, root in set(&root, try V.readJSON(&r)) })
    }
}

extension StatusJSONObject {
    public static func index(of fields: [StatusField<Self>]) -> [String: Int] {
        var index: [String: Int] = [:]
        for (i, f) in fields.enumerated() { index[f.key.description] = i }
        return index
    }

    public func writeJSON(to j: inout JSONBytes) {
        j.raw("{")
        var first = true
        for f in Self.fields where f.write(self, &j, first) { first = false }
        j.raw("}")
    }

    /// A key it does not know, a value of another type, a required field
    /// missing: the reader gives up (the caller then decodes with
    /// JSONDecoder, which says what is wrong). A null is an absent value.
    public static func readJSON(_ r: inout JSONReader) throws -> Self {
        var value = blank
        var seen: UInt64 = 0
        let fields = Self.fields
        try r.object { r, key in
            guard let i = fieldIndex[key] else { throw JSONReader.Unexpected() }
            if r.null() { return }
            try fields[i].read(&r, &value)
            if i < 64 { seen |= 1 << UInt64(i) }
        }
        for (i, f) in fields.enumerated() where !f.optional && (i >= 64 || seen & (1 << UInt64(i)) == 0) {
            throw JSONReader.Unexpected()
        }
        return value
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
    public static let fields: [StatusField<AppStatus>] = [
        .required("name", { $0.name }, { $0.name = $1 }),
        .required("state", { $0.state }, { $0.state = $1 }),
        .optional("pid", { $0.pid }, { $0.pid = $1 }),
        .required("secondsInState", { $0.secondsInState }, { $0.secondsInState = $1 }),
        .required("delivery", { $0.delivery }, { $0.delivery = $1 }),
        .required("backgroundTasks", { $0.backgroundTasks }, { $0.backgroundTasks = $1 }),
        .optional("backgroundTimeRemaining", { $0.backgroundTimeRemaining }, { $0.backgroundTimeRemaining = $1 }),
        .optional("awaiting", { $0.awaiting }, { $0.awaiting = $1 }),
        .optional("lastTermination", { $0.lastTermination }, { $0.lastTermination = $1 }),
        .optional("footprint", { $0.footprint }, { $0.footprint = $1 }),
        .optional("band", { $0.band }, { $0.band = $1 }),
        .optional("memoryLimit", { $0.memoryLimit }, { $0.memoryLimit = $1 }),
        .optional("statusLine", { $0.statusLine }, { $0.statusLine = $1 }),
        .optional("launching", { $0.launching }, { $0.launching = $1 }),
        .optional("frozen", { $0.frozen }, { $0.frozen = $1 }),
        .optional("freezeProblem", { $0.freezeProblem }, { $0.freezeProblem = $1 }),
        .optional("changePending", { $0.changePending }, { $0.changePending = $1 }),
        .optional("removing", { $0.removing }, { $0.removing = $1 }),
        .optional("relaunchIn", { $0.relaunchIn }, { $0.relaunchIn = $1 }),
        .optional("recentEnds", { $0.recentEnds }, { $0.recentEnds = $1 }),
        .optional("failed", { $0.failed }, { $0.failed = $1 }),
        .optional("outputProblem", { $0.outputProblem }, { $0.outputProblem = $1 }),
        .optional("nextFetchIn", { $0.nextFetchIn }, { $0.nextFetchIn = $1 }),
        .optional("quit", { $0.quit }, { $0.quit = $1 }),
        .optional("heldPush", { $0.heldPush }, { $0.heldPush = $1 }),
        .optional("waking", { $0.waking }, { $0.waking = $1 }),
        .optional("restorationBytes", { $0.restorationBytes }, { $0.restorationBytes = $1 }),
        .optional("scenes", { $0.scenes }, { $0.scenes = $1 }),
    ]
    public static let fieldIndex = index(of: fields)
    public static var blank: AppStatus {
        AppStatus(
            name: "", state: .notRunning, pid: nil, secondsInState: 0, delivery: .library, backgroundTasks: [],
            backgroundTimeRemaining: nil, awaiting: nil, lastTermination: nil)
    }
}

extension BackgroundTask: StatusJSONObject {
    public static let fields: [StatusField<BackgroundTask>] = [
        .required("id", { $0.id }, { $0.id = $1 }),
        .required("name", { $0.name }, { $0.name = $1 }),
    ]
    public static let fieldIndex = index(of: fields)
    public static var blank: BackgroundTask { BackgroundTask(id: 0, name: "") }
}

extension TerminationInfo: StatusJSONObject {
    public static let fields: [StatusField<TerminationInfo>] = [
        .required("reason", { $0.reason }, { $0.reason = $1 }),
        .required("description", { $0.description }, { $0.description = $1 }),
        .required("time", { $0.time }, { $0.time = $1 }),
        .optional("pid", { $0.pid }, { $0.pid = $1 }),
    ]
    public static let fieldIndex = index(of: fields)
    public static var blank: TerminationInfo { TerminationInfo(reason: .exited, description: "", time: 0, pid: nil) }
}

extension FailureInfo: StatusJSONObject {
    public static let fields: [StatusField<FailureInfo>] = [
        .required("reason", { $0.reason }, { $0.reason = $1 }),
        .required("description", { $0.description }, { $0.description = $1 }),
        .required("ends", { $0.ends }, { $0.ends = $1 }),
        .required("windowSeconds", { $0.windowSeconds }, { $0.windowSeconds = $1 }),
        .required("time", { $0.time }, { $0.time = $1 }),
    ]
    public static let fieldIndex = index(of: fields)
    public static var blank: FailureInfo {
        FailureInfo(reason: "", description: "", ends: 0, windowSeconds: 0, time: 0)
    }
}

extension SceneStatus: StatusJSONObject {
    public static let fields: [StatusField<SceneStatus>] = [
        .required("name", { $0.name }, { $0.name = $1 }),
        .required("display", { $0.display }, { $0.display = $1 }),
        .required("state", { $0.state }, { $0.state = $1 }),
        .required("inFront", { $0.inFront }, { $0.inFront = $1 }),
        .optional("discarding", { $0.discarding }, { $0.discarding = $1 }),
        .optional("shed", { $0.shed }, { $0.shed = $1 }),
    ]
    public static let fieldIndex = index(of: fields)
    public static var blank: SceneStatus {
        SceneStatus(name: "", display: "", state: .unattached, inFront: false, discarding: nil, shed: nil)
    }
}
