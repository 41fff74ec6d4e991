@preconcurrency import Glibc
import CMemoryWatch
import SystemPackage

/// Memory facts from the kernel: cgroup memory files and, without cgroups,
/// /proc PSS (`KernelFile` reads /proc/meminfo and the pressure files). Each
/// reader returns nil when its source is missing: the caller decides what
/// that means.
public enum MemoryProbe {
    /// "Pss:       24562064 kB" -> bytes.
    static func kibField(_ line: Substring) -> UInt64? {
        line.split(separator: " ").dropFirst().first.flatMap { UInt64($0) }.map { $0 * 1024 }
    }

    /// One value of a "key value" file (memory.stat).
    /// Scans bytes, not Characters: `status` reads this for every running app.
    static func statValue(_ text: String, _ key: String) -> UInt64? {
        let key = Array(key.utf8)
        var found: UInt64?
        var text = text
        text.withUTF8 { bytes in
            var start = 0
            while start < bytes.count {
                let end = bytes[start...].firstIndex(of: 0x0A) ?? bytes.count
                let line = bytes[start..<end]
                if line.count > key.count, line[start + key.count] == 0x20, line.starts(with: key) {
                    var value: UInt64 = 0
                    for b in line.dropFirst(key.count + 1) {
                        guard b >= 0x30, b <= 0x39 else { return }
                        value = value &* 10 &+ UInt64(b - 0x30)
                    }
                    found = value
                    return
                }
                start = end + 1
            }
        }
        return found
    }

    /// A cgroup's footprint: its usage less the inactive file cache the
    /// kernel can drop at no cost, and what it has on the swap device (what
    /// the app would really give back if killed). v2: memory.current,
    /// memory.stat and memory.swap.current, less what zswap holds of it
    /// (`zswapped`: those pages are in memory, compressed, and counted in
    /// memory.current); v1: memory.usage_in_bytes and memory.stat
    /// (hierarchical total_ keys, `total_swap` with swap accounting).
    public static func cgroupUse(_ dir: String, v1: Bool) -> MemoryUse? { cgroupUse(in: -1, dir, v1: v1) }

    /// `cgroupUse` of the group `dir`, through its open descriptor
    /// `directory` (-1: by the path), as AppCgroup reads its files.
    public static func cgroupUse(in directory: Int32, _ dir: String, v1: Bool) -> MemoryUse? {
        func read(_ file: String) -> String? { try? Posix.readFile(in: directory, file, of: dir) }
        guard let usageText = read(v1 ? "memory.usage_in_bytes" : "memory.current"),
            let usage = UInt64(usageText.trimmingWhitespace())
        else { return nil }
        let stat = read("memory.stat")
        let inactive = stat.flatMap { statValue($0, v1 ? "total_inactive_file" : "inactive_file") } ?? 0
        var swapped: UInt64 = 0
        if v1 {
            swapped = stat.flatMap { statValue($0, "total_swap") } ?? 0
        } else if let swap = read("memory.swap.current").flatMap({
            UInt64($0.trimmingWhitespace())
        }) {
            let zswapped = stat.flatMap { statValue($0, "zswapped") } ?? 0
            swapped = swap > zswapped ? swap - zswapped : 0
        }
        return MemoryUse(resident: usage > inactive ? usage - inactive : 0, swapped: swapped)
    }

    /// `cgroupUse`, both parts together.
    public static func cgroupFootprint(_ dir: String, v1: Bool) -> UInt64? { cgroupUse(dir, v1: v1)?.total }

    /// Proportional set size of one process (/proc/PID/smaps_rollup), bytes.
    public static func pss(pid: Int32) -> UInt64? {
        guard let text = try? Posix.readFile("/proc/\(pid)/smaps_rollup") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("Pss:") { return kibField(line) }
        return nil
    }

    /// The PSS of every process in a process group (the no-cgroup fallback),
    /// found by scanning /proc: a descendant that left the group is missed,
    /// which the daemon says when it falls back.
    public static func processGroupPSS(_ pgid: Int32) -> UInt64? {
        guard pgid > 0, let names = try? FileManagerLite.list("/proc") else { return nil }
        var sum: UInt64 = 0
        var found = false
        for name in names {
            guard let pid = Int32(name), processGroup(of: pid) == pgid, let p = pss(pid: pid) else { continue }
            sum += p
            found = true
        }
        return found ? sum : nil
    }

    static func processGroup(of pid: Int32) -> Int32? {
        guard let stat = try? Posix.readFile("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")") else {
            return nil
        }
        // After "comm)": state ppid pgrp ...
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 2 ? Int32(fields[2]) : nil
    }
}

/// What one run of an app holds: in memory (its usage less the inactive
/// file cache; zswap's compressed pages included) and on the swap device.
/// A kill gives back both; a reclaim moves the first into the second.
public struct MemoryUse: Sendable, Equatable {
    public var resident: UInt64
    public var swapped: UInt64
    public var total: UInt64 { resident + swapped }

    public init(resident: UInt64, swapped: UInt64 = 0) {
        self.resident = resident
        self.swapped = swapped
    }
}

/// A small kernel file read again and again (/proc/meminfo, a pressure
/// file): opened once, read with pread(2) into one buffer and scanned as
/// bytes, so that a sample allocates nothing and opens nothing.
public final class KernelFile {
    private let fd: Int32
    private var buffer: [UInt8]
    private var length = 0

    public init?(_ path: String) {
        guard let fd = try? Posix.call("open", path, { open(path, O_RDONLY | O_CLOEXEC) }) else { return nil }
        self.fd = fd
        buffer = [UInt8](repeating: 0, count: 8192)
    }

    deinit { Posix.close(fd) }

    /// Reads the file afresh; false when it cannot be read.
    public func refresh() -> Bool {
        let n =
            (try? buffer.withUnsafeMutableBytes { b throws(SystemError) in
                try Posix.call("pread") { pread(fd, b.baseAddress, b.count, 0) }
            }) ?? 0
        length = n
        return n > 0
    }

    /// The first unsigned integer after the first occurrence of `key`
    /// ("MemAvailable:", "total="), skipping spaces (`lc_integer_after`).
    public func integer(after key: StaticString) -> UInt64? {
        let v = buffer.withUnsafeBytes { b in
            key.utf8Start.withMemoryRebound(to: CChar.self, capacity: key.utf8CodeUnitCount) {
                lc_integer_after(b.baseAddress, length, $0, key.utf8CodeUnitCount)
            }
        }
        return v < 0 ? nil : UInt64(v)
    }
}

/// A PSI trigger: the kernel wakes us (POLLPRI on `fd`) when tasks stalled on
/// memory for `stall` within any `window`, so pressure is seen at once
/// rather than at the next sample. Needs a trailing newline, and without
/// CAP_SYS_RESOURCE a window that is a multiple of 2 s.
public final class PSITrigger {
    public let fd: Int32
    public let specification: String

    public init(
        path: String = "/proc/pressure/memory", stallMicroseconds: Int64,
        windowMicroseconds: Int64
    ) throws(SystemError) {
        let specification = "some \(max(1, stallMicroseconds)) \(windowMicroseconds)"
        let fd = try Posix.call("open", path) { open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC) }
        let text = Array((specification + "\n").utf8)
        do {
            try Posix.call("write trigger \"\(specification)\" to", path) {
                text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            }
        } catch {
            Posix.close(fd)  // here, not in deinit: the object was never made
            throw error
        }
        self.specification = specification
        self.fd = fd
    }

    deinit { Posix.close(fd) }
}

extension String {
    func trimmingWhitespace() -> Substring {
        var s = Substring(self)
        while let c = s.last, c == "\n" || c == " " { s.removeLast() }
        while let c = s.first, c == " " { s.removeFirst() }
        return s
    }
}
