@preconcurrency import Glibc
import CLifecycleShim
import SystemPackage

/// Who a process runs as, and with what power: the manifest's `user`,
/// `group`, `supplementary_groups`, `no_new_privileges`, `capabilities`
/// and `umask` (docs/configuration.md).
public struct SpawnCredentials: Sendable, Equatable {
    /// The user and group to switch to, with its supplementary groups;
    /// nil: the daemon's own.
    public var uid: UInt32?
    public var gid: UInt32?
    public var groups: [UInt32] = []
    public var noNewPrivileges = true
    /// Bit N set: capability N stays in the bounding set.
    public var keepCapabilities: UInt64 = .max
    public var umask: UInt32? = 0o022
    /// The app's nice value: 0, whatever the daemon's own (it runs above
    /// its apps, so that a busy app or a flooding user cannot starve it).
    public var nice: Int32? = 0
    /// The app's `oom_score_adj`, written by the child before exec; nil:
    /// the daemon's own (-900, which the app would carry until the daemon
    /// wrote it after the launch's save). Not the manifest's: the daemon
    /// sets it from the state the app starts in.
    public var oomScoreAdjust: Int32? = nil

    public init() {}

    /// The capabilities by number (linux/capability.h), for the manifest's names.
    public static let capabilityNames = [
        "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
        "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
        "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE",
        "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT",
        "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
        "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
        "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
        "CAP_CHECKPOINT_RESTORE",
    ]

    /// Whether a process with these ids may execute `path`: a regular file
    /// with the execute bit that applies to it, in directories it may
    /// search (a command in root's home, found through root's PATH, is
    /// not one that `nobody` can run). Root may if any execute bit is set.
    public func mayExecute(_ path: String) -> Bool {
        guard let uid, uid != 0 else { return Spawner.isExecutableFile(path) }
        var st = stat()
        guard stat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG, allowed(st, uid) else { return false }
        var directory = path
        while let slash = directory.lastIndex(of: "/"), slash != directory.startIndex {
            directory = String(directory[..<slash])
            guard stat(directory, &st) == 0, allowed(st, uid) else { return false }
        }
        return true
    }

    /// The execute (search) bit of the owner, group or others, whichever applies.
    private func allowed(_ st: stat, _ uid: UInt32) -> Bool {
        if st.st_uid == uid { return st.st_mode & 0o100 != 0 }
        if st.st_gid == gid || groups.contains(st.st_gid) { return st.st_mode & 0o010 != 0 }
        return st.st_mode & 0o001 != 0
    }
}

/// What to start: the app's command line, environment and working
/// directory, its group, and the fds it inherits (source in the daemon,
/// number in the child).
public struct SpawnRequest {
    public var executable: String
    /// argv[0]; the executable's path when nil.
    public var argv0: String?
    /// argv[1...].
    public var arguments: [String]
    public var environment: [String: String]
    public var workingDirectory: String?
    public var group: any AppGroup
    public var inherit: [(source: Int32, target: Int32)]
    public var credentials: SpawnCredentials?

    public init(
        executable: String, argv0: String? = nil, arguments: [String], environment: [String: String],
        workingDirectory: String?, group: any AppGroup, inherit: [(source: Int32, target: Int32)] = [],
        credentials: SpawnCredentials? = nil
    ) {
        self.credentials = credentials
        self.executable = executable
        self.argv0 = argv0
        self.arguments = arguments
        self.environment = environment
        self.workingDirectory = workingDirectory
        self.group = group
        self.inherit = inherit
    }
}

public struct SpawnedProcess: Sendable {
    public var pid: Int32
    public var pidfd: Int32
    /// False when the kernel lacked clone3 and the child was moved after fork.
    public var placedAtomically: Bool

    public init(pid: Int32, pidfd: Int32, placedAtomically: Bool) {
        self.pid = pid
        self.pidfd = pidfd
        self.placedAtomically = placedAtomically
    }
}

public struct SpawnError: Error, CustomStringConvertible, Sendable {
    /// The step of a spawn helper that could not be asked (`HelperSpawner`).
    public static let helperStep = "ask the spawn helper"
    public var step: String
    public var errno: Errno
    public var description: String { "\(step): \(errno)" }

    public init(step: String, errno: Errno) {
        self.step = step
        self.errno = errno
    }
}

public enum Spawner {
    /// Starts the process inside its group before it runs an instruction of
    /// its own (clone3 with CLONE_INTO_CGROUP, in the C shim). Exec errors
    /// come back here, synchronously: the group is fresh, never frozen.
    public static func spawn(_ request: SpawnRequest, helper: Int32 = -1) throws(SpawnError) -> SpawnedProcess {
        let (cgroupFD, v1ProcsFD): (Int32, Int32) =
            switch request.group.placement {
            case .cgroup(let directory, let v1Procs): (directory, v1Procs)
            case .processGroup: (-1, -1)
            }
        let spawned: SpawnedProcess
        do throws(SpawnError) {
            spawned = try start(
                request.executable, argv: [request.argv0 ?? request.executable] + request.arguments,
                environment: request.environment, workingDirectory: request.workingDirectory, cgroupFD: cgroupFD,
                v1ProcsFD: v1ProcsFD, inherit: request.inherit, credentials: request.credentials, helper: helper)
        } catch {
            // A helper that could not be asked started nothing: the group's
            // descriptors stay for the next way of spawning.
            if error.step != SpawnError.helperStep { request.group.spawned() }
            throw error
        }
        request.group.spawned()
        request.group.pid = spawned.pid
        return spawned
    }

    /// The C shim's spawn, for callers with no group (the systemd scope's
    /// keeper): into the cgroup directory `cgroupFD` when it is not -1,
    /// joining the v1 memory cgroup `v1ProcsFD` when it is not -1; through
    /// the spawn helper on `helper` when it is not -1 (`HelperSpawner`).
    public static func start(
        _ executable: String, argv: [String], environment: [String: String], workingDirectory: String?,
        cgroupFD: Int32, v1ProcsFD: Int32, inherit: [(source: Int32, target: Int32)],
        credentials: SpawnCredentials? = nil, helper: Int32 = -1
    ) throws(SpawnError) -> SpawnedProcess {
        let argvCopies = argv.map { strdup($0) }
        // Every "NAME=value" copied whole into one block, and the pointers
        // sorted with strcmp, so that every launch gets the same order (the
        // names' byte order, but that "A=..." comes after "A1=...", "=" being
        // after the digits). Sorted with String's `<` (Unicode's order) and
        // copied one by one, through an interpolated String each, the
        // environment was 190 k instructions of a launch with fifty
        // variables (docs/performance.md).
        let envBlock = UnsafeMutablePointer<CChar>.allocate(
            capacity: environment.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count + 2 })
        defer {
            for p in argvCopies { free(p) }
            envBlock.deallocate()
        }
        var end = envBlock
        func put(_ text: String, then last: CChar) {
            var text = text
            text.withUTF8 { bytes in
                if let base = bytes.baseAddress {
                    UnsafeMutableRawPointer(end).copyMemory(from: base, byteCount: bytes.count)
                }
                end += bytes.count
            }
            end.pointee = last
            end += 1
        }
        var envpC: [UnsafeMutablePointer<CChar>?] = []
        envpC.reserveCapacity(environment.count + 1)
        for (name, value) in environment {
            envpC.append(end)
            put(name, then: 0x3D)  // "="
            put(value, then: 0)
        }
        envpC.sort { strcmp($0!, $1!) < 0 }
        envpC.append(nil)
        var argvC: [UnsafeMutablePointer<CChar>?] = argvCopies + [nil]
        var map: [Int32] = inherit.flatMap { [$0.source, $0.target] }
        var groups: [gid_t] = credentials?.groups ?? []
        var pidfd: Int32 = -1, step: Int32 = 0, atomic: Int32 = 0
        let pid: pid_t = executable.withCString { path in
            (workingDirectory ?? "").withCString { cwd in
                argvC.withUnsafeMutableBufferPointer { a in
                    envpC.withUnsafeMutableBufferPointer { e in
                        map.withUnsafeMutableBufferPointer { m in
                            groups.withUnsafeMutableBufferPointer { g in
                                let given = credentials ?? SpawnCredentials()
                                var creds = lc_spawn_credentials(
                                    set_ids: given.uid == nil ? 0 : 1, uid: given.uid ?? 0, gid: given.gid ?? 0,
                                    groups: g.baseAddress, group_count: Int32(g.count),
                                    no_new_privs: given.noNewPrivileges ? 1 : 0, keep_caps: given.keepCapabilities,
                                    umask: given.umask.map { Int32($0) } ?? -1, nice: given.nice ?? Int32.min,
                                    oom_score_adj: given.oomScoreAdjust ?? Int32.min)
                                return withUnsafePointer(to: &creds) { c in
                                    var req = lc_spawn_request(
                                        path: path, argv: a.baseAddress, envp: e.baseAddress,
                                        cwd: workingDirectory == nil ? nil : cwd,
                                        cgroup_fd: cgroupFD, v1_procs_fd: v1ProcsFD,
                                        fd_map: m.baseAddress, fd_map_count: Int32(inherit.count),
                                        credentials: credentials == nil ? nil : c)
                                    return helper >= 0
                                        ? lc_spawn_via(helper, &req, &pidfd, &step, &atomic)
                                        : lc_spawn(&req, &pidfd, &step, &atomic)
                                }
                            }
                        }
                    }
                }
            }
        }
        guard pid > 0 else {
            let names = [
                1: "clone3", 2: "join memory cgroup", 3: "set up file descriptors",
                4: "reset signals", 5: "setsid", 6: "chdir", 7: "execve",
                8: "drop capabilities", 9: "set user and groups", 10: "no_new_privileges",
                Int(LC_STEP_HELPER.rawValue): SpawnError.helperStep,
            ]
            throw SpawnError(step: names[Int(step)] ?? "spawn", errno: Errno(rawValue: Glibc.errno))
        }
        return SpawnedProcess(pid: pid, pidfd: pidfd, placedAtomically: atomic != 0)
    }

    /// Resolves a command the way a shell would: a name with a slash as is
    /// (relative to `base`), anything else through `searchPath`.
    /// `credentials`: for the user the process will run as.
    public static func resolve(
        _ command: String, searchPath: String, base: String, credentials: SpawnCredentials = SpawnCredentials()
    ) -> String? {
        if command.contains("/") {
            let path = command.hasPrefix("/") ? command : base + "/" + command
            return credentials.mayExecute(path) ? path : nil
        }
        for dir in searchPath.split(separator: ":") where !dir.isEmpty {
            let path = "\(dir)/\(command)"
            if credentials.mayExecute(path) { return path }
        }
        return nil
    }

    /// A regular file this process may execute (a directory has x too).
    static func isExecutableFile(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFREG && access(path, X_OK) == 0
    }
}

/// Starts processes: the kernel's `Spawner`, or a test's fake process table.
public protocol ProcessStarter: AnyObject {
    func spawn(_ request: SpawnRequest) throws(SpawnError) -> SpawnedProcess
}

/// The real one: clone3 into the group, exec errors reported synchronously.
public final class KernelSpawner: ProcessStarter {
    public init() {}
    public func spawn(_ request: SpawnRequest) throws(SpawnError) -> SpawnedProcess { try Spawner.spawn(request) }
}

/// The daemon's: every app started by the spawn helper (lc_spawn_helper_start,
/// docs/architecture.md "The spawn helper"), a small process forked while
/// the daemon was small, so that a launch copies neither the daemon's
/// address space nor its descriptor table (three per running app): its
/// cost no longer grows with the number of running apps. The child is
/// still the daemon's (CLONE_PARENT): reaped, signalled and adopted as
/// before.
///
/// A helper that is gone (killed, say) is replaced at the next launch; if
/// the new one cannot be asked either, or a request is too large for it
/// (over 1 MiB of command line and environment), the launch is made from
/// the daemon itself, as before the helper. `trouble` hears of each.
public final class HelperSpawner: ProcessStarter {
    private var socket: Int32 = -1
    private var pid: Int32 = 0
    private var pidfd: Int32 = -1
    /// Set after a replacement could not be asked either: launches come from the daemon.
    public private(set) var disabled = false
    /// What went wrong with the helper, for the daemon's log.
    let trouble: (String) -> Void

    /// Starts the helper: call it while the process is small.
    public init(trouble: @escaping (String) -> Void) {
        self.trouble = trouble
        if let problem = start() {
            disabled = true
            trouble("\(problem): launching from the daemon itself")
        }
    }

    /// The helper's pid, or nil when there is none.
    public var helperPID: Int32? { socket >= 0 ? pid : nil }

    private func start() -> String? {
        var child: pid_t = 0
        let fd = lc_spawn_helper_start(&child)
        guard fd >= 0 else { return "cannot start the spawn helper: \(Errno(rawValue: Glibc.errno))" }
        socket = fd
        pid = child
        pidfd = lc_pidfd_open(child)
        return nil
    }

    /// The helper goes: its socket closed (it leaves at EOF), killed and
    /// reaped through its pidfd (never a recycled pid: an app may have it
    /// by now), unless the daemon's reaper was first.
    private func stop() {
        guard socket >= 0 else { return }
        Posix.close(socket)
        socket = -1
        if pidfd >= 0 {
            _ = lc_pidfd_send_signal(pidfd, SIGKILL)
            var pfd = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
            _ = poll(&pfd, 1, 1000)
            _ = lc_reap_pidfd(pidfd)
            Posix.close(pidfd)
            pidfd = -1
        }
    }

    deinit { stop() }

    public func spawn(_ request: SpawnRequest) throws(SpawnError) -> SpawnedProcess {
        if !disabled {
            for attempt in 0..<2 {
                if socket < 0, let problem = start() {
                    disabled = true
                    trouble("\(problem): launching from the daemon itself")
                    break
                }
                do { return try Spawner.spawn(request, helper: socket) } catch
                    where error.step == SpawnError.helperStep
                {
                    if error.errno == .noFunction {
                        disabled = true
                        stop()
                        trouble(
                            "the kernel has no clone3, which the spawn helper needs: launching from the daemon itself")
                        break
                    }
                    if error.errno == .messageTooLong {
                        trouble(
                            "\(request.executable): its command line and environment are over the spawn helper's 1 MiB: launched from the daemon itself"
                        )
                        break
                    }
                    stop()
                    if attempt == 0 {
                        trouble("the spawn helper is gone (\(error.errno)): starting another")
                    } else {
                        disabled = true
                        trouble(
                            "the new spawn helper cannot be asked either (\(error.errno)): launching from the daemon itself from now on"
                        )
                    }
                }
            }
        }
        return try Spawner.spawn(request)
    }
}
