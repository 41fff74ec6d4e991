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

// Codable values written straight to JSON bytes, in one pass. Foundation's
// JSONEncoder first builds a tree of every value and key, then writes it;
// on the daemon's event path that was most of an event's instructions (the
// durable save writes the changed app's row on every step, issue 31,
// docs/performance.md). This writer keeps no tree: each container writes its
// keys and values as they come, and a value's containers are closed when it
// returns. What it writes is what JSONEncoder (no output options) writes, up
// to spacing and escapes, so JSONDecoder reads it back: Data as base64, Date
// as seconds since 2001, URL as its string, and a value that asks for no
// container as `{}`; a non-finite number is refused as there. Synthesized
// and hand-written conformances encode each nested value before the next
// key, which is what a single pass needs; a container used again after a
// later sibling was opened (which no conformance here does) gets its later
// keys in the right object still, because writing to a container first
// closes everything opened inside it since.

/// Encodes a value as JSON in one pass (see the file's comment).
public struct JSONStreamEncoder {
    public init() {}

    public func encode<T: Encodable>(_ value: T) throws -> Data {
        Data(try encodeBytes(value))
    }

    public func encodeBytes<T: Encodable>(_ value: T) throws -> [UInt8] {
        let writer = JSONStreamWriter()
        try writer.value(value)
        writer.closeAll(downTo: 0)
        return writer.out.bytes
    }

    /// What `encodeBytes` writes for a value that writes itself
    /// (LifecycleModel/JSONWriting.swift): its own writer, and this
    /// encoder for its fields that have none.
    public func writeBytes<T: JSONWritable>(_ value: T) throws -> [UInt8] {
        var w = JSONWriter(other: Self.other)
        try value.write(json: &w)
        return w.out.bytes
    }

    /// A field without a writer of its own, written through Codable into
    /// the hand-written writer's buffer.
    static func other(_ value: any Encodable, _ out: inout JSONBytes) throws {
        let writer = JSONStreamWriter(capacity: 0)
        swap(&writer.out, &out)
        defer { swap(&writer.out, &out) }
        try writer.value(value)
        writer.closeAll(downTo: 0)
    }

    /// Two encoded objects as one: `{"a":1}` and `{"b":2}` make
    /// `{"a":1,"b":2}` (what one conformance writing both parts into the
    /// same container writes). Each must be an object this encoder wrote.
    public static func joinObjects(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] {
        precondition(a.first == 0x7B && a.last == 0x7D && b.first == 0x7B && b.last == 0x7D, "two JSON objects")
        if a.count == 2 { return b }
        if b.count == 2 { return a }
        var joined = a
        joined.reserveCapacity(a.count + b.count - 1)
        joined[joined.count - 1] = 0x2C
        joined.append(contentsOf: b[1...])
        return joined
    }
}

final class JSONStreamWriter: Encoder {
    /// What the writer changes as it goes, kept behind a pointer: a class's
    /// stored properties are checked for exclusive access at run time on
    /// every change (swift_beginAccess, about 90 instructions each), and
    /// every key and value changes them several times; through the pointer
    /// nothing is checked. One writer encodes one value on one thread, and
    /// no access to the state overlaps another.
    struct State {
        var out: JSONBytes
        /// The containers open, outermost first: the byte that closes each,
        /// and whether it has an element yet.
        var open: [(closer: UInt8, filled: Bool)] = []
        /// Where the value being encoded starts in `open` (its own container,
        /// when it asks for one, is at this level), and whether it has written
        /// anything (a container or a single value).
        var base = 0
        var started = false
    }
    private let state: UnsafeMutablePointer<State>

    init(capacity: Int = 512) {
        state = .allocate(capacity: 1)
        state.initialize(to: State(out: JSONBytes(capacity: capacity)))
    }

    deinit {
        state.deinitialize(count: 1)
        state.deallocate()
    }

    var out: JSONBytes {
        unsafeAddress { UnsafePointer(state.pointer(to: \.out)!) }
        unsafeMutableAddress { state.pointer(to: \.out)! }
    }
    var open: [(closer: UInt8, filled: Bool)] {
        unsafeAddress { UnsafePointer(state.pointer(to: \.open)!) }
        unsafeMutableAddress { state.pointer(to: \.open)! }
    }
    var base: Int {
        get { state.pointee.base }
        set { state.pointee.base = newValue }
    }
    var started: Bool {
        get { state.pointee.started }
        set { state.pointee.started = newValue }
    }

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func value<T: Encodable>(_ v: T) throws {
        if T.self == Data.self { return out.string((v as! Data).base64EncodedString()) }
        if T.self == Date.self { return try double((v as! Date).timeIntervalSinceReferenceDate) }
        if T.self == URL.self { return out.string((v as! URL).absoluteString) }
        let (outerBase, outerStarted) = (base, started)
        base = open.count
        started = false
        defer { (base, started) = (outerBase, outerStarted) }
        try v.encode(to: self)
        if !started { out.raw("{}") }  // as JSONEncoder: a value that encoded nothing
        closeAll(downTo: base)
    }

    /// Closes the containers above `level`.
    func closeAll(downTo level: Int) {
        while open.count > level { out.bytes.append(open.removeLast().closer) }
    }

    /// Before an element of the container at `level`: what was opened
    /// inside it since is closed, and a comma if it is not the first.
    func element(at level: Int) {
        closeAll(downTo: level + 1)
        if open[level].filled { out.bytes.append(0x2C) } else { open[level].filled = true }
    }

    /// The value's own container: opened once, its second request (a
    /// conformance that encodes a part of itself first, then the rest) the
    /// same object.
    func openContainer(_ opener: UInt8, _ closer: UInt8) -> Int {
        if started, open.count > base, open[base].closer == closer {
            closeAll(downTo: base + 1)
            return base
        }
        started = true
        out.bytes.append(opener)
        open.append((closer, false))
        return open.count - 1
    }

    func double(_ d: Double) throws {
        guard d.isFinite else {
            throw EncodingError.invalidValue(d, .init(codingPath: [], debugDescription: "\(d) is not valid in JSON"))
        }
        out.number(d)
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(Keyed<Key>(writer: self, level: openContainer(0x7B, 0x7D)))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        Unkeyed(writer: self, level: openContainer(0x5B, 0x5D))
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        Single(writer: self)
    }

    /// What every container writes with: scalars at once, anything else
    /// through `value`.
    fileprivate func write(_ v: Bool) { out.bool(v) }
    fileprivate func write(_ v: String) { out.string(v) }
    fileprivate func write<T: BinaryInteger>(_ v: T) { out.number(v) }

    struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let writer: JSONStreamWriter
        let level: Int
        var codingPath: [any CodingKey] { [] }

        func key(_ k: Key) { key(named: k.stringValue) }

        func key(named name: String) {
            writer.element(at: level)
            writer.out.string(name)
            writer.out.bytes.append(0x3A)
        }

        mutating func encodeNil(forKey k: Key) throws {
            key(k)
            writer.out.raw("null")
        }
        mutating func encode(_ v: Bool, forKey k: Key) throws {
            key(k)
            writer.write(v)
        }
        mutating func encode(_ v: String, forKey k: Key) throws {
            key(k)
            writer.write(v)
        }
        mutating func encode(_ v: Double, forKey k: Key) throws {
            key(k)
            try writer.double(v)
        }
        mutating func encode(_ v: Float, forKey k: Key) throws {
            key(k)
            try writer.double(Double(v))
        }
        mutating func encode(_ v: Int, forKey k: Key) throws {
            key(k)
            writer.write(v)
        }
        mutating func encode(_ v: Int8, forKey k: Key) throws {
            key(k)
            writer.write(v)
        }
        mutating func encode(_ v: Int16, forKey k: Key) throws {
            key(k)
            writer.write(v)
        }
        mutating func encode(_ v: Int32, forKey k: Key) throws {
            key(k)
            writer.write(v)
        }
        mutating func encode(_ v: Int64, forKey k: Key) throws {
            key(k)
            writer.write(v)
        }
        mutating func encode(_ v: UInt, forKey k: Key) throws {
            key(k)
            writer.write(v)
        }
        mutating func encode(_ v: UInt8, forKey k: Key) throws {
            key(k)
            writer.write(v)
        }
        mutating func encode(_ v: UInt16, forKey k: Key) throws {
            key(k)
            writer.write(v)
        }
        mutating func encode(_ v: UInt32, forKey k: Key) throws {
            key(k)
            writer.write(v)
        }
        mutating func encode(_ v: UInt64, forKey k: Key) throws {
            key(k)
            writer.write(v)
        }
        mutating func encode<T: Encodable>(_ v: T, forKey k: Key) throws {
            key(k)
            try writer.value(v)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy keyType: NestedKey.Type, forKey k: Key
        ) -> KeyedEncodingContainer<NestedKey> {
            key(k)
            writer.out.bytes.append(0x7B)
            writer.open.append((0x7D, false))
            return KeyedEncodingContainer(Keyed<NestedKey>(writer: writer, level: writer.open.count - 1))
        }

        mutating func nestedUnkeyedContainer(forKey k: Key) -> any UnkeyedEncodingContainer {
            key(k)
            writer.out.bytes.append(0x5B)
            writer.open.append((0x5D, false))
            return Unkeyed(writer: writer, level: writer.open.count - 1)
        }

        mutating func superEncoder() -> any Encoder {
            let me = self
            return SubEncoder(writer: writer, key: { me.key(named: "super") })
        }

        mutating func superEncoder(forKey k: Key) -> any Encoder {
            let me = self
            return SubEncoder(writer: writer, key: { me.key(k) })
        }
    }

    struct Unkeyed: UnkeyedEncodingContainer {
        let writer: JSONStreamWriter
        let level: Int
        var codingPath: [any CodingKey] { [] }
        var count = 0

        mutating func next() {
            writer.element(at: level)
            count += 1
        }

        mutating func encodeNil() throws {
            next()
            writer.out.raw("null")
        }
        mutating func encode(_ v: Bool) throws {
            next()
            writer.write(v)
        }
        mutating func encode(_ v: String) throws {
            next()
            writer.write(v)
        }
        mutating func encode(_ v: Double) throws {
            next()
            try writer.double(v)
        }
        mutating func encode(_ v: Float) throws {
            next()
            try writer.double(Double(v))
        }
        mutating func encode(_ v: Int) throws {
            next()
            writer.write(v)
        }
        mutating func encode(_ v: Int32) throws {
            next()
            writer.write(v)
        }
        mutating func encode(_ v: Int64) throws {
            next()
            writer.write(v)
        }
        mutating func encode(_ v: UInt32) throws {
            next()
            writer.write(v)
        }
        mutating func encode(_ v: UInt64) throws {
            next()
            writer.write(v)
        }
        mutating func encode<T: Encodable>(_ v: T) throws {
            next()
            try writer.value(v)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy keyType: NestedKey.Type
        ) -> KeyedEncodingContainer<NestedKey> {
            next()
            writer.out.bytes.append(0x7B)
            writer.open.append((0x7D, false))
            return KeyedEncodingContainer(Keyed<NestedKey>(writer: writer, level: writer.open.count - 1))
        }

        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            next()
            writer.out.bytes.append(0x5B)
            writer.open.append((0x5D, false))
            return Unkeyed(writer: writer, level: writer.open.count - 1)
        }

        mutating func superEncoder() -> any Encoder {
            count += 1
            let (writer, level) = (writer, level)
            return SubEncoder(writer: writer, key: { writer.element(at: level) })
        }
    }

    struct Single: SingleValueEncodingContainer {
        let writer: JSONStreamWriter
        var codingPath: [any CodingKey] { [] }

        func mark() { writer.started = true }

        mutating func encodeNil() throws {
            mark()
            writer.out.raw("null")
        }
        mutating func encode(_ v: Bool) throws {
            mark()
            writer.write(v)
        }
        mutating func encode(_ v: String) throws {
            mark()
            writer.write(v)
        }
        mutating func encode(_ v: Double) throws {
            mark()
            try writer.double(v)
        }
        mutating func encode(_ v: Float) throws {
            mark()
            try writer.double(Double(v))
        }
        mutating func encode(_ v: Int) throws {
            mark()
            writer.write(v)
        }
        mutating func encode(_ v: Int8) throws {
            mark()
            writer.write(v)
        }
        mutating func encode(_ v: Int16) throws {
            mark()
            writer.write(v)
        }
        mutating func encode(_ v: Int32) throws {
            mark()
            writer.write(v)
        }
        mutating func encode(_ v: Int64) throws {
            mark()
            writer.write(v)
        }
        mutating func encode(_ v: UInt) throws {
            mark()
            writer.write(v)
        }
        mutating func encode(_ v: UInt8) throws {
            mark()
            writer.write(v)
        }
        mutating func encode(_ v: UInt16) throws {
            mark()
            writer.write(v)
        }
        mutating func encode(_ v: UInt32) throws {
            mark()
            writer.write(v)
        }
        mutating func encode(_ v: UInt64) throws {
            mark()
            writer.write(v)
        }
        mutating func encode<T: Encodable>(_ v: T) throws {
            mark()
            try writer.value(v)
        }
    }

    /// superEncoder: an encoder for one element of a container, whose key
    /// (or place) is written when its value first asks for a container,
    /// with the writer's own containers one level down. (No conformance
    /// here uses it; it writes valid JSON when its value asks for a
    /// container, as any conformance does.)
    final class SubEncoder: Encoder {
        let writer: JSONStreamWriter
        let writeKey: () -> Void
        /// The level of its value's container, once opened.
        var level: Int?
        var codingPath: [any CodingKey] { [] }
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        init(writer: JSONStreamWriter, key: @escaping () -> Void) {
            self.writer = writer
            self.writeKey = key
        }

        func open(_ opener: UInt8, _ closer: UInt8) -> Int {
            if let level, writer.open.count > level, writer.open[level].closer == closer {
                writer.closeAll(downTo: level + 1)
                return level
            }
            writeKey()
            writer.out.bytes.append(opener)
            writer.open.append((closer, false))
            level = writer.open.count - 1
            return writer.open.count - 1
        }

        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            KeyedEncodingContainer(Keyed<Key>(writer: writer, level: open(0x7B, 0x7D)))
        }
        func unkeyedContainer() -> any UnkeyedEncodingContainer { Unkeyed(writer: writer, level: open(0x5B, 0x5D)) }
        func singleValueContainer() -> any SingleValueEncodingContainer {
            writeKey()
            return Single(writer: writer)
        }
    }
}
