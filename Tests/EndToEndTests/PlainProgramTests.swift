import Foundation
@preconcurrency import Glibc
import LifecycleControl
import LifecycleOS
import LifecycleTestKit
import Testing

/// A free TCP port on the loopback (the kernel's pick, released at once).
func freePort() throws -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0
        }
    }
    guard ok else { throw TestFailure("no free port") }
    return UInt16(bigEndian: addr.sin_port)
}

/// One HTTP GET on the loopback; the body, or nil when no answer came within `seconds`.
func httpGet(port: UInt16, path: String, seconds: Int) -> String? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var tv = timeval(tv_sec: seconds, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = port.bigEndian
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard connected == 0 else { return nil }
    let request = "GET \(path) HTTP/1.0\r\nHost: localhost\r\n\r\n"
    _ = request.withCString { send(fd, $0, strlen($0), 0) }
    var out: [UInt8] = []
    var buf = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = recv(fd, &buf, buf.count, 0)
        if n <= 0 { break }
        out += buf[0..<n]
    }
    return out.isEmpty ? nil : String(decoding: out, as: UTF8.self)
}

/// A plain program whose launch completes at READY=1, within `launch` seconds.
func notifying(_ command: [String], launch: Double) -> String {
    """
    command = [\(command.map { "\"\($0)\"" }.joined(separator: ", "))]
    delivery = "signals"
    readiness = "notify"
    [timeouts]
    launch = \(launch)
    """
}

/// Programs nobody wrote for lifecycled, supervised as plain programs.
@Suite struct RealPlainProgramTests {
    @Test func pythonHTTPServerFrozenStopsAnsweringThawedAnswersAgainStopEndsItCleanly() throws {
        let s = scratch()
        try "hello from a frozen server\n".write(toFile: s + "/index.txt", atomically: true, encoding: .utf8)
        let port = try freePort()
        let d = try DaemonUnderTest(apps: [
            "web": """
            command = ["/usr/bin/env", "python3", "-m", "http.server", "--bind", "127.0.0.1", "\(port)"]
            working_directory = "\(s)"
            delivery = "signals"
            [timeouts]
            background_grace = 0.2
            """
        ])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "web"))
        try f.state("web", "active")
        // It knows nothing of readiness: ask until it listens (the bound is the failure).
        var answer: String? = nil
        for _ in 0..<200 where answer == nil {
            answer = httpGet(port: port, path: "/index.txt", seconds: 1)
            if answer == nil { usleep(25_000) }
        }
        #expect(answer?.contains("hello from a frozen server") == true)

        try d.command(ControlRequest(.home))
        try f.state("web", "suspended")
        #expect(httpGet(port: port, path: "/index.txt", seconds: 1) == nil, "a frozen server must not answer")

        try d.command(ControlRequest(.activate, app: "web"))
        try f.state("web", "active")
        #expect(httpGet(port: port, path: "/index.txt", seconds: 5)?.contains("hello from a frozen server") == true)

        try d.command(ControlRequest(.stop, app: "web"))
        let end = try f.terminated("web")
        #expect(end.reason == "stopped-by-user")
        #expect(end.detail?.contains("killed") == false, "SIGTERM ended it, no SIGKILL was needed: \(end.detail ?? "")")
        #expect(try d.stop() == 0)
    }

    /// A STATUS= said while nothing else changes is saved all the same
    /// (the save writes the rows whose run changed, the daemon's tables
    /// name them): a daemon killed right after shows it still.
    @Test func aStatusLineOutlivesADaemonKill() throws {
        let s = scratch()
        let gate = s + "/gate"
        mkfifo(gate, 0o600)
        let script =
            "systemd-notify --ready --status=first; read go < \(gate); systemd-notify --status=second; "
            + "while true; do sleep 100 & wait $!; done"
        let d = try DaemonUnderTest(apps: ["svc": notifying(["/bin/sh", "-c", script], launch: 20)])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "svc"))
        try f.state("svc", "active")
        let fd = open(gate, O_WRONLY)
        _ = write(fd, "go\n", 3)
        close(fd)
        try f.wait("STATUS=second") { $0.kind == .notified && $0.detail == "STATUS=second" }
        _ = try d.crash(with: SIGKILL)
        let d2 = try DaemonUnderTest(after: d)
        #expect(try d2.status("svc").statusLine == "second")
        #expect(try d2.stop() == 0)
    }

    @Test func systemdNotifyReadinessStatusAndStopping() throws {
        let s = scratch()
        let gate = s + "/gate"
        mkfifo(gate, 0o600)
        // systemd's own systemd-notify, as a service script would use it.
        let script =
            "trap 'systemd-notify STOPPING=1; exit 0' TERM; systemd-notify --status=warming-up; read go < \(gate); "
            + "systemd-notify --ready --status=serving; while true; do sleep 100 & wait $!; done"
        let d = try DaemonUnderTest(apps: ["svc": notifying(["/bin/sh", "-c", script], launch: 20)])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "svc"))
        try f.wait("STATUS=warming-up") { $0.kind == .notified && $0.detail == "STATUS=warming-up" }
        let waiting = try d.status("svc")
        #expect(waiting.state == .inactive, "launched, not ready: not active")
        #expect(waiting.statusLine == "warming-up")

        let fd = open(gate, O_WRONLY)
        _ = write(fd, "go\n", 3)
        close(fd)
        try f.wait("READY=1") { $0.kind == .notified && $0.detail == "READY=1" }
        try f.state("svc", "active")
        try f.wait("STATUS=serving") { $0.kind == .notified && $0.detail == "STATUS=serving" }
        #expect(try d.status("svc").statusLine == "serving")
        let (_, table, _) = try d.ctl(["status", "svc"])
        #expect(table.contains("\"serving\""))

        try d.command(ControlRequest(.stop, app: "svc"))
        try f.wait("STOPPING=1") { $0.kind == .notified && $0.detail == "STOPPING=1" }
        let end = try f.terminated("svc")
        #expect(end.reason == "stopped-by-user" && end.detail?.contains("killed") == false)
        #expect(try d.stop() == 0)
    }

    @Test func noReadinessInTimeIsTheLaunchWatchdog() throws {
        let d = try DaemonUnderTest(apps: ["mute": notifying(["/bin/sleep", "1000"], launch: 0.3)])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "mute"))
        let launched = try f.wait("launched") { $0.kind == .launched }
        let end = try f.terminated("mute")
        #expect(end.reason == "launch-watchdog")
        #expect(Double(end.monotonic - launched.monotonic) / 1e9 >= 0.29)
        #expect(try d.stop() == 0)
    }

    @Test func aProgramFloodingItsNotifySocketHarmsNoOne() throws {
        let s = scratch()
        let spam =
            "import os, socket; s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); "
            + "a = os.environ['NOTIFY_SOCKET']; [s.sendto(b'STATUS=spam', a) for _ in iter(int, 1)]"
        let d = try DaemonUnderTest(
            apps: [
                "spammer": "command = [\"/usr/bin/env\", \"python3\", \"-c\", \"\(spam)\"]\ndelivery = \"signals\"\n"
                    + "[timeouts]\nbackground_grace = 60\n",
                "good": recorder(s + "/good"),
            ], daemon: "foreground_slots = 2\nevent_history = 0")
        let f = try d.follow(["good"])
        let flood = try d.follow(["spammer"])
        try d.command(ControlRequest(.launch, app: "spammer", background: true))
        try flood.wait("the flood to begin") { $0.kind == .notified }  // and it never stops
        try d.command(ControlRequest(.activate, app: "good"))
        try f.acknowledged("good", "didBecomeActive")
        for _ in 0..<20 {
            try interruptAndResume(d, f, "good")
        }
        #expect(try d.status("spammer").statusLine == "spam")
        #expect(try d.stop() == 0)
    }

    /// Only the app's own processes speak for it: another user cannot send
    /// to its NOTIFY_SOCKET at all, and a process of the same user that is
    /// not the app's is dropped and said once in the log, however much it sends.
    @Test func notificationsFromStrangersAreIgnored() throws {
        let s = scratch()
        let script =
            "echo $NOTIFY_SOCKET > \(s)/address; echo written >> \(s)/address; "
            + "while [ ! -e \(s)/go ]; do sleep 0.05; done; systemd-notify --ready; exec sleep 1000"
        let d = try DaemonUnderTest(apps: ["svc": notifying(["/bin/sh", "-c", script], launch: 60)])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "svc"))
        try waitForLine(s + "/address", "written", seconds: 10)
        let address = try #require(lines(s + "/address").first)
        #expect(address == d.path("run") + "/notify/svc.1")
        let (refused, _, err) = try run(
            [
                "/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/systemd-notify",
                "--ready",
            ],
            environment: ["NOTIFY_SOCKET": address])
        #expect(refused != 0 && err.contains("Permission denied"), "\(err)")
        let stranger =
            "import os, socket\ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
            + "for _ in range(2000): s.sendto(b'READY=1', '\(address)')\nprint(os.getpid())\n"
        let flood = Posix.monotonicNanoseconds()
        let (code, out, _) = try run(["/usr/bin/python3", "-c", stranger])
        let pid = out.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(code == 0)
        let go = Posix.monotonicNanoseconds()
        _ = FileManager.default.createFile(atPath: s + "/go", contents: nil)
        // Datagrams are read in order: the app's READY=1 comes after every stranger's.
        let ready = try f.wait("READY=1") { $0.kind == .notified && $0.detail == "READY=1" }
        #expect(ready.monotonic > go, "no stranger's READY=1 counted")
        try f.state("svc", "active")
        // Said once, and again only once per interval with the count dropped
        // since: a flood slowed past the interval by a loaded machine (the
        // sender blocks on a queue of 10 datagrams) may say it a second time.
        let lines = d.daemonLog.split(separator: "\n").filter { $0.contains("not one of its processes, ignored") }
        let said = lines.filter { $0.contains("pid \(pid),") }
        let intervals = Int((ready.monotonic - flood) / 10_000_000_000)
        #expect(said.count >= 1 && said.count <= 1 + intervals, "\(said.count) log lines for one stranger: \(lines)")
        #expect(said.dropFirst().allSatisfy { $0.contains("more since the last line") }, "\(lines)")
        #expect(try d.stop() == 0)
        #expect(!FileManager.default.fileExists(atPath: address), "the socket file goes with its run")
    }

    /// Each launch starts from the daemon's environment, read once: without
    /// what belongs to the daemon alone, with the app's own `[environment]`,
    /// and nothing of another app's (launched before it) or of its own last run.
    @Test func eachLaunchGetsTheDaemonsEnvironmentAndOnlyItsOwnAdditions() throws {
        let s = scratch()
        // Each run writes its environment to NAME.GENERATION (its NOTIFY_SOCKET's name).
        func app(_ extra: String) -> String {
            """
            command = ["/bin/sh", "-c", "{ env; echo END; } > \(s)/${NOTIFY_SOCKET##*/}; exec sleep 1000"]
            delivery = "signals"
            \(extra)
            """
        }
        let d = try DaemonUnderTest(
            apps: ["one": app("[environment]\nONLY_ONE = \"1\"\nFROM_DAEMON = \"mine\""), "two": app("")],
            environment: ["FROM_DAEMON": "yes", "LIFECYCLE_FD": "9", "LIFECYCLED_SOCKET": "/nowhere"])
        func environment(_ run: String) throws -> [String: String] {
            try waitForLine(s + "/" + run, "END", seconds: 10)
            let pairs = lines(s + "/" + run).compactMap { l in
                l.firstIndex(of: "=").map { (String(l[..<$0]), String(l[l.index(after: $0)...])) }
            }
            return Dictionary(pairs) { a, _ in a }.filter { $0.key != "NOTIFY_SOCKET" }
        }
        let f = try d.follow()
        try d.command(ControlRequest(.launch, app: "one", background: true))
        let first = try environment("one.1")
        #expect(first["ONLY_ONE"] == "1" && first["FROM_DAEMON"] == "mine")
        try d.command(ControlRequest(.launch, app: "two", background: true))
        let two = try environment("two.1")
        #expect(two["FROM_DAEMON"] == "yes" && two["ONLY_ONE"] == nil, "nothing of one's")
        #expect(two["LIFECYCLE_FD"] == nil && two["LIFECYCLED_SOCKET"] == nil, "nothing of the daemon's own")
        try d.command(ControlRequest(.stop, app: "one"))
        try f.terminated("one")
        try d.command(ControlRequest(.launch, app: "one", background: true))
        #expect(try environment("one.2") == first)
        #expect(try d.stop() == 0)
    }
}
