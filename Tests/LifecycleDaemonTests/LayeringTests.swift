import Foundation
import Testing

/// The shell reaches the kernel only through LifecycleOS: no C module
/// imported in Sources/LifecycleDaemon, no call of the C shims or of
/// libsystemd, and none of the system calls LifecycleOS wraps, so that
/// every one goes through the one helper that names it in its errors.
@Suite struct LayeringTests {
    static let shell =
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path + "/Sources/LifecycleDaemon"

    /// Calls that belong in LifecycleOS: as a bare call (not a method of
    /// a type, not a label, not in a comment or a string).
    static let syscalls = [
        "open", "openat", "read", "write", "close", "unlink", "mkfifo", "fcntl", "ioctl", "kill", "send", "recv",
        "recvmsg", "sendmsg", "socket", "bind", "connect", "accept", "getpriority", "setpriority", "signal",
        "sigaction", "clock_gettime", "waitid", "waitpid", "prctl", "chown", "chmod", "mkdir", "rmdir", "rename",
        "ftruncate", "fsync", "mmap", "pipe", "pipe2", "dup", "dup2", "dup3", "syscall",
    ]

    static func files() throws -> [(path: String, lines: [Substring])] {
        let names = try #require(FileManager.default.enumerator(atPath: shell)?.allObjects as? [String])
        return try names.filter { $0.hasSuffix(".swift") }.sorted().map { name in
            let text = try String(contentsOfFile: shell + "/" + name, encoding: .utf8)
            return (name, text.split(separator: "\n", omittingEmptySubsequences: false))
        }
    }

    /// The line without its comment and string literals (enough for this
    /// code: no string holds a `//` that matters here).
    static func code(_ line: Substring) -> String {
        var out = ""
        var inString = false
        var previous: Character = " "
        for c in line {
            if !inString, c == "/", previous == "/" {
                out.removeLast()
                break
            }
            if c == "\"", previous != "\\" { inString.toggle() } else if !inString { out.append(c) }
            previous = c
        }
        return out
    }

    @Test func theShellImportsNoCModule() throws {
        var found: [String] = []
        for (path, lines) in try Self.files() {
            for (i, line) in lines.enumerated() where line.hasPrefix("import C") || line.contains(" import C") {
                found.append("\(path):\(i + 1): \(line)")
            }
        }
        #expect(found.isEmpty, "\(found.joined(separator: "\n"))")
    }

    @Test func theShellMakesNoSystemCallOfItsOwn() throws {
        let files = try Self.files()
        // The shell's own functions and enum cases by those names (its
        // `send(_:to:)`, `Command.kill`) are not system calls: those names
        // (today kill, signal, open, close, read, send, connect) are left
        // out of the bare-call check; a `Glibc.` call is caught whatever
        // its name, and the C modules cannot be imported at all.
        let declared = try Regex(#"(?:func|case) (\w+)\("#)
        var own: Set<String> = []
        for (_, lines) in files {
            for line in lines {
                for m in Self.code(line).matches(of: declared) {
                    if let name = m.output[1].substring { own.insert(String(name)) }
                }
            }
        }
        let calls = Self.syscalls.filter { !own.contains($0) }
        let pattern = try Regex(
            #"(?:^|[^\w.])(lc_\w+|sd_\w+|mw_\w+|"# + calls.joined(separator: "|") + #")\(|Glibc\.\w+\("#)
        var found: [String] = []
        for (path, lines) in files {
            for (i, line) in lines.enumerated() where Self.code(line).contains(pattern) {
                found.append("\(path):\(i + 1): \(line.trimmingCharacters(in: .whitespaces))")
            }
        }
        #expect(found.isEmpty, "calls that belong in LifecycleOS:\n\(found.joined(separator: "\n"))")
        #expect(own.isSuperset(of: ["send", "kill"]), "the shell's own names were found: \(own.sorted())")
    }
}
