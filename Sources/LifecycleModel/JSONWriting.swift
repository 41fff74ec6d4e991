// The durable save's hot records written by hand (issue 31, part 1), and
// what every follower reads and every request is answered with (EventRecord,
// ControlResponse: LifecycleControl).
//
// An event saves the changed app's row twice (the decision's step and the
// acknowledgement's), and through Codable each nested value of that row
// cost a container: the generic metadata of the container and its box, a
// heap box, and a witness call per field, 1.3-1.4 k instructions a
// container before anything is written (docs/performance.md, "The save's
// records write themselves"). A type that is `JSONWritable` writes its
// own bytes instead: exactly what its `encode(to:)` writes through
// JSONStreamEncoder (LifecycleControl), so what is read back (JSONDecoder,
// its Codable `init(from:)`) is unchanged, and so is the file. A field whose
// type has no writer of its own goes through the Codable path (`other`),
// into the same buffer. The tests hold the two paths to the same bytes:
// every app part of the seeded simulation's runs, at every step
// (LifecycleCoreTests/SimulationTests.swift), and the daemon's rows with
// every field set (LifecycleDaemonTests/JSONStreamEncoderTests.swift).

/// A value that writes its own JSON, byte for byte what its Encodable
/// conformance writes through JSONStreamEncoder.
public protocol JSONWritable: Encodable {
    func write(json w: inout JSONWriter) throws
}

/// Writes JSON objects, arrays and scalars in one pass; commas follow
/// from the order of the calls (`key` or `element` before each value).
public struct JSONWriter {
    public var out: JSONBytes
    /// A value was written at this level: the next key or element needs a comma.
    @usableFromInline var comma = false
    /// Writes a value that has no writer of its own, as JSONStreamEncoder does.
    @usableFromInline let other: (any Encodable, inout JSONBytes) throws -> Void

    public init(capacity: Int = 512, other: @escaping (any Encodable, inout JSONBytes) throws -> Void) {
        out = JSONBytes(capacity: capacity)
        self.other = other
    }

    @inlinable
    public mutating func openObject() {
        out.bytes.append(0x7B)
        comma = false
    }

    @inlinable
    public mutating func closeObject() {
        out.bytes.append(0x7D)
        comma = true
    }

    @inlinable
    public mutating func openArray() {
        out.bytes.append(0x5B)
        comma = false
    }

    @inlinable
    public mutating func closeArray() {
        out.bytes.append(0x5D)
        comma = true
    }

    /// `"name":`, after a comma unless it is the first of its object.
    @inlinable
    public mutating func key(_ name: StaticString) {
        if comma { out.bytes.append(0x2C) }
        out.bytes.append(0x22)
        name.withUTF8Buffer { out.bytes.append(contentsOf: $0) }
        out.bytes.append(0x22)
        out.bytes.append(0x3A)
    }

    /// A key that is data (a dictionary's), escaped as any string.
    @inlinable
    public mutating func key(_ name: String) {
        if comma { out.bytes.append(0x2C) }
        out.string(name)
        out.bytes.append(0x3A)
    }

    /// Before an element of an array.
    @inlinable
    public mutating func element() {
        if comma { out.bytes.append(0x2C) }
    }

    @inlinable
    public mutating func int(_ v: Int64) {
        out.number(v)
        comma = true
    }

    @inlinable
    public mutating func uint(_ v: UInt64) {
        out.number(v)
        comma = true
    }

    @inlinable
    public mutating func bool(_ v: Bool) {
        out.bool(v)
        comma = true
    }

    @inlinable
    public mutating func string(_ v: String) {
        out.string(v)
        comma = true
    }

    /// A number as JSONStreamEncoder writes it; not a number or an
    /// infinity is refused, as there.
    @inlinable
    public mutating func double(_ v: Double) throws {
        guard v.isFinite else {
            throw EncodingError.invalidValue(v, .init(codingPath: [], debugDescription: "\(v) is not valid in JSON"))
        }
        out.number(v)
        comma = true
    }

    /// A value without a writer of its own, through Codable.
    @inlinable
    public mutating func other<T: Encodable>(_ v: T) throws {
        try other(v, &out)
        comma = true
    }

    /// `"name":value`: what `encode(_:forKey:)` writes.
    @inlinable
    public mutating func field<T: JSONWritable>(_ name: StaticString, _ v: T) throws {
        key(name)
        try v.write(json: &self)
    }

    /// Nothing for nil: what `encode(ifPresent:forKey:)` writes.
    @inlinable
    public mutating func field<T: JSONWritable>(_ name: StaticString, ifPresent v: T?) throws {
        if let v { try field(name, v) }
    }

    /// Nothing at the value a decoder falls back to (AppRecord's `put`).
    @inlinable
    public mutating func field<T: JSONWritable & Equatable>(_ name: StaticString, _ v: T, unless fallback: T) throws {
        if v != fallback { try field(name, v) }
    }

    /// A field whose type has no writer of its own, through Codable.
    @inlinable
    public mutating func field<T: Encodable>(_ name: StaticString, other v: T) throws {
        key(name)
        try other(v)
    }

    @inlinable
    public mutating func field<T: Encodable>(_ name: StaticString, otherIfPresent v: T?) throws {
        if let v { try field(name, other: v) }
    }

    /// A synthesized enum's case: `{"name":{}}` without a payload, or
    /// `{"name":{...}}` with the payload's fields (labels as keys, `_0`
    /// for one without), written by `payload`.
    @inlinable
    public mutating func enumCase(_ name: StaticString, payload: (inout JSONWriter) throws -> Void) rethrows {
        openObject()
        key(name)
        openObject()
        try payload(&self)
        closeObject()
        closeObject()
    }

    @inlinable
    public mutating func enumCase(_ name: StaticString) { enumCase(name) { _ in } }

    /// An array of values that write themselves.
    @inlinable
    public mutating func array<C: Collection>(_ values: C) throws where C.Element: JSONWritable {
        openArray()
        for v in values {
            element()
            try v.write(json: &self)
        }
        closeArray()
    }

    /// A dictionary keyed by strings: an object, in the dictionary's order
    /// (as Codable writes it).
    @inlinable
    public mutating func object<V: JSONWritable>(_ values: [String: V]) throws {
        openObject()
        for (k, v) in values {
            key(k)
            try v.write(json: &self)
        }
        closeObject()
    }
}

// The scalars, as Codable writes them.
extension String: JSONWritable {
    @inlinable public func write(json w: inout JSONWriter) { w.string(self) }
}
extension Bool: JSONWritable {
    @inlinable public func write(json w: inout JSONWriter) { w.bool(self) }
}
extension Int: JSONWritable {
    @inlinable public func write(json w: inout JSONWriter) { w.int(Int64(self)) }
}
extension Int32: JSONWritable {
    @inlinable public func write(json w: inout JSONWriter) { w.int(Int64(self)) }
}
extension Int64: JSONWritable {
    @inlinable public func write(json w: inout JSONWriter) { w.int(self) }
}
extension UInt32: JSONWritable {
    @inlinable public func write(json w: inout JSONWriter) { w.uint(UInt64(self)) }
}
extension UInt64: JSONWritable {
    @inlinable public func write(json w: inout JSONWriter) { w.uint(self) }
}
extension Double: JSONWritable {
    @inlinable public func write(json w: inout JSONWriter) throws { try w.double(self) }
}

/// A word of the vocabulary, written as its raw value (as Codable does).
public protocol JSONWritableWord: JSONWritable, RawRepresentable where RawValue == String {}
extension JSONWritableWord {
    @inlinable public func write(json w: inout JSONWriter) { w.string(rawValue) }
}
extension LifecycleState: JSONWritableWord {}
extension LifecycleEvent: JSONWritableWord {}
extension LaunchMode: JSONWritableWord {}
extension LaunchReason: JSONWritableWord {}
extension SceneState: JSONWritableWord {}
extension TerminationCode: JSONWritableWord {}
extension OOMKiller: JSONWritableWord {}
