#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleCore
import LifecycleOS
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

/// The displays' outputs and focus policies, for a compositor's follower.
public struct FollowConfig: Sendable, Equatable {
    /// Output (connector name) to display. An output no display lists
    /// belongs to the first display.
    public var outputs: [String: DisplayID] = [:]
    /// Per display; a display not named (or none declared) follows the seat.
    public var policies: [DisplayID: FocusPolicy] = [:]
    /// Per display: the compositor command its follower runs on `home`
    /// (sway: "workspace number 10").
    public var homeCommands: [DisplayID: String] = [:]
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
    /// `[[display]]` tables, in order (the first is the default); none
    /// declared: one display, `main`, with `foreground_slots` slots.
    public var declaredDisplays: [DisplaySpec] = []
    public var displays: [DisplaySpec] {
        declaredDisplays.isEmpty ? DisplaySpec.single(slots: foregroundSlots) : declaredDisplays
    }
    /// Which outputs each display follows, and its focus policy (docs/focus.md).
    public var follow = FollowConfig()
    /// "auto", an absolute cgroup path for the daemon's subtree, or "none"
    /// for the process-group fallback.
    public var cgroupRoot: String = "auto"
    /// Records kept for `supervisorctl events`.
    public var eventHistory: Int = 1000
    public var logLevel: String = "info"
    /// Persistent state: the kill log. systemd's StateDirectory= sets it.
    public var stateDirectory: String =
        ProcessInfo.processInfo.environment["STATE_DIRECTORY"]
        .flatMap { $0.split(separator: ":").first.map(String.init) } ?? "/var/lib/lifecycled"
    /// Runtime state, meaningful until reboot: the saved state of every app
    /// (re-adopted by the next daemon) and the resume socket of library
    /// apps. systemd's RuntimeDirectory= sets it.
    public var runtimeDirectory: String =
        ProcessInfo.processInfo.environment["RUNTIME_DIRECTORY"]
        .flatMap { $0.split(separator: ":").first.map(String.init) } ?? "/run/lifecycled"
    public var memory = MemoryConfig()
    public var cpu = CPUConfig()
    /// Where apps' stdout and stderr go (Apps/Output.swift).
    var output: OutputMode = .auto
    /// The per-app log files (when output goes to files). systemd's LogsDirectory= sets it.
    public var logDirectory: String =
        ProcessInfo.processInfo.environment["LOGS_DIRECTORY"]
        .flatMap { $0.split(separator: ":").first.map(String.init) } ?? "/var/log/lifecycled"
    /// A log file is rotated past this size, and this many old ones are kept (supervisord's 50 MB x 10).
    public var logMaxSize: UInt64 = 50 << 20
    public var logBackups = 10
    /// Bytes a second of one app's output written to its file, after a
    /// burst four times as large; beyond it the app waits in its writes
    /// (0: no limit). Under journald, journald's own rate limit applies.
    public var logRate: UInt64 = 1 << 20
    /// Background fetches that fall due within this window of each other
    /// wake the machine once (0: each on its own timer).
    public var fetchWindow: Duration = .seconds(300)
    /// Memory the prewarmed processes may hold (docs/lifecycle.md, "Prewarming").
    public var prewarmBudget: PrewarmBudget = .auto
    /// Serve io.lifecycled.Lifecycle1 on the system bus (docs/dbus.md).
    public var dbus = true
    /// Who decides the D-Bus calls of callers that are neither root nor in
    /// the control group: polkit, or nobody (they are refused).
    public var dbusAuthorization: BusAuthorization = .auto

    public init() {}
}

/// The daemon's `prewarm_budget`: `auto` (5 % of the machine's memory, at
/// most 512 MiB), `off`, or a size.
public enum PrewarmBudget: Sendable, Equatable {
    case auto
    case bytes(UInt64)

    /// In bytes, on a machine with `memTotal` bytes of memory (not known:
    /// `auto` prewarms nothing).
    public func bytes(memTotal: UInt64?) -> UInt64 {
        switch self {
        case .auto: memTotal.map { min($0 / 20, 512 << 20) } ?? 0
        case .bytes(let b): b
        }
    }
}

/// Who decides a D-Bus call of a caller that is neither root nor in the
/// control group (docs/dbus.md, "Who may do what").
public enum BusAuthorization: String, Sendable, Equatable {
    /// polkit when polkitd answers; without it, the group rule (refused).
    case auto
    /// polkit; without polkitd, refused with a message that says so.
    case polkit
    /// Only root and the control group, as on the JSON socket.
    case group
}

/// The [cpu] table of the daemon file: cpu.weight by state (with the cgroup
/// v2 cpu controller), so that what the user sees comes first.
public struct CPUConfig: Sendable, Equatable {
    /// Write weights at all.
    public var weights = true
    /// Active and inactive apps (in front), and apps in the background;
    /// the kernel's default is 100 (1 to 10000).
    public var foregroundWeight = 1000
    public var backgroundWeight = 50

    public init() {}
}

/// The [memory] table of the daemon file: how memory is watched and when
/// it is short.
public struct MemoryConfig: Sendable, Equatable {
    /// An available-memory threshold: a share of MemTotal, or an amount.
    public enum Available: Sendable, Equatable {
        case percent(Double)
        case bytes(UInt64)
    }

    /// Sample memory at all (false: levels only from `supervisorctl pressure`).
    public var monitor = true
    /// Longest and shortest time between samples; in between, the time it
    /// would take to fill the headroom left at `fillRate`.
    public var interval: Duration = .seconds(2)
    public var minInterval: Duration = .milliseconds(5)
    /// The fastest memory is assumed to fill, bytes per second (earlyoom
    /// assumes 6000 KiB/ms, about the same).
    public var fillRate: UInt64 = 6 << 30
    public var availableWarning: Available? = .percent(20)
    public var availableCritical: Available? = .percent(10)
    /// Percent of time some task stalled on memory (PSI).
    public var stallWarning: Double? = 10
    public var stallCritical: Double? = 40
    /// Be woken by a PSI trigger at the warning stall, not only by samples.
    public var psiTrigger = true
    /// The managed apps' footprint together may use this much (bytes).
    public var budget: UInt64?
    public var budgetWarning: Double = 90
    public var budgetCritical: Double = 100
    /// Percentage points a signal must recover past its threshold before the level drops.
    public var hysteresis: Double = 2
    /// Kill records kept in memory for `supervisorctl jetsam` (the log file keeps more).
    public var killHistory = 200
    /// Push suspended apps' memory to swap before killing any (where swap
    /// has room; cgroup v2 memory controller).
    public var reclaim = true
    /// memory.low of a foreground app's group: UInt64.max ("max"), an
    /// amount, or nil ("off": no protection written).
    public var foregroundLow: UInt64? = .max

    public init() {}

    /// The gauge's thresholds, with amounts turned into shares of `total`.
    public func thresholds(total: UInt64?) -> MemoryThresholds {
        func percent(_ a: Available?) -> Double? {
            switch a {
            case .percent(let p)?: return p
            case .bytes(let b)?: return total.map { Double(b) * 100 / Double(max($0, 1)) }
            case nil: return nil
            }
        }
        var t = MemoryThresholds()
        t.availableWarning = percent(availableWarning)
        t.availableCritical = percent(availableCritical)
        t.stallWarning = stallWarning
        t.stallCritical = stallCritical
        t.budgetWarning = budget == nil ? nil : budgetWarning
        t.budgetCritical = budget == nil ? nil : budgetCritical
        t.hysteresis = hysteresis
        return t
    }
}

public enum ConfigLoader {
    /// Loads the daemon file and every manifest of its apps directory. A bad
    /// manifest is reported in `problems` and skipped; a bad daemon file throws.
    public static func load(path: String) throws(ConfigError) -> (DaemonConfig, [AppManifest], problems: [ConfigError])
    {
        let config = try loadDaemon(path: path)
        var apps: [AppManifest] = []
        var problems: [ConfigError] = []
        let dir = config.appsDirectory
        let names: [String]
        do { names = try FileManagerLite.list(dir) } catch {
            throw ConfigError(file: path, line: nil, key: "apps_dir", message: "cannot read '\(dir)': \(error.errno)")
        }
        let paths = names.filter { $0.hasSuffix(".toml") }.map { dir + "/" + $0 }
        for result in loadApps(paths) {
            switch result {
            case .success(let m): apps.append(m)
            case .failure(let e): problems.append(e)
            }
        }
        return (config, apps, problems)
    }

    public static func loadDaemon(path: String) throws(ConfigError) -> DaemonConfig {
        let doc = try Document(path: path)
        var c = DaemonConfig()
        c.file = path
        var sawSlots = false
        let base = directory(of: path)
        try doc.each(doc.root, table: "") { (key: String, value: any TOMLValueConvertible) throws(ConfigError) in
            switch key {
            case "apps_dir": c.appsDirectory = try doc.string(value, key)
            case "control_socket": c.controlSocket = try doc.string(value, key)
            case "control_socket_mode":
                let s = try doc.string(value, key)
                guard let m = UInt32(s, radix: 8), m <= 0o777 else {
                    throw doc.error(key, "expected an octal mode like \"0660\", got \"\(s)\"")
                }
                c.controlSocketMode = m
            case "control_group":
                let g = try doc.string(value, key)
                c.controlGroup = g.isEmpty ? nil : g
            case "foreground_slots":
                c.foregroundSlots = try doc.int(value, key, 1...64)
                sawSlots = true
            case "display": c.declaredDisplays = try loadDisplays(doc, value, follow: &c.follow)
            case "cgroup_root":
                let r = try doc.string(value, key)
                guard r == "auto" || r == "none" || r.hasPrefix("/") else {
                    throw doc.error(key, "expected \"auto\", \"none\" or an absolute cgroup path, got \"\(r)\"")
                }
                c.cgroupRoot = r
            case "event_history": c.eventHistory = try doc.int(value, key, 0...1_000_000)
            case "state_directory": c.stateDirectory = resolve(try doc.string(value, key), base: base)
            case "runtime_directory": c.runtimeDirectory = resolve(try doc.string(value, key), base: base)
            case "memory": c.memory = try loadMemory(doc, value)
            case "cpu": c.cpu = try loadCPU(doc, value)
            case "output":
                let o = try doc.string(value, key)
                guard let mode = OutputMode(rawValue: o) else {
                    throw doc.error(key, "expected \"auto\", \"journal\", \"files\" or \"inherit\", got \"\(o)\"")
                }
                c.output = mode
            case "log_directory": c.logDirectory = resolve(try doc.string(value, key), base: base)
            case "log_max_size":
                c.logMaxSize = try doc.size(value, key, table: "")
                if c.logMaxSize < 4096 { throw doc.error(key, "at least 4K: every line must fit") }
            case "log_backups": c.logBackups = try doc.int(value, key, 0...1000)
            case "log_rate": c.logRate = value.string == "off" ? 0 : try doc.size(value, key, table: "")
            case "fetch_window":
                c.fetchWindow = Document.number(value) == 0 ? .zero : try doc.seconds(value, key, table: "")
                if c.fetchWindow > .seconds(3600) {
                    throw doc.error(key, "at most 1 h: a fetch waits at most this long")
                }
            case "prewarm_budget":
                switch value.string {
                case "auto": c.prewarmBudget = .auto
                case "off": c.prewarmBudget = .bytes(0)
                default: c.prewarmBudget = .bytes(try doc.size(value, key, table: ""))
                }
            case "dbus": c.dbus = try doc.bool(value, key)
            case "dbus_authorization":
                let a = try doc.string(value, key)
                guard let mode = BusAuthorization(rawValue: a) else {
                    throw doc.error(key, "expected \"auto\", \"polkit\" or \"group\", got \"\(a)\"")
                }
                c.dbusAuthorization = mode
            case "log_level":
                let l = try doc.string(value, key)
                guard ["trace", "debug", "info", "notice", "warning", "error", "critical"].contains(l) else {
                    throw doc.error(key, "unknown log level \"\(l)\"")
                }
                c.logLevel = l
            default: throw doc.error(key, "unknown key")
            }
        }
        c.appsDirectory = resolve(c.appsDirectory, base: base)  // also the default
        if sawSlots && !c.declaredDisplays.isEmpty {
            throw doc.error("foreground_slots", "not with [[display]]: each display has its own slots")
        }
        return c
    }

    /// `[[display]]`: name (unique) and slots (default 1), in order.
    static func loadDisplays(_ doc: Document, _ value: any TOMLValueConvertible, follow: inout FollowConfig)
        throws(ConfigError) -> [DisplaySpec]
    {
        guard let list = value.array else {
            throw doc.error("display", "expected [[display]] tables (name, slots), got \(value.type)")
        }
        var specs: [DisplaySpec] = []
        for item in list {
            guard let t = item.table else {
                throw doc.error("display", "expected [[display]] tables, found \(item.type)")
            }
            var name: String?
            var slots = 1
            var outputs: [String] = []
            var policy = FocusPolicy.seat
            var home: String?
            try doc.each(t, table: "display") { (k: String, v: any TOMLValueConvertible) throws(ConfigError) in
                switch k {
                case "name": name = try doc.string(v, k, table: "display")
                case "slots": slots = try doc.int(v, k, 1...64, table: "display")
                case "outputs":
                    guard let list = v.array else {
                        throw doc.error(k, "expected a list of output names, got \(v.type)", table: "display")
                    }
                    for item in list {
                        guard let o = item.string, !o.isEmpty else {
                            throw doc.error(k, "expected output names (strings), found \(item.type)", table: "display")
                        }
                        outputs.append(o)
                    }
                case "focus_policy":
                    let p = try doc.string(v, k, table: "display")
                    guard let parsed = FocusPolicy(rawValue: p) else {
                        throw doc.error(k, "expected \"seat\" or \"display\", got \"\(p)\"", table: "display")
                    }
                    policy = parsed
                case "home_command":
                    let c = try doc.string(v, k, table: "display")
                    guard !c.isEmpty, c.utf8.count <= 1024, !c.contains("\n") else {
                        throw doc.error(k, "expected one compositor command line (1 to 1024 bytes)", table: "display")
                    }
                    home = c
                default:
                    throw doc.error(
                        k, "unknown key (a display has name, slots, outputs, focus_policy and home_command)",
                        table: "display")
                }
            }
            guard let name else { throw doc.error("display", "a [[display]] needs a name") }
            guard SceneNames.valid(name) else {
                throw doc.error(
                    "name", "\"\(name)\" is not a display name (\(SceneNames.rule))", table: "display")
            }
            guard !specs.contains(where: { $0.name == name }) else {
                throw doc.error("name", "display \"\(name)\" is declared twice", table: "display")
            }
            for o in outputs where follow.outputs[o] != nil {
                throw doc.error("outputs", "output \"\(o)\" is in two displays", table: "display")
            }
            for o in outputs { follow.outputs[o] = name }
            follow.policies[name] = policy
            follow.homeCommands[name] = home
            specs.append(DisplaySpec(name: name, slots: slots))
        }
        guard specs.count <= 16 else { throw doc.error("display", "at most 16 displays") }
        return specs
    }

    static func loadMemory(_ doc: Document, _ value: any TOMLValueConvertible) throws(ConfigError) -> MemoryConfig {
        guard let t = value.table else { throw doc.error("memory", "expected a table") }
        var m = MemoryConfig()
        let table = "memory"
        func percentOrOff(_ v: any TOMLValueConvertible, _ k: String) throws(ConfigError) -> Double? {
            if v.string == "off" { return nil }
            return try doc.percent(v, k, table: table)
        }
        func available(_ v: any TOMLValueConvertible, _ k: String) throws(ConfigError) -> MemoryConfig.Available? {
            if let s = v.string {
                if s == "off" { return nil }
                return .bytes(try doc.size(v, k, table: table))
            }
            return .percent(try doc.percent(v, k, table: table))
        }
        try doc.each(t, table: table) { (k: String, v: any TOMLValueConvertible) throws(ConfigError) in
            switch k {
            case "monitor": m.monitor = try doc.bool(v, k, table: table)
            case "interval": m.interval = try doc.seconds(v, k, table: table)
            case "min_interval": m.minInterval = try doc.seconds(v, k, table: table)
            case "fill_rate": m.fillRate = try doc.size(v, k, table: table)
            case "available_warning": m.availableWarning = try available(v, k)
            case "available_critical": m.availableCritical = try available(v, k)
            case "stall_warning": m.stallWarning = try percentOrOff(v, k)
            case "stall_critical": m.stallCritical = try percentOrOff(v, k)
            case "psi_trigger": m.psiTrigger = try doc.bool(v, k, table: table)
            case "budget":
                m.budget = v.string == "off" ? nil : try doc.size(v, k, table: table)
            case "budget_warning": m.budgetWarning = try doc.percent(v, k, table: table, max: 1000)
            case "budget_critical": m.budgetCritical = try doc.percent(v, k, table: table, max: 1000)
            case "hysteresis": m.hysteresis = try doc.percent(v, k, table: table)
            case "kill_history": m.killHistory = try doc.int(v, k, 0...100_000, table: table)
            case "reclaim": m.reclaim = try doc.bool(v, k, table: table)
            case "foreground_low":
                switch v.string {
                case "off": m.foregroundLow = nil
                case "max": m.foregroundLow = .max
                default: m.foregroundLow = try doc.size(v, k, table: table)
                }
            default: throw doc.error(k, "unknown key", table: table)
            }
        }
        if m.minInterval > m.interval {
            throw doc.error("min_interval", "must not exceed interval", table: table)
        }
        if m.budgetWarning > m.budgetCritical {
            throw doc.error("budget_warning", "must not exceed budget_critical", table: table)
        }
        if let w = m.stallWarning, let c = m.stallCritical, w > c {
            throw doc.error("stall_warning", "must not exceed stall_critical", table: table)
        }
        let inverted: Bool
        switch (m.availableWarning, m.availableCritical) {
        case (.percent(let w)?, .percent(let c)?): inverted = w < c
        case (.bytes(let w)?, .bytes(let c)?): inverted = w < c
        default: inverted = false
        }
        if inverted {
            throw doc.error(
                "available_warning", "must not be below available_critical (warning comes first)", table: table)
        }
        return m
    }

    static func loadCPU(_ doc: Document, _ value: any TOMLValueConvertible) throws(ConfigError) -> CPUConfig {
        guard let t = value.table else { throw doc.error("cpu", "expected a table") }
        var c = CPUConfig()
        try doc.each(t, table: "cpu") { (k: String, v: any TOMLValueConvertible) throws(ConfigError) in
            switch k {
            case "weights": c.weights = try doc.bool(v, k, table: "cpu")
            case "foreground_weight": c.foregroundWeight = try doc.int(v, k, 1...10000, table: "cpu")
            case "background_weight": c.backgroundWeight = try doc.int(v, k, 1...10000, table: "cpu")
            default: throw doc.error(k, "unknown key (weights, foreground_weight, background_weight)", table: "cpu")
            }
        }
        return c
    }

    /// The directory part of a path ("" for a bare name, "/" for one at the root).
    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "" }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    static func resolve(_ path: String, base: String) -> String {
        path.hasPrefix("/") ? path : (base.isEmpty ? path : base + "/" + path)
    }
}
