import Foundation
@preconcurrency import Glibc
import CLifecycleShim
import LifecycleOS

/// A real sway, headless (no GPU, no input devices, pixman), with two
/// 640x480 outputs side by side, run as `user` (sway refuses root) in a
/// runtime directory of its own. Its IPC is the tests' oracle; its Wayland
/// socket is where the apps under test draw (docs/focus.md).
public final class HeadlessSway {
    /// XDG_RUNTIME_DIR: the user's, mode 0700.
    public let dir: String
    public let user: String
    public private(set) var pid: Int32
    private var pidfd: Int32
    /// SWAYSOCK.
    public let socket: String
    /// WAYLAND_DISPLAY (a name in `dir`).
    public let display: String

    public init(user: String = "nobody") throws {
        guard Posix.exists("/usr/bin/sway") else {
            throw TestFailure("sway is not installed (scripts/install-deps.sh installs it)")
        }
        guard let pw = getpwnam(user) else { throw TestFailure("no user \(user)") }
        self.user = user
        dir = "/tmp/lifecycled-sway-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        chown(dir, pw.pointee.pw_uid, pw.pointee.pw_gid)
        chmod(dir, 0o700)
        let config = """
            output HEADLESS-1 resolution 640x480 position 0,0
            output HEADLESS-2 resolution 640x480 position 640,0
            default_border none
            xwayland disable
            """
        try config.write(toFile: dir + "/sway.conf", atomically: true, encoding: .utf8)
        let log = open(dir + "/sway.log", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        defer { close(log) }
        let env = [
            "XDG_RUNTIME_DIR": dir, "HOME": dir, "PATH": "/usr/bin:/bin", "WLR_BACKENDS": "headless",
            "WLR_HEADLESS_OUTPUTS": "2", "WLR_LIBINPUT_NO_DEVICES": "1", "WLR_RENDERER": "pixman",
        ]
        let argv = asUser(user, ["/usr/bin/sway", "-c", dir + "/sway.conf"])
        let p = try Spawner.spawn(
            SpawnRequest(
                executable: argv[0], arguments: Array(argv.dropFirst()), environment: env, workingDirectory: dir,
                group: AppProcessGroup(), inherit: [(log, 1), (log, 2)]))
        (pid, pidfd) = (p.pid, p.pidfd)
        // setpriv executes sway: the socket carries sway's uid and this pid.
        socket = "\(dir)/sway-ipc.\(pw.pointee.pw_uid).\(p.pid).sock"
        display = "wayland-1"
        let deadline = Date().addingTimeInterval(20)
        while !Posix.exists(socket) || !Posix.exists(dir + "/" + display) {
            if Date() > deadline || kill(pid, 0) != 0 {
                let said = (try? String(contentsOfFile: dir + "/sway.log", encoding: .utf8)) ?? ""
                end()
                throw TestFailure("sway did not start within 20 s: \(said.suffix(2000))")
            }
            var pfd = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
            _ = poll(&pfd, 1, 20)  // woken early if it dies
        }
        let (code, _, err) = try msg(["-t", "get_version"])
        guard code == 0 else { throw TestFailure("swaymsg get_version: \(err)") }
    }

    /// swaymsg on this sway: (exit code, output, error).
    public func msg(_ args: [String]) throws -> (Int32, String, String) {
        try run(["/usr/bin/swaymsg", "-s", socket] + args)
    }

    /// A command (`[pid=N] focus`); throws when sway says it failed.
    public func command(_ command: String) throws {
        let (code, out, err) = try msg([command])
        guard code == 0 else { throw TestFailure("swaymsg \(command): \(out) \(err)") }
    }

    /// One window of sway's tree, as the oracle sees it.
    public struct Window: Equatable, Sendable {
        public var id: Int
        public var pid: Int32
        public var appID: String?
        public var focused: Bool
        public var visible: Bool
        public var output: String?
    }

    /// Every window, from GET_TREE.
    public func windows() throws -> [Window] {
        let (code, out, err) = try msg(["-t", "get_tree", "-r"])
        guard code == 0, let root = try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any] else {
            throw TestFailure("swaymsg get_tree: \(err)")
        }
        var found: [Window] = []
        func walk(_ node: [String: Any], output: String?) {
            var output = output
            if node["type"] as? String == "output" { output = node["name"] as? String == "__i3" ? nil : node["name"] as? String }
            if let pid = node["pid"] as? Int, let id = node["id"] as? Int {
                found.append(
                    Window(
                        id: id, pid: Int32(pid), appID: node["app_id"] as? String,
                        focused: node["focused"] as? Bool ?? false, visible: node["visible"] as? Bool ?? false,
                        output: output))
            }
            for key in ["nodes", "floating_nodes"] {
                for child in node[key] as? [[String: Any]] ?? [] { walk(child, output: output) }
            }
        }
        walk(root, output: nil)
        return found
    }

    /// sway stops (SIGSTOP) or goes on (SIGCONT): a hung compositor.
    public func pause(_ stopped: Bool) { kill(pid, stopped ? SIGSTOP : SIGCONT) }

    /// The environment a Wayland client needs to draw here.
    public var clientEnvironment: [String: String] { ["WAYLAND_DISPLAY": display, "XDG_RUNTIME_DIR": dir] }

    private func end() {
        guard pid > 0 else { return }
        killAndReap(pid, pidfd)
        pid = -1
    }

    deinit {
        end()
        try? FileManager.default.removeItem(atPath: dir)
    }
}
