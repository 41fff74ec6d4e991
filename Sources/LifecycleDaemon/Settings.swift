#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleCore
import LifecycleOS

/// The configuration and everything derived from it, as one value: the
/// daemon file, the valid manifests, and what the shell needs from them.
/// A reload will build a new one and replace it whole.
struct Settings {
    var config: DaemonConfig
    var manifests: [AppID: AppManifest]
    /// Manifests that could not be loaded, each naming file, line and key.
    let problems: [ConfigError]
    /// Apps whose manifest sets memory.limit.
    let limits: [AppID: UInt64]
    /// The daemon's own directory: looked in first for commands (the example apps beside it).
    let selfDirectory: String
    /// The search path of apps that set no PATH of their own.
    let searchPath: String

    init(configPath: String) throws(ConfigError) {
        let (config, apps, problems) = try ConfigLoader.load(path: configPath)
        self.config = config
        self.problems = problems
        manifests = Dictionary(uniqueKeysWithValues: apps.map { ($0.name, $0) })
        limits = manifests.compactMapValues(\.policy.memory.limit)
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
        selfDirectory = ConfigLoader.directory(of: exe)
        searchPath =
            selfDirectory + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin")
    }

    var policies: [AppID: AppPolicy] { manifests.mapValues(\.policy) }

    /// Apps that would run as root without their manifest saying so (no
    /// `user`, and the daemon is root): root can write itself into any
    /// cgroup and signal any app, so no confinement holds for them
    /// (docs/security.md). `user = "root"` says it is meant.
    var implicitlyRoot: [AppID] {
        guard geteuid() == 0 else { return [] }
        return manifests.values.filter { $0.credentials.uid == nil }.map(\.name).sorted()
    }

    /// What `--check-config` and the start say about `implicitlyRoot`.
    var implicitlyRootNote: String? {
        let apps = implicitlyRoot
        guard !apps.isEmpty else { return nil }
        return "\(apps.count == 1 ? "app" : "apps") \(apps.joined(separator: ", ")) run as root without a `user`: "
            + "root can leave its cgroup and signal other apps; give each a `user` (or `user = \"root\"` if it is meant)"
    }

    /// What an app's group is given as it moves from `from` to `to`: the
    /// foreground protected (memory.low) and weighted first (cpu.weight),
    /// systemd-oomd told to leave it alone (omit) in front and to take it
    /// last (avoid) in the background; a suspended app is a candidate like
    /// any, which keeps oomd in the band order. Nil when nothing changes
    /// (between inactive and active), or the confinement has no such knobs.
    func standing(_ to: LifecycleState, from: LifecycleState, knobs: GroupStanding.Knobs) -> GroupStanding? {
        guard to != .notRunning, !knobs.isEmpty else { return nil }
        let new = standing(in: to, knobs: knobs)
        guard from != .notRunning else { return new }  // a fresh group: everything
        let old = standing(in: from, knobs: knobs)
        let change = GroupStanding(
            memoryLow: new.memoryLow != old.memoryLow ? new.memoryLow : nil,
            cpuWeight: new.cpuWeight != old.cpuWeight ? new.cpuWeight : nil,
            oomd: new.oomd != old.oomd ? new.oomd : nil)
        return change == GroupStanding() ? nil : change
    }

    private func standing(in state: LifecycleState, knobs: GroupStanding.Knobs) -> GroupStanding {
        let inFront = state == .active || state == .inactive
        var s = GroupStanding()
        if knobs.contains(.memory) {
            if let low = config.memory.foregroundLow { s.memoryLow = inFront ? low : 0 }
            s.oomd = inFront ? .omit : state == .background ? .avoid : OOMDPreference.none
        }
        if knobs.contains(.cpu), config.cpu.weights {
            s.cpuWeight = inFront ? config.cpu.foregroundWeight : config.cpu.backgroundWeight
        }
        return s
    }

    /// Where `manifest`'s command is looked for.
    func searchPath(for manifest: AppManifest) -> String {
        manifest.environment["PATH"].map { selfDirectory + ":" + $0 } ?? searchPath
    }

    /// The program a launch of `manifest` runs: a name with a slash
    /// relative to the manifest's directory, any other through the search
    /// path; nil when it is not a regular file its user may execute.
    func executable(for manifest: AppManifest) -> String? {
        Spawner.resolve(
            manifest.command[0], searchPath: searchPath(for: manifest), base: ConfigLoader.directory(of: manifest.file),
            credentials: manifest.credentials)
    }

    /// Each valid manifest whose command would not start (what a launch
    /// would report).
    var commandProblems: [ConfigError] {
        manifests.values.sorted { $0.name < $1.name }.compactMap { m in
            guard executable(for: m) == nil else { return nil }
            let looked = m.command[0].contains("/") ? "" : " (looked in \(searchPath(for: m)))"
            return ConfigError(
                file: m.file, line: nil, key: "command",
                message:
                    "'\(m.command[0])' is not an executable regular file"
                    + "\(m.account.map { " for user \($0.name)" } ?? "")\(looked)"
            )
        }
    }
}

extension ConfigLoader {
    /// `--check-config`: the daemon file, every manifest, and every app's
    /// command as a launch would find it. Throws for a bad daemon file.
    /// Notes are not errors: apps that run as root without saying so.
    public static func check(path: String) throws(ConfigError) -> (
        valid: Int, problems: [ConfigError], notes: [String]
    ) {
        let settings = try Settings(configPath: path)
        let commands = settings.commandProblems
        return (
            settings.manifests.count - commands.count, settings.problems + commands,
            settings.implicitlyRootNote.map { [$0] } ?? []
        )
    }
}
