@preconcurrency import Glibc
import CLifecycleShim
import LifecycleModel
import SystemPackage

/// Where apps live: a subtree of the cgroup v2 hierarchy, or nothing.
///
/// Layouts: pure cgroup v2 (mounted at /sys/fs/cgroup) and the hybrid layout
/// (v2 at /sys/fs/cgroup/unified beside v1 controllers) are the same to us:
/// we need the v2 tree with cgroup.freeze (Linux 5.2+). Without it the
/// daemon falls back to process groups (SIGSTOP/SIGCONT, /proc) and says
/// what that cannot guarantee.
///
/// Shape of the subtree, standalone (`base` is /lifecycled, or the
/// configured cgroup_root):
///
///   base/daemon            the daemon itself: a leaf, as cgroup v2 wants
///   base/apps/NAME.GEN     one fresh cgroup per launch of each app
///
/// Under systemd (see `AppsScope`) `base` is the apps' transient scope and
/// the daemon stays in its service, outside it:
///
///   base/keeper            the process that holds the scope open
///   base/apps/NAME.GEN     as above
///
/// Memory is accounted by the v2 memory controller when the tree has it; on
/// a hybrid machine whose memory controller is a v1 hierarchy, each app also
/// gets V1/base/apps/NAME.GEN there, which the child joins before exec (v1
/// charges do not move with a process); with neither, from /proc PSS.
public enum MemoryAccounting: String, Sendable {
    case cgroupV2 = "cgroup-v2 memory controller"
    case cgroupV1 = "cgroup-v1 memory controller"
    case processPSS = "/proc PSS"
}

public final class Cgroups: Confinement {
    /// The v2 mount point, e.g. /sys/fs/cgroup or /sys/fs/cgroup/unified.
    public let mount: String
    /// Our subtree, relative to the mount ("/lifecycled", "/system.slice/lifecycled.service").
    public let base: String
    /// Where the daemon was before `enter()`.
    public let original: String
    /// The systemd scope `base` is, when apps live in one (the daemon then
    /// stays where it is); nil for the daemon's own tree.
    public let scope: String?
    /// What the start-up log should say about the choice: notes (the scope
    /// was created or found) and warnings (it could not be used).
    public private(set) var notes: [String] = []
    public private(set) var warnings: [String] = []
    private var entered = false
    public private(set) var memory: MemoryAccounting = .processPSS
    /// The v1 memory hierarchy's copy of our subtree, when memory is accounted there.
    public private(set) var v1MemoryBase: String?
    /// The cgroup v2 cpu controller is enabled for the apps (cpu.weight by state).
    public private(set) var cpu = false
    /// What could not be set up of the controllers, and why: said at start
    /// and in `status` (a daemon that fell back from the v2 memory
    /// controller says so; it never does so silently).
    public private(set) var problems: [String] = []

    public var basePath: String { mount + base }
    public var summary: String { "cgroup-v2 \(basePath)" + (scope.map { " (systemd scope \($0))" } ?? "") }
    public var memoryAccounting: MemoryAccounting { memory }
    public var appsPath: String { basePath + "/apps" }
    public var standings: GroupStanding.Knobs {
        var knobs: GroupStanding.Knobs = []
        if memory == .cgroupV2 { knobs.insert(.memory) }
        if cpu { knobs.insert(.cpu) }
        return knobs
    }

    init(
        mount: String, base: String, original: String, scope: String? = nil, notes: [String] = [],
        warnings: [String] = []
    ) {
        self.mount = mount
        self.base = base
        self.original = original
        self.scope = scope
        self.notes = notes
        self.warnings = warnings
    }

    /// Set by a daemon for its next image across daemon-reexec: the cgroup
    /// it started in, before it moved into its leaf.
    public static let originEnvironmentKey = "LIFECYCLED_ORIGIN_CGROUP"

    /// Finds the v2 hierarchy and decides the subtree. `root` is the
    /// configured subtree ("auto" or an absolute cgroup path). Returns nil
    /// with the reason when cgroups cannot be used.
    public static func detect(root: String) -> (Cgroups?, String) {
        guard let mount = v2Mount() else { return (nil, "no cgroup2 file system is mounted") }
        var own = ownCgroup() ?? "/"
        // A daemon-reexec'd image starts in its earlier image's leaf
        // (BASE/daemon): the earlier image said where it came from, and its
        // apps are in that tree, so this image keeps it.
        let earlier = getenv(originEnvironmentKey).map { String(cString: $0) }
        if let earlier {
            unsetenv(originEnvironmentKey)
            if own.hasSuffix("/daemon") { own = earlier }
        }
        var warnings: [String] = []
        if root == "auto", earlier == nil, let names = AppsScope.names() {
            do {
                let (cgroup, created) = try AppsScope.take(
                    scope: names.scope, service: names.service, slice: names.slice)
                let note = created ? "created \(names.scope) for the apps" : "the apps are in \(names.scope)"
                return (Cgroups(mount: mount, base: cgroup, original: own, scope: names.scope, notes: [note]), "")
            } catch {
                warnings.append(
                    "cannot use \(names.scope) for the apps (\(error)): they go into \(own), "
                        + "where a restart of \(names.service) ends them"
                )
            }
        }
        let base: String
        if root == "auto" {
            base = own == "/" ? "/lifecycled" : own
        } else {
            guard root.hasPrefix("/") else { return (nil, "cgroup root '\(root)' is not an absolute cgroup path") }
            base = root
        }
        return (Cgroups(mount: mount, base: base, original: own, warnings: warnings), "")
    }

    /// Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup on pure v2,
    /// /sys/fs/cgroup/unified in the hybrid layout), if it is.
    public static func v2Mount() -> String? {
        guard let info = try? Posix.readFile("/proc/self/mountinfo") else { return nil }
        for line in info.split(separator: "\n") {
            // "36 25 0:31 / /sys/fs/cgroup/unified rw,... - cgroup2 cgroup2 rw,..."
            let halves = line.split(separator: " - ", maxSplits: 1)
            guard halves.count == 2, halves[1].hasPrefix("cgroup2 ") else { continue }
            let fields = halves[0].split(separator: " ")
            if fields.count > 4 { return String(fields[4]) }
        }
        return nil
    }

    /// The cgroup v2 directory a process is in (`mount` joined with the
    /// "0::" line of /proc/PID/cgroup), or nil when it is gone.
    public static func directory(of pid: Int32, mount: String) -> String? {
        guard pid > 0, let text = try? Posix.readFile("/proc/\(pid)/cgroup") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("0::") {
            let relative = line.dropFirst(3)
            return relative == "/" ? mount : mount + relative
        }
        return nil
    }

    /// Our own cgroup v2 path, from the "0::" line of /proc/self/cgroup.
    static func ownCgroup() -> String? {
        guard let text = try? Posix.readFile("/proc/self/cgroup") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("0::") {
            return String(line.dropFirst(3))
        }
        return nil
    }

    /// Creates the subtree and moves the daemon into its own leaf. Done
    /// before READY=1, so that app cgroups can be created beside it.
    public func enter() throws(SystemError) {
        if scope != nil { return try enterScope() }
        for dir in [basePath, basePath + "/daemon", appsPath] { try Posix.makeDirectory(dir) }
        // The freezer is what we need: a kernel without cgroup.freeze (< 5.2)
        // gets the process-group fallback instead.
        if !Posix.exists(basePath + "/daemon/cgroup.freeze") {
            throw SystemError("cgroup.freeze", basePath, errno: .noSuchFileOrDirectory)
        }
        // Moving a process between cgroups waits for an RCU grace period
        // (about 25 ms here): a re-executed daemon already in its leaf skips it.
        if Self.ownCgroup() != base + "/daemon" { try Posix.writeFile(basePath + "/daemon/cgroup.procs", "0") }
        entered = true
        setUpControllers()
        // The daemon's group weighs as much as all its apps together (their
        // parent's weight, the kernel's default): above every background
        // app, and no heavier, because the reclaims it writes run in its
        // own context (docs/architecture.md).
        // Written, not assumed: an older daemon's leaf may say otherwise.
        if cpu { try? Posix.writeFile(basePath + "/daemon/cpu.weight", "100") }
    }

    /// The scope's layout: the process it was created around (the keeper)
    /// moves into `keeper/`, so that the scope holds no process of its own
    /// and controllers can be enabled in it; a keeper that died while apps
    /// held the scope open is replaced.
    private func enterScope() throws(SystemError) {
        let keeper = basePath + "/keeper"
        for dir in [keeper, appsPath] { try Posix.makeDirectory(dir) }
        if !Posix.exists(appsPath + "/cgroup.freeze") {
            throw SystemError("cgroup.freeze", appsPath, errno: .noSuchFileOrDirectory)
        }
        for pid in AppCgroup.pids(basePath + "/cgroup.procs") {
            try Posix.writeFile(keeper + "/cgroup.procs", "\(pid)")
        }
        if AppCgroup.pids(keeper + "/cgroup.procs").isEmpty {
            let fd = try Posix.call("open", keeper) { open(keeper, O_DIRECTORY | O_RDONLY | O_CLOEXEC) }
            defer { close(fd) }
            let pid: Int32
            do { pid = try AppsScope.spawnKeeper(into: fd) } catch {
                throw SystemError("spawn the keeper (\(error.step))", keeper, errno: error.errno)
            }
            notes.append("started a new keeper (pid \(pid)) in \(keeper)")
        }
        entered = true
        setUpControllers()
    }

    /// The controllers the apps need from cgroup v2: memory (footprints,
    /// limits, protection of the foreground, OOM groups) and cpu (weights by
    /// state). systemd offers them to a delegated unit; a tree of the
    /// daemon's own (standalone, as on a machine without systemd, where the
    /// root cgroup may enable none) gets them enabled from the root down to
    /// it. What cannot be had is said in `problems`, with why; memory then
    /// falls back to a v1 memory hierarchy (hybrid machines), else /proc.
    /// Done after the daemon left the base: a cgroup with processes of its
    /// own cannot enable controllers for its children.
    private func setUpControllers() {
        for controller in ["memory", "cpu"] {
            guard Self.listed(mount + "/cgroup.controllers", controller) else {
                notes.append(
                    "the cgroup v2 hierarchy has no \(controller) controller "
                        + "(the hybrid layout: a v1 hierarchy holds it)")
                continue
            }
            if !Self.listed(basePath + "/cgroup.controllers", controller) {
                if scope == nil {
                    enableAbove(controller)
                } else {
                    problems.append("\(scope!) does not offer the \(controller) controller (is it delegated?)")
                }
            }
            guard Self.listed(basePath + "/cgroup.controllers", controller) else { continue }
            for dir in [basePath, appsPath] {
                guard !Self.listed(dir + "/cgroup.subtree_control", controller) else { continue }
                do { try Posix.writeFile(dir + "/cgroup.subtree_control", "+" + controller) } catch {
                    problems.append("cannot enable the \(controller) controller for \(dir): \(error)")
                }
            }
        }
        cpu = Self.listed(appsPath + "/cgroup.subtree_control", "cpu")
        if Self.listed(appsPath + "/cgroup.subtree_control", "memory") {
            memory = .cgroupV2
            // The foreground's memory.low counts only up to what every group
            // above it allows: "max" on ours; one above with none caps it.
            try? Posix.writeFile(appsPath + "/memory.low", "max")
            if scope == nil { try? Posix.writeFile(basePath + "/memory.low", "max") }
            if let capped = protectionCap() {
                problems.append(
                    "the foreground's memory.low is capped by \(capped), whose memory.low is 0 "
                        + "(set MemoryLow= on it: docs/configuration.md)")
            }
            return
        }
        if let v1 = Self.v1MemoryMount() {
            let dir = v1 + base
            var ok = true
            for d in [dir, dir + "/apps"] where (try? Posix.makeDirectory(d)) == nil { ok = false }
            if ok {
                v1MemoryBase = dir
                memory = .cgroupV1
            }
        }
    }

    /// Enables `controller` in every group from the mount's root down to
    /// the base's parent, where it is not already: each group offers to its
    /// children only what its parent enabled for it.
    private func enableAbove(_ controller: String) {
        var dir = mount
        for component in base.split(separator: "/").dropLast().map(String.init) + [""] {
            if !Self.listed(dir + "/cgroup.subtree_control", controller) {
                do { try Posix.writeFile(dir + "/cgroup.subtree_control", "+" + controller) } catch {
                    let why =
                        error.errno == .resourceBusy
                        ? "it has processes of its own, and cgroup v2 lets only a group without any enable controllers"
                        : "\(error)"
                    problems.append("cannot enable the \(controller) controller in \(dir): \(why)")
                    return
                }
            }
            if !component.isEmpty { dir += "/" + component }
        }
    }

    /// The first group above ours (below the root, where protection is not
    /// capped) whose memory.low is 0, if any.
    private func protectionCap() -> String? {
        var components = base.split(separator: "/").dropLast(scope == nil ? 1 : 0)
        while !components.isEmpty {
            let dir = mount + "/" + components.joined(separator: "/")
            if (try? Posix.readFile(dir + "/memory.low"))?.trimmingWhitespace() == "0" { return dir }
            components = components.dropLast()
        }
        return nil
    }

    /// True when the space-separated list in `file` names `word`.
    static func listed(_ file: String, _ word: String) -> Bool {
        (try? Posix.readFile(file))?.split(whereSeparator: { $0 == " " || $0 == "\n" }).contains(Substring(word))
            ?? false
    }

    /// Where a v1 hierarchy with the memory controller is mounted, if any.
    static func v1MemoryMount() -> String? {
        guard let info = try? Posix.readFile("/proc/self/mountinfo") else { return nil }
        for line in info.split(separator: "\n") {
            let halves = line.split(separator: " - ", maxSplits: 1)
            guard halves.count == 2, halves[1].hasPrefix("cgroup ") else { continue }
            let superOptions = halves[1].split(separator: " ").last?.split(separator: ",") ?? []
            let fields = halves[0].split(separator: " ")
            if superOptions.contains("memory"), fields.count > 4 { return String(fields[4]) }
        }
        return nil
    }

    /// The footprint of every app together, from the apps' parent cgroup;
    /// nil when memory is accounted from /proc (the caller adds up the apps).
    public func appsFootprint() -> UInt64? {
        switch memory {
        case .cgroupV2: MemoryProbe.cgroupFootprint(appsPath, v1: false)
        case .cgroupV1: v1MemoryBase.flatMap { MemoryProbe.cgroupFootprint($0 + "/apps", v1: true) }
        case .processPSS: nil
        }
    }

    /// A fresh cgroup for one launch of an app (never reused: after
    /// cgroup.kill the kernel kills every later CLONE_INTO_CGROUP child).
    public func makeGroup(app name: String, generation: UInt64) throws(SystemError) -> any AppGroup {
        let path = appsPath + "/\(name).\(generation)"
        if try !Posix.makeDirectory(path) {
            // Left over from an earlier daemon: clear it out and start afresh.
            let stale = AppCgroup(path: path, directory: -1, memory: .processPSS)
            stale.killAll()
            _ = stale.remove()
            try Posix.makeDirectory(path)
        }
        let fd = try Posix.call("open", path) { open(path, O_DIRECTORY | O_RDONLY | O_CLOEXEC) }
        let group = AppCgroup(path: path, directory: fd, memory: memory)
        if memory == .cgroupV2 {
            // All or nothing: the kernel's OOM killer takes the whole app,
            // never one helper of it (and counts it in oom_group_kill).
            try? group.write("memory.oom.group", "1")
            if let events = try? group.read("memory.events") { group.oomBaseline = OOMCounters(events) }
        }
        if let v1 = v1MemoryBase {
            let dir = v1 + "/apps/\(name).\(generation)"
            if (try? Posix.makeDirectory(dir)) == false {
                for pid in AppCgroup.pids(dir + "/cgroup.procs") { Posix.signal(pid, SIGKILL) }
                Posix.remove(directory: dir)
                _ = try? Posix.makeDirectory(dir)
            }
            // The child writes "0" to this before exec, so its first page is charged here.
            let procs: Int32
            do {
                procs = try Posix.call("open", dir + "/cgroup.procs") {
                    open(dir + "/cgroup.procs", O_WRONLY | O_CLOEXEC)
                }
            } catch {
                _ = group.remove()
                throw error
            }
            group.v1Memory = dir
            group.v1ProcsFD = procs
        }
        return group
    }

    public func adoptGroup(app name: String, generation: UInt64, pid: Int32, member: Bool) -> (any AppGroup)? {
        let path = appsPath + "/\(name).\(generation)"
        guard let fd = try? Posix.call("open", path, { open(path, O_DIRECTORY | O_RDONLY | O_CLOEXEC) }) else {
            return nil
        }
        let group = AppCgroup(path: path, directory: fd, memory: memory)
        group.v1Memory = v1Memory(of: "\(name).\(generation)")
        guard !member || group.contains(pid) else { return nil }  // its deinit closes the directory
        group.pid = pid
        return group
    }

    /// A group's copy in the v1 memory hierarchy (hybrid machines), if it has one.
    private func v1Memory(of group: String) -> String? {
        v1MemoryBase.map { $0 + "/apps/" + group }.flatMap { Posix.exists($0) ? $0 : nil }
    }

    public func leftoverGroups() -> [String] {
        // Every directory of a cgroup file system is a group.
        (try? FileManagerLite.list(appsPath, directoriesOnly: true)) ?? []
    }

    public func leftover(_ name: String) -> (any AppGroup)? {
        let group = AppCgroup(path: appsPath + "/" + name, directory: -1, memory: .processPSS)
        group.v1Memory = v1Memory(of: name)
        return group
    }

    /// Removes what `enter()` made, moving the daemon back where it was, or
    /// ending the scope's keeper. Under systemd (`base` is our unit's
    /// cgroup or the scope) systemd removes the rest.
    public func leave() {
        guard entered else { return }
        if let names = try? FileManagerLite.list(appsPath) {
            for n in names { Posix.remove(directory: appsPath + "/" + n) }
        }
        Posix.remove(directory: appsPath)
        if let v1 = v1MemoryBase {
            if let names = try? FileManagerLite.list(v1 + "/apps") {
                for n in names { Posix.remove(directory: v1 + "/apps/" + n) }
            }
            Posix.remove(directory: v1 + "/apps")
            if base != original, scope == nil { Posix.remove(directory: v1) }
        }
        if scope != nil {
            // Without its keeper the empty scope ends, and systemd removes it.
            for pid in AppCgroup.pids(basePath + "/keeper/cgroup.procs") { Posix.signal(pid, SIGKILL) }
        } else if base != original {
            // The daemon, and whatever else is in its leaf: the spawn helper
            // of a daemon-reexec'd image, forked there (the first image
            // forks it before it moves in), ends only after this, and its
            // leaf could not be removed (found after a reexec and a stop).
            let back = mount + (original == "/" ? "" : original) + "/cgroup.procs"
            try? Posix.writeFile(back, "0")
            for pid in AppCgroup.pids(basePath + "/daemon/cgroup.procs") { try? Posix.writeFile(back, "\(pid)") }
            Posix.remove(directory: basePath + "/daemon")
            Posix.remove(directory: basePath)
        }
    }
}
