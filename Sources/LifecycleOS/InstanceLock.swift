#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleModel

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

/// An exclusive POSIX record lock (fcntl F_SETLK) on `lifecycled.pid` in the
/// runtime directory, with the holder's pid written in it, held for the
/// life of the process. It ends with the process (any death, no stale lock
/// to clean up); an exec (daemon-reexec) closes the descriptor and lets it
/// go, and the new image takes it again. Not `flock`: a flock belongs to
/// the open file, which every child shares until it execs (a spawn that
/// joins a v1 memory group waits 10-25 ms for RCU first), so a daemon
/// started at once after a kill -9 found the lock held by its predecessor's
/// child. A record lock belongs to the process alone and is never inherited.
/// (Its one trap, that closing any descriptor of the file drops it, does
/// not arise: this is the only one the daemon opens.)
public final class InstanceLock {
    public let path: String
    private var fd: Int32

    public init(directory: String) throws {
        let path = directory + "/lifecycled.pid"
        self.path = path
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        fd = try Posix.call("open", path) { open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o644) }
        var whole = flock()
        whole.l_type = Int16(F_WRLCK)
        whole.l_whence = Int16(SEEK_SET)
        guard fcntl(fd, F_SETLK, &whole) == 0 else {
            // The kernel names the holder; the file's text is the fallback.
            var probe = flock()
            probe.l_type = Int16(F_WRLCK)
            probe.l_whence = Int16(SEEK_SET)
            let named = fcntl(fd, F_GETLK, &probe) == 0 && probe.l_type != Int16(F_UNLCK) ? probe.l_pid : nil
            let holder =
                named
                ?? (try? Posix.readFile(path)).flatMap {
                    Int32($0.trimmed)
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
