#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleCore
import LifecycleOS
import Logging
import LifecycleControl

// The NOTIFY_SOCKET of plain programs: readiness, status lines and
// STOPPING=1, as under systemd.

extension Daemon {
    /// The directory of the socket files, made before the earlier daemon's
    /// are bound again: mode 0711, so that no one else can list it, and
    /// each socket 0600.
    func makeNotifyDirectory() {
        try? FileManager.default.createDirectory(atPath: notifyDirectory, withIntermediateDirectories: true)
        try? Posix.chmod(notifyDirectory, 0o711)
    }

    /// After the adoption: socket files no run uses any more (their runs
    /// ended while no daemon ran) go.
    func removeStaleNotifySockets() {
        let used = Set(runs.byApp.values.compactMap(\.notifyName))
        for name in (try? FileManagerLite.list(notifyDirectory)) ?? []
        where !used.contains(notifyDirectory + "/" + name) {
            Posix.unlink(notifyDirectory + "/" + name)
        }
    }

    /// A stranger's notification is dropped after one look at its sender;
    /// its log line is said once per sender per interval, with how many
    /// were dropped since, so that a flood cannot become a flood of logs.
    static var strangerLogInterval: Int64 { 10_000_000_000 }

    /// sd_notify messages of a plain program. Accepted from any process of
    /// the app (systemd's NotifyAccess=all), checked by the sender's pid;
    /// passed fds (BARRIER=1) are closed by the shim at once.
    func readNotifications(_ id: AppID, _ run: Run) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var turn = 0
        while runs[id] === run, turn < Self.messagesPerTurn {
            turn += 1
            let received = try? UnixSocket.receiveNotification(run.notify, into: &buffer)
            guard let (n, pid) = received.flatMap({ $0 }) else { return }  // all read (or failed: next turn)
            guard n <= buffer.count else {
                logger.warning(
                    "\(id): notification of \(n) bytes ignored (at most \(buffer.count))", metadata: ["app": "\(id)"])
                continue
            }
            // A sender found a stranger within the interval is dropped at
            // once: reading its group's member list for each of its
            // messages was most of what a flood cost.
            let knownStranger =
                run.strangers[pid].map {
                    loop.now - $0.said < Self.strangerLogInterval
                } ?? false
            guard pid > 0, pid == run.pid || (!knownStranger && run.group.contains(pid)) else {
                strangerSent(id, run, pid)
                continue
            }
            run.strangers[pid] = nil  // a pid reused by the app since
            for line in String(decoding: buffer[0..<n], as: UTF8.self).split(separator: "\n") {
                if line == "READY=1" {
                    record(id, .notified, detail: "READY=1")
                    report(.ready(id, generation: run.generation))
                } else if line.hasPrefix("STATUS=") {
                    // Saved at the end of the turn, before the record of it leaves.
                    runs.said(status: String(line.dropFirst("STATUS=".count).prefix(256)), on: run, of: id)
                    markUnsaved()
                    record(id, .notified, detail: "STATUS=" + (run.statusLine ?? ""))
                } else if line == "STOPPING=1" {
                    record(id, .notified, detail: "STOPPING=1")
                }
            }
        }
    }

    private func strangerSent(_ id: AppID, _ run: Run, _ pid: pid_t) {
        let now = loop.now
        if run.strangers.count > 64 { run.strangers = [:] }  // many senders: forget, and say it again
        var seen = run.strangers[pid] ?? (said: 0, dropped: 0)
        if seen.said != 0, now - seen.said < Self.strangerLogInterval {
            seen.dropped += 1
        } else {
            let more = seen.dropped > 0 ? " (and \(seen.dropped) more since the last line)" : ""
            logger.warning(
                "\(id): notification from pid \(pid), not one of its processes, ignored\(more)",
                metadata: ["app": "\(id)"])
            seen = (said: now, dropped: 0)
        }
        run.strangers[pid] = seen
    }
}
