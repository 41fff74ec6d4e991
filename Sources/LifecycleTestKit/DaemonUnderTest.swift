import Foundation
@preconcurrency import Glibc
import CLifecycleShim
import LifecycleControl
import LifecycleOS

// LifecycleTestKit: a real lifecycled under test, for the end-to-end tests
// and the benchmarks. It plays systemd (a NOTIFY_SOCKET it reads like
// systemd does) and the user (commands, `events --follow`).

/// Where `swift build` put the executables: beside the test or bench binary.
public let buildDirectory: String = {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
    var dir = (exe as NSString).deletingLastPathComponent
    // The test binary may sit inside an .xctest bundle directory.
    while !dir.isEmpty && dir != "/" && !FileManager.default.fileExists(atPath: dir + "/lifecycled") {
        dir = (dir as NSString).deletingLastPathComponent
    }
    return dir
}()

public func binary(_ name: String) -> String { buildDirectory + "/" + name }

public struct TestFailure: Error, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { description = d }
}

/// A real lifecycled, with its own temporary config, apps, control socket,
/// cgroup subtree and a NOTIFY_SOCKET this test owns (it is the service
/// manager here). Stopped and checked for leftovers by `stop()`.
public final class DaemonUnderTest {
    public let dir: String
    public let socket: String
    public let cgroupRoot: String
    public let notify: NotifySocket
    public let pid: Int32
    public let pidfd: Int32
    public private(set) var stopped = false
    /// A daemon started on this one's state took over its apps and cgroups.
    var handedOver = false
    let environment: [String: String]

    /// A daemon file's directory lines, each in the daemon file's own
    /// directory, for those `daemon` (the test's own lines) does not name:
    /// the defaults are the system's (/run, /var/lib and /var/log/lifecycled),
    /// which a test must never write to.
    public static func ownDirectories(besides daemon: String = "") -> String {
        var lines = ""
        for (key, value) in [("state_directory", "state"), ("runtime_directory", "run"), ("log_directory", "logs")]
        where !daemon.contains(key) {
            lines += "\(key) = \"\(value)\"\n"
        }
        return lines
    }

    /// `apps`: name -> manifest text. `daemon`: extra daemon config lines.
    /// `launcher`: a command that runs the daemon (its path and arguments
    /// follow), as a script or a service manager would start it.
    public init(
        apps: [String: String], daemon: String = "", cgroupRoot: String? = nil,
        environment: [String: String] = [:], launcher: [String] = []
    ) throws {
        dir = FileManager.default.temporaryDirectory.path + "/lifecycled-test-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir + "/apps", withIntermediateDirectories: true)
        socket = dir + "/control.sock"
        self.cgroupRoot = cgroupRoot ?? "/lifecycled-test-\(UUID().uuidString.prefix(8))"
        var preamble = daemon.contains("event_history") ? "" : "event_history = 10000\n"
        preamble += Self.ownDirectories(besides: daemon)
        // Tables ([memory]) must come after the top-level keys.
        try "apps_dir = \"apps\"\n\(preamble)\(daemon)\n".write(
            toFile: dir + "/lifecycled.toml", atomically: true, encoding: .utf8)
        for (name, text) in apps {
            try text.write(toFile: dir + "/apps/\(name).toml", atomically: true, encoding: .utf8)
        }
        notify = try NotifySocket(path: dir + "/notify.sock")
        self.environment = environment
        (pid, pidfd) = try Self.start(
            dir: dir, socket: socket, cgroupRoot: self.cgroupRoot, notify: notify, environment, launcher: launcher)
    }

    /// A new daemon on `earlier`'s config, state and cgroups, as an operator
    /// (or systemd) starts one after a crash: it takes over its apps.
    public init(after earlier: DaemonUnderTest) throws {
        dir = earlier.dir
        socket = earlier.socket
        cgroupRoot = earlier.cgroupRoot
        environment = earlier.environment
        // Eight hex digits: with four, a chaos walk's twenty restarts in one
        // directory met an earlier daemon's socket about once in 300 walks
        // (seen: "cannot bind .../notify-7889.sock").
        notify = try NotifySocket(path: dir + "/notify-\(UUID().uuidString.prefix(8)).sock")
        earlier.handedOver = true
        (pid, pidfd) = try Self.start(dir: dir, socket: socket, cgroupRoot: cgroupRoot, notify: notify, environment)
    }

    private static func start(
        dir: String, socket: String, cgroupRoot: String, notify: NotifySocket, _ environment: [String: String],
        launcher: [String] = []
    ) throws -> (Int32, Int32) {
        var env = ProcessInfo.processInfo.environment
        env["NOTIFY_SOCKET"] = notify.path
        env["PATH"] = buildDirectory + ":" + (env["PATH"] ?? "/usr/bin:/bin")
        // No test daemon touches the machine's system bus: one that is
        // about D-Bus gives its private bus's address.
        env["DBUS_SYSTEM_BUS_ADDRESS"] = "unix:path=\(dir)/no-bus.sock"
        for (k, v) in environment { env[k] = v }
        let argv =
            launcher + [
                binary("lifecycled"), "--config", dir + "/lifecycled.toml", "--control-socket", socket,
                "--cgroup-root", cgroupRoot,
            ]
        let log = open(dir + "/daemon.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        defer { close(log) }
        let p = try Spawner.spawn(
            SpawnRequest(
                executable: argv[0], arguments: Array(argv.dropFirst()),
                environment: env, workingDirectory: dir, group: AppProcessGroup(),
                inherit: [(log, 1), (log, 2)]))
        // READY=1 arrives only once the socket listens and the daemon sits in its leaf.
        guard try notify.waitFor("READY=1", seconds: 20) else {
            let log = (try? String(contentsOfFile: dir + "/daemon.log", encoding: .utf8)) ?? ""
            throw TestFailure("lifecycled did not send READY=1; its log:\n\(log)")
        }
        return (p.pid, p.pidfd)
    }

    /// After a failed test: stop the daemon gracefully if it will, else
    /// SIGKILL it; then kill whatever its apps left and remove the subtree,
    /// so that a failure leaves nothing running.
    deinit {
        if !stopped {
            kill(pid, SIGTERM)
            var p = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
            if poll(&p, 1, 10_000) != 1 {
                kill(pid, SIGKILL)
                poll(&p, 1, 5000)
            }
            var st = lc_child_status()
            lc_reap(pid, &st)
        }
        close(pidfd)
        guard !handedOver else { return }
        removeSubtree(cgroupPath)
        removeV1(v1MemoryPath)
        // Its config, state and logs: gone with it, unless asked to keep them
        // (LIFECYCLED_KEEP_TEST_DIRS=1, to look at a failure).
        if !keepTestDirectories { try? FileManager.default.removeItem(atPath: dir) }
    }

    /// The v1 memory hierarchy's copy (hybrid machines): its processes are
    /// gone with the v2 subtree; rmdir from the leaves up.
    private func removeV1(_ path: String) {
        guard let children = try? FileManager.default.contentsOfDirectory(atPath: path) else { return }
        for child in children
        where (try? FileManager.default.attributesOfItem(atPath: path + "/" + child)[.type] as? FileAttributeType)
            == .typeDirectory
        {
            removeV1(path + "/" + child)
        }
        rmdir(path)
    }

    public var v1MemoryPath: String { "/sys/fs/cgroup/memory" + cgroupRoot }

    /// cgroup.kill, then rmdir from the leaves up (waiting on cgroup.events
    /// via inotify for each cgroup to empty).
    private func removeSubtree(_ path: String) {
        guard FileManager.default.fileExists(atPath: path) else { return }
        try? "1".write(toFile: path + "/cgroup.kill", atomically: false, encoding: .utf8)
        let children = ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [])
            .filter {
                (try? FileManager.default.attributesOfItem(atPath: path + "/" + $0)[.type] as? FileAttributeType)
                    == .typeDirectory
            }
        for child in children { removeSubtree(path + "/" + child) }
        let fd = inotify_init1(Int32(IN_CLOEXEC))
        defer { close(fd) }
        inotify_add_watch(fd, path + "/cgroup.events", UInt32(IN_MODIFY))
        for _ in 0..<50 where rmdir(path) != 0 && errno == EBUSY {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            poll(&p, 1, 100)
            var buf = [UInt8](repeating: 0, count: 256)
            if p.revents != 0 { _ = read(fd, &buf, buf.count) }
        }
    }

    public var daemonLog: String { (try? String(contentsOfFile: dir + "/daemon.log", encoding: .utf8)) ?? "" }

    public func path(_ name: String) -> String { dir + "/" + name }

    public func client() throws -> ControlClient {
        let c = try ControlClient(path: socket)
        c.setReadTimeout(seconds: 30)
        return c
    }

    /// Sends a command; throws with the daemon's message if refused.
    @discardableResult
    public func command(_ r: ControlRequest) throws -> ControlResponse {
        let resp = try client().send(r)
        guard resp.ok else { throw TestFailure("\(r.command.rawValue) refused: \(resp.error?.message ?? "?")") }
        return resp
    }

    public func status(_ app: String) throws -> AppStatus {
        try command(ControlRequest(.status, apps: [app])).status!.apps[0]
    }

    /// A follower of `events --follow`, to wait for records as they happen.
    public func follow(_ apps: [String]? = nil) throws -> Follower { try Follower(client(), apps: apps) }

    /// Runs supervisorctl against this daemon; returns (exit code, stdout, stderr).
    public func ctl(_ args: [String], user: String? = nil) throws -> (Int32, String, String) {
        var argv = [binary("supervisorctl")] + args + ["--socket", socket]
        if let user { argv = asUser(user, argv) }
        return try run(argv)
    }

    /// SIGTERM, as systemd would; waits for a clean exit and checks that no
    /// cgroup is left behind.
    @discardableResult
    public func stop(seconds: Int32 = 30) throws -> Int32 {
        let st = try end(with: SIGTERM, seconds: seconds)
        return st.exited != 0 ? st.value : 128 + st.value
    }

    /// Sends `signal` and waits (at most `seconds`, a failure bound) for the
    /// daemon to end; returns how it ended. Its apps are left as a crash
    /// leaves them (deinit removes them).
    public func crash(with signal: Int32, seconds: Int32 = 10) throws -> (signaled: Bool, value: Int32) {
        let st = try end(with: signal, seconds: seconds)
        return (st.exited == 0, st.value)
    }

    private func end(with signal: Int32, seconds: Int32) throws -> lc_child_status {
        kill(pid, signal)
        var p = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, seconds * 1000) == 1 else {
            throw TestFailure("lifecycled did not end within \(seconds) s of signal \(signal)")
        }
        var st = lc_child_status()
        lc_reap(pid, &st)
        stopped = true
        return st
    }

    /// Starts a daemon on `earlier`'s config, state and cgroups and SIGKILLs
    /// it `microseconds` later, whatever it is doing then (reading the
    /// state, taking apps back, its first steps); returns once it is gone.
    /// Whether it got as far as READY=1 is its own business: the chaos test
    /// kills daemons at random instants of their start.
    public static func killDuringStart(after earlier: DaemonUnderTest, microseconds: UInt32) throws {
        var env = ProcessInfo.processInfo.environment
        env["PATH"] = buildDirectory + ":" + (env["PATH"] ?? "/usr/bin:/bin")
        env["NOTIFY_SOCKET"] = nil
        for (k, v) in earlier.environment { env[k] = v }
        let log = open(earlier.dir + "/daemon.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        defer { close(log) }
        let p = try Spawner.spawn(
            SpawnRequest(
                executable: binary("lifecycled"),
                arguments: [
                    "--config", earlier.dir + "/lifecycled.toml", "--control-socket", earlier.socket,
                    "--cgroup-root", earlier.cgroupRoot,
                ],
                environment: env, workingDirectory: earlier.dir, group: AppProcessGroup(),
                inherit: [(log, 1), (log, 2)]))
        defer { close(p.pidfd) }
        if microseconds > 0 { usleep(microseconds) }
        kill(p.pid, SIGKILL)
        var pfd = pollfd(fd: p.pidfd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, 10_000) == 1 else { throw TestFailure("lifecycled did not end after SIGKILL") }
        var st = lc_child_status()
        lc_reap(p.pid, &st)
    }

    /// The daemon's subtree: under /sys/fs/cgroup/unified here (the hybrid
    /// layout), /sys/fs/cgroup on pure cgroup v2 (the virtual machine).
    public var cgroupPath: String { (Cgroups.v2Mount() ?? "/sys/fs/cgroup/unified") + cgroupRoot }
}

/// Runs a command to completion; returns (exit code, stdout, stderr).
/// `argv` run as `user` (nobody with nogroup), with only `groups` (a
/// comma-separated list of group names; nil: none) as supplementary groups.
public func asUser(_ user: String, groups: String? = nil, _ argv: [String]) -> [String] {
    ["/usr/bin/setpriv", "--reuid=\(user)", "--regid=\(user == "nobody" ? "nogroup" : user)"]
        + [groups.map { "--groups=\($0)" } ?? "--clear-groups"] + argv
}

public func run(_ argv: [String], environment: [String: String]? = nil) throws -> (Int32, String, String) {
    let dir = FileManager.default.temporaryDirectory.path + "/run-\(UUID().uuidString.prefix(8))"
    let out = open(dir + ".out", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    let err = open(dir + ".err", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    defer { close(out); close(err); unlink(dir + ".out"); unlink(dir + ".err") }
    let p = try Spawner.spawn(
        SpawnRequest(
            executable: argv[0], arguments: Array(argv.dropFirst()),
            environment: environment ?? ProcessInfo.processInfo.environment, workingDirectory: nil,
            group: AppProcessGroup(), inherit: [(out, 1), (err, 2)]))
    var pfd = pollfd(fd: p.pidfd, events: Int16(POLLIN), revents: 0)
    // Longer than supervisorctl's own 60 s wait, so that its message says why.
    guard poll(&pfd, 1, 90_000) == 1 else {
        kill(p.pid, SIGKILL)
        let said = [dir + ".out", dir + ".err"].compactMap { try? String(contentsOfFile: $0, encoding: .utf8) }
        throw TestFailure("\(argv.joined(separator: " ")) did not finish in 90 s; it said: \(said.joined())")
    }
    var st = lc_child_status()
    lc_reap(p.pid, &st)
    close(p.pidfd)
    let o = (try? String(contentsOfFile: dir + ".out", encoding: .utf8)) ?? ""
    let e = (try? String(contentsOfFile: dir + ".err", encoding: .utf8)) ?? ""
    return (st.exited != 0 ? st.value : 128 + st.value, o, e)
}

/// Lines of a file written by an example app (comments starting with # kept).
public func lines(_ path: String) -> [String] {
    ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
}

/// Waits until the file at `path` has a line `line`, woken by inotify on
/// every write (a plain program says "started" once its signals are set up).
public func waitForLine(_ path: String, _ line: String, seconds: Int32 = 20) throws {
    try waitForLine(path, "the line '\(line)'", seconds: seconds) { $0 == line }
}

/// The same for a line that `matches` (a daemon's log line, whose time
/// stamp comes first).
public func waitForLine(
    _ path: String, _ what: String, seconds: Int32 = 20, where matches: (String) -> Bool
) throws {
    let fd = inotify_init1(Int32(IN_CLOEXEC))
    defer { close(fd) }
    let dir = (path as NSString).deletingLastPathComponent
    inotify_add_watch(fd, dir, UInt32(IN_MODIFY | IN_CREATE))
    let deadline = Date().addingTimeInterval(Double(seconds))
    while !lines(path).contains(where: matches) {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let left = Int32(max(1, deadline.timeIntervalSinceNow * 1000))
        guard Date() < deadline, poll(&p, 1, left) == 1 else {
            throw TestFailure("\(path) never got \(what)")
        }
        var buf = [UInt8](repeating: 0, count: 4096)
        _ = read(fd, &buf, buf.count)
    }
}

/// A daemon file's two displays, one slot each: a car's centre display and
/// its cluster (the scene tests and the scene benchmark).
public let twoDisplays = """
    [[display]]
    name = "centre"
    slots = 1

    [[display]]
    name = "cluster"
    slots = 1
    """
