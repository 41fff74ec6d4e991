import Foundation
import LifecycleControl
import LifecycleOS
import Logging

/// Every kill for memory, kept: JSON lines appended to `jetsam.log` under
/// the state directory (rotated to `jetsam.log.1` past 1 MiB), and the most
/// recent records in memory for `supervisorctl jetsam`, loaded back at start
/// so that a restart loses none.
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
            logger.warning(
                "state directory \(directory) unusable (\(error.localizedDescription)): kill records are kept in memory only"
            )
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

    func append(_ record: KillRecord, logger: Logger) {
        recent.append(record)
        if recent.count > keep + keep / 4 { recent.removeFirst(recent.count - keep) }
        guard let path, var line = try? encoder.encode(record) else { return }
        line.append(0x0A)
        if let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int, size > Self.rotateAt {
            _ = try? FileManager.default.removeItem(atPath: path + ".1")
            _ = try? FileManager.default.moveItem(atPath: path, toPath: path + ".1")
        }
        do {
            let fd = try Posix.call("open", path) { open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644) }
            defer { Posix.close(fd) }
            // One write(2) with O_APPEND: a record is never interleaved or torn by a crash of ours.
            let written = try Posix.call("write", path) { line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } }
            if written != line.count {
                logger.warning(
                    "kill record cut short in \(path) (\(written) of \(line.count) bytes): is the disk full?")
            }
        } catch {
            logger.warning("cannot write the kill record to \(path): \(error)")
        }
    }

    /// The most recent `limit` records (all by default), oldest first.
    func records(limit: Int?) -> [KillRecord] {
        guard let limit else { return Array(recent.suffix(keep)) }
        return Array(recent.suffix(max(0, min(limit, keep))))
    }
}
