import Foundation
@preconcurrency import Glibc
import LifecycleOS

/// A real PipeWire for tests: the server and its session manager
/// (WirePlumber, on a session bus of its own) as `user`, in `dir` (its
/// XDG_RUNTIME_DIR: a headless sway's, so that one session has both), and
/// a null sink, so that a stream links and runs with no sound card.
public final class PipeWireSession {
    public let dir: String
    public let user: String
    private var children: [(pid: Int32, pidfd: Int32)] = []

    public init(dir: String, user: String = "nobody") throws {
        for tool in [
            "/usr/bin/pipewire", "/usr/bin/wireplumber", "/usr/bin/pw-cli", "/usr/bin/pw-dump",
            "/usr/bin/dbus-run-session",
        ]
        where !Posix.exists(tool) {
            throw TestFailure(
                "\(tool) is not installed (scripts/install-deps.sh installs pipewire, wireplumber, pipewire-bin)")
        }
        self.dir = dir
        self.user = user
        try spawn(["/usr/bin/pipewire"], log: "pipewire.log")
        let deadline = Date().addingTimeInterval(20)
        while !Posix.exists(dir + "/pipewire-0") {
            guard Date() < deadline else {
                throw TestFailure("PipeWire did not start within 20 s: \(log("pipewire.log"))")
            }
            usleep(10_000)
        }
        // WirePlumber's session bus listens in this directory, not in /tmp:
        // ended with SIGKILL (deinit), it cannot remove its socket, and the
        // default session config left one in /tmp at every run.
        let config = dir + "/session-bus.conf"
        try PrivateBus.configuration(type: "session", listen: "unix:dir=\(dir)", policy: PrivateBus.openPolicy)
            .write(toFile: config, atomically: true, encoding: .utf8)
        chmod(config, 0o644)
        try spawn(
            ["/usr/bin/dbus-run-session", "--config-file=" + config, "--", "/usr/bin/wireplumber"],
            log: "wireplumber.log")
        let sink = """
            { factory.name=support.null-audio-sink node.name=lifecycled-test-sink media.class=Audio/Sink \
            object.linger=true audio.position=[FL FR] }
            """
        let (code, _, err) = try run(
            asUser(user, ["/usr/bin/pw-cli", "create-node", "adapter", sink]), environment: environment)
        guard code == 0 else { throw TestFailure("pw-cli create-node: \(err)") }
        // Ready when WirePlumber has connected (it links streams to the sink).
        while try !run(asUser(user, ["/usr/bin/pw-dump"]), environment: environment).1.contains("\"WirePlumber\"") {
            guard Date() < deadline else { throw TestFailure("WirePlumber did not connect: \(log("wireplumber.log"))") }
            usleep(20_000)
        }
    }

    /// What a client of this server needs.
    public var environment: [String: String] { ["XDG_RUNTIME_DIR": dir, "HOME": dir, "PATH": "/usr/bin:/bin"] }

    private func log(_ name: String) -> String {
        String(((try? String(contentsOfFile: dir + "/" + name, encoding: .utf8)) ?? "").suffix(2000))
    }

    private func spawn(_ argv: [String], log: String) throws {
        let fd = open(dir + "/" + log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        defer { close(fd) }
        let full = asUser(user, argv)
        let p = try Spawner.spawn(
            SpawnRequest(
                executable: full[0], arguments: Array(full.dropFirst()), environment: environment,
                workingDirectory: dir,
                group: AppProcessGroup(), inherit: [(fd, 1), (fd, 2)]))
        children.append((p.pid, p.pidfd))
    }

    /// A silent WAV of `seconds` (8 kHz, mono, 8 bits) that `user` can read.
    public func silence(seconds: Int, name: String = "silence.wav") throws -> String {
        var data = Data("RIFF".utf8)
        func le32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { data.append(contentsOf: $0) } }
        func le16(_ v: UInt16) { withUnsafeBytes(of: v.littleEndian) { data.append(contentsOf: $0) } }
        let samples = UInt32(8000 * seconds)
        le32(36 + samples)
        data.append(contentsOf: Array("WAVEfmt ".utf8))
        le32(16); le16(1); le16(1); le32(8000); le32(8000); le16(1); le16(8)
        data.append(contentsOf: Array("data".utf8))
        le32(samples)
        data.append(Data(repeating: 128, count: Int(samples)))
        let path = dir + "/" + name
        try data.write(to: URL(fileURLWithPath: path))
        chmod(path, 0o644)
        return path
    }

    deinit {
        for c in children.reversed() {
            kill(-c.pid, SIGKILL)  // its process group: dbus-run-session's bus and WirePlumber too
            killAndReap(c.pid, c.pidfd)
        }
    }
}
