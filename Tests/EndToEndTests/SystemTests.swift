import Foundation
@preconcurrency import Glibc
import CLifecycleShim
import LifecycleControl
import LifecycleTestKit
import LifecycleOS
import Testing

func plain(_ log: String, _ extra: String = "") -> String {
    """
    command = ["example-plain", "--log", "\(log)"\(extra.contains("--busy") ? ", \"--busy\"" : "")]
    delivery = "signals"
    [signals]
    willResignActive = "SIGUSR1"
    didBecomeActive = "SIGUSR2"
    [timeouts]
    background_grace = 0.3
    """
}

/// CPU time of a process (utime + stime), in clock ticks, from /proc.
func cpuTicks(_ pid: Int32) -> Int? {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return nil }
    let f = stat[stat.index(after: close)...].split(separator: " ")
    guard f.count > 13, let u = Int(f[11]), let s = Int(f[12]) else { return nil }
    return u + s
}

/// Lets `seconds` of wall time pass: a measurement window, not a wait for
/// something to happen (CPU time accrues over time, nothing signals it).
func measure(seconds: Double) {
    var ts = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - Double(Int(seconds))) * 1e9))
    nanosleep(&ts, nil)
}

@Suite struct FreezerEndToEndTests {
    @Test func suspendedAppIsFrozenAndItsCPUTimeStops() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: ["busy": plain(s + "/busy", "--busy")])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "busy"))
        try f.state("busy", "active")
        try waitForLine(s + "/busy", "started")
        let pid = try #require(try d.status("busy").pid)
        let before = try #require(cpuTicks(pid))
        measure(seconds: 0.3)
        let running = try #require(cpuTicks(pid)) - before
        #expect(running > 5, "a busy app should burn CPU while running (\(running) ticks)")

        try d.command(ControlRequest(.home))
        let frozen = try f.wait("frozen") { $0.kind == .frozen }
        try f.state("busy", "suspended")
        #expect(frozen.latencyMicroseconds != nil)
        let group = try FileManager.default.contentsOfDirectory(atPath: d.cgroupPath + "/apps").first {
            $0.hasPrefix("busy.")
        }
        let events = try String(
            contentsOfFile: d.cgroupPath + "/apps/\(try #require(group))/cgroup.events", encoding: .utf8)
        #expect(events.contains("frozen 1"))
        let t0 = try #require(cpuTicks(pid))
        measure(seconds: 0.3)
        #expect(try #require(cpuTicks(pid)) == t0, "a frozen app must not run")

        // Thawed, it runs again and answers its signals.
        try d.command(ControlRequest(.activate, app: "busy"))
        try f.state("busy", "active")
        let t1 = try #require(cpuTicks(pid))
        measure(seconds: 0.3)
        #expect(try #require(cpuTicks(pid)) > t1)
        #expect(try d.stop() == 0)
    }

    @Test func plainProgramSurvivesBackgroundAndForeground() throws {
        let s = scratch(), log = s + "/p"
        let d = try DaemonUnderTest(apps: ["p": plain(log)])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "p"))
        try f.state("p", "active")
        try waitForLine(log, "started")
        let pid = try d.status("p").pid
        try d.command(ControlRequest(.home))
        try f.state("p", "background")
        try f.state("p", "suspended")
        try d.command(ControlRequest(.activate, app: "p"))
        try f.state("p", "active")
        #expect(try d.status("p").pid == pid, "the same process came back")
        // Standard signals do not queue: one still pending when the next is
        // sent is taken in signal-number order. Let it see SIGUSR2 first.
        try waitForLine(log, "SIGUSR2")
        try d.command(ControlRequest(.stop, app: "p"))
        #expect(try f.terminated("p").reason == "stopped-by-user")
        // The launch is silent; then SIGUSR1 (willResignActive), SIGUSR2
        // (didBecomeActive) in order, SIGUSR1 again and SIGTERM for the quit.
        #expect(lines(log) == ["started", "SIGUSR1", "SIGUSR2", "SIGUSR1", "SIGTERM"])
        #expect(try d.stop() == 0)
    }

    @Test func programIgnoringSIGTERMIsKilledAtTheTerminateDeadline() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: [
            "stubborn": """
            command = ["/bin/sh", "-c", "trap '' TERM; echo started > \(s)/log; while :; do sleep 1; done"]
            delivery = "signals"
            [timeouts]
            terminate = 0.3
            """
        ])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "stubborn"))
        try f.state("stubborn", "active")
        try waitForLine(s + "/log", "started")
        try d.command(ControlRequest(.stop, app: "stubborn"))
        let term = try f.wait("SIGTERM") { $0.kind == .delivered && $0.event == .willTerminate }
        #expect(term.detail == "signal Terminated")
        let killed = try f.wait("SIGKILL") { $0.kind == .killed }
        #expect(Double(killed.monotonic - term.monotonic) / 1e9 >= 0.3)
        let end = try f.terminated("stubborn")
        #expect(end.reason == "stopped-by-user")
        #expect(end.detail == "stopped by user (killed after the terminate deadline)")
        #expect(try d.stop() == 0)
    }

    @Test func processGroupFallbackSuspendsWithSIGSTOP() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: ["busy": plain(s + "/busy", "--busy")], cgroupRoot: "none")
        let f = try d.follow()
        let status = try d.command(ControlRequest(.status)).status!
        #expect(status.daemon.confinement.hasPrefix("process-groups"))
        try d.command(ControlRequest(.activate, app: "busy"))
        try f.state("busy", "active")
        try waitForLine(s + "/busy", "started")
        let pid = try #require(try d.status("busy").pid)
        try d.command(ControlRequest(.home))
        try f.wait("stopped") { $0.kind == .frozen }
        try f.state("busy", "suspended")
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        #expect(stat[stat.index(stat.lastIndex(of: ")")!, offsetBy: 2)] == "T")
        #expect(d.daemonLog.contains("falling back to process groups"))
        #expect(try d.stop() == 0)
    }

    @Test func noZombieAndNoGrandchildSurvives() throws {
        let s = scratch()
        // The app starts a grandchild that would outlive it, then exits.
        let d = try DaemonUnderTest(apps: [
            "forker":
                "command = [\"/bin/sh\", \"-c\", \"sleep 1000 & echo $! > \(s)/grandchild; exec sleep 1000\"]\ndelivery = \"signals\"\n"
        ])
        let f = try d.follow()
        try d.command(ControlRequest(.launch, app: "forker", background: true))
        try f.state("forker", "background")
        var grandchild: Int32? = nil
        for _ in 0..<2000 where grandchild == nil {  // the shell writes the pid right after fork
            grandchild = lines(s + "/grandchild").first.flatMap { Int32($0) }
            if grandchild == nil { sched_yield() }
        }
        let g = try #require(grandchild)
        let watch = lc_pidfd_open(g)
        try #require(watch >= 0, "the grandchild is running before the kill")
        defer { close(watch) }
        try d.command(ControlRequest(.kill, app: "forker"))
        try f.terminated("forker")
        // The whole cgroup was killed: the grandchild dies (its pidfd says
        // so), and the daemon, its subreaper, reaps it: no zombie is left.
        var p = pollfd(fd: watch, events: Int16(POLLIN), revents: 0)
        #expect(poll(&p, 1, 10_000) == 1, "grandchild \(g) survived its app")
        var reaped = false
        for _ in 0..<5000 where !reaped {  // reaping has no event to wait on: the bound is the failure
            reaped = !FileManager.default.fileExists(atPath: "/proc/\(g)")
            if !reaped { usleep(1000) }
        }
        #expect(reaped, "grandchild \(g) was not reaped by the daemon")
        #expect(zombies(of: d.pid).isEmpty, "zombie children of the daemon: \(zombies(of: d.pid))")
        #expect(try d.stop() == 0)
        #expect(!FileManager.default.fileExists(atPath: d.cgroupPath))
    }
}

/// Children of `parent` in state Z.
func zombies(of parent: Int32) -> [Int32] {
    let pids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc"))?.compactMap { Int32($0) } ?? []
    return pids.filter { pid in
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        let f = stat[stat.index(after: close)...].split(separator: " ")
        return f.count > 2 && f[0] == "Z" && Int32(f[1]) == parent
    }
}

@Suite struct SystemdEndToEndTests {
    @Test func notifiesReadyStatusAndStopping() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: ["a": recorder(s + "/a")])
        #expect(try d.notify.waitFor(prefix: "STATUS=", seconds: 5) { $0 == "STATUS=1 apps: 1 not-running" } != nil)
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")
        #expect(try d.notify.waitFor(prefix: "STATUS=", seconds: 5) { $0 == "STATUS=1 apps: 1 active" } != nil)
        #expect(try d.stop() == 0)
        #expect(try d.notify.waitFor("STOPPING=1", seconds: 5))
    }

    @Test func pingsTheWatchdogWhenWatchdogSecIsSet() throws {
        // What systemd sets for WatchdogSec=0.4s: the loop pings at half of it.
        let d = try DaemonUnderTest(apps: [:], environment: ["WATCHDOG_USEC": "400000"])
        #expect(try d.notify.waitFor("WATCHDOG=1", seconds: 5))
        #expect(d.daemonLog.contains("watchdog enabled"))
        #expect(try d.stop() == 0)
    }

    @Test func unitFilesVerifyWithoutWarnings() throws {
        let dir = scratch()
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
        for unit in ["lifecycled.service", "lifecycled.socket"] {
            var text = try String(contentsOfFile: root + "/systemd/" + unit, encoding: .utf8)
            text = text.replacingOccurrences(of: "/usr/local/bin/lifecycled", with: binary("lifecycled"))
            text = text.replacingOccurrences(of: "/usr/local/bin/supervisorctl", with: binary("supervisorctl"))
            try text.write(toFile: dir + "/" + unit, atomically: true, encoding: .utf8)
        }
        let (code, out, err) = try run([
            "/usr/bin/systemd-analyze", "verify", "--man=no",
            dir + "/lifecycled.service", dir + "/lifecycled.socket",
        ])
        #expect(code == 0)
        #expect(err.isEmpty, "systemd-analyze warned: \(err)")
        #expect(out.isEmpty)
    }

    @Test func socketActivation() throws {
        let s = scratch()
        try ("apps_dir = \"apps\"\ncontrol_socket = \"\(s)/unused.sock\"\n" + DaemonUnderTest.ownDirectories()).write(
            toFile: s + "/d.toml", atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: s + "/apps", withIntermediateDirectories: true)
        try recorder(s + "/a.events").write(toFile: s + "/apps/a.toml", atomically: true, encoding: .utf8)
        let sock = s + "/activated.sock"
        let log = open(s + "/log", O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        defer { close(log) }
        var env = ProcessInfo.processInfo.environment
        env["PATH"] = buildDirectory + ":" + (env["PATH"] ?? "")
        let p = try Spawner.spawn(
            SpawnRequest(
                executable: "/usr/bin/systemd-socket-activate",
                arguments: [
                    "-l", sock, binary("lifecycled"), "--config", s + "/d.toml", "--cgroup-root",
                    "/lifecycled-sa-\(getpid())",
                ],
                environment: env, workingDirectory: s, group: AppProcessGroup(), inherit: [(log, 1), (log, 2)]))
        defer {
            kill(p.pid, SIGKILL)
            var pfd = pollfd(fd: p.pidfd, events: Int16(POLLIN), revents: 0)
            poll(&pfd, 1, 5000)
            var st = lc_child_status()
            lc_reap(p.pid, &st)
            close(p.pidfd)
        }
        // systemd-socket-activate listens before it starts us; the first
        // connection starts lifecycled, which takes the socket via sd_listen_fds.
        var client: ControlClient? = nil
        for _ in 0..<5000 where client == nil {
            client = try? ControlClient(path: sock)
            if client == nil { sched_yield() }
        }
        let c = try #require(client)
        c.setReadTimeout(seconds: 20)
        let r = try c.send(ControlRequest(.status))
        #expect(r.ok)
        #expect(r.status?.apps.map(\.name) == ["a"])
        #expect(!FileManager.default.fileExists(atPath: s + "/unused.sock"))
        #expect(FileManager.default.fileExists(atPath: s + "/run/lifecycled.pid"), "its runtime directory is its own")
        kill(p.pid, SIGTERM)
        var pfd = pollfd(fd: p.pidfd, events: Int16(POLLIN), revents: 0)
        #expect(poll(&pfd, 1, 20_000) == 1)
    }
}

/// The spawn helper (docs/architecture.md): apps are started by a small
/// process the daemon forked while it was small, and are still the
/// daemon's children; a helper that is killed is replaced at the next
/// launch; a daemon-reexec starts a new one and leaves no zombie.
@Suite struct SpawnHelperTests {
    /// The daemon's children named lifecycled-fork (its spawn helper).
    func helpers(of daemon: Int32) -> [Int32] {
        let pids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc"))?.compactMap { Int32($0) } ?? []
        return pids.filter { pid in
            guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return false }
            let fields = status.split(separator: "\n")
            return fields.contains("Name:\tlifecycled-fork") && fields.contains("PPid:\t\(daemon)")
                && !fields.contains { $0.hasPrefix("State:\tZ") }
        }
    }

    func parent(of pid: Int32) -> Int32? {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        return status.split(separator: "\n").first { $0.hasPrefix("PPid:") }.flatMap {
            Int32($0.dropFirst(5).trimmingCharacters(in: .whitespaces))
        }
    }

    @Test func appsComeFromTheHelperAndAreTheDaemonsChildren() throws {
        let sleeper = "command = [\"sleep\", \"1000\"]\ndelivery = \"signals\"\n"
        let d = try DaemonUnderTest(apps: ["a": sleeper, "b": sleeper, "c": sleeper])
        let f = try d.follow()
        let first = try #require(helpers(of: d.pid).first, "a spawn helper beside the daemon")
        try d.command(ControlRequest(.launch, app: "a", background: true))
        try f.state("a", "background")
        #expect(parent(of: try #require(try d.status("a").pid)) == d.pid, "the app is the daemon's child")
        // The helper holds stdio and its socket; the daemon holds far more
        // (its control socket, the app's group, pidfd, notify socket...).
        let held = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(first)/fd").count
        let daemonHeld = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(d.pid)/fd").count
        #expect(held <= 4 && daemonHeld > held, "helper \(held), daemon \(daemonHeld) descriptors")

        // Killed: the next launch starts another helper and says so.
        let watch = lc_pidfd_open(first)
        try #require(watch >= 0)
        kill(first, SIGKILL)
        var p = pollfd(fd: watch, events: Int16(POLLIN), revents: 0)
        #expect(poll(&p, 1, 10_000) == 1)
        close(watch)
        try d.command(ControlRequest(.launch, app: "b", background: true))
        try f.state("b", "background")
        #expect(parent(of: try #require(try d.status("b").pid)) == d.pid)
        #expect(d.daemonLog.contains("the spawn helper is gone"), "\(d.daemonLog)")
        let second = helpers(of: d.pid)
        #expect(second.count == 1 && second != [first], "one new helper: \(second)")

        // daemon-reexec: the old helper leaves (its socket closed on exec),
        // the new image has its own; no zombie is left behind.
        let (code, _, err) = try d.ctl(["daemon-reexec"])
        #expect(code == 0, "\(err)")
        try d.command(ControlRequest(.launch, app: "c", background: true))
        let f2 = try d.follow()
        if try d.status("c").state != .background { try f2.state("c", "background") }
        #expect(parent(of: try #require(try d.status("c").pid)) == d.pid)
        let third = helpers(of: d.pid)
        #expect(third.count == 1 && third != second, "the new image's own helper: \(third)")
        var left = zombies(of: d.pid)
        for _ in 0..<5000 where !left.isEmpty {  // reaping has no event to wait on: the bound is the failure
            usleep(1000)
            left = zombies(of: d.pid)
        }
        #expect(left.isEmpty, "zombie children of the daemon: \(left)")
        #expect(try d.stop() == 0)
    }
}
