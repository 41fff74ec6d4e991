#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
// The fuzzers compile this module's files together with LifecycleModel's
// into one module, where there is nothing to import.
#if canImport(LifecycleModel)
    import LifecycleModel
#endif

// The status answer written and read by hand: with 1,000 apps, JSONEncoder's
// generic path cost the daemon 5 ms of a 7 ms answer, and JSONDecoder a
// third of a 40 ms `supervisorctl status` (docs/performance.md). Each app's
// fields are described once, in a table (StatusFields.swift) that the writer
// and the reader walk: the same keys as the Codable conformance, optionals
// left out when nil. Tests hold the table to the Codable keys and both
// paths to the same value; the reader is fuzzed (scripts/fuzz.sh). Anything
// else still goes through JSONEncoder.

extension StatusReport {
    /// `{"ok":true,"status":{...}}` and a newline: the daemon's answer to `status`.
    public func responseLine() throws -> [UInt8] {
        var j = JSONBytes(capacity: 96 + apps.count * 320)
        j.raw("{\"ok\":true,\"status\":{\"daemon\":")
        j.bytes += try JSONStreamEncoder().encodeBytes(daemon)
        j.raw(",\"apps\":[")
        for i in apps.indices {  // not `for app in apps`: each would be copied
            if i > 0 { j.raw(",") }
            apps[i].writeJSON(to: &j)
        }
        j.raw("]}}\n")
        return j.bytes
    }
}

// And read by hand in supervisorctl, for the same reason (JSONDecoder took
// a third of a 40 ms `supervisorctl status` of 1,000 apps). Anything it
// does not expect makes it give up, and the caller decodes with JSONDecoder.

public struct JSONReader {
    struct Unexpected: Error {}

    let b: [UInt8]
    var i = 0

    init(_ bytes: [UInt8]) { b = bytes }

    mutating func ws() {
        while i < b.count, b[i] == 0x20 || b[i] == 0x0A || b[i] == 0x0D || b[i] == 0x09 { i += 1 }
    }

    mutating func take(_ c: UInt8) -> Bool {
        ws()
        guard i < b.count, b[i] == c else { return false }
        i += 1
        return true
    }

    mutating func expect(_ c: UInt8) throws { if !take(c) { throw Unexpected() } }

    mutating func null() -> Bool {
        ws()
        guard i + 4 <= b.count, b[i] == 0x6E, b[i + 1] == 0x75, b[i + 2] == 0x6C, b[i + 3] == 0x6C else { return false }
        i += 4
        return true
    }

    mutating func bool() throws -> Bool {
        ws()
        if i + 4 <= b.count, b[i] == 0x74, b[i + 1] == 0x72, b[i + 2] == 0x75, b[i + 3] == 0x65 {
            i += 4
            return true
        }
        if i + 5 <= b.count, b[i] == 0x66, b[i + 1] == 0x61, b[i + 2] == 0x6C, b[i + 3] == 0x73, b[i + 4] == 0x65 {
            i += 5
            return false
        }
        throw Unexpected()
    }

    mutating func string() throws -> String {
        try expect(0x22)
        let start = i
        while i < b.count, b[i] != 0x22, b[i] != 0x5C { i += 1 }
        guard i < b.count else { throw Unexpected() }
        if b[i] == 0x22 {  // no escapes: the common case
            defer { i += 1 }
            return String(decoding: b[start..<i], as: UTF8.self)
        }
        var out = Array(b[start..<i])
        var units: [UInt16] = []
        while i < b.count, b[i] != 0x22 {
            if b[i] != 0x5C {
                out.append(b[i])
                i += 1
                continue
            }
            guard i + 1 < b.count else { throw Unexpected() }
            let e = b[i + 1]
            i += 2
            switch e {
            case 0x6E: out.append(0x0A)
            case 0x72: out.append(0x0D)
            case 0x74: out.append(0x09)
            case 0x62: out.append(0x08)
            case 0x66: out.append(0x0C)
            case 0x75:
                guard i + 4 <= b.count, let u = UInt16(String(decoding: b[i..<(i + 4)], as: UTF8.self), radix: 16)
                else { throw Unexpected() }
                i += 4
                units = [u]
                if UTF16.isLeadSurrogate(u), i + 6 <= b.count, b[i] == 0x5C, b[i + 1] == 0x75,
                    let low = UInt16(String(decoding: b[(i + 2)..<(i + 6)], as: UTF8.self), radix: 16)
                {
                    units.append(low)
                    i += 6
                }
                out += Array(String(decoding: units, as: UTF16.self).utf8)
            default: out.append(e)  // \" \\ \/
            }
        }
        guard i < b.count else { throw Unexpected() }
        i += 1
        return String(decoding: out, as: UTF8.self)
    }

    mutating func double() throws -> Double {
        ws()
        let start = i
        while i < b.count,
            (0x30...0x39).contains(b[i]) || b[i] == 0x2D || b[i] == 0x2B || b[i] == 0x2E
                || b[i] == 0x65 || b[i] == 0x45
        {
            i += 1
        }
        if let d = Self.shortDecimal(b[start..<i]) { return d }
        // JSON has no infinity: a number too large for a Double is malformed.
        guard let d = Double(String(decoding: b[start..<i], as: UTF8.self)), d.isFinite else { throw Unexpected() }
        return d
    }

    /// `-?digits(.digits)?` with at most 15 digits in all: the digits as a
    /// whole number and the power of ten to divide it by are both exact in
    /// a Double, so their quotient is the correctly rounded value, the same
    /// as parsing the text gives (Clinger's fast path). Anything else
    /// (more digits, an exponent) is nil, for the full parse: the seconds
    /// in a status, a thousand of them, no longer each make a String.
    static func shortDecimal(_ t: ArraySlice<UInt8>) -> Double? {
        var k = t.startIndex
        let negative = k < t.endIndex && t[k] == 0x2D
        if negative { k += 1 }
        var mantissa: UInt64 = 0
        var digits = 0, fraction = 0
        var point = false
        while k < t.endIndex {
            let c = t[k]
            if c == 0x2E {
                guard !point, digits > 0 else { return nil }
                point = true
            } else {
                guard c >= 0x30, c <= 0x39, digits < 15 else { return nil }
                mantissa = mantissa &* 10 &+ UInt64(c &- 0x30)
                digits += 1
                if point { fraction += 1 }
            }
            k += 1
        }
        guard digits > 0, !point || fraction > 0 else { return nil }
        let d = Double(mantissa) / Self.powersOfTen[fraction]
        return negative ? -d : d
    }

    /// 10^0 to 10^15, each exact.
    static let powersOfTen: [Double] = (0...15).map { n in (0..<n).reduce(1.0) { a, _ in a * 10 } }

    /// A key: the range of its bytes when it has no escape (the status
    /// reader compares them with its fields' names without making a
    /// String), else the decoded text.
    enum Key {
        case bytes(Range<Int>)
        case text(String)
    }

    mutating func key() throws -> Key {
        try expect(0x22)
        let start = i
        while i < b.count, b[i] != 0x22, b[i] != 0x5C { i += 1 }
        guard i < b.count else { throw Unexpected() }
        if b[i] == 0x22 {
            i += 1
            return .bytes(start..<(i - 1))
        }
        i = start - 1
        return .text(try string())
    }

    /// Whether `key` is `name`.
    func key(_ key: Key, is name: String) -> Bool {
        switch key {
        case .bytes(let r):
            // The names are ASCII literals, whose bytes are at hand: a
            // memcmp, where elementsEqual walked both a byte at a time.
            var name = name
            guard name.utf8.count == r.count, !r.isEmpty else { return name.utf8.count == r.count }
            return name.withUTF8 { n in
                b.withUnsafeBufferPointer { memcmp(n.baseAddress!, $0.baseAddress! + r.lowerBound, r.count) }
            } == 0
        case .text(let text): return text == name
        }
    }

    func text(_ key: Key) -> String {
        switch key {
        case .bytes(let r): return String(decoding: b[r], as: UTF8.self)
        case .text(let text): return text
        }
    }

    /// A whole number that fits `T`: a minus sign only for a signed type (a
    /// negative in an unsigned field is malformed, never a trap), no
    /// fraction or exponent, no overflow.
    mutating func integer<T: FixedWidthInteger>(_: T.Type = T.self) throws -> T {
        ws()
        var negative = false
        if i < b.count, b[i] == 0x2D {
            guard T.isSigned else { throw Unexpected() }
            negative = true
            i += 1
        }
        var n: T = 0
        let start = i
        while i < b.count, (0x30...0x39).contains(b[i]) {
            let digit = T(b[i] - 0x30)
            let (m, o1) = n.multipliedReportingOverflow(by: 10)
            let (s, o2) = negative ? m.subtractingReportingOverflow(digit) : m.addingReportingOverflow(digit)
            guard !o1, !o2 else { throw Unexpected() }
            n = s
            i += 1
        }
        guard i > start, i >= b.count || (b[i] != 0x2E && b[i] != 0x65 && b[i] != 0x45) else { throw Unexpected() }
        return n
    }

    /// `{ "key": value, ... }`, the body reading each value.
    mutating func object(_ body: (inout JSONReader, String) throws -> Void) throws {
        try object(key: { try $0.string() }, body)
    }

    /// The same, each key read by `key` (RequestJSON.swift takes only plain
    /// ones; the status reader, `Key`s).
    mutating func object<K>(
        key: (inout JSONReader) throws -> K, _ body: (inout JSONReader, K) throws -> Void
    ) throws {
        try expect(0x7B)
        if take(0x7D) { return }
        repeat {
            let name = try key(&self)
            try expect(0x3A)
            try body(&self, name)
        } while take(0x2C)
        try expect(0x7D)
    }

    mutating func array(_ body: (inout JSONReader) throws -> Void) throws {
        try expect(0x5B)
        if take(0x5D) { return }
        repeat { try body(&self) } while take(0x2C)
        try expect(0x5D)
    }

    /// Any value, skipped; its bytes.
    mutating func skip() throws -> Range<Int> {
        ws()
        let start = i
        guard i < b.count else { throw Unexpected() }
        switch b[i] {
        case 0x7B: try object { r, _ in _ = try r.skip() }
        case 0x5B: try array { r in _ = try r.skip() }
        case 0x22: _ = try string()
        case 0x74, 0x66: _ = try bool()
        case 0x6E: if !null() { throw Unexpected() }
        default: _ = try double()
        }
        return start..<i
    }
}

extension StatusReport {
    /// The status in a `status` answer, read by hand; nil when the answer
    /// is anything else (an error, a shape this reader does not know).
    public static func fromResponseLine(_ bytes: [UInt8]) -> StatusReport? {
        var r = JSONReader(bytes)
        var daemon: DaemonStatus?
        var apps: [AppStatus]?
        var ok = false
        do {
            try r.object { r, key in
                switch key {
                case "ok": ok = try r.bool()
                case "status":
                    try r.object { r, key in
                        switch key {
                        case "daemon":
                            let range = try r.skip()
                            daemon = try JSONDecoder().decode(DaemonStatus.self, from: Data(bytes[range]))
                        case "apps":
                            var list: [AppStatus] = []
                            try r.array { r in list.append(try AppStatus.readJSON(&r)) }
                            apps = list
                        default: throw JSONReader.Unexpected()
                        }
                    }
                default: throw JSONReader.Unexpected()
                }
            }
        } catch { return nil }
        guard ok, let daemon, let apps else { return nil }
        return StatusReport(daemon: daemon, apps: apps)
    }
}
