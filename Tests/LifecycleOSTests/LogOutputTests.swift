import Foundation
@preconcurrency import Glibc
@testable import LifecycleOS
import Testing

/// The daemon's log output never blocks the caller: a pipe nobody reads
/// fills, the rest is queued up to its limit, then dropped and counted,
/// and the count is said once the reader is back.
@Suite struct LogOutputTests {
    @Test(.timeLimit(.minutes(1))) func aPipeNobodyReadsNeverBlocksTheWriter() throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        // Close-on-exec at once (Glibc's module has no pipe2): a daemon
        // another test spawns meanwhile must not inherit the write end, or
        // the reader below waits for an EOF as long as that daemon lives
        // (seen once, with outOfDescriptorsTheLoopDoesNotSpin: both hung).
        for fd in ends { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        defer { close(ends[0]) }
        let out = LogOutput(fd: ends[1], limit: 64 << 10)
        let writeEnd = ends[1]
        out.droppedNotice = { count in
            let text = Array("dropped \(count)\n".utf8)
            return .init(bytes: text.count) { LogOutput.writeAll(writeEnd, text) }
        }
        // 20,000 lines of 100 bytes: 2 MB into a 64 KiB pipe nobody reads.
        for i in 0..<20_000 {
            out.write(String(format: "%06d", i) + String(repeating: ".", count: 93) + "\n")
        }
        // Returned, so never blocked. What did not fit was counted.
        let dropped = out.droppedTotal
        #expect(dropped > 0)
        // The reader comes back (on a thread of its own, reading to the
        // end while the writer drains its queue): the lines come in order,
        // and the count where they went missing.
        let readEnd = ends[0]
        let reader = Thread {
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            var bytes: [UInt8] = []
            while true {
                let n = read(readEnd, &buffer, buffer.count)
                if n <= 0 { break }
                bytes += buffer[0..<n]
            }
            Received.shared.set(String(decoding: bytes, as: UTF8.self))
        }
        reader.start()
        out.flush(seconds: 30)
        close(writeEnd)
        let text = Received.shared.wait()
        let numbers = text.split(separator: "\n").compactMap { Int($0.prefix(6)) }
        #expect(numbers == numbers.sorted() && numbers.first == 0, "lines kept their order")
        #expect(numbers.count + dropped == 20_000, "every line written or counted")
        // Said where they went missing: once, or in parts if the writer
        // caught up for a moment in between (a loaded machine).
        let said = text.split(separator: "\n").filter { $0.hasPrefix("dropped ") }.compactMap { Int($0.dropFirst(8)) }
        #expect(!said.isEmpty && said.reduce(0, +) == dropped, "\(said) of \(dropped)")
    }

    /// A regular file never blocks: written at once, in the caller.
    @Test func aFileIsWrittenAtOnce() throws {
        let path = FileManager.default.temporaryDirectory.path + "/log-\(UUID().uuidString.prefix(8))"
        let fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0o600)
        try #require(fd >= 0)
        defer { close(fd); unlink(path) }
        let out = LogOutput(fd: fd)
        out.write("one\n")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "one\n")
    }
}

/// What the reader thread read, handed to the test once it has all of it.
final class Received: @unchecked Sendable {
    static let shared = Received()
    private let condition = NSCondition()
    private var text: String?

    func set(_ t: String) {
        condition.lock()
        text = t
        condition.signal()
        condition.unlock()
    }

    func wait() -> String {
        condition.lock()
        defer {
            text = nil
            condition.unlock()
        }
        while text == nil { condition.wait() }
        return text!
    }
}
