import Foundation
@testable import LifecycleOS
import LifecycleTestKit
import Testing

/// Writes `text` to a fresh file named `name` in a directory of its own.
func write(_ text: String, _ name: String) -> String {
    let path = scratchDirectory("os") + "/" + name
    try? text.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

/// The byte scanners the sampler relies on, on fixed text and on the real files.
@Suite struct MemoryProbeTests {
    @Test func integersAfterKeys() throws {
        let path = write("MemTotal:       24562064 kB\nMemFree:  1 kB\nMemAvailable:   23000000 kB\n", "meminfo")
        let f = try #require(KernelFile(path))
        #expect(f.refresh())
        #expect(f.integer(after: "MemTotal:") == 24_562_064)
        #expect(f.integer(after: "MemAvailable:") == 23_000_000)
        #expect(f.integer(after: "SwapTotal:") == nil)
        let psi = try #require(
            KernelFile(write("some avg10=0.00 avg60=0.00 avg300=0.00 total=1234\nfull avg10=0.00 total=99\n", "memory"))
        )
        #expect(psi.refresh() && psi.integer(after: "total=") == 1234, "the some line comes first")
    }

    @Test func theRealFiles() throws {
        let meminfo = try #require(KernelFile("/proc/meminfo"))
        #expect(meminfo.refresh())
        let total = try #require(meminfo.integer(after: "MemTotal:"))
        let available = try #require(meminfo.integer(after: "MemAvailable:"))
        #expect(total > 0 && available <= total)
        if let psi = KernelFile("/proc/pressure/memory") {
            #expect(psi.refresh() && psi.integer(after: "total=") != nil)
        }
    }

    @Test func memoryStatValues() {
        let stat = "cache 10\nrss 20\ntotal_inactive_file 4096\ninactive_file 7\n"
        #expect(MemoryProbe.statValue(stat, "inactive_file") == 7, "a key, not a suffix of another")
        #expect(MemoryProbe.statValue(stat, "total_inactive_file") == 4096)
        #expect(MemoryProbe.statValue(stat, "missing") == nil)
        #expect(MemoryProbe.statValue("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", "oom_kill") == 3)
    }
}
