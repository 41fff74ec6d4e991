import Foundation
import LifecycleCore
import TOMLKit

/// A problem in a configuration file, naming the file, the line and the key.
public struct ConfigError: Error, CustomStringConvertible, Equatable, Sendable {
    public var file: String
    public var line: Int?
    public var key: String?
    public var message: String

    public var description: String {
        var where_ = file
        if let line { where_ += ":\(line)" }
        if let key { return "\(where_): \(key): \(message)" }
        return "\(where_): \(message)"
    }
}

/// The daemon's settings (lifecycled.toml).
public struct DaemonConfig: Sendable {
    public var file: String = ""
    /// Directory of app manifests, one NAME.toml per app.
    public var appsDirectory: String = "apps"
    public var controlSocket: String = "/run/lifecycled/control.sock"
    public var controlSocketMode: UInt32 = 0o666
    /// Members of this group (and root) may change things; others may read.
    public var controlGroup: String? = nil
    public var foregroundSlots: Int = 1
    /// "auto" or an absolute cgroup path for the daemon's subtree.
    public var cgroupRoot: String = "auto"
    /// Records kept for `supervisorctl events`.
    public var eventHistory: Int = 1000
    public var logLevel: String = "info"

    public init() {}
}

/// One app's manifest (apps/NAME.toml).
public struct AppManifest: Sendable {
    public var name: String
    public var file: String
    public var command: [String]
    public var environment: [String: String] = [:]
    public var workingDirectory: String?
    public var policy = AppPolicy()
    public var backgroundModes: [String] = []
    /// Signals for plain programs, by event; absent = none.
    public var signals: [LifecycleEvent: Int32] = [.willTerminate: SIGTERM]
    public var autostart: LaunchMode? = nil
}

public enum ConfigLoader {
    public static let continuousModes: Set<String> = ["audio", "location", "voip"]

    /// Loads the daemon file and every manifest of its apps directory. A bad
    /// manifest is reported in `problems` and skipped; a bad daemon file throws.
    public static func load(path: String) throws(ConfigError) -> (DaemonConfig, [AppManifest], problems: [ConfigError]) {
        let config = try loadDaemon(path: path)
        var apps: [AppManifest] = []
        var problems: [ConfigError] = []
        let dir = config.appsDirectory
        let names: [String]
        do { names = try FileManager.default.contentsOfDirectory(atPath: dir).sorted() } catch {
            throw ConfigError(file: path, line: nil, key: "apps_dir", message: "cannot read '\(dir)': \(error.localizedDescription)")
        }
        for name in names where name.hasSuffix(".toml") {
            do { apps.append(try loadApp(path: dir + "/" + name)) } catch { problems.append(error) }
        }
        return (config, apps, problems)
    }

    public static func loadDaemon(path: String) throws(ConfigError) -> DaemonConfig {
        let doc = try Document(path: path)
        var c = DaemonConfig()
        c.file = path
        let base = (path as NSString).deletingLastPathComponent
        try doc.each(doc.root, table: "") { (key: String, value: any TOMLValueConvertible) throws(ConfigError) in
            switch key {
            case "apps_dir": c.appsDirectory = resolve(try doc.string(value, key), base: base)
            case "control_socket": c.controlSocket = try doc.string(value, key)
            case "control_socket_mode":
                let s = try doc.string(value, key)
                guard let m = UInt32(s, radix: 8), m <= 0o777 else { throw doc.error(key, "expected an octal mode like \"0660\", got \"\(s)\"") }
                c.controlSocketMode = m
            case "control_group":
                let g = try doc.string(value, key)
                c.controlGroup = g.isEmpty ? nil : g
            case "foreground_slots": c.foregroundSlots = try doc.int(value, key, 1...64)
            case "cgroup_root":
                let r = try doc.string(value, key)
                guard r == "auto" || r.hasPrefix("/") else { throw doc.error(key, "expected \"auto\" or an absolute cgroup path, got \"\(r)\"") }
                c.cgroupRoot = r
            case "event_history": c.eventHistory = try doc.int(value, key, 0...1_000_000)
            case "log_level":
                let l = try doc.string(value, key)
                guard ["trace", "debug", "info", "notice", "warning", "error", "critical"].contains(l) else {
                    throw doc.error(key, "unknown log level \"\(l)\"")
                }
                c.logLevel = l
            default: throw doc.error(key, "unknown key")
            }
        }
        return c
    }

    public static func loadApp(path: String) throws(ConfigError) -> AppManifest {
        let fileName = (path as NSString).lastPathComponent
        let name = String(fileName.dropLast(".toml".count))
        guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_".contains($0)) }) else {
            throw ConfigError(file: path, line: nil, key: nil,
                              message: "app name '\(name)' (from the file name) may only use letters, digits, '-' and '_'")
        }
        let doc = try Document(path: path)
        var m = AppManifest(name: name, file: path, command: [])
        let base = (path as NSString).deletingLastPathComponent
        var sawCommand = false
        try doc.each(doc.root, table: "") { (key: String, value: any TOMLValueConvertible) throws(ConfigError) in
            switch key {
            case "command":
                m.command = try doc.strings(value, key)
                guard !m.command.isEmpty, !m.command[0].isEmpty else { throw doc.error(key, "must name a program") }
                sawCommand = true
            case "environment":
                guard let t = value.table else { throw doc.error(key, "expected a table of strings") }
                try doc.each(t, table: "environment") { (k: String, v: any TOMLValueConvertible) throws(ConfigError) in
                    m.environment[k] = try doc.string(v, k, table: "environment")
                }
            case "working_directory": m.workingDirectory = resolve(try doc.string(value, key), base: base)
            case "delivery":
                let d = try doc.string(value, key)
                guard let delivery = Delivery(rawValue: d) else { throw doc.error(key, "expected \"library\" or \"signals\", got \"\(d)\"") }
                m.policy.delivery = delivery
            case "background_modes":
                m.backgroundModes = try doc.strings(value, key)
                for mode in m.backgroundModes where !continuousModes.contains(mode) {
                    throw doc.error(key, "unknown background mode \"\(mode)\" (known: \(continuousModes.sorted().joined(separator: ", ")))")
                }
                m.policy.continuousBackground = !m.backgroundModes.isEmpty
            case "exits_on_suspend": m.policy.exitsOnSuspend = try doc.bool(value, key)
            case "autostart":
                let a = try doc.string(value, key)
                switch a {
                case "no": m.autostart = nil
                case "foreground": m.autostart = .foreground
                case "background": m.autostart = .background
                default: throw doc.error(key, "expected \"no\", \"foreground\" or \"background\", got \"\(a)\"")
                }
            case "timeouts":
                guard let t = value.table else { throw doc.error(key, "expected a table") }
                try doc.each(t, table: "timeouts") { (k: String, v: any TOMLValueConvertible) throws(ConfigError) in
                    let d = try doc.seconds(v, k, table: "timeouts")
                    switch k {
                    case "launch": m.policy.launchTimeout = d
                    case "event": m.policy.eventTimeout = d
                    case "background": m.policy.backgroundTimeout = d
                    case "terminate": m.policy.terminateTimeout = d
                    case "background_task_budget": m.policy.backgroundTaskBudget = d
                    case "expiration_warning": m.policy.expirationWarning = d
                    case "background_grace": m.policy.backgroundGrace = d
                    default: throw doc.error(k, "unknown key", table: "timeouts")
                    }
                }
                if m.policy.expirationWarning > m.policy.backgroundTaskBudget {
                    throw doc.error("expiration_warning", "must not exceed background_task_budget", table: "timeouts")
                }
            case "signals":
                guard let t = value.table else { throw doc.error(key, "expected a table") }
                try doc.each(t, table: "signals") { (k: String, v: any TOMLValueConvertible) throws(ConfigError) in
                    guard let event = LifecycleEvent(rawValue: k), event != .willFinishLaunching, event != .didFinishLaunching else {
                        throw doc.error(k, "not an event that maps to a signal (willResignActive, didEnterBackground, willEnterForeground, didBecomeActive, willTerminate)", table: "signals")
                    }
                    let s = try doc.string(v, k, table: "signals")
                    if s == "none" { m.signals[event] = nil; return }
                    guard let number = signalNumber(s) else { throw doc.error(k, "unknown signal \"\(s)\"", table: "signals") }
                    m.signals[event] = number
                }
            default: throw doc.error(key, "unknown key")
            }
        }
        guard sawCommand else { throw ConfigError(file: path, line: nil, key: "command", message: "missing: every app needs a command") }
        return m
    }

    static func resolve(_ path: String, base: String) -> String {
        path.hasPrefix("/") ? path : (base.isEmpty ? path : base + "/" + path)
    }

    static let signalNames: [String: Int32] = [
        "SIGHUP": SIGHUP, "SIGINT": SIGINT, "SIGQUIT": SIGQUIT, "SIGUSR1": SIGUSR1, "SIGUSR2": SIGUSR2,
        "SIGTERM": SIGTERM, "SIGCONT": SIGCONT, "SIGWINCH": SIGWINCH, "SIGPWR": SIGPWR, "SIGALRM": SIGALRM,
    ]

    static func signalNumber(_ s: String) -> Int32? {
        let name = s.hasPrefix("SIG") ? s : "SIG" + s
        if let n = signalNames[name.uppercased()] { return n }
        if s.hasPrefix("SIGRTMIN+"), let k = Int32(s.dropFirst("SIGRTMIN+".count)) {
            let min = __libc_current_sigrtmin(), max = __libc_current_sigrtmax()
            if k >= 0, min + k <= max { return min + k }
        }
        return nil
    }
}

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
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw ConfigError(file: path, line: nil, key: nil, message: "cannot read: \(error.localizedDescription)")
        }
        do { root = try TOMLTable(string: text) } catch let e as TOMLParseError {
            throw ConfigError(file: path, line: Int(e.source.begin.line), key: nil, message: "TOML syntax: \(e.description)")
        } catch {
            throw ConfigError(file: path, line: nil, key: nil, message: "TOML syntax: \(error)")
        }
        var table = ""
        for (i, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("[") {
                table = line.trimmingCharacters(in: CharacterSet(charactersIn: "[] ")).components(separatedBy: "#")[0]
                    .trimmingCharacters(in: CharacterSet(charactersIn: "[] "))
                lines[table + "."] = i + 1
                continue
            }
            guard let eq = line.firstIndex(of: "="), !line.hasPrefix("#") else { continue }
            let key = line[..<eq].trimmingCharacters(in: CharacterSet(charactersIn: " \"'"))
            lines[table + "." + key] = lines[table + "." + key] ?? i + 1
            // Inline tables: `environment = { A = "1", B = "2" }`.
            if let open = line.firstIndex(of: "{") {
                for part in line[line.index(after: open)...].split(separator: ",") {
                    if let e = part.firstIndex(of: "=") {
                        let k = part[..<e].trimmingCharacters(in: CharacterSet(charactersIn: " \"'{"))
                        lines[key + "." + k] = lines[key + "." + k] ?? i + 1
                    }
                }
            }
        }
    }

    func line(_ key: String, table: String) -> Int? { lines[table + "." + key] ?? lines[table + "."] }

    func error(_ key: String, _ message: String, table: String = "") -> ConfigError {
        ConfigError(file: path, line: line(key, table: table), key: table.isEmpty ? key : "\(table).\(key)", message: message)
    }

    func each(_ t: TOMLTable, table: String,
              _ body: (String, any TOMLValueConvertible) throws(ConfigError) -> Void) throws(ConfigError) {
        for key in t.keys.sorted(by: { (line($0, table: table) ?? 0) < (line($1, table: table) ?? 0) }) {
            try body(key, t[key]!)
        }
    }

    func string(_ v: any TOMLValueConvertible, _ key: String, table: String = "") throws(ConfigError) -> String {
        guard let s = v.string else { throw error(key, "expected a string, got \(v.type)", table: table) }
        return s
    }

    func bool(_ v: any TOMLValueConvertible, _ key: String) throws(ConfigError) -> Bool {
        guard let b = v.bool else { throw error(key, "expected true or false, got \(v.type)") }
        return b
    }

    func int(_ v: any TOMLValueConvertible, _ key: String, _ range: ClosedRange<Int>) throws(ConfigError) -> Int {
        guard let i = v.int else { throw error(key, "expected an integer, got \(v.type)") }
        guard range.contains(i) else { throw error(key, "\(i) is out of range \(range.lowerBound)...\(range.upperBound)") }
        return i
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
    func seconds(_ v: any TOMLValueConvertible, _ key: String, table: String) throws(ConfigError) -> Duration {
        let s: Double
        if let i = v.int { s = Double(i) } else if let d = v.double { s = d } else {
            throw error(key, "expected seconds as a number, got \(v.type)", table: table)
        }
        guard s > 0, s <= 86_400 else { throw error(key, "\(s) s is out of range (0, 86400]", table: table) }
        return .nanoseconds(Int64(s * 1e9))
    }
}
