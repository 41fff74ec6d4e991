import Foundation
@preconcurrency import Glibc
@testable import LifecycleOS
import Testing

/// Apps' output files: every app's FIFO read on the output thread, each
/// line stamped and appended to the app's file.
@Suite struct OutputFilesTests {
    /// An app over its rate (`log_rate`) waits in its writes, out of the
    /// thread's set until its bucket refills, while another app's line goes
    /// to its file at once; nothing the first wrote is lost, in order. With
    /// 64 KiB/s after a 64 KiB burst, 256 KiB cannot be written in less
    /// than 3 s, however fast the machine (a load only makes it slower).
    @Test(.timeLimit(.minutes(1))) func anAppOverItsRateWaitsAndTheOthersDoNot() throws {
        let dir = FileManager.default.temporaryDirectory.path + "/output-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let files = try OutputFiles(
            directory: dir, limits: .init(maxSize: 1 << 30, backups: 1, rate: 64 << 10, burst: 64 << 10),
            report: { _ in })
        func fifo(_ app: String) throws -> (reader: Int32, writer: Int32) {
            let path = dir + "/" + app + ".fifo"
            try Posix.reuseOrMakeFIFO(path, mode: 0o600)
            return (try Posix.open(path, O_RDONLY | O_NONBLOCK), try Posix.open(path, O_RDWR))
        }
        let flood = try fifo("flood")
        let quiet = try fifo("quiet")
        files.add(app: "flood", fd: flood.reader)
        files.add(app: "quiet", fd: quiet.reader)
        let lines = 4096  // 64 bytes each: 256 KiB
        let started = Posix.monotonicNanoseconds()
        let writer = flood.writer
        let thread = Thread {
            for i in 0..<lines {
                let line = Array((String(format: "%06d", i) + String(repeating: ".", count: 57) + "\n").utf8)
                _ = line.withUnsafeBytes { write(writer, $0.baseAddress, $0.count) }  // blocks while held off
            }
            close(writer)
        }
        thread.start()
        func text(_ app: String) -> String { (try? String(contentsOfFile: files.file(app), encoding: .utf8)) ?? "" }
        /// Whether `done` came to hold, looked at every 10 ms (a file's
        /// growth is no event to wait on); the bound is the failure.
        func until(_ done: () -> Bool) -> Bool {
            let end = Posix.monotonicNanoseconds() + 30_000_000_000
            while !done() {
                guard Posix.monotonicNanoseconds() < end else { return false }
                usleep(10_000)
            }
            return true
        }
        try #require(until { !text("flood").isEmpty }, "the burst written")
        _ = write(quiet.writer, "hello\n", 6)
        try #require(until { text("quiet").hasSuffix("hello\n") }, "the quiet app's line")
        let floodWhenQuiet = text("flood").split(separator: "\n").count
        #expect(floodWhenQuiet < lines, "the quiet app's line waited for the flood to be written")
        try #require(until { text("flood").split(separator: "\n").count == lines }, "the flood written")
        let took = Double(Posix.monotonicNanoseconds() - started) / 1e9
        #expect(took >= 2.9, "256 KiB at 64 KiB/s after a 64 KiB burst in \(took) s")
        // And it slept while the flood rested: a stream left in the set
        // would wake it at once, again and again, for the whole 3 s.
        let cpu = Self.outputThreadsCPUSeconds()
        #expect(cpu < 1, "the output thread ran \(cpu) s of \(took)")
        let numbers = text("flood").split(separator: "\n").map { Int($0.suffix(63).prefix(6)) }
        #expect(numbers == (0..<lines).map { $0 }, "every line, in order")
        close(quiet.writer)
    }

    /// The CPU time of this process's output threads (named lifecycled-out).
    static func outputThreadsCPUSeconds() -> Double {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        var ticks = 0
        for task in tasks {
            guard let comm = try? Posix.readFile("/proc/self/task/\(task)/comm"), comm.hasPrefix("lifecycled-out"),
                let stat = try? Posix.readFile("/proc/self/task/\(task)/stat")
            else { continue }
            // After the command's closing parenthesis: state is field 3, utime 14, stime 15.
            let fields = stat[stat.index(after: stat.lastIndex(of: ")")!)...].split(separator: " ")
            ticks += (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)
        }
        return Double(ticks) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}
