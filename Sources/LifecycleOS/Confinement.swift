@preconcurrency import Glibc

// How apps are held: one protocol, two implementations. `Cgroups` puts each
// run of an app in a cgroup of its own (the freezer suspends it, cgroup.kill
// ends it whole, memory files account it); `ProcessGroups` is the fallback
// where no cgroup v2 freezer is usable (SIGSTOP, process-group kills, /proc
// accounting), with what it cannot guarantee said at start-up. The daemon
// speaks only to these protocols, so tests can hand it a fake.

/// Where the apps of one daemon run.
public protocol Confinement: AnyObject {
    /// For `status` and the start-up log: "cgroup-v2 /sys/fs/cgroup/…" or
    /// "process-groups (why)".
    var summary: String { get }
    /// How app footprints are measured.
    var memoryAccounting: MemoryAccounting { get }
    /// A fresh group for one run of one app.
    func makeGroup(app: String, generation: UInt64) throws(SystemError) -> any AppGroup
    /// The group of a run an earlier daemon started, when it is still
    /// there (with `pid` in it, when `member`): a restarted daemon takes it back.
    func adoptGroup(app: String, generation: UInt64, pid: Int32, member: Bool) -> (any AppGroup)?
    /// The groups an earlier daemon left ("NAME.GENERATION").
    func leftoverGroups() -> [String]
    /// A group an earlier daemon left, to be killed and removed (once
    /// empty) like the group of an ended run; nil without cgroups.
    func leftover(_ name: String) -> (any AppGroup)?
    /// Every app's footprint together when one file says it; nil: add them up.
    func appsFootprint() -> UInt64?
    /// Removes what the confinement made at start-up.
    func leave()
}

/// How a child joins its group as it is spawned.
public enum SpawnPlacement: Sendable {
    /// clone3 into this cgroup directory; join this v1 memory cgroup (its
    /// cgroup.procs fd, or -1) before exec.
    case cgroup(directory: Int32, v1Procs: Int32)
    /// The child leads a new session and process group (setsid).
    case processGroup
}

/// The processes of one run of one app.
public protocol AppGroup: AnyObject {
    /// For logs: the cgroup path, or "process group PID".
    var name: String { get }
    /// The main process (set by the spawner).
    var pid: Int32 { get set }
    var memory: MemoryAccounting { get }
    var placement: SpawnPlacement { get }
    /// The spawn is done: close what only the child needed.
    func spawned()
    /// Starts freezing; true when the freeze is already complete.
    func freeze() throws(SystemError) -> Bool
    func isFrozen() -> Bool
    /// True when a freeze was asked and not undone, complete or not (a
    /// restarted daemon holds this against the state it saved).
    func freezeAsked() -> Bool
    func thaw() throws(SystemError)
    /// SIGKILLs every process of the group; works on frozen ones.
    func killAll()
    func contains(_ pid: Int32) -> Bool
    /// True while any process of the group is alive.
    var populated: Bool { get }
    /// Removes the group; false while processes remain.
    func remove() -> Bool
    func memoryFootprint() -> UInt64?
    /// The kernel's own limit where there is one; false where it cannot.
    @discardableResult func setMemoryLimit(_ bytes: UInt64) -> Bool
    /// True when the kernel's OOM killer killed something in the group.
    func oomKilled() -> Bool
    /// CPU time of every process of the group, microseconds.
    func cpuMicroseconds() -> UInt64?
    /// Writes `oom_score_adj` of every process of the group (the value of a
    /// process that is already gone is not an error).
    func setOOMScoreAdjust(_ value: Int32)
}

/// The fallback: each app leads a process group of its own.
public final class ProcessGroups: Confinement {
    /// Why cgroups are not used.
    public let reason: String
    public init(reason: String) { self.reason = reason }
    public var summary: String { "process-groups (\(reason))" }
    public var memoryAccounting: MemoryAccounting { .processPSS }
    public func makeGroup(app: String, generation: UInt64) throws(SystemError) -> any AppGroup { AppProcessGroup() }
    /// The process group the app's main process leads, if it still does.
    public func adoptGroup(app: String, generation: UInt64, pid: Int32, member: Bool) -> (any AppGroup)? {
        guard !member || MemoryProbe.processGroup(of: pid) == pid else { return nil }
        let group = AppProcessGroup()
        group.pid = pid
        return group
    }
    /// Without cgroups nothing names an earlier daemon's processes: those
    /// the saved state does not name cannot be found (docs/architecture.md).
    public func leftoverGroups() -> [String] { [] }
    public func leftover(_ name: String) -> (any AppGroup)? { nil }
    public func appsFootprint() -> UInt64? { nil }
    public func leave() {}
}

/// One run of one app as a process group (the child calls setsid): SIGSTOP
/// to suspend, which the app can see and its children can escape by
/// changing process group.
public final class AppProcessGroup: AppGroup {
    public var pid: Int32 = 0
    public init() {}
    public var name: String { "process group \(pid)" }
    public var memory: MemoryAccounting { .processPSS }
    public var placement: SpawnPlacement { .processGroup }
    public func spawned() {}

    /// SIGSTOP is asynchronous: a running process stops at its next entry
    /// into the kernel. Confirmed like the freezer: isFrozen().
    public func freeze() throws(SystemError) -> Bool {
        if pid > 0 { Posix.signal(-pid, SIGSTOP) }
        return isFrozen()
    }

    /// The main process's state in /proc/PID/stat: stopped.
    public func isFrozen() -> Bool {
        guard let stat = try? Posix.readFile("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")") else {
            return false
        }
        let state = stat[stat.index(close, offsetBy: 2)]
        return state == "T" || state == "t"
    }

    public func freezeAsked() -> Bool { isFrozen() }

    public func thaw() throws(SystemError) {
        if pid > 0 { Posix.signal(-pid, SIGCONT) }
    }

    public func killAll() {
        if pid > 0 {
            Posix.signal(-pid, SIGKILL)
            Posix.signal(pid, SIGKILL)
        }
    }

    public func contains(_ pid: Int32) -> Bool { MemoryProbe.processGroup(of: pid) == self.pid }
    public var populated: Bool { pid > 0 && Posix.signal(-pid, 0) }
    public func remove() -> Bool { true }
    public func memoryFootprint() -> UInt64? { MemoryProbe.processGroupPSS(pid) }
    public func setMemoryLimit(_ bytes: UInt64) -> Bool { false }
    public func oomKilled() -> Bool { false }

    /// The main process only: its descendants are not tracked without cgroups.
    public func setOOMScoreAdjust(_ value: Int32) { Posix.setOOMScoreAdjust(pid, value) }
    public func cpuMicroseconds() -> UInt64? {
        guard let stat = try? Posix.readFile("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")") else {
            return nil
        }
        let f = stat[stat.index(after: close)...].split(separator: " ")
        guard f.count > 13, let u = UInt64(f[11]), let s = UInt64(f[12]) else { return nil }
        return (u + s) * 1_000_000 / UInt64(sysconf(Int32(_SC_CLK_TCK)))
    }
}

extension Cgroups {
    /// Cgroups under `root` ("auto", an absolute cgroup path, or "none"),
    /// entered; or the process-group fallback, saying why.
    public static func confinement(root: String) -> any Confinement {
        guard root != "none" else { return ProcessGroups(reason: "disabled by configuration (cgroup_root = \"none\")") }
        let (found, reason) = detect(root: root)
        guard let found else { return ProcessGroups(reason: reason) }
        do {
            try found.enter()
            return found
        } catch {
            return ProcessGroups(reason: "cannot use cgroup subtree \(found.basePath): \(error)")
        }
    }
}
