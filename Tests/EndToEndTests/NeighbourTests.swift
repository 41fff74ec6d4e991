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
        try "apps_dir = \"apps\"\nruntime_directory = \"run-other\"\nstate_directory = \"state-other\"\n".write(
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
