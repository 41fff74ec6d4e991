@preconcurrency import Glibc
import CLifecycleShim
import LifecycleModel
import SystemPackage

/// One run of one app in a cgroup of its own: frozen by the cgroup
/// freezer, killed whole with cgroup.kill, accounted by its memory files.
public final class AppCgroup: AppGroup {
    public let path: String
    /// O_DIRECTORY fd of the cgroup, handed to clone3 (CLONE_INTO_CGROUP).
    public private(set) var directory: Int32
    public var pid: Int32 = 0
    public let memory: MemoryAccounting
    /// Its cgroup in the v1 memory hierarchy, and that cgroup's cgroup.procs
    /// held open for the child to join before exec (closed after the spawn).
    public internal(set) var v1Memory: String?
    public internal(set) var v1ProcsFD: Int32 = -1

    /// The group's identity (its directory's inode: a cgroup's id, never
    /// reused in a boot), taken when the handle is made: a group removed
    /// and made again at the same path (a new run under a reused name) is
    /// another group, which this handle neither kills nor removes.
    let identity: ino_t?

    init(path: String, directory: Int32, memory: MemoryAccounting) {
        self.path = path
        self.directory = directory
        self.memory = memory
        var st = stat()
        let found = directory >= 0 ? fstat(directory, &st) : stat(path, &st)
        identity = found == 0 ? st.st_ino : nil
    }

    /// The path still names the group this handle was made for (false
    /// once it is gone, or another group took the path).
    var stillItself: Bool {
        var st = stat()
        return stat(path, &st) == 0 && st.st_ino == identity
    }

    deinit {
        closeDirectory()
        spawned()
    }

    public var name: String { path }
    public var placement: SpawnPlacement { .cgroup(directory: directory, v1Procs: v1ProcsFD) }

    /// One of the group's own files: opened relative to its directory while
    /// the handle holds it open (the kernel walks nothing above it, and the
    /// file is this group's even if its path were another's by now), by
    /// its path once the directory is closed or for a leftover handle.
    func read(_ file: String) throws(SystemError) -> String {
        try Posix.readFile(in: directory, file, of: path)
    }

    func write(_ file: String, _ value: String) throws(SystemError) {
        try Posix.writeFile(in: directory, file, value, of: path)
    }

    func closeDirectory() {
        if directory >= 0 { Posix.close(directory) }
        directory = -1
    }

    public func spawned() {
        if v1ProcsFD >= 0 { Posix.close(v1ProcsFD) }
        v1ProcsFD = -1
    }

    public func memoryUse() -> MemoryUse? {
        switch memory {
        case .cgroupV2: return MemoryProbe.cgroupUse(in: directory, path, v1: false)
        case .cgroupV1: return v1Memory.flatMap { MemoryProbe.cgroupUse($0, v1: true) }
        case .processPSS:
            let all = pids().compactMap { MemoryProbe.pss(pid: $0) }
            return all.isEmpty ? nil : MemoryUse(resident: all.reduce(0, +))
        }
    }

    /// The kernel's own limit (cgroup v2 memory.max): beyond it the kernel
    /// reclaims, then OOM-kills inside the group. False where it cannot.
    @discardableResult
    public func setMemoryLimit(_ bytes: UInt64) -> Bool {
        guard memory == .cgroupV2 else { return false }
        return (try? write("memory.max", String(bytes))) != nil
    }

    /// memory.events' OOM counters when the group was made (zero for a
    /// fresh one; a group taken back after a restart was fresh at its
    /// launch too). They count for the group's whole life, so only what
    /// rose since says anything about this run.
    var oomBaseline = OOMCounters()

    /// The kernel's OOM killer killed in the group when `oom_kill` (each
    /// process) or `oom_group_kill` (the whole group, with memory.oom.group)
    /// rose; at the group's own limit when `oom` rose too (its usage reached
    /// its memory.max). A global OOM kill counts in `oom_kill` as well, but
    /// not in `oom`: that is how the two are told apart. systemd-oomd marks
    /// a group before it kills it (`user.oomd_ooms`). v1: memory.oom_control.
    public func outOfMemory() -> OutOfMemory? {
        switch memory {
        case .cgroupV2:
            guard let text = try? read("memory.events") else { return nil }
            let now = OOMCounters(text)
            let peak = (try? read("memory.peak")).flatMap { UInt64($0.trimmingWhitespace()) }
            guard now.oomKill > oomBaseline.oomKill || now.groupKill > oomBaseline.groupKill else {
                return lc_xattr_exists(path, "user.oomd_ooms") == 1
                    ? OutOfMemory(limit: nil, peak: peak, killer: .systemdOOMD) : nil
            }
            let limit =
                now.oom > oomBaseline.oom
                ? (try? read("memory.max")).flatMap { UInt64($0.trimmingWhitespace()) } : nil
            return OutOfMemory(limit: limit, peak: peak)
        case .cgroupV1:
            guard let v1 = v1Memory, let text = try? Posix.readFile(v1 + "/memory.oom_control"),
                (MemoryProbe.statValue(text, "oom_kill") ?? 0) > 0
            else { return nil }
            let peak = (try? Posix.readFile(v1 + "/memory.max_usage_in_bytes")).flatMap {
                UInt64($0.trimmingWhitespace())
            }
            return OutOfMemory(limit: nil, peak: peak)
        case .processPSS: return nil
        }
    }

    /// A pidfd of each process taken before the kill (so that no pid can be
    /// reused under us), cgroup.kill, then process_mrelease (Linux 5.15+) of
    /// each: the memory comes back in our context, at once, whether the
    /// dying processes get a CPU or not (they may be frozen).
    public func killForMemory(pidfd: Int32) -> (before: MemoryUse?, after: MemoryUse?) {
        let pidfds = pids().map { lc_pidfd_open($0) }.filter { $0 >= 0 }
        defer { for fd in pidfds { Posix.close(fd) } }
        let before = memoryUse()
        killAll()
        if pidfd >= 0 { _ = lc_pidfd_send_signal(pidfd, SIGKILL) }
        for fd in pidfds { _ = lc_process_mrelease(fd) }  // EINVAL: it had already gone
        return (before, memoryUse())
    }

    /// memory.low, cpu.weight and systemd-oomd's xattrs, as given. A
    /// failed write is not an error here: the group may be going, and the
    /// next transition writes again.
    public func stand(_ standing: GroupStanding) {
        if let low = standing.memoryLow, memory == .cgroupV2 {
            try? write("memory.low", low == .max ? "max" : String(low))
        }
        if let weight = standing.cpuWeight {
            try? write("cpu.weight", String(weight))
        }
        if let oomd = standing.oomd, memory == .cgroupV2 {
            // Both xattrs are read by systemd-oomd on root-owned cgroups only, which ours are.
            for (name, wanted) in [("user.oomd_omit", oomd == .omit), ("user.oomd_avoid", oomd == .avoid)] {
                _ = lc_xattr_flag(path, name, wanted ? 1 : 0)
            }
        }
    }

    /// Starts freezing; true when the freeze is already complete. A busy
    /// process can take a scheduler tick or two: poll `isFrozen()` after.
    public func freeze() throws(SystemError) -> Bool {
        try write("cgroup.freeze", "1")
        return isFrozen()
    }

    /// Reads cgroup.events' "frozen" line.
    public func isFrozen() -> Bool {
        guard let events = try? read("cgroup.events") else { return false }
        return events.contains("frozen 1")
    }

    public func freezeAsked() -> Bool {
        (try? read("cgroup.freeze"))?.hasPrefix("1") ?? false
    }

    public func thaw() throws(SystemError) {
        try write("cgroup.freeze", "0")
    }

    /// SIGKILLs every process: cgroup.kill (Linux 5.14+), else each pid of
    /// cgroup.procs. Works on frozen processes without thawing them.
    public func killAll() {
        // Its open directory is this group (gone, it has no files to
        // write); without it, the path must still name this group.
        guard directory >= 0 || stillItself else { return }
        if (try? write("cgroup.kill", "1")) != nil { return }
        for pid in pids() { Posix.signal(pid, SIGKILL) }
    }

    public func pids() -> [Int32] { Self.pids(listed: try? read("cgroup.procs")) }

    static func pids(_ procsFile: String) -> [Int32] { pids(listed: try? Posix.readFile(procsFile)) }

    private static func pids(listed text: String?) -> [Int32] {
        text?.split(separator: "\n").compactMap { Int32($0) } ?? []
    }

    public func contains(_ pid: Int32) -> Bool { pids().contains(pid) }

    public var populated: Bool {
        guard let events = try? read("cgroup.events") else { return false }
        return events.contains("populated 1")
    }

    public func remove() -> Bool {
        closeDirectory()
        spawned()
        // Gone already, or the path is another group's now (its v1 copy
        // too): nothing of ours is left to remove.
        guard stillItself else { return true }
        if let v1 = v1Memory {
            for pid in Self.pids(v1 + "/cgroup.procs") { Posix.signal(pid, SIGKILL) }
            if !Posix.remove(directory: v1) { return false }
            v1Memory = nil
        }
        return Posix.remove(directory: path)
    }

    public func setOOMScoreAdjust(_ value: Int32) {
        for pid in pids() { Posix.setOOMScoreAdjust(pid, value) }
    }

    public func cpuMicroseconds() -> UInt64? {
        guard let text = try? read("cpu.stat") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("usage_usec ") {
            return UInt64(line.dropFirst("usage_usec ".count))
        }
        return nil
    }
}

/// The OOM counters of a cgroup v2 memory.events (missing keys, on older
/// kernels, read as zero: `oom_group_kill` came in Linux 5.17).
struct OOMCounters: Equatable {
    var oom: UInt64 = 0
    var oomKill: UInt64 = 0
    var groupKill: UInt64 = 0

    init() {}

    init(_ text: String) {
        oom = MemoryProbe.statValue(text, "oom") ?? 0
        oomKill = MemoryProbe.statValue(text, "oom_kill") ?? 0
        groupKill = MemoryProbe.statValue(text, "oom_group_kill") ?? 0
    }
}
