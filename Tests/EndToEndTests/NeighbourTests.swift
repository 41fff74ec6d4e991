import Foundation
import LifecycleControl
import LifecycleOS
import LifecycleTestKit
import Testing

// Issue 12, hostile or careless neighbours: a second daemon, a socket
// someone else listens on, a start from a script that ignores SIGINT,
// configuration files that are not what their name says.

@Suite struct OneDaemonTests {
    /// A second daemon started on the same config exits at once, naming the
    /// one that runs, before it binds the control socket or touches a
    /// cgroup (it would have killed the first one's apps as leftovers).
    @Test func aSecondDaemonOnTheSameRuntimeDirectoryIsRefusedNamingTheFirst() throws {
        let d = try DaemonUnderTest(apps: ["plain": "command = [\"sleep\", \"1000\"]\ndelivery = \"signals\"\n"])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "plain"))
        try f.state("plain", "active")
        let pid = try #require(try d.status("plain").pid)
        let (code, _, err) = try run([
            binary("lifecycled"), "--config", d.path("lifecycled.toml"), "--control-socket", d.path("second.sock"),
            "--cgroup-root", d.cgroupRoot,
        ])
        #expect(code == 1)
        #expect(
            err.contains(
                "another lifecycled (pid \(d.pid)) holds \(d.path("run"))/lifecycled.pid: one daemon per runtime directory"
            ),
            "\(err)")
        #expect(!FileManager.default.fileExists(atPath: d.path("second.sock")))
        #expect(try d.status("plain").pid == pid && kill(pid, 0) == 0, "the first daemon's app runs on")
        #expect(try d.stop() == 0)
    }

    /// Two daemons with their own runtime directories but one control
    /// socket: the second may not take the socket over; and a daemon that
    /// stops removes its socket file only if it is still its own.
    @Test func aControlSocketInUseIsNotTakenOverNorRemovedByAnother() throws {
        let first = try DaemonUnderTest(apps: [:])
        let config = first.path("other.toml")
        try
            "apps_dir = \"apps\"\nruntime_directory = \"run-other\"\nstate_directory = \"state-other\"\nlog_directory = \"logs-other\"\n"
            .write(
                toFile: config, atomically: true, encoding: .utf8)
        let argv = [
            binary("lifecycled"), "--config", config, "--control-socket", first.socket, "--cgroup-root",
            "/lifecycled-test-other-\(UUID().uuidString.prefix(8))",
        ]
        let (code, _, err) = try run(argv)
        #expect(code == 1)
        #expect(err.contains("\(first.socket) (a running process listens on it)"), "\(err)")
        #expect(
            !FileManager.default.fileExists(atPath: "/sys/fs/cgroup/unified" + argv[6]),
            "a failed start leaves no group")
        #expect(try first.command(ControlRequest(.status)).ok, "the first one still answers on it")

        // A file that is not a socket is never removed to make room.
        let notASocket = first.path("plain-file")
        try "keep me".write(toFile: notASocket, atomically: true, encoding: .utf8)
        let (code2, _, err2) = try run(Array(argv.prefix(3)) + ["--control-socket", notASocket] + argv.suffix(2))
        #expect(code2 == 1 && err2.contains("(not a socket)"), "\(err2)")
        #expect((try? String(contentsOfFile: notASocket, encoding: .utf8)) == "keep me")

        // The first one's file replaced by another socket: the first one,
        // stopping, leaves that one alone.
        unlink(first.socket)
        let squatter = try UnixSocket.listen(path: first.socket, mode: 0o600)
        defer { close(squatter) }
        #expect(try first.stop() == 0)
        #expect(FileManager.default.fileExists(atPath: first.socket), "not the first daemon's file any more")
    }

    /// A daemon started from a script that ignores signals (`trap '' INT
    /// CHLD`, inherited across exec) still stops on Ctrl-C and still learns
    /// how its apps ended: an ignored SIGCHLD would make the kernel reap
    /// them itself, and every exit status would be lost. Dispositions are
    /// reset at start.
    @Test func inheritedIgnoredSignalsAreResetAtStart() throws {
        let d = try DaemonUnderTest(
            apps: [
                "plain": "command = [\"sleep\", \"1000\"]\ndelivery = \"signals\"\n",
                "quitter": "command = [\"sh\", \"-c\", \"read x; exit 3\"]\ndelivery = \"signals\"\n",
            ],
            launcher: [
                "/usr/bin/env", "python3", "-c",
                "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                    + "signal.signal(signal.SIGCHLD, signal.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])",
            ])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "quitter"))
        try f.state("quitter", "active")
        let end = try f.terminated("quitter")  // its stdin is /dev/null: `read` ends at once
        #expect(end.reason == "exited", "\(end)")
        #expect(try d.status("quitter").lastTermination?.description == "exited with code 3")
        try d.command(ControlRequest(.activate, app: "plain"))
        try f.state("plain", "active")
        #expect(try d.crash(with: SIGINT) == (false, 0), "a clean stop")
        #expect(d.daemonLog.contains("received Interrupt: stopping every app"))
    }
}

@Suite struct ConfigCheckTests {
    /// `--check-config` finds what a launch would: a command that does not
    /// exist, or is a directory, or is not executable.
    @Test func checkConfigChecksEveryCommand() throws {
        let dir = scratch()
        try FileManager.default.createDirectory(atPath: dir + "/apps", withIntermediateDirectories: true)
        try "#!/bin/sh\n".write(toFile: dir + "/not-executable", atomically: true, encoding: .utf8)
        let manifests = [
            "good": "command = [\"sleep\", \"1\"]",
            "missing": "command = [\"no-such-program-anywhere\"]",
            "directory": "command = [\"/tmp\"]",
            "plainfile": "command = [\"\(dir)/not-executable\"]",
        ]
        for (name, text) in manifests {
            try (text + "\n").write(toFile: dir + "/apps/\(name).toml", atomically: true, encoding: .utf8)
        }
        try "apps_dir = \"apps\"\n".write(toFile: dir + "/lifecycled.toml", atomically: true, encoding: .utf8)
        let (code, out, _) = try run([binary("lifecycled"), "--config", dir + "/lifecycled.toml", "--check-config"])
        #expect(code == 78)
        #expect(
            out.contains("error: \(dir)/apps/directory.toml: command: '/tmp' is not an executable regular file\n"),
            "\(out)")
        #expect(
            out.contains(
                "error: \(dir)/apps/missing.toml: command: 'no-such-program-anywhere' is not an executable regular file (looked in "
            ))
        #expect(
            out.contains(
                "error: \(dir)/apps/plainfile.toml: command: '\(dir)/not-executable' is not an executable regular file\n"
            ))
        #expect(out.contains("1 app(s) valid, 3 invalid"))
    }
}

extension ConfigCheckTests {
    /// A manifest its reader may not read is named with the reason, and
    /// nothing of its content is shown (root reads anything: the check runs
    /// as `nobody`).
    @Test func anUnreadableManifestIsNamedWithoutItsContent() throws {
        let dir = scratch()
        chmod(dir, 0o755)
        try FileManager.default.createDirectory(atPath: dir + "/apps", withIntermediateDirectories: true)
        chmod(dir + "/apps", 0o755)
        try "command = [\"/bin/true\"]\n".write(toFile: dir + "/apps/open.toml", atomically: true, encoding: .utf8)
        try "command = [\"secret-token-42\"]\n".write(
            toFile: dir + "/apps/closed.toml", atomically: true, encoding: .utf8)
        chmod(dir + "/apps/open.toml", 0o644)
        chmod(dir + "/apps/closed.toml", 0o600)
        try "apps_dir = \"apps\"\n".write(toFile: dir + "/lifecycled.toml", atomically: true, encoding: .utf8)
        chmod(dir + "/lifecycled.toml", 0o644)
        let (code, out, err) = try run([
            "/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", binary("lifecycled"),
            "--config", dir + "/lifecycled.toml", "--check-config",
        ])
        #expect(code == 78, "\(out)\(err)")
        #expect(out.contains("error: \(dir)/apps/closed.toml: cannot be read (permission denied)"), "\(out)")
        #expect(out.contains("1 app(s) valid, 1 invalid"), "\(out)")
        #expect(!(out + err).contains("secret-token-42"))
    }
}

extension ConfigCheckTests {
    /// An app without `user` runs as root, which no cgroup holds: the check
    /// and the start say so, naming it; `user = "root"` says it is meant.
    @Test func appsRunningAsRootWithoutSayingSoAreNamed() throws {
        let plain = "command = [\"sleep\", \"1000\"]\ndelivery = \"signals\"\n"
        let d = try DaemonUnderTest(apps: [
            "implicit": plain, "meant": plain + "user = \"root\"\n", "confined": plain + "user = \"nobody\"\n",
        ])
        let (code, out, _) = try run([binary("lifecycled"), "--config", d.path("lifecycled.toml"), "--check-config"])
        #expect(code == 0, "a note, not an error")
        let note =
            "app implicit run as root without a `user`: root can leave its cgroup and signal other apps; "
            + "give each a `user` (or `user = \"root\"` if it is meant)"
        #expect(out.contains("note: " + note + "\n"), "\(out)")
        #expect(d.daemonLog.contains(note), "said at start")
        #expect(try d.stop() == 0)
    }
}

@Suite struct LongNameTests {
    /// Any valid app name gets a NOTIFY_SOCKET: a 200-character name does
    /// not fit an abstract address as is, and is shortened with a hash.
    @Test func aLongAppNameStillGetsItsNotifySocket() throws {
        let name = String(repeating: "n", count: 200)
        let d = try DaemonUnderTest(apps: [
            name: notifying(["/bin/sh", "-c", "systemd-notify --ready; exec sleep 1000"], launch: 20)
        ])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: name))
        try f.wait("READY=1") { $0.kind == .notified && $0.detail == "READY=1" }
        try f.state(name, "active")
        #expect(try d.stop() == 0)
    }
}

@Suite struct ControlLimitTests {
    /// The line limit is exact, whether the line comes in pieces or whole.
    @Test func aLineOverTheLimitIsRefusedEvenInOneRead() throws {
        let d = try DaemonUnderTest(apps: [:])
        for (size, refused) in [(65_536, false), (65_537, true)] {
            let client = try d.client()
            try client.writeRaw([UInt8](repeating: 0x20, count: size) + [0x0A])
            let answer = try client.readResponse()
            let message = answer.error?.message ?? ""
            #expect(message.contains("line longer than 65536 bytes") == refused, "\(size): \(message)")
            #expect(!answer.ok, "\(size): \(message)")
        }
        #expect(try d.command(ControlRequest(.status)).ok)
        #expect(try d.stop() == 0)
    }

    /// Runs a Python script as user `nobody` with the control socket's
    /// path as its argument; returns its output.
    func asNobody(_ d: DaemonUnderTest, _ script: String) throws -> String {
        let (code, out, err) = try run([
            "/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script,
            d.socket,
        ])
        #expect(code == 0, "\(err)")
        return out
    }

    /// A user other than root gets 32 connections at once; the 33rd is
    /// answered with the reason and closed, and root is never turned away.
    @Test func connectionsAreBoundedPerUser() throws {
        let d = try DaemonUnderTest(apps: [:])
        let out = try asNobody(
            d,
            """
            import socket, sys
            conns = []
            for i in range(40):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(sys.argv[1]); conns.append(s)
            conns[39].settimeout(20); print(conns[39].makefile().readline().strip())
            conns[0].sendall(b'{"command":"status"}\\n'); conns[0].settimeout(20)
            print('first:', '"ok":true' in conns[0].makefile().readline())
            """)
        #expect(out.contains("\"refusal\":\"too-many-connections\""), "\(out)")
        #expect(out.contains("too many connections from uid 65534 (at most 32 at once)"), "\(out)")
        #expect(out.contains("first: True"), "the first 32 are served: \(out)")
        #expect(try d.command(ControlRequest(.status)).ok)
        #expect(try d.stop() == 0)
    }

    /// A peer sending junk is told why 32 times, then closed: an
    /// unauthorised peer costs no more than its refusals.
    @Test func aPeerSendingJunkOrRefusedRequestsIsClosed() throws {
        let d = try DaemonUnderTest(apps: [:])
        let out = try asNobody(
            d,
            """
            import socket, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(sys.argv[1])
            s.sendall(b'\\n' * 20 + b'{"command":"home"}\\n' * 20)
            lines = s.makefile().read().splitlines()
            print(len(lines)); print(lines[-1])
            """)
        let lines = out.split(separator: "\n")
        #expect(lines.first == "33", "32 answers and the last word: \(out)")
        #expect(out.contains("32 bad or refused requests: closing the connection"), "\(out)")
        #expect(try d.command(ControlRequest(.status)).ok)
        #expect(try d.stop() == 0)
    }

    /// A user other than root gets 32 requests a second (64 at once), over
    /// all its connections: `status` of many apps without pause cannot
    /// hold the loop. Beyond, each is refused, and the refusals count.
    @Test func requestsOfAUserAreRated() throws {
        let d = try DaemonUnderTest(apps: [:])
        let out = try asNobody(
            d,
            """
            import socket, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(sys.argv[1])
            s.sendall(b'{"command":"status"}\\n' * 200)
            lines = s.makefile().read().splitlines()
            print(sum('"ok":true' in l for l in lines), sum('too-many-requests' in l for l in lines), len(lines))
            """)
        let counts = out.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { Int($0) }
        try #require(counts.count == 3, "\(out)")
        #expect((64...70).contains(counts[0]), "answered: \(counts[0])")
        #expect(counts[1] == 32 && counts[2] == counts[0] + 33, "\(out)")
        #expect(try d.command(ControlRequest(.status)).ok, "root is never rated")
        #expect(try d.stop() == 0)
    }

    /// Out of descriptors, the daemon refuses a connection with the reason
    /// (taken with its reserve descriptor) instead of leaving it in the
    /// backlog, where it would wake the loop again and again; once
    /// descriptors are free it serves again.
    @Test(.timeLimit(.minutes(1))) func outOfDescriptorsTheLoopDoesNotSpin() throws {
        let d = try DaemonUnderTest(apps: [:])
        let open = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(d.pid)/fd").count
        let limit = open + 4
        let (code, _, err) = try run(["/usr/bin/prlimit", "--pid", "\(d.pid)", "--nofile=\(limit):\(limit)"])
        try #require(code == 0, "\(err)")
        // Seen once in a full CI run and never since: "the daemon closed
        // the connection" (an end of file, or the client's 30 s read
        // timeout), from one of the two requests below. Each now says which
        // it was, with what the daemon held and logged.
        func explained<T>(_ step: String, _ body: () throws -> T) throws -> T {
            let started = Date()
            do { return try body() } catch {
                let waited = Int(Date().timeIntervalSince(started))  // 30: the read timed out
                let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(d.pid)/fd").count) ?? -1
                let log = d.daemonLog.split(separator: "\n").suffix(15).joined(separator: "\n")
                throw TestFailure(
                    "\(step): \(error) after \(waited) s; the daemon holds \(fds) descriptors of \(limit)\n\(log)")
            }
        }
        var held: [ControlClient] = []
        for _ in 0..<12 { held.append(try d.client()) }  // root: bounded only by descriptors
        let last = try #require(held.last)
        let answer = try explained("the twelfth connection's refusal") { try last.readResponse() }
        #expect(answer.error?.refusal == "out-of-descriptors", "\(answer)")
        func cpuTicks() throws -> Int {
            let stat = try String(contentsOfFile: "/proc/\(d.pid)/stat", encoding: .utf8)
            let fields = stat[stat.range(of: ") ")!.upperBound...].split(separator: " ")
            return Int(fields[11])! + Int(fields[12])!  // utime, stime (fields 14 and 15)
        }
        let before = try cpuTicks()
        usleep(500_000)  // a measurement window, not a wait for anything
        let spent = try cpuTicks() - before
        #expect(spent < 10, "\(spent) ticks in half a second, out of descriptors")
        held.removeAll()
        #expect(try explained("the status once they are gone") { try d.command(ControlRequest(.status)) }.ok)
        #expect(try d.stop() == 0)
    }
}

extension ControlLimitTests {
    /// Root's commands have a backlog of their own: a socket beside the
    /// control socket, mode 0600, that another user cannot open (the
    /// kernel says EACCES before the daemon spends anything). supervisorctl
    /// run as its owner goes through it, other users through the shared
    /// one; it is kept across daemon-reexec, bound again after a crash,
    /// and removed at a clean stop.
    @Test func rootHasAPrivateSocketNobodyCanOpen() throws {
        let d = try DaemonUnderTest(apps: [:])
        let privatePath = ControlDefaults.privatePath(for: d.socket)
        var st = stat()
        #expect(lstat(privatePath, &st) == 0 && st.st_mode & S_IFMT == S_IFSOCK)
        #expect(st.st_mode & 0o777 == 0o600 && st.st_uid == 0)
        let out = try asNobody(
            d,
            """
            import socket, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(sys.argv[1] + '.private'); print('connected')
            except PermissionError:
                print('EACCES')
            """)
        #expect(out == "EACCES\n")
        #expect(try d.ctl(["status"], user: "nobody").0 == 0, "other users use the shared socket")

        // With the shared socket's file moved away, root's supervisorctl still reaches the daemon.
        let moved = d.path("moved.sock")
        #expect(rename(d.socket, moved) == 0)
        let (code, _, err) = try d.ctl(["status"])
        #expect(code == 0, "through the private socket: \(err)")
        #expect(rename(moved, d.socket) == 0)

        let identity = UnixSocket.identity(privatePath)
        #expect(try d.ctl(["daemon-reexec"]).0 == 0)
        #expect(UnixSocket.identity(privatePath) == identity, "the same socket, kept open across the exec")
        #expect(rename(d.socket, moved) == 0)
        #expect(try d.ctl(["status"]).0 == 0, "served by the new image")
        #expect(rename(moved, d.socket) == 0)

        #expect(try d.crash(with: SIGKILL) == (true, SIGKILL))
        let d2 = try DaemonUnderTest(after: d)
        #expect(rename(d2.socket, moved) == 0)
        #expect(try d2.ctl(["status"]).0 == 0, "bound afresh over the stale file")
        #expect(rename(moved, d2.socket) == 0)
        #expect(try d2.stop() == 0)
        #expect(!FileManager.default.fileExists(atPath: privatePath), "removed at a clean stop")
    }
}

@Suite struct LaunchDescriptorTests {
    /// A launch the daemon has no descriptors for fails with the reason,
    /// before it half-starts anything; with descriptors back, it works.
    @Test func aLaunchWithoutDescriptorsFailsSayingWhy() throws {
        let d = try DaemonUnderTest(apps: ["plain": "command = [\"sleep\", \"1000\"]\ndelivery = \"signals\"\n"])
        let f = try d.follow()
        let open = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(d.pid)/fd").count
        let low = open + 10
        let limits = try String(contentsOfFile: "/proc/\(d.pid)/limits", encoding: .utf8)
        let soft = try #require(
            limits.split(separator: "\n").first { $0.hasPrefix("Max open files") }?.split(separator: " ").dropLast(1)
                .last)
        #expect(try run(["/usr/bin/prlimit", "--pid", "\(d.pid)", "--nofile=\(low):"]).0 == 0)  // the soft limit only
        try d.command(ControlRequest(.activate, app: "plain"))
        let end = try f.terminated("plain")
        #expect(end.reason == "launch-failed")
        #expect(end.detail?.contains("no file descriptors left for it") == true, "\(end.detail ?? "")")
        #expect(try run(["/usr/bin/prlimit", "--pid", "\(d.pid)", "--nofile=\(soft):"]).0 == 0)
        try d.command(ControlRequest(.activate, app: "plain"))
        try f.state("plain", "active")
        #expect(try d.stop() == 0)
    }
}

@Suite struct DescriptorTests {
    /// The soft limit is raised to the hard one (three descriptors per
    /// running app), and the descriptor table is sized at start, while the
    /// daemon has one thread: growing it later, with threads, waits for an
    /// RCU grace period each time (a restart with 1,000 apps waited six).
    @Test func theLimitIsRaisedAndTheTableSizedAtStart() throws {
        let d = try DaemonUnderTest(apps: [:])
        let limits = try String(contentsOfFile: "/proc/\(d.pid)/limits", encoding: .utf8)
        let line = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max open files") })
        let fields = line.split(separator: " ").suffix(3)
        #expect(fields.first == fields.dropFirst().first, "soft limit raised to the hard one: \(line)")
        let status = try String(contentsOfFile: "/proc/\(d.pid)/status", encoding: .utf8)
        let size = try #require(
            status.split(separator: "\n").first { $0.hasPrefix("FDSize:") }.flatMap {
                Int($0.dropFirst("FDSize:".count).trimmingCharacters(in: .whitespaces))
            })
        let hard = Int(fields.dropFirst().first ?? "") ?? 0
        #expect(size >= min(4096, hard), "FDSize \(size)")
        #expect(try d.stop() == 0)
    }
}

@Suite struct LogOutputEndToEndTests {
    /// The issue's case: the daemon's output on a pipe nobody reads, and an
    /// app writing as fast as it can into the same pipe (it shares it). The
    /// daemon's lines wait (or are dropped and counted); its loop does not:
    /// another app is activated and sent home ten times, every step logged.
    @Test(.timeLimit(.minutes(2))) func aFullLogPipeNeverStallsTheDaemon() throws {
        let s = scratch()
        let fifo = s + "/output"
        try #require(mkfifo(fifo, 0o600) == 0)
        let d = try DaemonUnderTest(
            apps: [
                "loud": "command = [\"/usr/bin/yes\", \"\(String(repeating: "x", count: 200))\"]\n"
                    + "delivery = \"signals\"\n[timeouts]\nbackground_grace = 600\n",
                "good": recorder(s + "/good"),
            ],
            daemon: "foreground_slots = 1",
            launcher: ["/bin/sh", "-c", "exec \"$@\" 1<>\(fifo) 2>&1", "sh"])
        // Held open, never read: the pipe stays full.
        let held = open(fifo, O_RDWR | O_NONBLOCK | O_CLOEXEC)
        try #require(held >= 0)
        defer { close(held) }
        let f = try d.follow(["good"])
        try d.command(ControlRequest(.launch, app: "loud", background: true))
        let loud = try #require(try d.status("loud").pid)
        var blocked = ""
        for _ in 0..<1000 where !blocked.hasSuffix("pipe_write") {
            usleep(10_000)  // no event says "the pipe is full": the app waits in (anon_)pipe_write
            blocked = (try? String(contentsOfFile: "/proc/\(loud)/wchan", encoding: .utf8)) ?? ""
        }
        var unread: Int32 = 0
        _ = ioctl(held, UInt(FIONREAD), &unread)
        #expect(blocked.hasSuffix("pipe_write"), "the app filled the pipe (\(unread) bytes) and waits")
        try d.command(ControlRequest(.activate, app: "good"))
        try f.acknowledged("good", "didBecomeActive")
        for _ in 0..<10 {
            try d.command(ControlRequest(.home))
            try f.state("good", "background")
            try d.command(ControlRequest(.activate, app: "good"))
            try f.acknowledged("good", "didBecomeActive")
        }
        let status = try d.command(ControlRequest(.status)).status
        #expect(status?.daemon.logLinesDropped != nil)
        #expect(try d.stop() == 0)
    }
}

@Suite struct FreezeRetryTests {
    /// Sets the daemon's soft descriptor limit so that its next descriptor
    /// fails (EMFILE): the lowest free number. `reserveToo`: 3, below every
    /// descriptor the daemon opened (they stay open), so that releasing its
    /// reserve does not help either.
    func starve(_ d: DaemonUnderTest, reserveToo: Bool = false) throws {
        let used = Set(try FileManager.default.contentsOfDirectory(atPath: "/proc/\(d.pid)/fd").compactMap { Int($0) })
        let limit = reserveToo ? 3 : (0...).first { !used.contains($0) }!
        #expect(try run(["/usr/bin/prlimit", "--pid", "\(d.pid)", "--nofile=\(limit):"]).0 == 0)
    }

    func feed(_ d: DaemonUnderTest) throws {
        let limits = try String(contentsOfFile: "/proc/\(d.pid)/limits", encoding: .utf8)
        let hard = try #require(
            limits.split(separator: "\n").first { $0.hasPrefix("Max open files") }?.split(separator: " ").dropLast(1)
                .last)
        #expect(try run(["/usr/bin/prlimit", "--pid", "\(d.pid)", "--nofile=\(hard):"]).0 == 0)
    }

    /// Out of descriptors, the daemon still freezes on time (its reserve
    /// descriptor). A freeze refused all the same (here: the reserve out of
    /// reach too) is retried, and `status` says so meanwhile (the state is
    /// the intent, `frozen` the truth); once it can, the app is frozen. One
    /// that still cannot be frozen after 5 s is killed, like any missed deadline.
    @Test func aRefusedFreezeIsRetriedShownAndEscalated() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: ["rec": recorder(s + "/rec")])
        let f = try d.follow(["rec"])
        let control = try d.client()  // opened before the descriptors run out
        try d.command(ControlRequest(.activate, app: "rec"))
        try f.acknowledged("rec", "didBecomeActive")

        try starve(d)
        #expect(try control.send(ControlRequest(.home)).ok)
        try f.state("rec", "suspended")  // taken here, or the next wait for it would find this one
        let onTime = try f.wait("frozen") { $0.kind == .frozen }
        #expect((onTime.latencyMicroseconds ?? .infinity) < 1_000_000, "frozen on time, with the reserve")
        #expect(try control.send(ControlRequest(.status, apps: ["rec"])).status?.apps.first?.frozen == true)
        try feed(d)
        try d.command(ControlRequest(.activate, app: "rec"))
        try f.acknowledged("rec", "didBecomeActive")

        try starve(d, reserveToo: true)
        #expect(try control.send(ControlRequest(.home)).ok)
        try f.state("rec", "suspended")
        let during = try #require(try control.send(ControlRequest(.status, apps: ["rec"])).status?.apps.first)
        #expect(during.state == .suspended && during.frozen == false, "\(during.state)")
        #expect(during.freezeProblem?.contains("Too many open files") == true, "\(during.freezeProblem ?? "")")
        try feed(d)
        _ = try f.wait("frozen") { $0.kind == .frozen }
        let after = try d.status("rec")
        #expect(after.frozen == true && after.freezeProblem == nil)

        // Again, and this time the descriptors do not come back in time.
        try d.command(ControlRequest(.activate, app: "rec"))
        try f.acknowledged("rec", "didBecomeActive")
        try starve(d, reserveToo: true)
        #expect(try control.send(ControlRequest(.home)).ok)
        let end = try f.terminated("rec")
        #expect(end.reason == "freeze-failed", "\(end)")
        #expect(end.detail?.contains("Too many open files") == true, "\(end.detail ?? "")")
        try feed(d)
        #expect(try d.stop() == 0)
    }
}

@Suite struct UnprivilegedAppTests {
    /// An app that runs as `nobody`, and a child of it, try to leave their
    /// cgroup (v2 and v1), to signal another app and to read its
    /// descriptors: the kernel refuses each. It runs with the umask, the
    /// bounding set and no_new_privileges its manifest says; a library app
    /// and a plain program with READY=1 work as `nobody` as they do as root.
    @Test func anAppAsAnotherUserCannotEscapeOrReachOthers() throws {
        let s = scratch()
        chmod(s, 0o777)
        let v2 = "/sys/fs/cgroup/unified"
        // The recorder where `nobody` can reach it: the build may sit where
        // other users cannot enter (a CI clone in a root-only directory).
        let reachable = s + "/example-recorder"
        try FileManager.default.copyItem(atPath: binary("example-recorder"), toPath: reachable)
        chmod(reachable, 0o755)
        let script = """
            V=$(pgrep -x -f '/bin/sleep 1001'); echo $V > \(s)/victim; id -u > \(s)/uid; umask > \(s)/umask; \
            grep -E 'NoNewPrivs|CapBnd' /proc/self/status > \(s)/status; awk '{print $19}' /proc/self/stat > \(s)/nice; \
            (echo $$ > \(v2)/cgroup.procs) 2> \(s)/escape; \
            sh -c 'echo $$ > \(v2)/cgroup.procs' 2> \(s)/escape-child; \
            if [ -d /sys/fs/cgroup/memory ]; then (echo $$ > /sys/fs/cgroup/memory/cgroup.procs) 2> \(s)/escape-v1; fi; \
            kill -0 $V 2> \(s)/kill; ls /proc/$V/fd 2> \(s)/fd > /dev/null; \
            echo done > \(s)/done; exec sleep 1000
            """
        let d = try DaemonUnderTest(
            apps: [
                "victim": "command = [\"/bin/sleep\", \"1001\"]\ndelivery = \"signals\"\n",
                "escaper":
                    "command = [\"/bin/sh\", \"-c\", \"\(script.replacingOccurrences(of: "\"", with: "\\\""))\"]\n"
                    + "delivery = \"signals\"\nuser = \"nobody\"\numask = \"0027\"\ncapabilities = [\"CAP_NET_BIND_SERVICE\"]\n",
                "rec": "command = [\"\(reachable)\", \"--log\", \"\(s)/rec\"]\nuser = \"nobody\"\n",
                "svc": "user = \"nobody\"\n"
                    + notifying(["/bin/sh", "-c", "systemd-notify --ready; exec sleep 1000"], launch: 10),
            ], daemon: "foreground_slots = 4")
        let f = try d.follow()
        try d.command(ControlRequest(.launch, app: "victim", background: true))
        try f.state("victim", "background")
        try d.command(ControlRequest(.launch, app: "escaper", background: true))
        try waitForLine(s + "/done", "done", seconds: 10)
        #expect(lines(s + "/uid") == ["65534"])
        #expect(lines(s + "/umask") == ["0027"])
        // The daemon runs above its apps: -5 for it, 0 for them.
        #expect(lines(s + "/nice") == ["0"])
        let daemonStat = try String(contentsOfFile: "/proc/\(d.pid)/stat", encoding: .utf8)
        #expect(daemonStat.split(separator: ")").last?.split(separator: " ")[16] == "-5", "\(daemonStat)")
        let status = lines(s + "/status")
        #expect(status.contains("NoNewPrivs:\t1") && status.contains("CapBnd:\t0000000000000400"), "\(status)")
        for file in ["escape", "escape-child"]
            + (FileManager.default.fileExists(atPath: s + "/escape-v1") ? ["escape-v1"] : [])
        {
            #expect(
                try String(contentsOfFile: s + "/" + file, encoding: .utf8).contains("Permission denied"), "\(file)")
        }
        #expect(try String(contentsOfFile: s + "/kill", encoding: .utf8).contains("not permitted"))
        #expect(try String(contentsOfFile: s + "/fd", encoding: .utf8).contains("Permission denied"))
        let pid = try #require(try d.status("escaper").pid)
        let cgroup = try String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8)
        #expect(cgroup.contains("/apps/escaper.1"), "still in its group: \(cgroup)")

        try d.command(ControlRequest(.activate, app: "rec"))
        try f.acknowledged("rec", "didBecomeActive")
        try d.command(ControlRequest(.activate, app: "svc"))
        try f.state("svc", "active")
        #expect(try d.stop() == 0)
    }
}

@Suite struct FullDiskTests {
    /// The state directory on a tmpfs that is full but for the end of one
    /// page: a kill record does not fit. It is not torn into the file (cut
    /// back whole), it is said (log, status, the event), kept in memory, and
    /// written whole once there is room.
    @Test(.enabled(if: getuid() == 0, "mounts a tmpfs"))
    func aKillRecordTheDiskRefusesIsKeptSaidAndWrittenWholeLater() throws {
        let s = scratch()
        let state = s + "/state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try #require(mount("tmpfs", state, "tmpfs", 0, "size=64k") == 0)
        defer { umount2(state, Int32(MNT_DETACH)) }
        // A line that is no record (skipped when read), and the rest of the space taken.
        try (String(repeating: "x", count: 3999) + "\n").write(
            toFile: state + "/jetsam.log", atomically: false, encoding: .utf8)
        let filler = state + "/filler"
        let fd = open(filler, O_CREAT | O_WRONLY | O_CLOEXEC, 0o600)
        let block = [UInt8](repeating: 0, count: 4096)
        while write(fd, block, block.count) > 0 {}
        close(fd)

        let d = try DaemonUnderTest(
            apps: ["victim": recorder(s + "/victim")], daemon: "state_directory = \"\(state)\"")
        let f = try d.follow(["victim"])
        try d.command(ControlRequest(.launch, app: "victim", background: true))
        try f.state("victim", "suspended")
        try d.command(ControlRequest(.pressure, level: "critical"))
        let jetsam = try f.wait("jetsam") { $0.kind == .jetsam }
        #expect(jetsam.detail?.contains("not yet saved") == true, "\(jetsam.detail ?? "")")
        #expect(try d.command(ControlRequest(.status)).status?.daemon.killRecordsUnsaved == 1)
        #expect(d.daemonLog.contains("cannot write kill records"))
        let torn = try String(contentsOfFile: state + "/jetsam.log", encoding: .utf8)
        #expect(torn.utf8.count == 4000, "nothing torn into the file: \(torn.utf8.count) bytes")

        unlink(filler)
        var unsaved = 1
        for _ in 0..<100 where unsaved != 0 {
            usleep(100_000)  // the retry comes after a second
            unsaved = try d.command(ControlRequest(.status)).status?.daemon.killRecordsUnsaved ?? -1
        }
        #expect(unsaved == 0)
        let lines = try String(contentsOfFile: state + "/jetsam.log", encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 2)
        let record = try JSONDecoder().decode(KillRecord.self, from: Data(lines[1].utf8))
        #expect(record.app == "victim")
        #expect(try d.stop() == 0)
    }
}
