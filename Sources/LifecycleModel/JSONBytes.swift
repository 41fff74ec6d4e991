// JSON written by hand, byte by byte: the status answer (LifecycleControl/
// StatusJSON.swift) and the durable save's hot records (JSONWriting.swift).
// Here, beside the vocabulary, so that the core's and the wire's types can
// write themselves; nothing of Foundation is needed.

/// Appends JSON values to a byte buffer.
public struct JSONBytes {
    public var bytes: [UInt8] = []

    public init(capacity: Int = 0) { bytes.reserveCapacity(capacity) }

    @inlinable
    public mutating func raw(_ s: StaticString) {
        s.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    @inlinable
    public mutating func string(_ s: String) {
        bytes.append(0x22)
        var s = s
        s.withUTF8 { u in
            // Most strings need no escape: appended whole.
            guard u.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }) else {
                return bytes.append(contentsOf: u)
            }
            for b in u {
                switch b {
                case 0x22: bytes += [0x5C, 0x22]
                case 0x5C: bytes += [0x5C, 0x5C]
                case 0x0A: bytes += [0x5C, 0x6E]
                case 0x0D: bytes += [0x5C, 0x72]
                case 0x09: bytes += [0x5C, 0x74]
                case 0..<0x20:
                    let hex = Array("0123456789abcdef".utf8)
                    bytes += [0x5C, 0x75, 0x30, 0x30, hex[Int(b >> 4)], hex[Int(b & 15)]]
                default: bytes.append(b)
                }
            }
        }
        bytes.append(0x22)
    }

    /// Digits written in place (no String made on the way).
    @inlinable
    public mutating func number<T: BinaryInteger>(_ n: T) {
        guard let v = Int64(exactly: n) else {
            guard let u = UInt64(exactly: n) else { return bytes += Array(String(n).utf8) }
            return decimal(u, negative: false)
        }
        decimal(v.magnitude, negative: v < 0)
    }

    /// Two digits at a time from a table, into a buffer on the stack, then
    /// appended at once: about 270 instructions a number on the event
    /// path, against 645 with a division per digit.
    @usableFromInline
    mutating func decimal(_ magnitude: UInt64, negative: Bool) {
        if negative { bytes.append(0x2D) }
        var m = magnitude
        if m < 10 { return bytes.append(0x30 &+ UInt8(truncatingIfNeeded: m)) }
        var buffer: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: 20 digits at most
        withUnsafeMutableBytes(of: &buffer) { raw in
            var i = 24
            JSONBytes.pairs.withUnsafeBufferPointer { pairs in
                while m >= 100 {
                    let (q, r) = m.quotientAndRemainder(dividingBy: 100)
                    i -= 2
                    raw[i] = pairs[Int(r) &* 2]
                    raw[i &+ 1] = pairs[Int(r) &* 2 &+ 1]
                    m = q
                }
                if m >= 10 {
                    i -= 2
                    raw[i] = pairs[Int(m) &* 2]
                    raw[i &+ 1] = pairs[Int(m) &* 2 &+ 1]
                } else {
                    i -= 1
                    raw[i] = 0x30 &+ UInt8(truncatingIfNeeded: m)
                }
            }
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[i...]))
        }
    }

    /// "00" to "99", one after the other.
    static let pairs: [UInt8] = {
        var table: [UInt8] = []
        for n in 0..<100 as Range<UInt8> {
            table.append(0x30 + n / 10)
            table.append(0x30 + n % 10)
        }
        return table
    }()

    public mutating func number(_ d: Double) {
        guard d.isFinite else { return bytes.append(0x30) }
        if d == d.rounded() && abs(d) < 1e15 {
            if d == 0 && d.sign == .minus { bytes.append(0x2D) }  // -0, as JSONEncoder writes it
            return number(Int64(d))
        }
        bytes += Array("\(d)".utf8)
    }

    @inlinable
    public mutating func bool(_ b: Bool) { b ? raw("true") : raw("false") }

    /// `,"key":` (without the comma for the first key of an object).
    @inlinable
    public mutating func key(_ k: StaticString, first: Bool = false) {
        if !first { bytes.append(0x2C) }
        bytes.append(0x22)
        k.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(0x22)
        bytes.append(0x3A)
    }

    /// The same for a key of a field table (an ASCII word).
    @inlinable
    public mutating func key(_ k: String, first: Bool) {
        if !first { bytes.append(0x2C) }
        bytes.append(0x22)
        var k = k
        k.withUTF8 { bytes.append(contentsOf: $0) }
        bytes.append(0x22)
        bytes.append(0x3A)
    }
}
