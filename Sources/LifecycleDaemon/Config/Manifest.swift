import Foundation
import LifecycleCore
import LifecycleOS
import TOMLKit

// An app's manifest (apps/NAME.toml): what it is and how it is read. The
// daemon file, and what both share (errors, paths), are in Config.swift.

/// One app's manifest (apps/NAME.toml).
public struct AppManifest: Sendable {
    public var name: String
    public var file: String
    public var command: [String]
    public var environment: [String: String] = [:]
    public var workingDirectory: String?
    public var policy = AppPolicy()
    /// Signals for plain programs, by event; absent = none.
    public var signals: [LifecycleEvent: Int32] = [.willTerminate: SIGTERM]
    public var autostart: LaunchMode? = nil
    /// Who it runs as, and with what power (`user`, `group`, ...).
    public var credentials = SpawnCredentials()
    /// With `user`: its name and home, for USER, LOGNAME and HOME.
    public var account: (name: String, home: String)? = nil
    /// What the file says, whatever its layout: a hash of its parsed
    /// content in a canonical form (keys sorted, comments and spacing
    /// gone). A reload compares it to tell a changed manifest.
    public var fingerprint: UInt64 = 0
}

extension ConfigLoader {
    /// Many manifests at once, in the order given: a restarting daemon with
    /// 1,000 apps reads them while no app is supervised. The files' reads are
    /// started together (the page cache may have dropped them since the
    /// last start), then parsed on every core.
    static func loadApps(_ paths: [String]) -> [Result<AppManifest, ConfigError>] {
        for path in paths { Posix.prefetch(path) }
        return Parallel.map(paths.count) { i in Result { () throws(ConfigError) in try loadApp(path: paths[i]) } }
    }

    /// FNV-1a, 64 bits: stable across processes (Swift's Hasher is seeded
    /// per process), so a fingerprint can be saved for the next daemon.
    static func fingerprint(_ text: String) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in text.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        return h
    }

    /// A user by name or id (an id without an entry in the user database
    /// is taken as is, with the group of the same number, as systemd does).
    static func account(_ v: any TOMLValueConvertible, _ key: String, _ doc: Document) throws(ConfigError)
        -> (uid: UInt32, gid: UInt32, name: String, home: String)
    {
        if let name = v.string {
            guard let pw = getpwnam(name) else { throw doc.error(key, "no such user \"\(name)\"") }
            return (pw.pointee.pw_uid, pw.pointee.pw_gid, name, String(cString: pw.pointee.pw_dir))
        }
        let id = UInt32(try doc.int(v, key, 0...Int(UInt32.max - 1)))
        guard let pw = getpwuid(id) else { return (id, id, String(id), "/") }
        return (id, pw.pointee.pw_gid, String(cString: pw.pointee.pw_name), String(cString: pw.pointee.pw_dir))
    }

    /// A user's groups, its primary one among them (getgrouplist).
    static func groups(of user: String, primary: UInt32) -> [UInt32] {
        var count: Int32 = 64
        var list = [gid_t](repeating: 0, count: 64)
        if getgrouplist(user, primary, &list, &count) < 0, count > 64 {
            list = [gid_t](repeating: 0, count: Int(count))
            _ = getgrouplist(user, primary, &list, &count)
        }
        return Array(list.prefix(Int(max(0, count))))
    }

    /// A group by name or id.
    static func groupID(_ v: any TOMLValueConvertible, _ key: String, _ doc: Document) throws(ConfigError) -> UInt32 {
        if let name = v.string {
            guard let gr = getgrnam(name) else { throw doc.error(key, "no such group \"\(name)\"") }
            return gr.pointee.gr_gid
        }
        return UInt32(try doc.int(v, key, 0...Int(UInt32.max - 1)))
    }

    public static func loadApp(path: String) throws(ConfigError) -> AppManifest {
        let fileName = path.split(separator: "/").last.map(String.init) ?? path
        let name = String(fileName.dropLast(".toml".count))
        guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_".contains($0)) }) else {
            throw ConfigError(
                file: path, line: nil, key: nil,
                message: "app name '\(name)' (from the file name) may only use letters, digits, '-' and '_'")
        }
        let doc = try Document(path: path)
        var m = AppManifest(name: name, file: path, command: [])
        let base = directory(of: path)
        var sawCommand = false
        var sawBand = false
        var sawGroup = false
        var sawGroups = false
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
            case "user":
                let user = try Self.account(value, key, doc)
                m.credentials.uid = user.uid
                if !sawGroup { m.credentials.gid = user.gid }
                m.account = (user.name, user.home)
            case "group":
                m.credentials.gid = try Self.groupID(value, key, doc)
                sawGroup = true
            case "supplementary_groups":
                guard let list = value.array else { throw doc.error(key, "expected a list of group names or ids") }
                var groups: [UInt32] = []
                for item in list { groups.append(try Self.groupID(item, key, doc)) }
                m.credentials.groups = groups
                sawGroups = true
            case "no_new_privileges": m.credentials.noNewPrivileges = try doc.bool(value, key)
            case "capabilities":
                var keep: UInt64 = 0
                for name in try doc.strings(value, key) {
                    let upper = name.uppercased()
                    guard
                        let n = SpawnCredentials.capabilityNames.firstIndex(
                            of: upper.hasPrefix("CAP_") ? upper : "CAP_" + upper)
                    else {
                        throw doc.error(
                            key,
                            "unknown capability \"\(name)\" (names as in capabilities(7), like CAP_NET_BIND_SERVICE)")
                    }
                    keep |= 1 << UInt64(n)
                }
                m.credentials.keepCapabilities = keep
            case "umask":
                let text = try doc.string(value, key)
                guard let mask = UInt32(text, radix: 8), mask <= 0o777 else {
                    throw doc.error(key, "expected an octal mask like \"0022\", got \"\(text)\"")
                }
                m.credentials.umask = mask
            case "delivery":
                let d = try doc.string(value, key)
                guard let delivery = Delivery(rawValue: d) else {
                    throw doc.error(key, "expected \"library\" or \"signals\", got \"\(d)\"")
                }
                m.policy.delivery = delivery
            case "background_modes":
                for name in try doc.strings(value, key) {
                    guard let mode = BackgroundModes(name: name) else {
                        let known = BackgroundModes.named.map(\.name).joined(separator: ", ")
                        throw doc.error(key, "unknown background mode \"\(name)\" (known: \(known))")
                    }
                    m.policy.backgroundModes.insert(mode)
                }
            case "url_schemes":
                for raw in try doc.strings(value, key) {
                    let scheme = raw.lowercased()
                    let valid =
                        scheme.first.map { $0.isASCII && $0.isLetter } == true
                        && scheme.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }
                    guard valid else {
                        throw doc.error(key, "\"\(raw)\" is not a URL scheme (a letter, then letters, digits, + - .)")
                    }
                    if !m.policy.urlSchemes.contains(scheme) { m.policy.urlSchemes.append(scheme) }
                }
            case "scenes": m.policy.scenes = try doc.bool(value, key)
            case "max_scenes": m.policy.maxScenes = try doc.int(value, key, 1...64)
            case "display":
                let d = try doc.string(value, key)
                guard SceneNames.valid(d) else {
                    throw doc.error(key, "\"\(d)\" is not a display name (\(SceneNames.rule))")
                }
                m.policy.display = d
            case "fetch":
                guard let t = value.table else { throw doc.error(key, "expected a table") }
                try doc.each(t, table: "fetch") { (k: String, v: any TOMLValueConvertible) throws(ConfigError) in
                    switch k {
                    case "interval": m.policy.fetch.interval = try doc.seconds(v, k, table: "fetch")
                    case "timeout": m.policy.fetch.timeout = try doc.seconds(v, k, table: "fetch")
                    default: throw doc.error(k, "unknown key", table: "fetch")
                    }
                }
                if m.policy.fetch.interval < .seconds(1) {
                    throw doc.error("interval", "at least 1 s", table: "fetch")
                }
            case "push":
                guard let t = value.table else { throw doc.error(key, "expected a table") }
                try doc.each(t, table: "push") { (k: String, v: any TOMLValueConvertible) throws(ConfigError) in
                    switch k {
                    case "budget": m.policy.push.budget = try doc.int(v, k, 0...3600, table: "push")
                    case "timeout": m.policy.push.timeout = try doc.seconds(v, k, table: "push")
                    default: throw doc.error(k, "unknown key", table: "push")
                    }
                }
            case "exits_on_suspend": m.policy.exitsOnSuspend = try doc.bool(value, key)
            case "readiness":
                let r = try doc.string(value, key)
                switch r {
                case "exec": m.policy.awaitsReadiness = false
                case "notify": m.policy.awaitsReadiness = true
                default: throw doc.error(key, "expected \"exec\" or \"notify\", got \"\(r)\"")
                }
            case "autostart":
                let a = try doc.string(value, key)
                switch a {
                case "no": m.autostart = nil
                case "foreground": m.autostart = .foreground
                case "background": m.autostart = .background
                default: throw doc.error(key, "expected \"no\", \"foreground\" or \"background\", got \"\(a)\"")
                }
            case "restart":
                let r = try doc.string(value, key)
                guard let when = RestartWhen(rawValue: r) else {
                    throw doc.error(key, "expected \"no\", \"on-failure\" or \"always\", got \"\(r)\"")
                }
                m.policy.restart.when = when
            case "backoff":
                guard let t = value.table else { throw doc.error(key, "expected a table") }
                try doc.each(t, table: "backoff") { (k: String, v: any TOMLValueConvertible) throws(ConfigError) in
                    switch k {
                    case "delay": m.policy.restart.delay = try doc.seconds(v, k, table: "backoff")
                    case "max_delay": m.policy.restart.maxDelay = try doc.seconds(v, k, table: "backoff")
                    case "window": m.policy.restart.window = try doc.seconds(v, k, table: "backoff")
                    case "limit": m.policy.restart.limit = try doc.int(v, k, 0...10_000, table: "backoff")
                    default: throw doc.error(k, "unknown key", table: "backoff")
                    }
                }
                if m.policy.restart.delay > m.policy.restart.maxDelay {
                    throw doc.error("delay", "must not exceed max_delay", table: "backoff")
                }
                if m.policy.restart.delay < .milliseconds(10) {
                    throw doc.error(
                        "delay", "at least 0.01 s: a crash loop must not take the daemon with it", table: "backoff")
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
            case "memory":
                guard let t = value.table else { throw doc.error(key, "expected a table") }
                try doc.each(t, table: "memory") { (k: String, v: any TOMLValueConvertible) throws(ConfigError) in
                    switch k {
                    case "band":
                        let b = try doc.string(v, k, table: "memory")
                        guard let band = MemoryBand(rawValue: b) else {
                            throw doc.error(
                                k, "expected \"low\", \"normal\" or \"high\", got \"\(b)\"", table: "memory")
                        }
                        m.policy.memory.band = band
                        sawBand = true
                    case "limit": m.policy.memory.limit = try doc.size(v, k, table: "memory")
                    case "last_notice": m.policy.memory.lastNotice = try doc.bool(v, k, table: "memory")
                    case "last_notice_timeout":
                        m.policy.memory.lastNoticeTimeout = try doc.seconds(v, k, table: "memory")
                        if m.policy.memory.lastNoticeTimeout > .seconds(5) {
                            throw doc.error(k, "at most 5 s: memory is short when it runs", table: "memory")
                        }
                    default: throw doc.error(k, "unknown key", table: "memory")
                    }
                }
            case "signals":
                guard let t = value.table else { throw doc.error(key, "expected a table") }
                try doc.each(t, table: "signals") { (k: String, v: any TOMLValueConvertible) throws(ConfigError) in
                    guard let event = LifecycleEvent(rawValue: k), Self.mapsToSignal(event) else {
                        let events = LifecycleEvent.allCases.filter(Self.mapsToSignal).map(\.rawValue)
                        throw doc.error(
                            k, "not an event that maps to a signal (\(events.joined(separator: ", ")))",
                            table: "signals")
                    }
                    let s = try doc.string(v, k, table: "signals")
                    if s == "none" { m.signals[event] = nil; return }
                    guard let number = signalNumber(s) else {
                        throw doc.error(k, "unknown signal \"\(s)\"", table: "signals")
                    }
                    m.signals[event] = number
                }
            default: throw doc.error(key, "unknown key")
            }
        }
        if m.credentials.uid != nil, !sawGroups, let name = m.account?.name {
            m.credentials.groups = Self.groups(of: name, primary: m.credentials.gid ?? 0)  // as systemd's User=
        }
        if m.credentials.uid == nil, sawGroup || sawGroups {
            m.credentials.uid = getuid()  // a group alone: the ids are switched, the user stays
        }
        guard sawCommand else {
            throw ConfigError(file: path, line: nil, key: "command", message: "missing: every app needs a command")
        }
        if m.policy.delivery == .signals {
            let wakes = m.policy.backgroundModes.intersection([.fetch, .remoteNotification])
            if !wakes.isEmpty {
                throw doc.error(
                    "background_modes",
                    "\(wakes.names.joined(separator: " and ")) need delivery = \"library\": "
                        + "a plain program cannot answer a wake-up"
                )
            }
            if !m.policy.urlSchemes.isEmpty {
                throw doc.error("url_schemes", "needs delivery = \"library\": a plain program cannot be told a URL")
            }
            if m.policy.scenes {
                throw doc.error("scenes", "needs delivery = \"library\": a plain program cannot be told of scenes")
            }
        }
        if m.policy.awaitsReadiness && m.policy.delivery == .library {
            throw doc.error(
                "readiness",
                "only for delivery = \"signals\": a library app is ready when it returns from didFinishLaunching")
        }
        // Someone is listening to (or being guided by) a continuous-mode app.
        if !sawBand && m.policy.continuousBackground { m.policy.memory.band = .high }
        m.fingerprint = Self.fingerprint(doc.root.convert(to: .json))
        return m
    }

    static let signalNames: [String: Int32] = [
        "SIGHUP": SIGHUP, "SIGINT": SIGINT, "SIGQUIT": SIGQUIT, "SIGUSR1": SIGUSR1, "SIGUSR2": SIGUSR2,
        "SIGTERM": SIGTERM, "SIGCONT": SIGCONT, "SIGWINCH": SIGWINCH, "SIGPWR": SIGPWR, "SIGALRM": SIGALRM,
    ]

    /// The events a `[signals]` table may map: every one but the launch
    /// pair (a plain program's launch is its exec).
    static func mapsToSignal(_ event: LifecycleEvent) -> Bool { !event.isLaunchEvent }

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
