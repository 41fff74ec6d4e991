#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleControl
import LifecycleOS
import SystemPackage
import Logging

/// Every kill for memory, kept: JSON lines appended to `jetsam.log` under
/// the state directory (rotated to `jetsam.log.1` past 1 MiB), and the most
/// recent records in memory for `supervisorctl jetsam`, loaded back at start
/// so that a restart loses none. A record the disk cannot take stays in
/// memory, is said (log, `status`, `events`) and is written whole later.
final class KillLog {
    static let rotateAt = 1 << 20
    let path: String?
    let keep: Int
    private(set) var recent: [KillRecord] = []
    private let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        return e
    }()

    init(directory: String, keep: Int, logger: Logger) {
        self.keep = keep
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            path = directory + "/jetsam.log"
        } catch {
            let why = "\(error)"
            logger.warning("state directory \(directory) unusable (\(why)): kill records are kept in memory only")
            path = nil
            return
        }
        let decoder = JSONDecoder()
        for file in [path! + ".1", path!] {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { continue }
            for line in text.split(separator: "\n") {
                if let r = try? decoder.decode(KillRecord.self, from: Data(line.utf8)) { recent.append(r) }
            }
        }
        recent = Array(recent.suffix(keep))
    }

    /// Records not yet in the file (it could not be written: a full disk),
    /// oldest first, as the lines to write; kept until they can be.
    private(set) var unsaved: [Data] = []
    /// Why the last write failed, while records wait.
    private(set) var problem: String?

    /// Keeps the record, and writes it (with any still waiting) whole or
    /// not at all. False when something is left unsaved: the caller
    /// reports it and calls `flush` again later.
    @discardableResult
    func append(_ record: KillRecord, logger: Logger) -> Bool {
        recent.append(record)
        if recent.count > keep + keep / 4 { recent.removeFirst(recent.count - keep) }
        guard path != nil, var line = try? encoder.encode(record) else { return true }
        line.append(0x0A)
        unsaved.append(line)
        return flush(logger: logger)
    }

    /// Writes what waits, each record whole or not at all: a short write
    /// (a full disk) is cut back to where the record began, so the file
    /// never holds a torn line for the next record to glue onto. True when
    /// nothing waits any more.
    @discardableResult
    func flush(logger: Logger) -> Bool {
        guard let path, !unsaved.isEmpty else { return true }
        if let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int, size > Self.rotateAt {
            _ = try? FileManager.default.removeItem(atPath: path + ".1")
            _ = try? FileManager.default.moveItem(atPath: path, toPath: path + ".1")
        }
        do {
            let fd = try Posix.open(path, O_WRONLY | O_CREAT | O_APPEND, mode: 0o644)
            defer { Posix.close(fd) }
            while let line = unsaved.first {
                try Posix.appendWhole(fd, Array(line), path: path)  // whole or nothing
                unsaved.removeFirst()
            }
            if let problem {
                logger.notice("kill records written to \(path) after all (they had failed: \(problem))")
                self.problem = nil
            }
            return true
        } catch {
            if problem == nil {
                logger.error(
                    "cannot write kill records to \(path): \(error); \(unsaved.count) kept in memory, retried until they can be"
                )
            }
            problem = "\(error)"
            return false
        }
    }

    /// The most recent `limit` records (all by default), oldest first.
    func records(limit: Int?) -> [KillRecord] {
        guard let limit else { return Array(recent.suffix(keep)) }
        return Array(recent.suffix(max(0, min(limit, keep))))
    }
}
