#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleOS
import TOMLKit
import LifecycleModel

// How a configuration file is read, whatever it configures: safely (a file
// that is not what its name says is an error naming it, never quoting it,
// never hanging), parsed as TOML, with the line of every key for errors,
// and its values checked for type and range. What the keys mean is
// ConfigLoader's (Config.swift).

/// A parsed TOML file and where each key stands in it. TOMLKit (toml++)
/// parses and reports syntax errors with their position, but keeps no
/// position per key; the locator finds the line of `key =` under its
/// `[table]` header, which is how configuration files are written.
struct Document {
    let path: String
    let root: TOMLTable
    private var lines: [String: Int] = [:]

    init(path: String) throws(ConfigError) {
        self.path = path
        let text = try Self.read(path)
        do { root = try TOMLTable(string: text) } catch let e as TOMLParseError {
            throw ConfigError(
                file: path, line: Int(e.source.begin.line), key: nil, message: "TOML syntax: \(e.description)")
        } catch {
            throw ConfigError(file: path, line: nil, key: nil, message: "TOML syntax: \(error)")
        }
        var table = ""
        for (i, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = Self.trimmed(raw, " \t\r")
            if line.hasPrefix("[") {
                let header = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]
                table = String(Self.trimmed(header, "[] \t"))
                lines[table + "."] = i + 1
                continue
            }
            guard let eq = line.firstIndex(of: "="), !line.hasPrefix("#") else { continue }
            let key = Self.trimmed(line[..<eq], " \t\"'")
            lines[table + "." + key] = lines[table + "." + key] ?? i + 1
            // Inline tables: `environment = { A = "1", B = "2" }`.
            if let open = line.firstIndex(of: "{") {
                for part in line[line.index(after: open)...].split(separator: ",") {
                    if let e = part.firstIndex(of: "=") {
                        let k = Self.trimmed(part[..<e], " \t\"'{")
                        lines[key + "." + k] = lines[key + "." + k] ?? i + 1
                    }
                }
            }
        }
    }

    /// `text` without the given ASCII characters at either end (Foundation's
    /// trimming with a CharacterSet cost more than the TOML parse).
    static func trimmed(_ text: Substring, _ characters: StaticString) -> Substring {
        characters.withUTF8Buffer { set in
            let utf8 = text.utf8
            guard let first = utf8.firstIndex(where: { !set.contains($0) }),
                let last = utf8.lastIndex(where: { !set.contains($0) })
            else { return text[text.endIndex...] }
            return text[first..<utf8.index(after: last)]
        }
    }

    /// The largest file read as a configuration file.
    static let maxSize = 1 << 20

    /// A configuration file's text, or an error that says what is wrong
    /// with the file itself (never quoting its content): missing, not a
    /// regular file, unreadable, a symlink loop, too large, not UTF-8 text,
    /// a NUL byte (TOML forbids control characters; the text after one
    /// would otherwise be silently ignored).
    static func read(_ path: String) throws(ConfigError) -> String {
        do { return try TextFile.read(path, maxSize: maxSize) } catch {
            throw ConfigError(file: path, line: error.line, key: nil, message: error.message)
        }
    }

    func line(_ key: String, table: String) -> Int? { lines[table + "." + key] ?? lines[table + "."] }

    func error(_ key: String, _ message: String, table: String = "") -> ConfigError {
        ConfigError(
            file: path, line: line(key, table: table), key: table.isEmpty ? key : "\(table).\(key)", message: message)
    }

    func each(
        _ t: TOMLTable, table: String,
        _ body: (String, any TOMLValueConvertible) throws(ConfigError) -> Void
    ) throws(ConfigError) {
        for key in t.keys.sorted(by: { (line($0, table: table) ?? 0) < (line($1, table: table) ?? 0) }) {
            try body(key, t[key]!)
        }
    }

    func string(_ v: any TOMLValueConvertible, _ key: String, table: String = "") throws(ConfigError) -> String {
        guard let s = v.string else { throw error(key, "expected a string, got \(v.type)", table: table) }
        return s
    }

    func bool(_ v: any TOMLValueConvertible, _ key: String, table: String = "") throws(ConfigError) -> Bool {
        guard let b = v.bool else { throw error(key, "expected true or false, got \(v.type)", table: table) }
        return b
    }

    func int(_ v: any TOMLValueConvertible, _ key: String, _ range: ClosedRange<Int>, table: String = "")
        throws(ConfigError) -> Int
    {
        guard let i = v.int else { throw error(key, "expected an integer, got \(v.type)", table: table) }
        guard range.contains(i) else {
            throw error(key, "\(i) is out of range \(range.lowerBound)...\(range.upperBound)", table: table)
        }
        return i
    }

    /// An integer or a float, as a Double.
    static func number(_ v: any TOMLValueConvertible) -> Double? { v.int.map(Double.init) ?? v.double }

    /// A percentage: a number from 0 to `max`.
    func percent(_ v: any TOMLValueConvertible, _ key: String, table: String, max: Double = 100) throws(ConfigError)
        -> Double
    {
        guard let p = Self.number(v) else {
            throw error(key, "expected a percentage (a number), got \(v.type)", table: table)
        }
        guard p >= 0, p <= max else { throw error(key, "\(p) % is out of range 0...\(Int(max))", table: table) }
        return p
    }

    /// An amount of memory: "512M", "1.5G", "64KiB", "1048576" (bytes), or an integer of bytes.
    func size(_ v: any TOMLValueConvertible, _ key: String, table: String) throws(ConfigError) -> UInt64 {
        if let i = v.int {
            guard i > 0 else { throw error(key, "must be more than 0 bytes", table: table) }
            return UInt64(i)
        }
        guard let s = v.string else { throw error(key, "expected a size like \"512M\", got \(v.type)", table: table) }
        guard let bytes = parseSize(s), bytes > 0 else {
            throw error(
                key, "expected a size like \"512M\", \"1.5G\" or \"65536K\" (powers of 1024), got \"\(s)\"",
                table: table)
        }
        return bytes
    }

    func strings(_ v: any TOMLValueConvertible, _ key: String) throws(ConfigError) -> [String] {
        guard let a = v.array else { throw error(key, "expected an array of strings, got \(v.type)") }
        var out: [String] = []
        for item in a {
            guard let s = item.string else { throw error(key, "expected an array of strings, found \(item.type)") }
            out.append(s)
        }
        return out
    }

    /// Seconds, integer or float, positive and at most a day.
    /// (`table` names the table for error messages.)
    func seconds(_ v: any TOMLValueConvertible, _ key: String, table: String) throws(ConfigError) -> Duration {
        guard let s = Self.number(v) else {
            throw error(key, "expected seconds as a number, got \(v.type)", table: table)
        }
        guard s > 0, s <= 86_400 else { throw error(key, "\(s) s is out of range (0, 86400]", table: table) }
        return .nanoseconds(Int64(s * 1e9))
    }
}

/// "512M", "1.5G", "64KiB", "100" (bytes): powers of 1024. Nil when malformed.
public func parseSize(_ text: String) -> UInt64? {
    var s = text.trimmed
    for suffix in ["ib", "b"] where s.lowercased().hasSuffix(suffix) && s.count > suffix.count {
        s.removeLast(suffix.count)
        break
    }
    let units: [Character: Double] = [
        "K": 1024, "M": 1024 * 1024, "G": 1024 * 1024 * 1024, "T": 1024 * 1024 * 1024 * 1024,
    ]
    var factor: Double = 1
    if let last = s.last, let f = units[Character(last.uppercased())] {
        factor = f
        s.removeLast()
    }
    guard !s.isEmpty, s.allSatisfy({ $0.isNumber || $0 == "." }), let value = Double(s), value.isFinite else {
        return nil
    }
    let bytes = value * factor
    guard bytes >= 0, bytes < 1.8e19 else { return nil }
    return UInt64(bytes)
}
