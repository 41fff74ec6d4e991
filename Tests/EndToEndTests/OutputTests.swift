import Foundation
import LifecycleControl
import LifecycleTestKit
import Testing

// Issue 13, part 2: each app's stdout and stderr, captured from its first
// instruction into files of its own (journald is tested under a real
// systemd, Tests/systemd/inside.sh), rotated, and shown by `tail`.

@Suite struct OutputTests {
    /// A plain program that says something on both streams, and again on SIGUSR1.
    static func talker(_ text: String = "hello") -> String {
        let script = "trap 'echo again' USR1; echo \(text); echo oops >&2; while :; do sleep 0.05; done"
        return "command = [\"bash\", \"-c\", \"\(script)\"]\ndelivery = \"signals\"\n"
    }

    func tail(
        _ d: DaemonUnderTest, _ app: String, until line: String, trying: () -> Void = {}, marker: String? = nil
    ) throws -> [String] {
        // The output thread writes soon after the app: each try is an answer, the bound a failure.
        let deadline = Date().addingTimeInterval(10)
        while true {
            trying()
            let r = try d.client().send(ControlRequest(.tail, app: app, limit: 100))
            let lines = r.tail?.lines ?? []
            if lines.contains(where: { $0.hasSuffix(" " + line) }),
                marker.map({ m in lines.contains { $0.contains(m) } }) ?? true
            {
                return lines
            }
            guard Date() < deadline else { throw TestFailure("no line '\(line)' in \(app)'s output: \(lines)") }
            usleep(20_000)
        }
    }

    @Test func bothStreamsGoToTheAppsFileWithTimesAndSurviveKillNine() throws {
        let d = try DaemonUnderTest(apps: ["talker": Self.talker(), "quiet": Self.talker()])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "talker"))
        try f.state("talker", "active")
        let lines = try tail(d, "talker", until: "oops")
        #expect(lines.count == 2 && lines[0].hasSuffix(" hello"), "\(lines)")
        // 2026-11-23T19:04:35.123456Z hello
        #expect(
            lines[0].range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z hello$"#, options: .regularExpression) != nil)
        let (code, out, _) = try d.ctl(["tail", "-n", "1", "talker"])
        #expect(code == 0 && out.hasSuffix(" oops\n"), "\(out)")

        // Never ran: a clear error.
        let (never, _, err) = try d.ctl(["tail", "quiet"])
        #expect(never == 1 && err.contains("'quiet' has no output yet"), "\(err)")

        // The daemon dies; the app writes meanwhile, and is not hurt by it.
        let pid = try #require(try d.status("talker").pid)
        #expect(try d.crash(with: SIGKILL) == (true, SIGKILL))
        kill(pid, SIGUSR1)
        let d2 = try DaemonUnderTest(after: d)
        #expect(try tail(d2, "talker", until: "again").count == 3)
        #expect(try d2.status("talker").pid == pid, "the same process, never hurt by a write")
        #expect(try d2.stop() == 0)
    }

    /// A relaunch writes to the FIFO its last run wrote to (no inode made
    /// or deleted per launch), and whoever still holds it, nothing is lost:
    /// a writer outside the app keeps the last run's reader open across
    /// the relaunch, which then reads both.
    @Test func aRelaunchKeepsItsFIFOAndEveryLine() throws {
        let d = try DaemonUnderTest(apps: ["talker": Self.talker()])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "talker"))
        try f.state("talker", "active")
        _ = try tail(d, "talker", until: "oops")
        let fifo = d.dir + "/run/output/talker"
        var first = stat()
        try #require(stat(fifo, &first) == 0)
        let held = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
        try #require(held >= 0)
        defer { close(held) }
        try d.command(ControlRequest(.kill, app: "talker"))
        try f.terminated("talker")
        try d.command(ControlRequest(.activate, app: "talker"))
        try f.state("talker", "active")
        #expect(write(held, "outside\n", 8) == 8)
        var lines: [String] = []
        let deadline = Date().addingTimeInterval(10)  // a failure bound
        repeat {
            lines = try tail(d, "talker", until: "outside")
        } while lines.filter({ $0.hasSuffix(" oops") }).count < 2 && Date() < deadline
        #expect(lines.filter { $0.hasSuffix(" hello") }.count == 2, "\(lines)")
        #expect(lines.filter { $0.hasSuffix(" oops") }.count == 2, "\(lines)")
        var second = stat()
        try #require(stat(fifo, &second) == 0)
        #expect(second.st_ino == first.st_ino, "the relaunch made a new FIFO")
        #expect(try d.stop() == 0)
    }

    @Test func filesAreRotatedBySizeAndBounded() throws {
        let flood =
            "command = [\"bash\", \"-c\", \"for i in $(seq 1 3000); do echo line $i; done; echo done\"]\n"
            + "delivery = \"signals\"\n"
        let d = try DaemonUnderTest(
            apps: ["flood": flood], daemon: "log_max_size = \"8K\"\nlog_backups = 2\n")
        let f = try d.follow()
        try d.command(ControlRequest(.launch, app: "flood", background: true))
        _ = try f.terminated("flood")
        _ = try tail(d, "flood", until: "done")
        let logs = try FileManager.default.contentsOfDirectory(atPath: d.path("logs")).sorted()
        #expect(logs == ["flood.log", "flood.log.1", "flood.log.2"], "two backups kept, the oldest gone")
        for name in logs {
            let size = try FileManager.default.attributesOfItem(atPath: d.path("logs/\(name)"))[.size] as! Int
            #expect(size <= 8192 + 1024, "\(name): \(size) bytes")
        }
        #expect(try d.stop() == 0)
    }

    /// A log directory that cannot be written: the app runs and writes, the
    /// daemon carries on, and the loss is reported.
    @Test func anUnwritableLogDirectoryIsReportedAndHurtsNoOne() throws {
        let d = try DaemonUnderTest(apps: ["talker": Self.talker()], daemon: "log_directory = \"/proc/no-logs-here\"\n")
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "talker"))
        try f.state("talker", "active")
        let deadline = Date().addingTimeInterval(10)
        var problem: String?
        while problem == nil && Date() < deadline {
            problem = try d.status("talker").outputProblem
            if problem == nil { usleep(20_000) }
        }
        #expect(problem?.contains("/proc/no-logs-here/talker.log") == true, "\(problem ?? "none")")
        let pid = try d.status("talker").pid
        kill(pid ?? 0, SIGUSR1)
        #expect(try d.status("talker").state == .active)
        let (code, _, err) = try d.ctl(["tail", "talker"])
        #expect(code == 1 && err.contains("/proc/no-logs-here/talker.log"), "\(err)")
        #expect(try d.stop() == 0)
    }

    @Test func tailFollowsNewOutput() throws {
        let d = try DaemonUnderTest(apps: ["talker": Self.talker()])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "talker"))
        try f.state("talker", "active")
        _ = try tail(d, "talker", until: "oops")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: binary("supervisorctl"))
        p.arguments = ["tail", "-f", "-n", "0", "talker", "--socket", d.socket]
        let pipe = Pipe()
        p.standardOutput = pipe
        try p.run()
        defer {
            // Ended before the daemon is, and waited for: a follower left
            // behind would say "has not answered for 30 s" into the run.
            // SIGKILL: Foundation spawns it with the test thread's signal
            // mask, which blocks SIGTERM.
            if p.isRunning { kill(p.processIdentifier, SIGKILL) }
            p.waitUntilExit()
        }
        let talker = try #require(try d.status("talker").pid)
        kill(talker, SIGUSR1)
        var seen = ""
        let fd = pipe.fileHandleForReading.fileDescriptor
        let deadline = Date().addingTimeInterval(10)
        while !seen.contains(" again\n") && Date() < deadline {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 1000) == 1 else {
                // Written before `tail -f` had started to follow (-n 0 shows
                // nothing older): nothing says when it has, so say it again.
                kill(talker, SIGUSR1)
                continue
            }
            var buf = [UInt8](repeating: 0, count: 4096)
            let n = read(fd, &buf, 4096)
            if n <= 0 { break }
            seen += String(decoding: buf[0..<n], as: UTF8.self)
        }
        #expect(seen.hasSuffix(" again\n") && !seen.contains("hello"), "\(seen)")
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        #expect(try d.stop() == 0)
    }

    /// A full disk: the lines that do not fit are lost and counted, the app
    /// and the daemon carry on, and once there is room the file says what
    /// was lost.
    @Test func aFullDiskCostsLinesNotTheApp() throws {
        let d = try DaemonUnderTest(apps: ["talker": Self.talker()], daemon: "log_directory = \"full\"\n")
        let dir = d.path("full")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        #expect(mount("tmpfs", dir, "tmpfs", 0, "size=64k") == 0, "a 64 KiB file system")
        defer { umount(dir) }
        try Data(count: 60 << 10).write(to: URL(fileURLWithPath: dir + "/filler"))
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "talker"))
        try f.state("talker", "active")
        // Its first lines say its trap is set: a SIGUSR1 before it would
        // end bash (seen once, in a full run on a busy machine).
        _ = try tail(d, "talker", until: "oops")
        let pid = try #require(try d.status("talker").pid)
        // Enough to fill what is left, then more.
        for _ in 0..<200 { kill(pid, SIGUSR1); usleep(1000) }
        let deadline = Date().addingTimeInterval(10)
        var problem: String?
        while problem == nil && Date() < deadline {
            problem = try d.status("talker").outputProblem
            if problem == nil { kill(pid, SIGUSR1); usleep(20_000) }
        }
        let after = try d.status("talker")
        #expect(
            problem?.contains("No space left on device") == true && after.state == .active,
            "the app runs on: \(after.state), problem \(problem ?? "none"); \(d.daemonLog.suffix(3000))")
        unlink(dir + "/filler")
        // Room again: tried at most once a second, when output comes.
        let lines = try tail(
            d, "talker", until: "again", trying: { kill(pid, SIGUSR1) }, marker: "bytes of output lost")
        #expect(
            lines.contains { $0.contains("[lifecycled: ") && $0.contains("No space left on device") },
            "\(lines.suffix(3))")
        #expect(try d.status("talker").outputProblem == nil)
        #expect(try d.stop() == 0)
    }
}
