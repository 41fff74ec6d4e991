@preconcurrency import Glibc
import CLifecycleShim
import LifecycleModel

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
    /// Which of the knobs of `GroupStanding` its groups have (the cgroup v2
    /// memory and cpu controllers): the daemon writes only those.
    var standings: GroupStanding.Knobs { get }
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
    /// In memory and on swap, where it can be measured.
    func memoryUse() -> MemoryUse?
    /// The kernel's own limit where there is one; false where it cannot.
    /// Written only into a fresh group, before its process starts: with
    /// nothing charged yet the kernel has nothing to reclaim, so the write
    /// returns at once (lowering it under a running app would make the
    /// writer reclaim, synchronously).
    @discardableResult func setMemoryLimit(_ bytes: UInt64) -> Bool
    /// How the kernel's OOM killer ended the run, if it did (cgroup v2:
    /// memory.events since the group was made); nil when it did not.
    func outOfMemory() -> OutOfMemory?
    /// SIGKILLs every process for memory and frees their memory now, in the
    /// caller's context (process_mrelease), rather than when each dying
    /// process is next scheduled; returns what the group held just before
    /// and just after (what the kill gave back), where it can be measured.
    /// `pidfd`: the main process's.
    func killForMemory(pidfd: Int32) -> (before: MemoryUse?, after: MemoryUse?)
    /// Where the app stands for the kernel and systemd-oomd as its state
    /// changes: its memory protection, its CPU weight, oomd's preference.
    func stand(_ standing: GroupStanding)
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
    public var standings: GroupStanding.Knobs { [] }
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
    public func memoryUse() -> MemoryUse? { MemoryProbe.processGroupPSS(pid).map { MemoryUse(resident: $0) } }
    public func setMemoryLimit(_ bytes: UInt64) -> Bool { false }
    public func outOfMemory() -> OutOfMemory? { nil }
    public func stand(_ standing: GroupStanding) {}

    /// The group and the main process; only the main process's memory is
    /// freed at once (its descendants are not tracked without cgroups).
    public func killForMemory(pidfd: Int32) -> (before: MemoryUse?, after: MemoryUse?) {
        let before = memoryUse()
        killAll()
        if pidfd >= 0 { _ = lc_process_mrelease(pidfd) }
        return (before, nil)
    }

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

extension AppGroup {
    /// In memory and on swap together.
    public func memoryFootprint() -> UInt64? { memoryUse()?.total }
}

/// Where an app's group stands as its state changes (written on each
/// transition that changes it; nil fields are left as they are).
public struct GroupStanding: Sendable, Equatable {
    /// cgroup v2 memory.low: reclaim takes from unprotected groups first
    /// (0: unprotected; UInt64.max: "max", everything it has).
    public var memoryLow: UInt64?
    /// cgroup v2 cpu.weight, 1 to 10000 (100 is the kernel's default).
    public var cpuWeight: Int?
    /// What systemd-oomd is told of the group (the xattrs it reads on a
    /// root-owned candidate cgroup).
    public var oomd: OOMDPreference?

    public init(memoryLow: UInt64? = nil, cpuWeight: Int? = nil, oomd: OOMDPreference? = nil) {
        self.memoryLow = memoryLow
        self.cpuWeight = cpuWeight
        self.oomd = oomd
    }

    /// The knobs a confinement has.
    public struct Knobs: OptionSet, Sendable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        public static let memory = Knobs(rawValue: 1)  // memory.low, memory.oom.group, oomd's xattrs
        public static let cpu = Knobs(rawValue: 2)  // cpu.weight
    }
}

/// systemd-oomd's ManagedOOMPreference= for one cgroup, as the xattrs it
/// reads: `user.oomd_omit` (never a candidate), `user.oomd_avoid` (only
/// when nothing else is), neither (a candidate like any).
public enum OOMDPreference: Sendable, Equatable {
    case none, avoid, omit
}
