@preconcurrency import Glibc
import Foundation
@testable import LifecycleDaemon
import LifecycleCore
import LifecycleOS
import LifecycleTestKit
import LifecycleWire

// Fakes for driving the shell without a kernel to answer: no process is
// started, no cgroup made, no signal sent that could reach anything. In the
// spirit of swift-nio's embedded loop: the shell's choices run for real,
// against a world the test plays.

/// A group that records what the shell did to it.
final class FakeGroup: AppGroup {
    let name: String
    var pid: Int32 = 0
    var memory: MemoryAccounting { .processPSS }
    var placement: SpawnPlacement { .processGroup }
    var calls: [String] = []
    /// What `freeze()` answers: frozen at once, or only at a later look.
    var freezesAtOnce = true
    var frozen = false
    var footprint: UInt64? = 64 << 20
    /// What the kernel's OOM killer did, as outOfMemory() reports it.
    var oom: OutOfMemory?

    init(name: String) { self.name = name }

    func spawned() { calls.append("spawned") }
    func freeze() throws(SystemError) -> Bool {
        calls.append("freeze")
        frozen = freezesAtOnce
        return frozen
    }
    func isFrozen() -> Bool { frozen }
    func freezeAsked() -> Bool { frozen }
    func thaw() throws(SystemError) {
        calls.append("thaw")
        frozen = false
    }
    func killAll() { calls.append("killAll") }
    func contains(_ pid: Int32) -> Bool { pid == self.pid }
    var populated: Bool { false }
    func remove() -> Bool {
        calls.append("remove")
        return true
    }
    func memoryUse() -> MemoryUse? { footprint.map { MemoryUse(resident: $0) } }
    func setMemoryLimit(_ bytes: UInt64) -> Bool {
        calls.append("limit \(bytes)")
        return true
    }
    func outOfMemory() -> OutOfMemory? { oom }
    func killForMemory(pidfd: Int32) -> (before: MemoryUse?, after: MemoryUse?) {
        calls.append("killAll")
        return (memoryUse(), MemoryUse(resident: 0))
    }
    func stand(_ standing: GroupStanding) {
        if let low = standing.memoryLow { calls.append("memory.low \(low == .max ? "max" : String(low))") }
        if let weight = standing.cpuWeight { calls.append("cpu.weight \(weight)") }
        if let oomd = standing.oomd { calls.append("oomd \(oomd)") }
    }
    func cpuMicroseconds() -> UInt64? { nil }
    func setOOMScoreAdjust(_ value: Int32) { calls.append("oom_score_adj \(value)") }
}

/// A confinement that makes fake groups, named as the cgroups would be.
final class FakeConfinement: Confinement {
    var groups: [String: FakeGroup] = [:]
    var summary: String { "fake" }
    var memoryAccounting: MemoryAccounting { .processPSS }
    func makeGroup(app: String, generation: UInt64) throws(SystemError) -> any AppGroup {
        let g = FakeGroup(name: "\(app).\(generation)")
        groups[g.name] = g
        return g
    }
    func adoptGroup(app: String, generation: UInt64, pid: Int32, member: Bool) -> (any AppGroup)? { nil }
    func leftoverGroups() -> [String] { [] }
    func leftover(_ name: String) -> (any AppGroup)? { nil }
    func appsFootprint() -> UInt64? { nil }
    func leave() {}
    /// The knobs of a cgroup v2 tree with the memory and cpu controllers, by default.
    var standings: GroupStanding.Knobs = [.memory, .cpu]
}

/// A process table: spawns nothing, hands out pids no process has, and
/// keeps the app end of each channel so the test can play the app.
final class FakeStarter: ProcessStarter {
    struct Spawned {
        var request: SpawnRequest
        var pid: Int32
        /// The app's end of its channel (fd 3 in a real child), or -1.
        var channel: Int32
    }
    var spawned: [Spawned] = []
    var failWith: SpawnError?
    private var nextPID: Int32 = 2_000_000_000  // above PID_MAX_LIMIT (2^22): no real process

    func spawn(_ request: SpawnRequest) throws(SpawnError) -> SpawnedProcess {
        if let failWith { throw failWith }
        nextPID += 1
        let channel = request.inherit.first { $0.target == 3 }.map { dup($0.source) } ?? -1
        spawned.append(Spawned(request: request, pid: nextPID, channel: channel))
        request.group.pid = nextPID
        request.group.spawned()
        return SpawnedProcess(pid: nextPID, pidfd: -1, placedAtomically: true)
    }

    deinit { for s in spawned where s.channel >= 0 { close(s.channel) } }
}

/// A daemon shell over fakes, with the config and manifests given, on a
/// loop and clock the test drives by hand (`shell.loop.advance(by:)`).
func shellUnderTest(_ manifests: [String: String], daemon: String = "") throws
    -> (Daemon, FakeConfinement, FakeStarter)
{
    let config = write(
        "apps_dir = \"apps\"\n" + DaemonUnderTest.ownDirectories(besides: daemon) + daemon, "lifecycled.toml")
    let dir = (config as NSString).deletingLastPathComponent
    try FileManager.default.createDirectory(atPath: dir + "/apps", withIntermediateDirectories: true)
    for (name, text) in manifests {
        try text.write(toFile: dir + "/apps/\(name).toml", atomically: true, encoding: .utf8)
    }
    let confinement = FakeConfinement(), starter = FakeStarter()
    let shell = try Daemon(
        settings: Settings(configPath: config), confinement: confinement, starter: starter,
        options: .init(configPath: config), logger: .init(label: "test"), standalone: true, loop: .manual())
    return (shell, confinement, starter)
}

/// The app plays its part: reads everything the shell sent on its end of
/// the channel, without waiting.
func receivedByApp(_ fd: Int32) -> [DaemonMessage] {
    var out: [DaemonMessage] = []
    var buffer = [UInt8](repeating: 0, count: Wire.maxMessageSize)
    while true {
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        guard n > 0, let m = try? DaemonMessage.decode(Array(buffer[0..<n])) else { return out }
        out.append(m)
    }
}
