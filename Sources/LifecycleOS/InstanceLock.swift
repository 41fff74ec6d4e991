import Foundation
@preconcurrency import Glibc

// One daemon per runtime directory: its state, its apps.sock and its apps'
// cgroups belong to one process. A second daemon started on the same
// config would take the control socket and kill the first one's apps as
// leftovers; it must stop before it touches anything, and say who runs.

public struct AlreadyRunning: Error, CustomStringConvertible, Sendable {
    public let path: String
    public let pid: Int32?

    public var description: String {
        let who = pid.map { "another lifecycled (pid \($0))" } ?? "another lifecycled"
        return "\(who) holds \(path): one daemon per runtime directory; stop that one first"
    }
}

/// An exclusive `flock` on `lifecycled.pid` in the runtime directory, with
/// the holder's pid written in it, held for the life of the process. It
/// ends with the process (any death, no stale lock to clean up); an exec
/// (daemon-reexec) lets it go, and the new image takes it again.
public final class InstanceLock {
    public let path: String
    private var fd: Int32

    public init(directory: String) throws {
        let path = directory + "/lifecycled.pid"
        self.path = path
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        fd = try Posix.call("open", path) { open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o644) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let holder = (try? Posix.readFile(path)).flatMap {
                Int32($0.trimmingCharacters(in: .whitespacesAndNewlines))
            }
            Posix.close(fd)
            fd = -1
            throw AlreadyRunning(path: path, pid: holder)
        }
        let text = "\(getpid())\n"
        _ = ftruncate(fd, 0)
        _ = pwrite(fd, text, text.utf8.count, 0)
    }

    deinit { if fd >= 0 { Posix.close(fd) } }
}
