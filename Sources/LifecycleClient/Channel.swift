@preconcurrency import Glibc
import LifecycleWire

/// The app's end of its channel to lifecycled: the inherited, connected
/// SOCK_SEQPACKET socket named by $LIFECYCLE_FD. When the daemon gave a
/// resume socket ($LIFECYCLE_RESUME_SOCKET), a broken channel is taken back
/// after a restart of the daemon, on the same descriptor number
/// (docs/protocol.md, "Resuming the channel"). Shared by the delegate and
/// the async API; the async API acknowledges from any thread, so the
/// resume bookkeeping is behind a lock.
final class Channel: @unchecked Sendable {
    let fd: Int32
    /// Where to take the channel back; nil: a broken channel is final.
    let resumePath: String?
    let appName: String
    /// How long to try to resume in all (shorter in the tests).
    var resumeWaitMilliseconds = Wire.resumeWaitMilliseconds

    private var lock = pthread_mutex_t()
    /// The highest event sequence received, and the last acknowledged.
    private var highestReceived: UInt32 = 0
    private var lastAcknowledged: UInt32 = 0
    /// The background tasks the app holds open (named in a resume).
    private var openTasks: Set<UInt32> = []
    /// Started ahead of use ($LIFECYCLE_PREWARM=1) and not yet said so.
    private var prewarm: Bool

    init(fd: Int32, resumePath: String?, appName: String, prewarm: Bool = false) {
        self.fd = fd
        self.resumePath = resumePath
        self.appName = appName
        self.prewarm = prewarm
        pthread_mutex_init(&lock, nil)
    }

    deinit { pthread_mutex_destroy(&lock) }

    private func locked<T>(_ body: () -> T) -> T {
        pthread_mutex_lock(&lock)
        defer { pthread_mutex_unlock(&lock) }
        return body()
    }

    /// The inherited socket, or nil when not run by lifecycled.
    static func inherited() -> Channel? {
        guard let raw = getenv(Wire.socketEnvironmentKey), let fd = Int32(String(cString: raw)), fd >= 0 else {
            return nil
        }
        var type: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0, type == Int32(SOCK_SEQPACKET.rawValue) else {
            return nil
        }
        if let raw = getenv(Wire.protocolEnvironmentKey), case let spoken = String(cString: raw),
            !spoken.isEmpty, spoken != String(Wire.version)
        {
            fputs(
                "lifecycled speaks protocol version \(spoken) on the app channel; this LifecycleClient speaks \(Wire.version): update the app\n",
                stderr)
            exit(70)  // EX_SOFTWARE
        }
        let resume = getenv(Wire.resumeSocketEnvironmentKey).map { String(cString: $0) }.flatMap {
            $0.isEmpty ? nil : $0
        }
        let name = getenv(Wire.appNameEnvironmentKey).map { String(cString: $0) } ?? ""
        // As in C: without a name the daemon would refuse every resume, and a
        // path too long for a socket address cannot be reached: a break is final at once.
        let resumable =
            !name.isEmpty && name.utf8.count <= Wire.maxTaskName
            && (resume?.utf8.count ?? 0) < MemoryLayout.size(ofValue: sockaddr_un().sun_path)
        unsetenv(Wire.protocolEnvironmentKey)
        unsetenv(Wire.resumeSocketEnvironmentKey)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)  // not for the app's own children
        unsetenv(Wire.socketEnvironmentKey)
        let prewarm = getenv(Wire.prewarmEnvironmentKey).map { String(cString: $0) == "1" } ?? false
        unsetenv(Wire.prewarmEnvironmentKey)
        return Channel(fd: fd, resumePath: resumable ? resume : nil, appName: name, prewarm: prewarm)
    }

    /// The first time the app waits for an event: a prewarmed app says it
    /// is there, and the daemon holds it there, frozen, until a use. First
    /// it rehearses its launch (`rehearseLaunch`, then `rehearse` with the
    /// options: the caller's part), so that the activation does not pay for it.
    func waitingForEvents(rehearse: (LaunchOptions) -> Void = { _ in }) {
        guard
            locked({ () -> Bool in
                defer { prewarm = false }
                return prewarm
            })
        else { return }
        if let options = Self.rehearseLaunch() { rehearse(options) }
        send(.prewarmed)
    }

    /// The library's part of a launch event, once, on an event of its own
    /// making: decoded from its bytes, checked, its options read, its
    /// acknowledgement encoded; nothing is sent and no callback runs. What
    /// the Swift runtime does at a first use (the metadata of the generic
    /// types involved, looked up by their mangled names, and the pages of
    /// this code) is then done while the app is prewarmed, not inside its
    /// activation: with `Application`'s part, 174 k of the 290 k
    /// instructions the example recorder executed in an activation and a
    /// stop (docs/performance.md, "Prewarming"). The app's own first use
    /// of its callbacks is its own.
    static func rehearseLaunch() -> LaunchOptions? {
        let options = [
            KeyValue(LaunchOptionKey.launchMode.rawValue, LaunchMode.foreground.rawValue),
            KeyValue(LaunchOptionKey.reason.rawValue, LaunchReason.user.rawValue),
            KeyValue(LaunchOptionKey.previousTime.rawValue, "0.5"),
        ]
        let event = EventMessage(
            sequence: 1, event: .willFinishLaunching, deadline: 0, budgetEnd: nil, options: options)
        guard case .event(let e)? = try? DaemonMessage.decode(DaemonMessage.event(event).encoded()) else { return nil }
        _ = e.sceneProblem()
        _ = AppMessage.acknowledge(sequence: e.sequence).encoded()
        return LaunchOptions(e, restoration: nil)
    }

    /// Sends; a send into a broken channel is lost, and the next receive
    /// finds the break (and resumes: the resume names what was acknowledged).
    /// Under the lock, so that a resume on another thread names exactly
    /// the acknowledgements sent before it (the async API acknowledges from
    /// any thread): one sent after it goes on the new socket, after the resume.
    func send(_ m: AppMessage) {
        let bytes = m.encoded()
        locked {
            switch m {
            case .acknowledge(let seq), .complete(let seq, _):
                // Answered already (the async API's early answer, then its
                // acknowledgement at the next event): said once.
                if seq <= lastAcknowledged { return }
                lastAcknowledged = seq
            case .endBackgroundTask(let task): openTasks.remove(task)
            default: break
            }
            _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
    }

    /// A task the daemon granted: named in a resume until it ends.
    func taskBegan(_ task: UInt32) { _ = locked { openTasks.insert(task) } }

    /// What a wait on the channel brought: a message, the end of the
    /// channel, a datagram that does not decode (why, as WireError says it;
    /// the C library's lifecycle_last_error says the same), nothing in
    /// time, or the channel taken back after the daemon restarted.
    enum Received { case message(DaemonMessage), closed, violation(String), timeout, resumed }

    /// Waits up to `timeoutMilliseconds` (-1: forever) for one message.
    /// With no timeout it goes straight to a blocking recv (one system call
    /// per message on the hot path), into a stack buffer. A repeated event
    /// (after a resume) is ignored: its acknowledgement was sent, or named
    /// by the resume, or follows when its callback returns. A break is
    /// resumed when it can be.
    func receive(timeoutMilliseconds: Int32) -> Received {
        while true {
            let received = receiveOnce(timeoutMilliseconds: timeoutMilliseconds)
            switch received {
            case .message(.event(let e)):
                let fresh = locked {
                    guard e.sequence > highestReceived else { return false }
                    highestReceived = e.sequence
                    return true
                }
                if fresh { return received }
            case .closed:
                return resume()
            default:
                return received
            }
        }
    }

    private func receiveOnce(timeoutMilliseconds: Int32) -> Received {
        if timeoutMilliseconds >= 0 {
            switch Self.wait(fd, timeoutMilliseconds) {
            case false: return .timeout
            case true: break
            }
        }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Wire.maxMessageSize) { buffer in
            while true {
                // MSG_TRUNC: the real length of a longer datagram, to reject it (as C does).
                let n = recv(fd, buffer.baseAddress, buffer.count, Int32(MSG_TRUNC))
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return .closed }
                if n > buffer.count { return .violation("message of \(n) bytes exceeds \(Wire.maxMessageSize)") }
                do throws(WireError) {
                    return .message(try DaemonMessage.decode(Array(buffer[0..<n])))
                } catch {
                    return .violation(error.description)
                }
            }
        }
    }

    /// True when `fd` became readable within `milliseconds`.
    private static func wait(_ fd: Int32, _ milliseconds: Int32) -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while true {
            let r = poll(&p, 1, milliseconds)
            if r < 0 && errno == EINTR { continue }
            return r > 0
        }
    }

    // MARK: Resuming

    /// Takes the channel back after the daemon restarted: connects to the
    /// resume socket (every 100 ms, doubling up to 1 s, for at most
    /// `resumeWaitMilliseconds`), puts the new socket on the old descriptor
    /// number, and says what the app acknowledged and holds. `.closed` when
    /// there is no resume socket or the daemon never took it back; a
    /// message other than `resumed` first is a protocol violation, as in C.
    func resume() -> Received {
        guard let path = resumePath else { return .closed }
        let giveUp = monotonicNanoseconds() + Int64(resumeWaitMilliseconds) * 1_000_000
        var pause: Int64 = 100_000_000
        while true {
            let left = giveUp - monotonicNanoseconds()
            switch tryResume(path, waitMilliseconds: Int32(clamping: min(5000, max(0, left / 1_000_000)))) {
            case .resumed: return .resumed
            case .violation(let why): return .violation(why)
            default: break
            }
            guard left > 0 else { return .closed }
            var ts = timespec(tv_sec: 0, tv_nsec: Int(min(pause, left)))
            var rest = timespec()
            while nanosleep(&ts, &rest) != 0 && errno == EINTR { ts = rest }
            pause = min(pause * 2, Int64(Wire.resumeLongestPauseMilliseconds) * 1_000_000)
        }
    }

    /// One try: `.resumed`, `.violation`, or anything else for a failed try.
    private func tryResume(_ path: String, waitMilliseconds: Int32) -> Received {
        // Non-blocking: a daemon that is not accepting (a full backlog) is a failed try, not a hang.
        let s = socket(
            AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard s >= 0 else { return .closed }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            close(s)
            return .closed
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(s, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            close(s)
            return .closed
        }
        _ = fcntl(s, F_SETFL, fcntl(s, F_GETFL) & ~O_NONBLOCK)
        // The new socket takes the old number, and the resume goes first on
        // it, with no acknowledgement from another thread in between.
        let sent: Bool = locked {
            // dup3 is not in Swift's Glibc module: dup2, then close-on-exec.
            guard dup2(s, fd) >= 0 else { return false }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            let hello = AppMessage.resume(lastAcknowledged: lastAcknowledged, app: appName, tasks: openTasks.sorted())
                .encoded()
            return hello.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                == hello.count
        }
        close(s)
        guard sent else { return .closed }
        guard Self.wait(fd, waitMilliseconds) else { return .timeout }
        switch receiveOnce(timeoutMilliseconds: 0) {
        case .message(.resumed): return .resumed
        case .message(let m): return .violation("\(Self.typeName(m)) before resumed")
        case let other: return other
        }
    }

    private static func typeName(_ m: DaemonMessage) -> String {
        let type = m.encoded()[1]
        return "message type 0x\(String(type, radix: 16))"
    }
}

/// Why the channel became unusable. Final, as a channel error is in the C
/// library, and in the same words as its lifecycle_last_error() (see
/// docs/protocol.md, "What the client libraries do").
enum ChannelError: Error, Equatable, CustomStringConvertible {
    /// The daemon closed its end (C: ECONNRESET).
    case closed
    /// The daemon sent a datagram that does not decode (C: EPROTO).
    case protocolViolation(String)
    /// More than Wire.maxQueuedWhileWaiting messages arrived while
    /// beginBackgroundTask waited for its reply (C: ENOBUFS).
    case tooManyQueued

    var description: String {
        switch self {
        case .closed: "lifecycled closed the channel"
        case .protocolViolation(let why): "protocol violation by the daemon: \(why)"
        case .tooManyQueued:
            "more than \(Wire.maxQueuedWhileWaiting) messages arrived while waiting for a background task reply"
        }
    }

    /// The line the client writes on stderr: the error, then the app's name.
    func notice(app: String?) -> String { "\(self) (\(app ?? "this app"))" }
}

func monotonicNanoseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}
