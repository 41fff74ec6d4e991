#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleCore
import LifecycleOS
import TOMLKit

// How one manifest's keys are read: one function per table, and the rules
// that span keys checked once the whole file is read. What a manifest is,
// and the helpers for users, groups and signals, are in Manifest.swift.

struct ManifestReader {
    let doc: Document
    var m: AppManifest
    private let base: String
    private var sawCommand = false
    private var sawBand = false
    private var sawPrewarm = false
    private var sawGroup = false
    private var sawGroups = false

    init(doc: Document, name: String) {
        self.doc = doc
        m = AppManifest(name: name, file: doc.path, command: [])
        base = ConfigLoader.directory(of: doc.path)
    }

    mutating func read() throws(ConfigError) -> AppManifest {
        try doc.each(doc.root, table: "") { (key: String, value: any TOMLValueConvertible) throws(ConfigError) in
            switch key {
            case "command", "environment", "working_directory", "autostart": try program(key, value)
            case "user", "group", "supplementary_groups", "no_new_privileges", "capabilities", "umask":
                try credentials(key, value)
            case "delivery", "background_modes", "url_schemes", "scenes", "max_scenes", "display",
                "exits_on_suspend", "readiness", "restart", "app_id", "prewarm":
                try behaviour(key, value)
            case "fetch": try fetch(try table(key, value))
            case "push": try push(try table(key, value))
            case "backoff": try backoff(try table(key, value))
            case "timeouts": try timeouts(try table(key, value))
            case "memory": try memory(try table(key, value))
            case "signals": try signals(try table(key, value))
            default: throw doc.error(key, "unknown key")
            }
        }
        try finish()
        return m
    }

    private func table(_ key: String, _ value: any TOMLValueConvertible) throws(ConfigError) -> TOMLTable {
        guard let t = value.table else { throw doc.error(key, "expected a table") }
        return t
    }

    /// What runs, where, with what environment, and when it starts.
    private mutating func program(_ key: String, _ value: any TOMLValueConvertible) throws(ConfigError) {
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
        case "working_directory": m.workingDirectory = ConfigLoader.resolve(try doc.string(value, key), base: base)
        default:  // autostart
            let a = try doc.string(value, key)
            switch a {
            case "no": m.autostart = nil
            case "foreground": m.autostart = .foreground
            case "background": m.autostart = .background
            default: throw doc.error(key, "expected \"no\", \"foreground\" or \"background\", got \"\(a)\"")
            }
        }
    }

    /// Who it runs as, and with what power.
    private mutating func credentials(_ key: String, _ value: any TOMLValueConvertible) throws(ConfigError) {
        switch key {
        case "user":
            let user = try ConfigLoader.account(value, key, doc)
            m.credentials.uid = user.uid
            if !sawGroup { m.credentials.gid = user.gid }
            m.account = (user.name, user.home)
        case "group":
            m.credentials.gid = try ConfigLoader.groupID(value, key, doc)
            sawGroup = true
        case "supplementary_groups":
            guard let list = value.array else { throw doc.error(key, "expected a list of group names or ids") }
            var groups: [UInt32] = []
            for item in list { groups.append(try ConfigLoader.groupID(item, key, doc)) }
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
                        key, "unknown capability \"\(name)\" (names as in capabilities(7), like CAP_NET_BIND_SERVICE)")
                }
                keep |= 1 << UInt64(n)
            }
            m.credentials.keepCapabilities = keep
        default:  // umask
            let text = try doc.string(value, key)
            guard let mask = UInt32(text, radix: 8), mask <= 0o777 else {
                throw doc.error(key, "expected an octal mask like \"0022\", got \"\(text)\"")
            }
            m.credentials.umask = mask
        }
    }

    /// How it is told its lifecycle, what may wake it, and what it shows.
    private mutating func behaviour(_ key: String, _ value: any TOMLValueConvertible) throws(ConfigError) {
        switch key {
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
        case "app_id":
            let id = try doc.string(value, key)
            guard !id.isEmpty, id.utf8.count <= 255, !id.contains(where: { $0.isWhitespace }) else {
                throw doc.error(key, "\"\(id)\" is not an app_id (1 to 255 bytes, no spaces)")
            }
            m.appID = id
        case "exits_on_suspend": m.policy.exitsOnSuspend = try doc.bool(value, key)
        case "prewarm":
            let p = try doc.string(value, key)
            guard let policy = PrewarmPolicy(rawValue: p) else {
                throw doc.error(key, "expected \"never\", \"predicted\" or \"always\", got \"\(p)\"")
            }
            m.policy.prewarm = policy
            sawPrewarm = true
        case "readiness":
            let r = try doc.string(value, key)
            switch r {
            case "exec": m.policy.awaitsReadiness = false
            case "notify": m.policy.awaitsReadiness = true
            default: throw doc.error(key, "expected \"exec\" or \"notify\", got \"\(r)\"")
            }
        default:  // restart
            let r = try doc.string(value, key)
            guard let when = RestartWhen(rawValue: r) else {
                throw doc.error(key, "expected \"no\", \"on-failure\" or \"always\", got \"\(r)\"")
            }
            m.policy.restart.when = when
        }
    }

    private mutating func fetch(_ t: TOMLTable) throws(ConfigError) {
        try doc.each(t, table: "fetch") { (k: String, v: any TOMLValueConvertible) throws(ConfigError) in
            switch k {
            case "interval": m.policy.fetch.interval = try doc.seconds(v, k, table: "fetch")
            case "timeout": m.policy.fetch.timeout = try doc.seconds(v, k, table: "fetch")
            default: throw doc.error(k, "unknown key", table: "fetch")
            }
        }
        if m.policy.fetch.interval < .seconds(1) { throw doc.error("interval", "at least 1 s", table: "fetch") }
    }

    private mutating func push(_ t: TOMLTable) throws(ConfigError) {
        try doc.each(t, table: "push") { (k: String, v: any TOMLValueConvertible) throws(ConfigError) in
            switch k {
            case "budget": m.policy.push.budget = try doc.int(v, k, 0...3600, table: "push")
            case "timeout": m.policy.push.timeout = try doc.seconds(v, k, table: "push")
            default: throw doc.error(k, "unknown key", table: "push")
            }
        }
    }

    private mutating func backoff(_ t: TOMLTable) throws(ConfigError) {
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
            throw doc.error("delay", "at least 0.01 s: a crash loop must not take the daemon with it", table: "backoff")
        }
    }

    private mutating func timeouts(_ t: TOMLTable) throws(ConfigError) {
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
    }

    private mutating func memory(_ t: TOMLTable) throws(ConfigError) {
        try doc.each(t, table: "memory") { (k: String, v: any TOMLValueConvertible) throws(ConfigError) in
            switch k {
            case "band":
                let b = try doc.string(v, k, table: "memory")
                guard let band = MemoryBand(rawValue: b) else {
                    throw doc.error(k, "expected \"low\", \"normal\" or \"high\", got \"\(b)\"", table: "memory")
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
    }

    private mutating func signals(_ t: TOMLTable) throws(ConfigError) {
        try doc.each(t, table: "signals") { (k: String, v: any TOMLValueConvertible) throws(ConfigError) in
            guard let event = LifecycleEvent(rawValue: k), ConfigLoader.mapsToSignal(event) else {
                let events = LifecycleEvent.allCases.filter(ConfigLoader.mapsToSignal).map(\.rawValue)
                throw doc.error(
                    k, "not an event that maps to a signal (\(events.joined(separator: ", ")))", table: "signals")
            }
            let s = try doc.string(v, k, table: "signals")
            if s == "none" { m.signals[event] = nil; return }
            guard let number = ConfigLoader.signalNumber(s) else {
                throw doc.error(k, "unknown signal \"\(s)\"", table: "signals")
            }
            m.signals[event] = number
        }
    }

    /// The rules that span keys, once the whole file is read.
    private mutating func finish() throws(ConfigError) {
        if m.credentials.uid != nil, !sawGroups, let name = m.account?.name {
            m.credentials.groups = ConfigLoader.groups(of: name, primary: m.credentials.gid ?? 0)  // as User=
        }
        if m.credentials.uid == nil, sawGroup || sawGroups {
            m.credentials.uid = getuid()  // a group alone: the ids are switched, the user stays
        }
        guard sawCommand else {
            throw ConfigError(file: doc.path, line: nil, key: "command", message: "missing: every app needs a command")
        }
        if m.policy.delivery == .signals {
            let wakes = m.policy.backgroundModes.intersection([.fetch, .remoteNotification])
            if !wakes.isEmpty {
                throw doc.error(
                    "background_modes",
                    "\(wakes.names.joined(separator: " and ")) need delivery = \"library\": "
                        + "a plain program cannot answer a wake-up")
            }
            if !m.policy.urlSchemes.isEmpty {
                throw doc.error("url_schemes", "needs delivery = \"library\": a plain program cannot be told a URL")
            }
            if m.policy.scenes {
                throw doc.error("scenes", "needs delivery = \"library\": a plain program cannot be told of scenes")
            }
        }
        // A library app is held at its first event (its client library says
        // when); a plain program only where it says it can be (this key),
        // held at READY=1.
        if !sawPrewarm { m.policy.prewarm = m.policy.delivery == .library ? .predicted : .never }
        if m.policy.prewarm != .never && m.policy.delivery == .signals && !m.policy.awaitsReadiness {
            throw doc.error(
                "prewarm",
                "a plain program is held at READY=1 when prewarmed: it needs readiness = \"notify\"")
        }
        if m.policy.awaitsReadiness && m.policy.delivery == .library {
            throw doc.error(
                "readiness",
                "only for delivery = \"signals\": a library app is ready when it returns from didFinishLaunching")
        }
        // Someone is listening to (or being guided by) a continuous-mode app.
        if !sawBand && m.policy.continuousBackground { m.policy.memory.band = .high }
        m.fingerprint = ConfigLoader.fingerprint(doc.root.convert(to: .json))
    }
}
