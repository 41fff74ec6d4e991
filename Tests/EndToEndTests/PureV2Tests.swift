import Foundation
@preconcurrency import Glibc
import CLifecycleShim
import LifecycleControl
import LifecycleOS
import LifecycleTestKit
import Testing

// The memory path every real user runs: pure cgroup v2 with the memory and
// cpu controllers, which this development machine does not have (its v2
// tree has neither; docs/architecture.md). These suites run in the virtual
// machine of Tests/vm/run.sh (part of `make test`): a real kernel, real
// memory running out, real swap. Elsewhere they are skipped, saying so;
// inside the machine a missing controller or swap device fails them.

let inVirtualMachine = ProcessInfo.processInfo.environment["LIFECYCLED_VM"] == "1"

/// A cgroup file, trimmed.
func cgroupFile(_ path: String) -> String {
    ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
}

/// The group of the app's current run (NAME.GENERATION, the newest).
func appGroup(_ d: DaemonUnderTest, _ app: String) throws -> String {
    let names = try FileManager.default.contentsOfDirectory(atPath: d.cgroupPath + "/apps")
        .filter { $0.hasPrefix(app + ".") }
    let newest = try #require(
        names.max { Int($0.dropFirst(app.count + 1)) ?? 0 < Int($1.dropFirst(app.count + 1)) ?? 0 })
    return d.cgroupPath + "/apps/" + newest
}

/// Whether the extended attribute is set (Python's os.getxattr: Glibc's
/// module here lacks sys/xattr.h).
func hasXattr(_ path: String, _ name: String) throws -> Bool {
    let (code, _, _) = try run([
        "/usr/bin/python3", "-c", "import os, sys; os.getxattr(sys.argv[1], sys.argv[2])", path, name,
    ])
    return code == 0
}

/// The kernel's OOM kills since boot (/proc/vmstat).
func kernelOOMKills() -> Int {
    let text = (try? String(contentsOfFile: "/proc/vmstat", encoding: .utf8)) ?? ""
    return text.split(separator: "\n").first { $0.hasPrefix("oom_kill ") }.flatMap { Int($0.dropFirst(9)) } ?? -1
}

/// A line of /proc/meminfo, bytes.
func meminfo(_ key: String) throws -> UInt64 {
    let text = try String(contentsOfFile: "/proc/meminfo", encoding: .utf8)
    let line = try #require(text.split(separator: "\n").first { $0.hasPrefix(key + ":") })
    return try #require(UInt64(line.split(separator: " ")[1])) * 1024
}

/// A plain program (no library) running `script` in sh.
func shell(_ script: String, _ extra: String = "") -> String {
    "command = [\"/bin/sh\", \"-c\", \"\(script.replacingOccurrences(of: "\"", with: "\\\""))\"]\ndelivery = \"signals\"\n\(extra)\n"
}

/// Python holding `bytes` of touched memory, 16 MiB at a time (bytes
/// objects filled with 'x'; one block larger than memory and swap would be
/// refused by the kernel's overcommit check instead of running memory out).
func pythonHolding(_ bytes: UInt64) -> String {
    "python3 -c 'import time; b = [b\"x\" * (16 << 20) for _ in range(\((bytes + (16 << 20) - 1) >> 24))]; time.sleep(600)'"
}

@Suite(
    .serialized,
    .enabled(
        if: inVirtualMachine, "needs pure cgroup v2 with the memory controller: Tests/vm/run.sh (make test) runs it"))
struct PureV2MemoryTests {
    init() throws {
        // No swap here: what a kill gives back is memory, and the kernel's
        // OOM killer comes when memory alone runs out.
        #expect(try meminfo("SwapTotal") == 0, "this suite runs without swap (PureV2SwapTests has it)")
    }

    /// An app holding an ALSA playback device open (snd-dummy's: a real
    /// kernel driver, in the guest's kernel) is held from freezing past
    /// its grace, in the background; once it closes the device, it is
    /// frozen (docs/focus.md, "Holds"). Here rather than on the
    /// development machine, whose kernel has no sound drivers.
    @Test func anAppPlayingAudioIsNeverFrozen() throws {
        let (code, _, err) = try run(["/usr/sbin/modprobe", "snd-dummy"])
        try #require(code == 0, "modprobe snd-dummy: \(err)")
        try waitUntil("the dummy card's playback device") { Posix.exists("/dev/snd/pcmC0D0p") }
        let s = scratch()
        let fifo = s + "/release"
        #expect(mkfifo(fifo, 0o600) == 0)
        let script =
            "exec 3<>/dev/snd/pcmC0D0p; echo open > \(s)/open; read x < \(fifo); exec 3>&-; "
            + "echo closed > \(s)/closed; sleep 100000"
        let d = try DaemonUnderTest(apps: ["player": shell(script, "[timeouts]\nbackground_grace = 1")])
        #expect(try d.ctl(["launch", "--background", "player"]).0 == 0)
        try waitForLine(s + "/open", "open")
        try waitUntil("held for its audio") { try d.status("player").held == ["audio"] }
        #expect(try d.status("player").state == .background)
        #expect(try cgroupFile(appGroup(d, "player") + "/cgroup.events").contains("frozen 0"))
        #expect(d.daemonLog.contains("player plays audio (/dev/snd/pcmC0D0p): held from freezing"))

        // The device closed: frozen, as any app in the background past its grace.
        let fd = open(fifo, O_WRONLY)
        #expect(fd >= 0 && write(fd, "go\n", 3) == 3)
        close(fd)
        try waitForLine(s + "/closed", "closed")
        try waitUntil("frozen once it no longer plays") { try d.status("player").frozen == true }
        #expect(try d.status("player").held == nil)
        #expect(try d.stop() == 0)
    }

    /// The guest's root enables no controller at boot: the daemon enables
    /// memory and cpu down to its tree, and each app's group stands by its
    /// state: protected and weighted first in front, omitted by oomd there,
    /// avoided in the background, a candidate like any when suspended.
    @Test func theDaemonEnablesItsControllersAndEachAppStandsByItsState() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: [
            "a": recorder(s + "/a"),
            "b": recorder(s + "/b", "background_modes = [\"audio\"]"),
        ])
        let memory = try #require(try d.command(ControlRequest(.status)).status?.daemon.memory)
        #expect(memory.accounting == "cgroup-v2 memory controller")
        #expect(memory.problems == nil, "\(memory.problems ?? [])")
        for controller in ["memory", "cpu"] {
            #expect(cgroupFile(d.cgroupPath + "/apps/cgroup.subtree_control").contains(controller))
        }
        #expect(cgroupFile(d.cgroupPath + "/daemon/cpu.weight") == "100", "the daemon as heavy as its apps together")
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")
        let a = try appGroup(d, "a")
        #expect(cgroupFile(a + "/memory.oom.group") == "1")
        #expect(cgroupFile(a + "/memory.low") == "max")
        #expect(cgroupFile(a + "/cpu.weight") == "1000")
        #expect(try hasXattr(a, "user.oomd_omit") && !hasXattr(a, "user.oomd_avoid"))

        try d.command(ControlRequest(.launch, app: "b", background: true))
        try f.acknowledged("b", "didEnterBackground")
        let b = try appGroup(d, "b")
        #expect(cgroupFile(b + "/memory.low") == "0" && cgroupFile(b + "/cpu.weight") == "50")
        #expect(try hasXattr(b, "user.oomd_avoid") && !hasXattr(b, "user.oomd_omit"))

        try d.command(ControlRequest(.home))
        try f.state("a", "suspended")
        #expect(cgroupFile(a + "/memory.low") == "0" && cgroupFile(a + "/cpu.weight") == "50")
        #expect(try !hasXattr(a, "user.oomd_omit") && !hasXattr(a, "user.oomd_avoid"))
        #expect(try d.stop() == 0)
    }

    /// A group with processes of its own cannot enable controllers for its
    /// children: the daemon says so, naming it, and falls back to /proc.
    @Test func whereTheMemoryControllerCannotBeHadTheDaemonSaysWhy() throws {
        let busy = "/lifecycled-busy-\(UUID().uuidString.prefix(8))"
        let path = "/sys/fs/cgroup" + busy
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        let sleeper = try Spawner.spawn(
            SpawnRequest(
                executable: "/bin/sleep", arguments: ["600"], environment: [:], workingDirectory: nil,
                group: AppProcessGroup()))
        defer {
            kill(sleeper.pid, SIGKILL)
            var st = lc_child_status()
            lc_reap(sleeper.pid, &st)
            close(sleeper.pidfd)
            rmdir(path)
        }
        try "\(sleeper.pid)".write(toFile: path + "/cgroup.procs", atomically: false, encoding: .utf8)
        let s = scratch()
        let d = try DaemonUnderTest(apps: ["a": recorder(s + "/a")], cgroupRoot: busy + "/lc")
        let memory = try #require(try d.command(ControlRequest(.status)).status?.daemon.memory)
        #expect(memory.accounting == "/proc PSS")
        let problems = memory.problems ?? []
        #expect(
            problems.contains {
                $0.contains("cannot enable the memory controller in \(path)") && $0.contains("processes")
            },
            "\(problems)")
        #expect(d.daemonLog.contains("cannot enable the memory controller in \(path)"))
        #expect(try d.stop() == 0)
    }

    /// The limit is the kernel's before the app runs an instruction; at it,
    /// the kernel kills the whole group, and the record has the run's peak
    /// (not the footprint sampled before the allocation) and its pid.
    @Test func theKernelKillsAtTheAppsOwnLimitAndTheRecordHasItsPeakAndPid() throws {
        let s = scratch()
        let script =
            "cat /sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup)/memory.max > \(s)/max; exec \(pythonHolding(128 << 20))"
        let d = try DaemonUnderTest(apps: ["greedy": shell(script, "[memory]\nlimit = \"48M\"")])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "greedy"))
        let launched = try f.wait("the launch") { $0.app == "greedy" && $0.kind == .launched }
        let jetsam = try f.wait("the kill") { $0.app == "greedy" && $0.kind == .jetsam }
        #expect(try f.terminated("greedy").reason == "per-app-limit")
        let k = try #require(jetsam.kill)
        #expect(k.reason == .perAppLimit && k.killer == .kernel && k.limit == 48 << 20)
        #expect(try #require(k.footprint) > 40 << 20 && k.footprint == k.peak, "the peak at the limit: \(k)")
        #expect(k.pid != nil && k.pid == launched.pid)
        #expect(cgroupFile(s + "/max") == "\(48 << 20)", "memory.max was set before the app's first instruction")
        #expect(try d.status("greedy").lastTermination?.reason == .perAppLimit)
        #expect(try d.stop() == 0)
    }

    /// A helper (not the main process) that reaches the app's limit takes
    /// the whole app with it (memory.oom.group), and it is recorded. In
    /// front, so that it is not frozen before its helper has allocated (a
    /// launch into the background froze it first once, under the virtual
    /// machine's emulated CPU, before Python had started).
    @Test func aHelperAtTheLimitTakesItsAppWithItAndIsRecorded() throws {
        let d = try DaemonUnderTest(apps: [
            "parent": shell("\(pythonHolding(128 << 20)); sleep 600", "[memory]\nlimit = \"48M\"")
        ])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "parent"))
        let jetsam = try f.wait("the kill") { $0.app == "parent" && $0.kind == .jetsam }
        #expect(try f.terminated("parent").reason == "per-app-limit", "the main process (sh) went with its helper")
        #expect(jetsam.kill?.killer == .kernel && jetsam.kill?.reason == .perAppLimit)
        #expect(try d.stop() == 0)
    }

    /// With monitoring off, the machine runs out before anyone else acts:
    /// the kernel's OOM killer takes the app (not at its own limit, which
    /// is far above memory), and that is recorded as the kernel's kill.
    @Test func theMachineRunningOutIsTheKernelsOwnKillNotTheAppsLimit() throws {
        let total = try meminfo("MemTotal")
        let d = try DaemonUnderTest(
            apps: ["big": shell("exec \(pythonHolding(total * 3 / 2))", "[memory]\nlimit = \"16G\"")],
            daemon: "[memory]\nmonitor = false")
        let f = try d.follow()
        let before = kernelOOMKills()
        try d.command(ControlRequest(.activate, app: "big"))
        let launched = try f.wait("the launch") { $0.app == "big" && $0.kind == .launched }
        let jetsam = try f.wait("the kill") { $0.app == "big" && $0.kind == .jetsam }
        #expect(try f.terminated("big").reason == "kernel-oom")
        let k = try #require(jetsam.kill)
        #expect(k.reason == .kernelOOM && k.killer == .kernel && k.limit == nil, "\(k)")
        #expect(try #require(k.peak) > total / 2)
        #expect(k.pid == launched.pid)
        #expect(kernelOOMKills() > before)
        #expect(try d.status("big").lastTermination?.reason == .kernelOOM)
        #expect(try d.stop() == 0)
    }

    /// Real memory running out, with the defaults: the least recently used
    /// suspended app dies, its memory comes back at once (the record says
    /// how much), no other app dies, and the kernel never has to kill.
    @Test func realMemoryRunningOutKillsOneSuspendedAppBeforeTheKernelWouldAnyone() throws {
        let total = try meminfo("MemTotal"), available = try meminfo("MemAvailable")
        let mib: UInt64 = 1 << 20
        let suspended: UInt64 = 128 * mib
        // The front app crosses the critical level (10 % of MemTotal) by 64
        // MiB with both suspended apps resident: one kill is enough.
        let front = available - 2 * suspended - total / 10 + 64 * mib
        let s = scratch()
        // The subject is which app dies, not the launch deadline: right
        // after the suite's machine-wide exhaustion, in an emulated guest,
        // the front's launch events once took more than the default 5 s,
        // and so, another time, did s1's background launch.
        let slow = "[timeouts]\nlaunch = 60\nevent = 60"
        let d = try DaemonUnderTest(apps: [
            "s1": hog(s + "/s1", mb: Int(suspended / mib), slow), "s2": hog(s + "/s2", mb: Int(suspended / mib), slow),
            "front": hog(s + "/front", mb: Int(front / mib), slow),
        ])
        let f = try d.follow()
        for app in ["s1", "s2"] {
            try d.command(ControlRequest(.launch, app: app, background: true))
            try f.state(app, "suspended")
        }
        let before = kernelOOMKills()
        try d.command(ControlRequest(.activate, app: "front"))
        let jetsam = try f.wait("the kill") { $0.kind == .jetsam }
        #expect(jetsam.app == "s1")
        let k = try #require(jetsam.kill)
        #expect(k.reason == .memoryPressure && k.killer == nil && !k.simulated)
        // What came back by the time the record was written (right after
        // process_mrelease), which may be nothing yet: a dying app that got
        // a CPU first tears its memory down itself, and process_mrelease
        // then leaves it to it (seen once in CI: freed 0). That it came
        // back is the level leaving critical, below.
        #expect(k.freed != nil, "\(k)")
        try f.terminated("s1")
        try f.acknowledged("front", "didBecomeActive")
        // Back to warning, not normal: the front app holds what s1 held (less 64 MiB).
        let level = try f.wait("the level out of critical") { $0.kind == .memoryLevel && $0.from == "critical" }
        #expect(level.to == "warning")
        #expect(try d.status("s2").state == .suspended)
        #expect((try d.command(ControlRequest(.jetsam)).kills ?? []).map(\.app) == ["s1"])
        #expect(kernelOOMKills() == before, "the kernel never had to kill")
        #expect(try d.stop() == 0)
    }

    /// kill -9 of the daemon: the next one takes every app back, and the
    /// groups keep their standing, which moves on with the next transition.
    @Test func afterKill9TheNextDaemonCarriesOnWithEachStanding() throws {
        let s = scratch()
        // Long deadlines, as above: this suite's exhaustions empty the page
        // cache, and the subject here is adoption, not a launch's deadline.
        let slow = "[timeouts]\nlaunch = 60\nevent = 60"
        let d = try DaemonUnderTest(apps: ["a": recorder(s + "/a", slow), "b": recorder(s + "/b", slow)])
        let f = try d.follow()
        try d.command(ControlRequest(.launch, app: "b", background: true))
        try f.state("b", "suspended")
        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")
        let pid = try d.status("a").pid
        _ = try d.crash(with: SIGKILL)
        // The weight of its own group is written, not assumed: say an
        // older daemon left another one there.
        try "10000".write(toFile: d.cgroupPath + "/daemon/cpu.weight", atomically: false, encoding: .utf8)
        let next = try DaemonUnderTest(after: d)
        let g = try next.follow()
        #expect(cgroupFile(next.cgroupPath + "/daemon/cpu.weight") == "100")
        #expect(try next.status("a").pid == pid && next.status("a").state == .active)
        let a = try appGroup(next, "a")
        #expect(cgroupFile(a + "/memory.low") == "max")
        try next.command(ControlRequest(.home))
        try g.state("a", "suspended")
        #expect(cgroupFile(a + "/memory.low") == "0" && cgroupFile(a + "/cpu.weight") == "50")
        #expect(try next.stop() == 0)
    }
}

@Suite(
    .serialized,
    .enabled(if: inVirtualMachine, "needs pure cgroup v2 and a swap device: Tests/vm/run.sh (make test) runs it"))
struct PureV2SwapTests {
    init() throws {
        #expect(try meminfo("SwapTotal") > 0, "this suite runs with a swap device (Tests/vm/run.sh gives it one)")
    }

    /// A warning pushes the least recently used suspended app's memory to
    /// swap; its footprint still counts it; a kill then passes it over
    /// (killing it would give back swap, not memory); thawed, it answers.
    @Test func aWarningPushesTheColdestSuspendedAppToSwapAndAKillPassesItOver() throws {
        let mib: UInt64 = 1 << 20
        let s = scratch()
        let d = try DaemonUnderTest(apps: ["s1": hog(s + "/s1", mb: 64), "s2": hog(s + "/s2", mb: 64)])
        let f = try d.follow()
        for app in ["s1", "s2"] {
            try d.command(ControlRequest(.launch, app: app, background: true))
            try f.state(app, "suspended")
        }
        #expect(try d.command(ControlRequest(.status)).status?.daemon.memory?.reclaim == true)
        try d.command(ControlRequest(.pressure, level: "warning"))
        let reclaimed = try f.wait("the reclaim") { $0.kind == .reclaimed }
        #expect(reclaimed.app == "s1", "the least recently used first")
        let g = try appGroup(d, "s1")
        #expect(UInt64(cgroupFile(g + "/memory.swap.current")) ?? 0 > 48 * mib, "in swap now")
        #expect(try #require(try d.status("s1").footprint) > 60 * mib, "the footprint counts what is in swap")

        try d.command(ControlRequest(.pressure, level: "critical"))
        let jetsam = try f.wait("the kill") { $0.kind == .jetsam }
        #expect(jetsam.app == "s2", "s1 would give back swap, not memory")
        let k = try #require(jetsam.kill)
        #expect(k.candidates.map(\.app) == ["s2", "s1"] && (k.candidates[1].swap ?? 0) > 48 * mib)
        try f.terminated("s2")

        try d.command(ControlRequest(.activate, app: "s1"))
        try f.acknowledged("s1", "didBecomeActive")
        #expect(try d.stop() == 0)
    }
}
