import Foundation
@preconcurrency import Glibc
import CLifecycleShim
import LifecycleOS

/// A system-type bus of the test's own: a real dbus-daemon on a socket in
/// a directory every user can reach (so that tests can call as `nobody`),
/// whose policy lets anyone own names and call anything. The daemon under
/// test finds it through DBUS_SYSTEM_BUS_ADDRESS (`environment`).
public final class PrivateBus {
    public let dir: String
    public let address: String
    public private(set) var pid: Int32
    private var pidfd: Int32

    /// `including`: a policy file (the project's dbus/io.lifecycled.Lifecycle1.conf)
    /// under the stock system bus's default policy (deny owning names and
    /// method calls, holes punched by the files included), instead of a
    /// policy that allows everything.
    public init(including policy: String? = nil) throws {
        dir = "/tmp/lifecycled-bus-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        chmod(dir, 0o755)
        // As /usr/share/dbus-1/system.conf has it.
        let stock = """
              <policy context="default">
                <allow user="*"/>
                <deny own="*"/>
                <deny send_type="method_call"/>
                <allow send_type="signal"/>
                <allow send_requested_reply="true" send_type="method_return"/>
                <allow send_requested_reply="true" send_type="error"/>
                <allow receive_type="method_call"/>
                <allow receive_type="method_return"/>
                <allow receive_type="error"/>
                <allow receive_type="signal"/>
                <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
                <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
                <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
              </policy>
              <include>\(policy ?? "")</include>
            """
        let config = Self.configuration(
            type: "system", listen: "unix:path=\(dir)/bus.sock", policy: policy == nil ? Self.openPolicy : stock)
        try config.write(toFile: dir + "/bus.conf", atomically: true, encoding: .utf8)
        address = "unix:path=\(dir)/bus.sock"
        (pid, pidfd) = try Self.start(dir)
    }

    /// A policy that lets anyone connect, own names and call anything.
    public static let openPolicy = """
          <policy context="default">
            <allow user="*"/>
            <allow own="*"/>
            <allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/>
          </policy>
        """

    /// A dbus-daemon's configuration: a bus of `type` (system, session)
    /// listening on `listen`, under `policy`.
    public static func configuration(type: String, listen: String, policy: String) -> String {
        """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>\(type)</type>
          <listen>\(listen)</listen>
          <auth>EXTERNAL</auth>
        \(policy)
        </busconfig>
        """
    }

    /// Starts dbus-daemon and waits for it to print its address, which it
    /// does once it listens.
    private static func start(_ dir: String) throws -> (Int32, Int32) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw TestFailure("pipe: \(errno)") }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        defer { close(fds[0]) }
        let p = try Spawner.spawn(
            SpawnRequest(
                executable: "/usr/bin/dbus-daemon",
                arguments: ["--config-file=\(dir)/bus.conf", "--nofork", "--print-address=3"],
                environment: ProcessInfo.processInfo.environment, workingDirectory: dir, group: AppProcessGroup(),
                inherit: [(fds[1], 3)]))
        close(fds[1])
        var printed: [UInt8] = []
        var byte: UInt8 = 0
        while !printed.contains(UInt8(ascii: "\n")) {
            var pfd = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 20_000) == 1, read(fds[0], &byte, 1) == 1 else {
                kill(p.pid, SIGKILL)
                throw TestFailure("dbus-daemon did not start (is dbus-daemon installed?)")
            }
            printed.append(byte)
        }
        return (p.pid, p.pidfd)
    }

    /// The bus daemon dies (SIGKILL) and, with `restart`, a new one listens
    /// at the same address.
    public func crash(restart: Bool) throws {
        end()
        unlink(dir + "/bus.sock")
        if restart { try start() }
    }

    /// After `crash(restart: false)`: a new bus daemon at the same address.
    public func start() throws {
        guard pid <= 0 else { return }
        (pid, pidfd) = try Self.start(dir)
    }

    private func end() {
        guard pid > 0 else { return }
        killAndReap(pid, pidfd)
        pid = -1
    }

    /// The bus daemon stops (SIGSTOP) or goes on (SIGCONT): a stalled bus.
    public func pause(_ stopped: Bool) { kill(pid, stopped ? SIGSTOP : SIGCONT) }

    /// For DaemonUnderTest's `environment`.
    public var environment: [String: String] { ["DBUS_SYSTEM_BUS_ADDRESS": address] }

    /// busctl on this bus (as `user`, when given).
    public func busctl(_ args: [String], user: String? = nil) throws -> (Int32, String, String) {
        var argv = ["/usr/bin/busctl", "--address=\(address)"] + args
        if let user { argv = asUser(user, argv) }
        return try run(argv)
    }

    /// Waits (at most `seconds`, a failure bound) until `name` has an owner,
    /// told by the bus (gdbus wait watches NameOwnerChanged).
    public func waitForName(_ name: String = "io.lifecycled.Lifecycle1", seconds: Int = 20) throws {
        let (code, _, err) = try run(["/usr/bin/gdbus", "wait", "--address", address, "--timeout", "\(seconds)", name])
        guard code == 0 else { throw TestFailure("\(name) not owned on the test bus within \(seconds) s: \(err)") }
    }

    deinit {
        end()
        try? FileManager.default.removeItem(atPath: dir)
    }
}

/// A real polkitd on a private bus, in a mount namespace of its own where
/// its actions directory holds only `policy` (the project's action file)
/// and its rules directories only `rules` (JavaScript, one file): no test
/// reads or writes the machine's polkit directories.
public final class PrivatePolkit {
    public let dir: String
    public private(set) var pid: Int32
    private var pidfd: Int32

    public init(on bus: PrivateBus, policy: String, rules: String) throws {
        dir = "/tmp/lifecycled-polkit-\(UUID().uuidString.prefix(8))"
        for sub in ["", "/actions", "/rules"] {
            try FileManager.default.createDirectory(atPath: dir + sub, withIntermediateDirectories: true)
            chmod(dir + sub, 0o755)  // polkitd reads them as user polkitd
        }
        try FileManager.default.copyItem(atPath: policy, toPath: dir + "/actions/io.lifecycled.Lifecycle1.policy")
        try rules.write(toFile: dir + "/rules/50-test.rules", atomically: true, encoding: .utf8)
        for f in ["/actions/io.lifecycled.Lifecycle1.policy", "/rules/50-test.rules"] { chmod(dir + f, 0o644) }
        let script = """
            mount --bind \(dir)/actions /usr/share/polkit-1/actions && \
            mount --bind \(dir)/rules /etc/polkit-1/rules.d && \
            mount --bind \(dir)/rules /usr/share/polkit-1/rules.d && \
            exec /usr/lib/polkit-1/polkitd --no-debug
            """
        var env = ProcessInfo.processInfo.environment
        env["DBUS_SYSTEM_BUS_ADDRESS"] = bus.address
        let log = open(dir + "/polkitd.log", O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        defer { close(log) }
        let p = try Spawner.spawn(
            SpawnRequest(
                executable: "/usr/bin/unshare", arguments: ["-m", "/bin/sh", "-c", script], environment: env,
                workingDirectory: dir, group: AppProcessGroup(), inherit: [(log, 1), (log, 2)]))
        (pid, pidfd) = (p.pid, p.pidfd)
        do { try bus.waitForName("org.freedesktop.PolicyKit1") } catch {
            let text = (try? String(contentsOfFile: dir + "/polkitd.log", encoding: .utf8)) ?? ""
            throw TestFailure("polkitd did not take its name: \(error); its log: \(text)")
        }
    }

    deinit {
        killAndReap(pid, pidfd)
        try? FileManager.default.removeItem(atPath: dir)
    }
}

/// SIGKILL, then the end awaited on the pidfd (at most 10 s) and reaped.
func killAndReap(_ pid: Int32, _ pidfd: Int32) {
    kill(pid, SIGKILL)
    var pfd = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
    _ = poll(&pfd, 1, 10_000)
    var st = lc_child_status()
    lc_reap(pid, &st)
    close(pidfd)
}
