import Foundation
@preconcurrency import Glibc
import LifecycleControl
import LifecycleOS
import LifecycleTestKit
import Testing

/// A recorder that holds `mb` MiB of touched memory from its start.
func hog(_ log: String, mb: Int, _ extra: String = "") -> String {
    recorder(log, extra, arguments: ["--allocate-mb", "\(mb)"])
}

/// The available memory as the daemon counts it: MemAvailable plus the free
/// pages in per-CPU lists (hundreds of MiB right after another test's hog
/// was freed), bytes.
func availableMemory() throws -> UInt64 {
    let meminfo = try #require(KernelFile("/proc/meminfo"))
    let perCPU = try #require(PerCPUFreePages())
    #expect(meminfo.refresh())
    return try #require(meminfo.integer(after: "MemAvailable:")) * 1024 + (try #require(perCPU.read()))
}

/// Memory pressure with real memory: apps that allocate, a budget that
/// forces kills, the records and next-launch reasons that follow. The
/// daemon samples on its own; the tests wait on its event stream.
/// One at a time: two of them set thresholds on the machine's available
/// memory, which the others' hogs would move.
@Suite(.serialized) struct MemoryPressureEndToEndTests {
    /// Launches `app` into the background and waits until it is frozen.
    func suspend(_ d: DaemonUnderTest, _ f: Follower, _ app: String) throws {
        try d.command(ControlRequest(.launch, app: app, background: true))
        try f.state(app, "suspended")
    }

    @Test func overBudgetSuspendedAppsDieFirstLowestBandThenLeastRecentlyUsedAndNoMoreThanNeeded() throws {
        let s = scratch()
        // 3 × 64 MiB suspended + 128 MiB in front ≈ 320 MiB against 240 MiB:
        // two kills bring it under; the third suspended app and the front one stay.
        let d = try DaemonUnderTest(
            apps: [
                "s1": hog(s + "/s1", mb: 64), "s2": hog(s + "/s2", mb: 64),
                "low": hog(s + "/low", mb: 64, "[memory]\nband = \"low\""),
                "front": hog(s + "/front", mb: 128),
            ],
            daemon:
                "[memory]\nbudget = \"240M\"\nbudget_warning = 95\navailable_warning = \"off\"\navailable_critical = \"off\""
        )
        let f = try d.follow()
        try suspend(d, f, "s1")
        try suspend(d, f, "low")
        try suspend(d, f, "s2")
        try d.command(ControlRequest(.activate, app: "front"))

        let first = try f.wait("the first kill") { $0.kind == .jetsam }
        try f.terminated(first.app)
        let second = try f.wait("the second kill") { $0.kind == .jetsam }
        try f.terminated(second.app)
        try f.wait("the level back to normal") { $0.kind == .memoryLevel && $0.to == "normal" }
        #expect([first.app, second.app] == ["low", "s1"])

        let k = try #require(first.kill)
        #expect(k.reason == .memoryPressure && k.state == .suspended && k.band == .low && !k.simulated)
        #expect(k.level == .critical)
        #expect(try #require(k.footprint) >= 64 << 20)
        #expect(try #require(k.reading.appsTotal) > 240 << 20)
        #expect(k.reading.budget == 240 << 20)
        #expect(k.candidates.map(\.app) == ["low", "s1", "s2", "front"])

        try f.acknowledged("front", "didBecomeActive")
        #expect(try d.status("s2").state == .suspended)
        #expect(try d.status("front").state == .active)
        let jetsam = try d.command(ControlRequest(.jetsam)).kills ?? []
        #expect(jetsam.map(\.app) == ["low", "s1"])
        #expect(try d.status("low").lastTermination?.reason == .memoryPressure)

        // Its next launch is told why and when its previous run ended.
        let again = try d.follow(["low"])
        try d.command(ControlRequest(.launch, app: "low", background: true))
        try again.acknowledged("low", "didEnterBackground")
        #expect(lines(s + "/low").contains("# previous: memory-pressure"))
        #expect(try d.stop() == 0)
    }

    @Test func warningReachesRunningAppsNotSuspendedOnes() throws {
        let s = scratch()
        let d = try DaemonUnderTest(
            apps: [
                "sleeper": hog(s + "/sleeper", mb: 1), "front": hog(s + "/front", mb: 96),
            ],
            daemon:
                "[memory]\nbudget = \"160M\"\nbudget_warning = 50\navailable_warning = \"off\"\navailable_critical = \"off\""
        )
        let f = try d.follow()
        try suspend(d, f, "sleeper")
        try d.command(ControlRequest(.activate, app: "front"))
        let level = try f.wait("the warning level") { $0.kind == .memoryLevel && $0.to == "warning" }
        #expect(level.detail?.contains("simulated") == false)
        try f.acknowledged("front", "didReceiveMemoryWarning")
        #expect(lines(s + "/front").contains("didReceiveMemoryWarning"))
        #expect(!lines(s + "/sleeper").contains("didReceiveMemoryWarning"))
        #expect(try d.status("sleeper").state == .suspended)
        #expect((try d.command(ControlRequest(.jetsam)).kills ?? []).isEmpty, "a warning kills nothing")
        #expect(try d.stop() == 0)
    }

    @Test func anAppOverItsOwnLimitIsKilledWhateverTheLevel() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: ["greedy": hog(s + "/greedy", mb: 64, "[memory]\nlimit = \"32M\"")])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "greedy"))
        let kill = try f.wait("the limit kill") { $0.kind == .jetsam }
        #expect(try f.terminated("greedy").reason == "per-app-limit")
        let k = try #require(kill.kill)
        #expect(k.reason == .perAppLimit && k.limit == 32 << 20 && k.level == .normal)
        #expect(try #require(k.footprint) > 32 << 20)
        #expect(try d.stop() == 0)
    }

    @Test func lastNoticeThawsTellsThenKills() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: [
            "polite": hog(s + "/polite", mb: 1, "[memory]\nlast_notice = true"),
            "stuck": recorder(
                s + "/stuck", "[memory]\nlast_notice = true\nband = \"low\"",
                arguments: ["--hang", "willBeKilledForMemory"]),
        ])
        let f = try d.follow()
        try suspend(d, f, "stuck")
        try suspend(d, f, "polite")

        // The stuck one (low band) goes first: told, no answer, killed at 250 ms.
        try d.command(ControlRequest(.pressure, level: "critical"))
        let told = try f.wait("the notice") {
            $0.app == "stuck" && $0.kind == .delivered && $0.event == .willBeKilledForMemory
        }
        let killed = try f.wait("the kill") { $0.app == "stuck" && $0.kind == .killed }
        #expect(Double(killed.monotonic - told.monotonic) / 1e6 >= 249)
        #expect(lines(s + "/stuck").last == "willBeKilledForMemory")
        try f.terminated("stuck")

        try d.command(ControlRequest(.pressure, level: "critical"))
        try f.acknowledged("polite", "willBeKilledForMemory")
        #expect(try f.terminated("polite").reason == "memory-pressure")
        let kills = try d.command(ControlRequest(.jetsam)).kills ?? []
        #expect(kills.map(\.app) == ["stuck", "polite"])
        #expect(kills.allSatisfy { $0.lastNotice && $0.simulated })
        #expect(try d.stop() == 0)
    }

    /// Far from every threshold, samples are taken by the daemon's C
    /// sentinel and never wake its loop; real memory running short hands
    /// them back, the level changes as before, and once memory is back the
    /// samples are quiet again.
    @Test func quietSamplingHandsBackWhenRealMemoryRunsShort() throws {
        let available = try availableMemory()
        let warning = available - (600 << 20), critical = available - (3 << 30)
        let s = scratch()
        let d = try DaemonUnderTest(
            apps: ["big": hog(s + "/big", mb: 1024)],
            daemon: """
                [memory]
                available_warning = "\(warning >> 10)K"
                available_critical = "\(critical >> 10)K"
                hysteresis = 1
                """)
        func memory() throws -> MemoryStatus { try #require(d.command(ControlRequest(.status)).status?.daemon.memory) }
        // No event says a quiet sample was taken: look at the count.
        let deadline = Posix.monotonicNanoseconds() + 10_000_000_000
        while try !(memory().quiet == true && memory().quietSamples ?? 0 >= 2) {
            try #require(Posix.monotonicNanoseconds() < deadline, "quiet samples within 10 s")
            usleep(20_000)
        }
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "big"))
        let level = try f.wait("the warning level") { $0.kind == .memoryLevel && $0.to == "warning" }
        #expect(level.detail?.contains("simulated") == false)
        try f.acknowledged("big", "didReceiveMemoryWarning")
        #expect(try memory().quiet == false, "every sample in full while memory is short")
        try d.command(ControlRequest(.kill, app: "big"))
        try f.wait("the level back to normal") { $0.kind == .memoryLevel && $0.to == "normal" }
        #expect(try memory().quiet == true)
        #expect((try d.command(ControlRequest(.jetsam)).kills ?? []).isEmpty)
        #expect(try d.stop() == 0)
    }

    /// Since Linux 6.7 the kernel keeps a big free in per-CPU lists, which
    /// MemAvailable leaves out: a killed 384 MiB app may not move it at all
    /// for tens of seconds. Counted as available, the kill ends the
    /// critical level at once and the other suspended app lives.
    @Test func aKillWhoseMemoryHidesInPerCPUListsIsEnoughAlone() throws {
        let available = try availableMemory()
        let meminfo = try #require(KernelFile("/proc/meminfo"))
        #expect(meminfo.refresh())
        let total = try #require(meminfo.integer(after: "MemTotal:")) * 1024
        // s1 + s2 + front = 1536 MiB: critical 192 MiB before the front app
        // is resident; one kill (384 MiB) leaves 192 MiB over it, more than
        // the hysteresis (64 MiB, as a share of MemTotal), the apps' own few
        // MiB each and the small apps of other suites running meanwhile.
        let critical = available - (1344 << 20)
        let s = scratch()
        let d = try DaemonUnderTest(
            apps: [
                "s1": hog(s + "/s1", mb: 384), "s2": hog(s + "/s2", mb: 384), "front": hog(s + "/front", mb: 768),
            ],
            daemon: """
                [memory]
                available_warning = "off"
                available_critical = "\(critical >> 10)K"
                hysteresis = \(Double(64 << 20) * 100 / Double(total))
                """)
        let f = try d.follow()
        try suspend(d, f, "s1")
        try suspend(d, f, "s2")
        try d.command(ControlRequest(.activate, app: "front"))
        let kill = try f.wait("the kill") { $0.kind == .jetsam }
        #expect(kill.app == "s1")
        try f.wait("the level back to normal") { $0.kind == .memoryLevel && $0.to == "normal" }
        #expect((try d.command(ControlRequest(.jetsam)).kills ?? []).map(\.app) == ["s1"])
        try f.acknowledged("front", "didBecomeActive")
        #expect(try d.status("s2").state == .suspended)
        #expect(try d.status("front").state == .active)
        #expect(try d.stop() == 0)
    }

    @Test func footprintsInEveryAccounting() throws {
        // cgroup memory (v1 on this machine, v2 where the tree has it), then /proc PSS.
        for root in [nil, "none"] as [String?] {
            let s = scratch()
            let d = try DaemonUnderTest(apps: ["a": hog(s + "/a", mb: 48)], cgroupRoot: root)
            let f = try d.follow()
            try d.command(ControlRequest(.launch, app: "a", background: true))
            try f.state("a", "suspended")
            let footprint = try #require(try d.status("a").footprint)
            #expect(footprint >= 48 << 20 && footprint < 96 << 20, "\(root ?? "cgroups"): \(footprint)")
            let memory = try #require(try d.command(ControlRequest(.status)).status?.daemon.memory)
            #expect(
                memory.accounting == (root == nil ? "cgroup-v1 memory controller" : "/proc PSS")
                    || memory.accounting == "cgroup-v2 memory controller")
            #expect(memory.reading.available != nil && memory.reading.total != nil)
            #expect(try d.stop() == 0)
        }
    }

    @Test func killRecordsSurviveARestart() throws {
        let state = scratch()
        let line = "state_directory = \"\(state)\""
        do {
            let d = try DaemonUnderTest(apps: ["a": recorder(scratch() + "/a")], daemon: line)
            let f = try d.follow()
            try suspend(d, f, "a")
            try d.command(ControlRequest(.pressure, level: "critical"))
            try f.terminated("a")
            #expect(try d.stop() == 0)
        }
        let log = try String(contentsOfFile: state + "/jetsam.log", encoding: .utf8)
        #expect(log.split(separator: "\n").count == 1)
        let again = try DaemonUnderTest(apps: ["a": recorder(scratch() + "/a")], daemon: line)
        let (code, out, _) = try again.ctl(["jetsam", "--json"])
        #expect(code == 0)
        let kills = try JSONDecoder().decode([KillRecord].self, from: Data(out.utf8))
        #expect(kills.map(\.app) == ["a"] && kills[0].simulated)
        #expect(try again.stop() == 0)
    }
}
