#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleControl
import LifecycleCore
import LifecycleOS
import Logging
import SystemPackage

// Each app's stdout and stderr, captured from its first instruction
// (docs/configuration.md, "Each app's output"):
//
//   journal   two streams to journald (sd_journal_stream_fd), the app's name as
//             SYSLOG_IDENTIFIER, stdout at info and stderr at err, `<N>` prefixes
//             honoured; no byte passes through the daemon
//   files     a FIFO per app, read by the output thread into rotated files with
//             a time on every line (OutputFiles); the daemon's loop never touches it
//   inherit   the daemon's own stdout and stderr, as before issue 13
//
// `auto` is journal when journald's stream socket is there, files otherwise.

enum OutputMode: String, Sendable, Equatable, CaseIterable {
    case auto, journal, files, inherit
}

final class AppOutput {
    let mode: OutputMode
    /// The FIFOs, one per app: `RUNTIME/output/NAME`.
    let fifoDirectory: String
    let files: OutputFiles?
    let logger: Logger

    /// What a launch hands its app as fds 1 and 2, and keeps for after.
    struct Prepared {
        var stdout: Int32
        var stderr: Int32
        /// The FIFO's reading end, for the output thread.
        var reader: Int32 = -1
        var inherit: [(source: Int32, target: Int32)] { [(stdout, 1), (stderr, 2)] }
    }

    init(config: DaemonConfig, logger: Logger) {
        self.logger = logger
        fifoDirectory = config.runtimeDirectory + "/output"
        var mode = config.output
        if mode == .auto {
            let probe = Systemd.journalStream("lifecycled", priority: LOG_INFO, levelPrefix: false)
            if case .success(let fd) = probe { Posix.close(fd) }
            mode = (try? probe.get()) != nil ? .journal : .files
        }
        self.mode = mode
        // Files also when the journal is chosen: a launch journald refuses falls back to them.
        guard mode != .inherit else {
            files = nil
            return
        }
        _ = try? Posix.makeDirectory(fifoDirectory, mode: 0o700)
        do { try Posix.makeDirectory(config.logDirectory, mode: 0o755) } catch {
            logger.error("cannot create the log directory \(config.logDirectory): \(error.errno)")
        }
        let report: @Sendable (String) -> Void = { [logger] in logger.error("\($0)") }
        do {
            files = try OutputFiles(
                directory: config.logDirectory,
                limits: .init(
                    maxSize: config.logMaxSize, backups: config.logBackups, rate: config.logRate,
                    burst: config.logRate * 4),
                report: report)
        } catch {
            files = nil
            logger.error("apps' output cannot be written to files (\(error)): it goes where the daemon's does")
        }
    }

    /// The app's fds 1 and 2; nil for `inherit` (or when nothing could be opened).
    func prepare(_ id: AppID) -> Prepared? {
        switch mode {
        case .inherit: return nil
        case .journal:
            let out = Systemd.journalStream(id, priority: LOG_INFO, levelPrefix: true)
            let err = out.flatMap { _ in Systemd.journalStream(id, priority: LOG_ERR, levelPrefix: true) }
            if case .success(let o) = out, case .success(let e) = err { return Prepared(stdout: o, stderr: e) }
            if case .success(let o) = out { Posix.close(o) }
            let why: String
            if case .failure(let e) = err { why = "\(e.errno)" } else { why = "?" }
            let instead = files?.file(id) ?? "nowhere"
            logger.warning(
                "journald refused \(id)'s output stream (\(why)): it goes to \(instead)", metadata: ["app": "\(id)"])
            return fifo(id)
        default: return fifo(id)
        }
    }

    /// The app's FIFO, the one its last run wrote to when it is still there
    /// (docs/architecture.md, output): the app holds it for reading and
    /// writing (so a write never meets EPIPE while no daemon reads), the
    /// output thread reads it.
    private func fifo(_ id: AppID) -> Prepared? {
        guard files != nil else { return nil }
        let path = "\(fifoDirectory)/\(id)"
        let reader: Int32
        let writer: Int32
        do {
            try Posix.reuseOrMakeFIFO(path, mode: 0o600)
            reader = try Posix.open(path, O_RDONLY | O_NONBLOCK)
            do { writer = try Posix.open(path, O_RDWR) } catch {
                Posix.close(reader)
                throw error
            }
        } catch {
            logger.error("cannot make \(id)'s output FIFO: \(error)", metadata: ["app": "\(id)"])
            return nil
        }
        // 1 MiB waits while no daemon reads (at most pipe-max-size).
        Posix.setPipeSize(writer, 1 << 20)
        return Prepared(stdout: writer, stderr: writer, reader: reader)
    }

    /// After the spawn (or its failure): the app holds its ends now.
    func spawned(_ id: AppID, _ p: Prepared, ok: Bool) {
        Posix.close(p.stdout)
        if p.stderr != p.stdout { Posix.close(p.stderr) }
        guard p.reader >= 0 else { return }
        if ok, let files { files.add(app: id, fd: p.reader) } else { Posix.close(p.reader) }
    }

    /// At start: the FIFOs of apps that ran under an earlier daemon, read
    /// again (what they wrote meanwhile waited in the pipe); a FIFO no app
    /// holds any more ends at once, once drained.
    func reattach() {
        guard let files, let names = try? FileManager.default.contentsOfDirectory(atPath: fifoDirectory) else {
            return
        }
        for name in names {
            if let fd = try? Posix.open("\(fifoDirectory)/\(name)", O_RDONLY | O_NONBLOCK) {
                files.add(app: name, fd: fd)
            }
        }
    }
}

extension AppOutput {
    /// At most this much of a log file is read for one answer.
    static let tailWindow: UInt64 = 256 << 10

    /// The last `lines` of the app's log file, or the whole lines after
    /// `offset` (from the start of a file rotated since). A bounded read of
    /// a file the page cache most likely holds: the loop does not write.
    func tail(_ id: AppID, lines: Int, offset: UInt64?) -> Result<TailReport, CommandFailure> {
        switch mode {
        case .journal: return .success(TailReport(journal: true))
        case .inherit:
            return .failure(
                CommandFailure(
                    code: .refused, message: "output is not captured (output = \"inherit\" in the daemon file)",
                    refusal: "no-output"))
        default: break
        }
        guard let files else {
            return .failure(
                CommandFailure(code: .refused, message: "the output writer could not start", refusal: "no-output"))
        }
        let path = files.file(id)
        let fd: Int32
        do { fd = try Posix.open(path, O_RDONLY) } catch {
            let why =
                error.errno == .noSuchFileOrDirectory
                ? "'\(id)' has no output yet: it has written nothing since its output was captured (\(path))"
                : "cannot read \(path): \(error.errno)"
            return .failure(CommandFailure(code: .refused, message: why, refusal: "no-output"))
        }
        defer { Posix.close(fd) }
        let size = (try? Posix.size(fd)) ?? 0
        let from: UInt64
        if let offset {
            from = offset <= size ? offset : 0
        } else {
            from = size > Self.tailWindow ? size - Self.tailWindow : 0
        }
        let count = Int(min(size - from, Self.tailWindow))
        let bytes = (try? Posix.read(fd, count: count, at: from)) ?? []
        // Whole lines only: a line still being written is for the next answer.
        let end = (bytes.lastIndex(of: 0x0A).map { $0 + 1 }) ?? 0
        var text = bytes[..<end].split(separator: 0x0A, omittingEmptySubsequences: false).dropLast().map {
            String(decoding: $0, as: UTF8.self)
        }
        if offset == nil {
            if from > 0, !text.isEmpty { text.removeFirst() }  // the first may be cut
            text = Array(text.suffix(lines))
        }
        return .success(TailReport(journal: false, file: path, lines: text, offset: from + UInt64(end)))
    }
}
