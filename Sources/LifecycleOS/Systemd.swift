@preconcurrency import Glibc
import CSystemd
import SystemPackage
import Logging

/// The service manager, through libsystemd. Every call is harmless when
/// the daemon was not started by systemd (NOTIFY_SOCKET unset: a no-op).
public enum Systemd {
    /// A stream to journald for `identifier` at `priority`
    /// (sd_journal_stream_fd(3)), lines prefixed `<N>` to set their own
    /// level when `levelPrefix`. The descriptor, or why there is none.
    public static func journalStream(_ identifier: String, priority: Int32, levelPrefix: Bool)
        -> Result<Int32, SystemError>
    {
        let fd = sd_journal_stream_fd(identifier, priority, levelPrefix ? 1 : 0)
        if fd >= 0 { return .success(fd) }
        return .failure(SystemError("sd_journal_stream_fd", identifier, errno: Errno(rawValue: -fd)))
    }

    /// sd_notify(3): "READY=1", "STATUS=...", "STOPPING=1".
    @discardableResult
    public static func notify(_ state: String) -> Bool { sd_notify(0, state) > 0 }

    /// Sockets passed by socket activation (sd_listen_fds(3)); the LISTEN_*
    /// variables are unset so that apps do not inherit them.
    public static func listenFDs() -> [Int32] {
        let n = sd_listen_fds(1)
        guard n > 0 else { return [] }
        return (0..<n).map { SD_LISTEN_FDS_START + $0 }
    }

    /// The watchdog interval when WatchdogSec= is set for us.
    public static func watchdogInterval() -> Duration? {
        var usec: UInt64 = 0
        guard sd_watchdog_enabled(0, &usec) > 0 else { return nil }
        return .microseconds(Int64(usec))
    }

    /// True when our stderr is the journal (systemd sets $JOURNAL_STREAM to
    /// its device:inode): then logs go out as structured journal entries.
    public static var stderrIsJournal: Bool {
        guard let value = getenv("JOURNAL_STREAM").map({ String(cString: $0) }) else { return false }
        var st = stat()
        guard fstat(2, &st) == 0 else { return false }
        return value == "\(st.st_dev):\(st.st_ino)"
    }

    /// Sends one structured entry: MESSAGE, PRIORITY and the given fields.
    static func journal(_ fields: [(String, String)]) {
        let entries = fields.map { strdup("\($0.0)=\($0.1)")! }
        defer { entries.forEach { free($0) } }
        var iov = entries.map { iovec(iov_base: UnsafeMutableRawPointer($0), iov_len: strlen($0)) }
        _ = sd_journal_sendv(&iov, Int32(iov.count))
    }
}

/// A swift-log handler for a daemon: structured journal entries when stderr
/// is the journal (metadata become fields: "app" -> APP, "from-state" ->
/// FROM_STATE), otherwise one plain line per entry on stderr.
public struct DaemonLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    let identifier: String
    let journal: Bool

    public init(identifier: String, journal: Bool = Systemd.stderrIsJournal) {
        self.identifier = identifier
        self.journal = journal
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let level = event.level, message = event.message
        // Usually the handler has none: no merge (a new dictionary) then.
        let all = metadata.isEmpty ? event.metadata ?? [:] : metadata.merging(event.metadata ?? [:]) { $1 }
        if journal {
            var fields: [(String, String)] = [
                ("MESSAGE", message.description),
                ("PRIORITY", String(Self.priority(level))),
                ("SYSLOG_IDENTIFIER", identifier),
            ]
            for (k, v) in all.sorted(by: { $0.key < $1.key }) { fields.append((Self.fieldName(k), "\(v)")) }
            // journald's socket makes a sender wait when journald is slow: never the loop.
            let sent = fields
            output.enqueue(
                .init(bytes: fields.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count }) { Systemd.journal(sent) })
        } else {
            output.write(Self.line(identifier, level, message.description, all))
        }
    }

    /// An entry as one plain line: "IDENTIFIER: LEVEL: MESSAGE k=v ...",
    /// the metadata sorted by key. Built in one buffer: a line is written
    /// for every step of every app, and interpolating the level (an enum,
    /// described by reflection) and each pair cost more than the rest.
    static func line(_ identifier: String, _ level: Logger.Level, _ message: String, _ all: Logger.Metadata) -> String {
        var text = ""
        text.reserveCapacity(identifier.utf8.count + message.utf8.count + 12 + all.count * 32)
        text += identifier
        text += ": "
        text += level.rawValue
        text += ": "
        text += message
        for (k, v) in all.sorted(by: { $0.key < $1.key }) {
            text += " "
            text += k
            text += "="
            text += v.description
        }
        text += "\n"
        return text
    }

    /// Where the lines go: standard error, or the journal, never blocking.
    var output: LogOutput { .standardError }

    /// Has `output` say, when it can write again, how many lines it dropped.
    public func sayDroppedLines() {
        let identifier = identifier, journal = journal
        LogOutput.standardError.droppedNotice = { count in
            let message = "\(count) log line(s) dropped: the log output did not keep up"
            guard journal else {
                let text = Array("\(identifier): warning: \(message)\n".utf8)
                return .init(bytes: text.count) { LogOutput.writeAll(2, text) }
            }
            return .init(bytes: message.utf8.count) {
                Systemd.journal([("MESSAGE", message), ("PRIORITY", "4"), ("SYSLOG_IDENTIFIER", identifier)])
            }
        }
    }

    /// "from-state" -> "FROM_STATE": journal fields are upper case, digits, underscores.
    static func fieldName(_ key: String) -> String {
        String(key.uppercased().map { $0.isLetter || $0.isNumber ? $0 : "_" })
    }

    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }
}
