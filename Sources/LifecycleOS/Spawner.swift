@preconcurrency import Glibc
import CLifecycleShim
import SystemPackage

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

    public init(
        executable: String, argv0: String? = nil, arguments: [String], environment: [String: String],
        workingDirectory: String?, group: any AppGroup, inherit: [(source: Int32, target: Int32)] = []
    ) {
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
    public static func spawn(_ request: SpawnRequest) throws(SpawnError) -> SpawnedProcess {
        let (cgroupFD, v1ProcsFD): (Int32, Int32) =
            switch request.group.placement {
            case .cgroup(let directory, let v1Procs): (directory, v1Procs)
            case .processGroup: (-1, -1)
            }
        defer { request.group.spawned() }
        let spawned = try start(
            request.executable, argv: [request.argv0 ?? request.executable] + request.arguments,
            environment: request.environment, workingDirectory: request.workingDirectory, cgroupFD: cgroupFD,
            v1ProcsFD: v1ProcsFD, inherit: request.inherit)
        request.group.pid = spawned.pid
        return spawned
    }

    /// The C shim's spawn, for callers with no group (the systemd scope's
    /// keeper): into the cgroup directory `cgroupFD` when it is not -1,
    /// joining the v1 memory cgroup `v1ProcsFD` when it is not -1.
    public static func start(
        _ executable: String, argv: [String], environment: [String: String], workingDirectory: String?,
        cgroupFD: Int32, v1ProcsFD: Int32, inherit: [(source: Int32, target: Int32)]
    ) throws(SpawnError) -> SpawnedProcess {
        let argvCopies = argv.map { strdup($0) }
        let envp = environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") }
        defer {
            for p in argvCopies { free(p) }
            for p in envp { free(p) }
        }
        var argvC: [UnsafeMutablePointer<CChar>?] = argvCopies + [nil]
        var envpC: [UnsafeMutablePointer<CChar>?] = envp + [nil]
        var map: [Int32] = inherit.flatMap { [$0.source, $0.target] }
        var pidfd: Int32 = -1, step: Int32 = 0, atomic: Int32 = 0
        let pid: pid_t = executable.withCString { path in
            (workingDirectory ?? "").withCString { cwd in
                argvC.withUnsafeMutableBufferPointer { a in
                    envpC.withUnsafeMutableBufferPointer { e in
                        map.withUnsafeMutableBufferPointer { m in
                            var req = lc_spawn_request(
                                path: path, argv: a.baseAddress, envp: e.baseAddress,
                                cwd: workingDirectory == nil ? nil : cwd,
                                cgroup_fd: cgroupFD, v1_procs_fd: v1ProcsFD,
                                fd_map: m.baseAddress, fd_map_count: Int32(inherit.count))
                            return lc_spawn(&req, &pidfd, &step, &atomic)
                        }
                    }
                }
            }
        }
        guard pid > 0 else {
            let names = [
                1: "clone3", 2: "join memory cgroup", 3: "set up file descriptors",
                4: "reset signals", 5: "setsid", 6: "chdir", 7: "execve",
            ]
            throw SpawnError(step: names[Int(step)] ?? "spawn", errno: Errno(rawValue: Glibc.errno))
        }
        return SpawnedProcess(pid: pid, pidfd: pidfd, placedAtomically: atomic != 0)
    }

    /// Resolves a command the way a shell would: a name with a slash as is
    /// (relative to `base`), anything else through `searchPath`.
    public static func resolve(_ command: String, searchPath: String, base: String) -> String? {
        if command.contains("/") {
            let path = command.hasPrefix("/") ? command : base + "/" + command
            return isExecutableFile(path) ? path : nil
        }
        for dir in searchPath.split(separator: ":") where !dir.isEmpty {
            let path = "\(dir)/\(command)"
            if isExecutableFile(path) { return path }
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
