import Foundation
@preconcurrency import Glibc
import LifecycleControl
import LifecycleCore
import LifecycleOS
import LifecycleWire
import SystemPackage

// The state store: everything a daemon must hand to the next one so that a
// crash, a watchdog abort or an upgrade loses nothing an app or an operator
// can observe. The core's whole state, and what the shell knows of each
// running process (who it is, where it lives, the last event it was sent),
// in one file of the runtime directory, replaced atomically (write, then
// rename) after every step that changed something. The page cache outlives
// the process, so no fsync: this guards against the daemon's death, and a
// reboot ends every app anyway (the boot id says when a file is from an
// earlier boot).

/// What the shell knows of one running process, saved beside the core.
struct SavedRun: Codable {
    var generation: UInt64
    var pid: Int32
    /// With the pid, names one process for the life of the system
    /// (field 22 of /proc/PID/stat): a recycled pid is not the app.
    var startTime: UInt64
    var library: Bool
    /// A plain program's NOTIFY_SOCKET (abstract name), bound again by the next daemon.
    var notifyName: String?
    var statusLine: String?
    /// The last event sent: sent again on a resumed channel while it is owed.
    var lastEvent: EventMessage?
}

struct SavedDaemon: Codable {
    static let currentFormat = 1
    var format = SavedDaemon.currentFormat
    var bootID: String
    var core: CoreState
    var runs: [AppID: SavedRun]
    var terminations: [AppID: TerminationInfo]
    /// Written just before a daemon-reexec: the descriptors kept open across
    /// execve. Valid only in the process that wrote it (the same pid).
    var handoff: Handoff? = nil
}

/// What a daemon hands its own next image across execve.
struct Handoff: Codable {
    var pid: Int32
    var control: Int32
    var controlPath: String?
    var resume: Int32
    var runs: [AppID: HandedRun]
    /// CLOCK_MONOTONIC when the earlier image decided to exec (the new
    /// image logs how long the hand-over took).
    var decidedAt: Int64?
}

struct HandedRun: Codable {
    var channel: Int32
    var pidfd: Int32
    var notify: Int32
    /// Our child (launched by this process); false for a process taken
    /// back after a crash, whose end only its pidfd reports. Absent in a
    /// handoff from before it existed, where every handed run was a child.
    var child: Bool?
}

final class StateStore {
    let path: String
    private var lastError: String?
    /// This boot's id, read once: every save carries it.
    let bootID = StateStore.bootID()

    /// The last save failed (a daemon-reexec must not go ahead on it).
    var failing: Bool { lastError != nil }

    init(directory: String) {
        path = directory + "/state.json"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    static func bootID() -> String {
        ((try? Posix.readFile("/proc/sys/kernel/random/boot_id")) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The state a previous daemon left, if any. A file that does not
    /// decode, or is from an earlier boot or format, is set aside (renamed
    /// with `.unreadable`) with the reason, and the daemon starts afresh.
    func load() -> (SavedDaemon?, problem: String?) {
        guard let data = FileManager.default.contents(atPath: path) else { return (nil, nil) }
        let saved: SavedDaemon
        do { saved = try JSONDecoder().decode(SavedDaemon.self, from: data) } catch {
            return (nil, setAside("does not decode (\(error))"))
        }
        guard saved.format == SavedDaemon.currentFormat else {
            return (nil, setAside("format \(saved.format), this daemon reads \(SavedDaemon.currentFormat)"))
        }
        guard saved.bootID == bootID else {
            try? FileManager.default.removeItem(atPath: path)
            return (nil, "\(path) is from an earlier boot: ignored")
        }
        return (saved, nil)
    }

    private func setAside(_ why: String) -> String {
        let aside = path + ".unreadable"
        _ = rename(path, aside)
        return "\(path) \(why): moved to \(aside); starting afresh"
    }

    /// Replaces the file. Returns an error text the first time a given
    /// error happens (a full disk, say), so the caller logs it once; the
    /// daemon carries on in memory.
    func save(_ state: SavedDaemon) -> String? {
        let temporary = path + ".new"
        do {
            let data = try JSONEncoder().encode(state)
            guard FileManager.default.createFile(atPath: temporary, contents: data) else {
                throw SystemError("write", temporary, errno: Errno(rawValue: errno))
            }
            try Posix.call("rename", path) { rename(temporary, path) }
            lastError = nil
            return nil
        } catch {
            let text = "cannot save the state to \(path): \(error); a crash now would lose what changed since"
            defer { lastError = text }
            return text == lastError ? nil : text
        }
    }

    /// After a clean shutdown nothing is left to re-adopt.
    func remove() { unlink(path) }
}
