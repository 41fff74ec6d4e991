@preconcurrency import Glibc
@testable import LifecycleOS
import SystemPackage
import Testing

/// The one syscall helper: EAGAIN is a value, other errors name the call,
/// and EBADF (a bug of ours) stops the process rather than act on a
/// descriptor that may belong to someone else.
@Suite struct PosixTests {
    @Test func wouldBlockIsAValueNotAnError() throws {
        let (daemon, app) = try UnixSocket.channelPair()
        defer { Posix.close(daemon); Posix.close(app) }
        var byte: UInt8 = 0
        let n = try Posix.nonBlocking("recv", "empty channel") { recv(daemon, &byte, 1, Int32(MSG_DONTWAIT)) }
        #expect(n == nil)
    }

    @Test func errorsNameTheCallAndItsSubject() {
        #expect(throws: SystemError("open", "/nonexistent/x", errno: .noSuchFileOrDirectory)) {
            try Posix.call("open", "/nonexistent/x") { open("/nonexistent/x", O_RDONLY) }
        }
        #expect(!Posix.signal(Int32.max, 0), "no such process: false, not an error")
        #expect(Posix.remove(directory: "/nonexistent/dir"), "already gone counts as removed")
    }

    /// A file read or written relative to an open directory is found
    /// through that directory, wherever its path has gone (the kernel walks
    /// nothing above it); an error names the directory's path and the file.
    @Test func aFileInAnOpenDirectoryIsReachedThroughIt() throws {
        var template = Array("/tmp/lifecycled-posix-XXXXXX".utf8CString)
        let made = try #require(mkdtemp(&template))
        let path = String(cString: made)
        defer { _ = Glibc.system("rm -rf '\(path)' '\(path).moved'") }
        let fd = open(path, O_DIRECTORY | O_RDONLY | O_CLOEXEC)
        try #require(fd >= 0)
        defer { Posix.close(fd) }
        Posix.close(creat(path + "/value", 0o644))  // made here: a write opens, never creates
        try Posix.writeFile(in: fd, "value", "1\n", of: path)
        #expect(try Posix.readFile(path + "/value") == "1\n")
        try #require(rename(path, path + ".moved") == 0)
        #expect(try Posix.readFile(in: fd, "value", of: path) == "1\n")
        try Posix.writeFile(in: fd, "value", "2\n", of: path)
        #expect(try Posix.readFile(path + ".moved/value") == "2\n")
        do {
            _ = try Posix.readFile(in: fd, "missing", of: path)
            Issue.record("a missing file was read")
        } catch {
            #expect("\(error)".contains(path + "/missing"), "\(error)")
            #expect(error.errno == .noSuchFileOrDirectory)
        }
    }

    @Test func aBadDescriptorIsABugAndStopsTheProcess() async {
        await #expect(processExitsWith: .failure) {
            var byte: UInt8 = 0
            _ = try? Posix.call("read", "a closed fd") { read(1_000_000, &byte, 1) }
        }
    }

    /// A spawned process gets exactly the environment asked for, every
    /// variable whole (a value with "=" in it, an empty one, one not in
    /// ASCII), in the same order at every launch: strcmp's over "NAME=value".
    @Test func aSpawnedProcessGetsItsEnvironmentWholeAndInOneOrder() throws {
        let environment = ["B": "2", "A": "x=y", "A1": "", "Ä": "ü", "PATH": "/usr/bin:/bin"]
        var expected: [UInt8] = []
        for entry in environment.map({ Array("\($0.key)=\($0.value)".utf8) })
            .sorted(by: { $0.lexicographicallyPrecedes($1) })
        {
            expected += entry + [0]
        }
        for _ in 0..<2 {
            let got = try output(
                of: SpawnRequest(
                    executable: "/bin/cat", arguments: ["/proc/self/environ"], environment: environment,
                    workingDirectory: nil, group: AppProcessGroup()))
            #expect(got == expected, "\(String(decoding: got, as: UTF8.self).split(separator: "\0"))")
        }
    }

    /// What `request`'s process writes to its stdout (a pipe), once it has
    /// ended and been reaped.
    func output(of request: SpawnRequest, by starter: any ProcessStarter = KernelSpawner()) throws -> [UInt8] {
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var request = request
        request.inherit = [(fds[1], 1)]
        let child: SpawnedProcess
        do { child = try starter.spawn(request) } catch {
            Posix.close(fds[0])
            Posix.close(fds[1])
            throw error
        }
        Posix.close(fds[1])
        var got: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while case let n = read(fds[0], &buffer, buffer.count), n > 0 { got += buffer[0..<n] }
        Posix.close(fds[0])
        var status: Int32 = 0
        #expect(waitpid(child.pid, &status, 0) == child.pid)
        Posix.close(child.pidfd)
        return got
    }

    /// The child writes the `oom_score_adj` asked for before exec, so that an
    /// app never runs with the daemon's own (-900): started directly and
    /// through the spawn helper, which carries it in its request. Raising
    /// it needs no privilege; a value below the parent's needs
    /// CAP_SYS_RESOURCE, without which the write is refused and the child
    /// keeps the parent's value (best effort, as nice).
    @Test func aSpawnedProcessStartsWithTheOOMScoreAskedFor() throws {
        let helper = HelperSpawner { Issue.record("spawn helper: \($0)") }
        defer { withExtendedLifetime(helper) {} }
        let own = try String(contentsOfFile: "/proc/self/oom_score_adj", encoding: .utf8)
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let effective =
            status.split(separator: "\n").first { $0.hasPrefix("CapEff:") }
            .flatMap { UInt64($0.split(separator: "\t").last ?? "", radix: 16) } ?? 0
        let mayLower = effective & (1 << 24) != 0  // CAP_SYS_RESOURCE
        let starters: [(String, any ProcessStarter)] = [("directly", KernelSpawner()), ("helper", helper)]
        for (how, starter) in starters {
            for value: Int32 in [321, 1000, -17] {
                let expected = value >= 0 || mayLower ? "\(value)\n" : own
                var credentials = SpawnCredentials()
                credentials.oomScoreAdjust = value
                let got = try output(
                    of: SpawnRequest(
                        executable: "/bin/cat", arguments: ["/proc/self/oom_score_adj"], environment: [:],
                        workingDirectory: nil, group: AppProcessGroup(), credentials: credentials),
                    by: starter)
                #expect(String(decoding: got, as: UTF8.self) == expected, "\(how), \(value)")
            }
        }
    }

    /// How a process that is not reaped yet ended: read from /proc while
    /// it is a zombie (the pidfd has no status before the reap), and from
    /// the pidfd after.
    @Test func anUnreapedProcessTellsHowItEnded() throws {
        let child = try Spawner.spawn(
            SpawnRequest(
                executable: "/bin/sh", arguments: ["-c", "kill -TERM $$"], environment: [:], workingDirectory: nil,
                group: AppProcessGroup(), inherit: []))
        defer { Posix.close(child.pidfd) }
        var p = pollfd(fd: child.pidfd, events: Int16(POLLIN), revents: 0)
        #expect(poll(&p, 1, 10_000) == 1)
        #expect(try Processes.exitStatus(pidfd: child.pidfd, pid: child.pid) == .signaled(SIGTERM), "a zombie")
        var status: Int32 = 0
        #expect(waitpid(child.pid, &status, 0) == child.pid)
        let reaped = Result { () throws(SystemError) in try Processes.exitStatus(pidfd: child.pidfd, pid: child.pid) }
        switch reaped {
        case .success(let end): #expect(end == .signaled(SIGTERM), "from the pidfd (Linux 6.15+)")
        case .failure(let e): #expect(e.errno != .resourceTemporarilyUnavailable, "reaped, yet no status")
        }
    }
}
