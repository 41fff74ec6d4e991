@preconcurrency import Glibc
import CSystemd
import CSystemdBus
import SystemPackage

/// Under systemd the apps do not live in the daemon's service: they live in
/// one transient scope beside it, `NAME-apps.scope` for `NAME.service`, so
/// that a crash, a watchdog abort or a restart of the service (which kill
/// whatever is left in the service's cgroup) never touches them. The scope
/// is delegated to us (Delegate=yes), stopped after the service when the
/// service is stopped (PartOf=, Before=), and held open by a keeper process
/// while no app runs (systemd 252 has no empty scopes). Decision and
/// evidence: docs/architecture.md ("Under systemd: where apps live") and
/// docs/research/systemd-252-scopes.md.
public enum AppsScope {
    /// How the keeper is started: the daemon's own binary with this one
    /// argument, which only waits (`keep()`).
    public static let keeperArgument = "--apps-scope-keeper"
    /// Its name in ps, top and `systemctl status` (15 bytes at most).
    public static let keeperName = "lc-apps-keeper"

    /// The service we run as, its slice, and the scope for its apps; nil
    /// unless systemd started us as a system service and we are still in
    /// the root of its cgroup (a user service, a login shell or a process
    /// in a sub-cgroup keeps the daemon's own cgroup tree).
    public static func names() -> (service: String, slice: String?, scope: String)? {
        guard getenv("INVOCATION_ID") != nil, sd_booted() > 0 else { return nil }
        var unit: UnsafeMutablePointer<CChar>?, slice: UnsafeMutablePointer<CChar>?
        defer {
            free(unit)
            free(slice)
        }
        guard lc_own_unit(&unit, &slice) >= 0, let unit else { return nil }
        let service = String(cString: unit)
        guard service.hasSuffix(".service"), Cgroups.ownCgroup()?.hasSuffix("/" + service) == true else { return nil }
        return (service, slice.map { String(cString: $0) }, String(service.dropLast(8)) + "-apps.scope")
    }

    /// The scope's cgroup (relative to the v2 mount) when it is there and
    /// active, else created around a fresh keeper. `created` tells which.
    public static func take(
        scope: String, service: String, slice: String?
    ) throws(SystemdError) -> (cgroup: String, created: Bool) {
        switch state(scope) {
        case .success(let found?):
            guard found.active == "active" else {
                throw SystemdError("\(scope) is \(found.active), not active: cannot put apps in it")
            }
            return (found.cgroup, false)
        case .failure(let e): throw e
        case .success(nil): break
        }
        let keeper: Int32
        do { keeper = try spawnKeeper(into: -1) } catch {
            throw SystemdError("cannot start the scope's keeper: \(error)")
        }
        var message: UnsafeMutablePointer<CChar>?
        defer { free(message) }
        let r = lc_scope_start(
            scope, keeper, service, slice, "lifecycled apps of \(service)", 5_000_000, &message)
        guard r >= 0 else {
            Posix.signal(keeper, SIGKILL)
            throw SystemdError("StartTransientUnit \(scope): \(message.map { String(cString: $0) } ?? "error \(-r)")")
        }
        guard case .success(let found?) = state(scope), found.active == "active" else {
            throw SystemdError("\(scope) was started but is not active")
        }
        return (found.cgroup, true)
    }

    /// A loaded unit's ActiveState and, for a scope, its ControlGroup; nil
    /// when systemd has no such unit.
    static func state(_ unit: String) -> Result<(active: String, cgroup: String)?, SystemdError> {
        var active: UnsafeMutablePointer<CChar>?, cgroup: UnsafeMutablePointer<CChar>?
        var message: UnsafeMutablePointer<CChar>?
        defer {
            free(active)
            free(cgroup)
            free(message)
        }
        let r = lc_unit_state(unit, &active, &cgroup, &message)
        if r == -ENOENT { return .success(nil) }
        guard r >= 0, let active else {
            return .failure(SystemdError("\(unit): \(message.map { String(cString: $0) } ?? "error \(-r)")"))
        }
        return .success((String(cString: active), cgroup.map { String(cString: $0) } ?? ""))
    }

    /// The type of the job systemd has queued or is running on `unit`
    /// ("restart", "stop", ...), nil when none or when it cannot be read.
    public static func jobType(_ unit: String) -> String? {
        var type: UnsafeMutablePointer<CChar>?, message: UnsafeMutablePointer<CChar>?
        defer {
            free(type)
            free(message)
        }
        guard lc_unit_job_type(unit, &type, &message) >= 0, let type else { return nil }
        return String(cString: type)
    }

    /// Starts a keeper: our own binary with `keeperArgument`, stdio on
    /// /dev/null, a session of its own; cloned into the cgroup directory
    /// `cgroupFD` when it is not -1.
    public static func spawnKeeper(into cgroupFD: Int32) throws(SpawnError) -> Int32 {
        // The binary's real path, so that the keeper is named like us; a
        // replaced binary reads "... (deleted)": /proc/self/exe still works.
        var path = (try? Posix.readLink("/proc/self/exe")) ?? "/proc/self/exe"
        if path.hasSuffix(" (deleted)") || access(path, X_OK) != 0 { path = "/proc/self/exe" }
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        guard null >= 0 else { throw SpawnError(step: "open /dev/null", errno: Errno(rawValue: errno)) }
        defer { close(null) }
        let keeper = try Spawner.start(
            path, argv: ["lifecycled", keeperArgument], environment: [:], workingDirectory: nil,
            cgroupFD: cgroupFD, v1ProcsFD: -1, inherit: [(null, 0), (null, 1), (null, 2)])
        if keeper.pidfd >= 0 { close(keeper.pidfd) }
        return keeper.pid
    }

    /// The keeper's whole life: hold the scope open until killed. It keeps
    /// nothing open and allocates nothing; SIGTERM and SIGKILL end it.
    public static func keep() -> Never {
        try? Posix.writeFile("/proc/self/comm", keeperName)
        while true { pause() }
    }
}

/// A systemd call that failed, with systemd's own words.
public struct SystemdError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}
