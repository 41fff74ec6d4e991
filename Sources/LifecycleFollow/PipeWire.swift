#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc

// Who plays audio through the session's sound server. An app that plays
// through PipeWire (or PulseAudio on PipeWire, pipewire-pulse) holds no
// sound device of its own, so the daemon cannot see it in /proc; the
// server can. `pw-dump --monitor` (PipeWire's own tool) prints the whole
// graph once and then every object that changes, as JSON arrays, one
// after another, each opening with a line `[` and closing with a line
// `]`; a removed object is `{"id": N, "info": null}`. An output stream
// node in state `running` plays; its client's `pipewire.sec.pid` (the
// server took it from the socket's credentials: the client cannot lie
// about it) is the process that plays.

public final class SoundServer {
    private var pid: pid_t = 0
    private var output: Int32 = -1
    private var pending: [UInt8] = []
    private var chunk: [UInt8] = []
    private var inArray = false
    private let executable: String
    let say: (String) -> Void
    /// When pw-dump last started (a server that went away is looked for again, not at once).
    private var started = Date.distantPast

    struct Object {
        var type = ""
        var state: String?
        var mediaClass: String?
        var client: Int?
        var secPID: Int32?
    }
    private var objects: [Int: Object] = [:]
    /// The processes with an output stream running, sorted; nil while the
    /// server cannot be read.
    public private(set) var playing: [Int32]?

    /// Nil when pw-dump is not installed.
    public init?(say: @escaping (String) -> Void) {
        let dirs = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        let path = dirs.map { String($0) + "/pw-dump" }.first { (p: String) in access(p, X_OK) == 0 }
        guard let path else { return nil }
        executable = path
        self.say = say
        start()
    }

    deinit { stop() }

    /// Readable when the server said something (-1: not running).
    public var descriptor: Int32 { output }

    /// Starts pw-dump again if it ended, at most every 10 s.
    public func keepRunning() {
        if output < 0 && Date().timeIntervalSince(started) >= 10 { start() }
    }

    private func start() {
        started = Date()
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return say("pw-dump: no pipe: \(String(cString: strerror(errno)))") }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }  // the dup2 to stdout clears it there
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv = [executable, "--monitor", "--no-colors"]
        var cargv = argv.map { strdup($0) } + [nil]
        defer { for p in cargv { free(p) } }
        var child: pid_t = 0
        let r = posix_spawn(&child, executable, &actions, nil, &cargv, environ)
        close(fds[1])
        guard r == 0 else {
            close(fds[0])
            return say("pw-dump: \(String(cString: strerror(r)))")
        }
        pid = child
        output = fds[0]
        _ = fcntl(output, F_SETFL, fcntl(output, F_GETFL) | O_NONBLOCK)
        objects = [:]
        pending = []
        chunk = []
        inArray = false
    }

    private func stop() {
        if output >= 0 { close(output) }
        output = -1
        if pid > 0 {
            kill(pid, SIGTERM)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            pid = 0
        }
    }

    /// Takes what pw-dump printed; true when who plays changed.
    public func readEvents() -> Bool {
        let before = playing
        var buffer = [UInt8](repeating: 0, count: 65536)
        while output >= 0 {
            let n = buffer.withUnsafeMutableBytes { read(output, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && errno == EAGAIN { break }
            if n <= 0 {
                // The server went away (or pw-dump could not reach it).
                if playing != nil { say("PipeWire is gone: who plays audio through it is not seen until it is back") }
                stop()
                playing = nil
                objects = [:]
                return before != nil
            }
            pending += buffer[..<n]
            lines()
        }
        return before != playing
    }

    /// Whole lines: each array, from its `[` line to its `]` line, applied.
    private func lines() {
        var start = pending.startIndex
        while let end = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
            let line = pending[start..<end]
            start = end + 1
            if !inArray {
                if line.elementsEqual("[".utf8) {
                    inArray = true
                    chunk = Array("[".utf8)
                }
                continue
            }
            chunk += line
            chunk.append(UInt8(ascii: "\n"))
            if line.elementsEqual("]".utf8) {
                inArray = false
                apply(chunk)
                chunk = []
            }
        }
        pending.removeSubrange(pending.startIndex..<start)
    }

    private func apply(_ json: [UInt8]) {
        guard let array = try? JSONDecoder().decode([Dumped].self, from: Data(json)) else {
            return say("pw-dump printed something that is not a JSON array of objects")
        }
        for o in array {
            guard let id = o.id else { continue }
            guard let info = o.info else {
                objects[id] = nil  // removed
                continue
            }
            var object = Object()
            object.type = o.type
            object.state = info.state
            object.mediaClass = info.props["media.class"]?.string
            object.client = info.props["client.id"]?.integer
            object.secPID = info.props["pipewire.sec.pid"]?.integer.map(Int32.init)
            objects[id] = object
        }
        var pids = Set<Int32>()
        for node in objects.values where node.type.hasSuffix(":Node") && node.state == "running" {
            guard node.mediaClass?.hasPrefix("Stream/Output/Audio") == true, let c = node.client,
                let pid = objects[c]?.secPID, pid > 0
            else { continue }
            pids.insert(pid)
        }
        playing = pids.sorted()
    }

    /// One object of pw-dump's array, as far as it is read: a field of
    /// another type than expected reads as absent, and an `info` that is
    /// not an object (null) says the object was removed.
    struct Dumped: Decodable {
        var id: Int?
        var type = ""
        var info: Info?

        struct Info {
            var state: String?
            var props: [String: Loose] = [:]
        }

        enum Keys: String, CodingKey { case id, type, info }
        enum InfoKeys: String, CodingKey { case state, props }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: Keys.self)
            id = try? c.decode(Int.self, forKey: .id)
            type = (try? c.decode(String.self, forKey: .type)) ?? ""
            guard let i = try? c.nestedContainer(keyedBy: InfoKeys.self, forKey: .info) else { return }
            info = Info(
                state: try? i.decode(String.self, forKey: .state),
                props: (try? i.decode([String: Loose].self, forKey: .props)) ?? [:])
        }
    }

    /// A property's value: pw-dump writes numbers as numbers or strings.
    enum Loose: Decodable {
        case int(Int), string(String), other

        init(from decoder: any Decoder) throws {
            let c = try decoder.singleValueContainer()
            if let i = try? c.decode(Int.self) {
                self = .int(i)
            } else if let s = try? c.decode(String.self) {
                self = .string(s)
            } else {
                self = .other
            }
        }

        var integer: Int? {
            switch self {
            case .int(let i): i
            case .string(let s): Int(s)
            case .other: nil
            }
        }

        var string: String? { if case .string(let s) = self { s } else { nil } }
    }
}
