#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
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
    /// Its windows' Wayland app_id, for a follower that cannot tell a
    /// window's process (docs/focus.md); nil: the app's name.
    public var appID: String? = nil
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
        var reader = ManifestReader(doc: try Document(path: path), name: name)
        return try reader.read()
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
