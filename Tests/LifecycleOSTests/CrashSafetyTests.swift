import Foundation
@preconcurrency import Glibc
@testable import LifecycleOS
import Testing

/// What a kill -9 of the daemon leaves must not stop or harm the next one
/// (issue 27): its lock dies with it, and cleanup meant for one group
/// never touches another that took its path.
@Suite struct CrashSafetyTests {
    /// A child that has not yet exec'd holds copies of every descriptor
    /// (the daemon's spawn is one, for the 10-25 ms of a v1 memory-group
    /// join): the daemon's death must still free the lock at once.
    @Test func aChildThatHasNotExecutedDoesNotHoldTheInstanceLock() throws {
        let dir = FileManager.default.temporaryDirectory.path + "/lifecycled-lock-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var lock: InstanceLock? = try InstanceLock(directory: dir)
        let child = fork()
        if child == 0 {
            pause()
            _exit(0)
        }
        #expect(child > 0)
        defer {
            kill(child, SIGKILL)
            var status: Int32 = 0
            waitpid(child, &status, 0)
        }
        #expect(lock != nil)
        lock = nil  // the daemon is gone; its child lives on, not yet exec'd
        let next = try InstanceLock(directory: dir)
        #expect(next.path == dir + "/lifecycled.pid")
        // And the lock still excludes a second daemon while held.
        #expect(throws: AlreadyRunning.self) { try Self.lockFromAnotherProcess(dir) }
    }

    /// Another process tries the lock (POSIX record locks never conflict
    /// within one process): a helper that exits 0 if it got it, 1 if not.
    static func lockFromAnotherProcess(_ dir: String) throws {
        let path = dir + "/lifecycled.pid"
        let child = fork()
        if child == 0 {
            let fd = open(path, O_RDWR)
            var l = flock()
            l.l_type = Int16(F_WRLCK)
            l.l_whence = Int16(SEEK_SET)
            _exit(fd >= 0 && fcntl(fd, F_SETLK, &l) == 0 ? 0 : 1)
        }
        var status: Int32 = 0
        waitpid(child, &status, 0)
        if (status >> 8) & 0xff == 1 { throw AlreadyRunning(path: path, pid: nil) }
    }

    /// A group handle for a path that was removed and made again (a new
    /// run's group under a reused name) neither kills nor removes the new one.
    @Test func aGroupHandleNeverTouchesAGroupThatTookItsPath() throws {
        guard let mount = Cgroups.v2Mount() else { return }
        let base = mount + "/lifecycled-identity-\(UUID().uuidString.prefix(8))"
        #expect(mkdir(base, 0o755) == 0)
        defer { rmdir(base + "/x.2"); rmdir(base) }
        let path = base + "/x.2"
        #expect(mkdir(path, 0o755) == 0)
        let old = AppCgroup(path: path, directory: -1, memory: .processPSS)
        #expect(rmdir(path) == 0)
        #expect(mkdir(path, 0o755) == 0)  // the new run's group
        #expect(old.remove(), "the group it meant is gone: nothing left to remove")
        #expect(access(path, F_OK) == 0, "the new group stays")

        let sleeper = try Spawner.spawn(
            SpawnRequest(
                executable: "/bin/sleep", arguments: ["1000"], environment: [:], workingDirectory: nil,
                group: AppProcessGroup(), inherit: []))
        defer {
            kill(sleeper.pid, SIGKILL)
            var status: Int32 = 0
            waitpid(sleeper.pid, &status, 0)
            close(sleeper.pidfd)
        }
        try Posix.writeFile(path + "/cgroup.procs", String(sleeper.pid))
        old.killAll()
        var p = pollfd(fd: sleeper.pidfd, events: Int16(POLLIN), revents: 0)
        #expect(poll(&p, 1, 100) == 0, "the new group's process lives")
    }
}
