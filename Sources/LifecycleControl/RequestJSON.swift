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

// A control request read by hand (issue 31): JSONDecoder cost the daemon
// about 33 k instructions a request line, 8 % of a counted event with its
// request (docs/performance.md). This reader takes only the plain shape
// that supervisorctl, the bench and the tour send: one object, each key
// once, a known key's value of its own type or null, strings of printable
// ASCII without escapes, whole numbers without leading zeros. Anything
// else (an escape, a non-ASCII byte, an unknown or repeated key, `shown`,
// a fraction) makes it give up, and JSONDecoder decides as before. So it
// never accepts a line JSONDecoder refuses, or reads one otherwise: the
// control-request fuzzer holds the two to that (scripts/fuzz.sh).

extension ControlRequest {
    /// The request on a line, when it has the plain shape; nil otherwise
    /// (the caller decodes with JSONDecoder).
    public static func readPlain(_ line: [UInt8]) -> ControlRequest? {
        var r = JSONReader(line)
        var request = ControlRequest(.status)
        var command: Command?
        var seen: Set<String> = []
        do {
            try r.object(key: { try $0.plainString() }) { r, key in
                guard seen.insert(key).inserted else { throw JSONReader.Unexpected() }
                if key == "command" {
                    guard let c = Command(rawValue: try r.plainString()) else { throw JSONReader.Unexpected() }
                    command = c
                    return
                }
                if r.null() { return }  // an optional's null: nil, as decodeIfPresent reads it
                switch key {
                case "app": request.app = try r.plainString()
                case "apps":
                    var apps: [String] = []
                    try r.array { apps.append(try $0.plainString()) }
                    request.apps = apps
                case "background": request.background = try r.bool()
                case "follow": request.follow = try r.bool()
                case "level": request.level = try r.plainString()
                case "limit": request.limit = try r.plainInteger(Int.self)
                case "dryRun": request.dryRun = try r.bool()
                case "restartChanged": request.restartChanged = try r.bool()
                case "signal": request.signal = try r.plainString()
                case "offset": request.offset = try r.plainInteger(UInt64.self)
                case "payload": request.payload = try r.plainString()
                case "url": request.url = try r.plainString()
                case "display": request.display = try r.plainString()
                case "scene": request.scene = try r.plainString()
                default: throw JSONReader.Unexpected()  // `shown`, or a key it does not know
                }
            }
            guard r.atEnd(), let command else { return nil }
            request.command = command
            return request
        } catch {
            return nil
        }
    }
}

extension JSONReader {
    /// A string of printable ASCII without escapes; anything else is left
    /// to JSONDecoder (which refuses what JSON does not allow).
    mutating func plainString() throws -> String {
        try expect(0x22)
        let start = i
        while i < b.count, b[i] != 0x22 {
            guard b[i] >= 0x20, b[i] < 0x7F, b[i] != 0x5C else { throw Unexpected() }
            i += 1
        }
        guard i < b.count else { throw Unexpected() }
        defer { i += 1 }
        return String(decoding: b[start..<i], as: UTF8.self)
    }

    /// A whole number as JSON writes it: no leading zero (but 0 itself).
    mutating func plainInteger<T: FixedWidthInteger>(_: T.Type) throws -> T {
        ws()
        let digits = i < b.count && b[i] == 0x2D ? i + 1 : i
        if digits + 1 < b.count, b[digits] == 0x30, (0x30...0x39).contains(b[digits + 1]) { throw Unexpected() }
        return try integer(T.self)
    }

    /// Nothing but white space is left.
    mutating func atEnd() -> Bool {
        ws()
        return i == b.count
    }
}
