import Foundation
@preconcurrency import Glibc
import CLifecycleShim
import LifecycleCore
import LifecycleOS
import Logging

// The NOTIFY_SOCKET of plain programs: readiness, status lines and
// STOPPING=1, as under systemd.

extension Daemon {
    /// sd_notify messages of a plain program. Accepted from any process of
    /// the app (systemd's NotifyAccess=all), checked by the sender's pid;
    /// passed fds (BARRIER=1) are closed by the shim at once.
    func readNotifications(_ id: AppID, _ run: Run) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var turn = 0
        while runs[id] === run, turn < Self.messagesPerTurn {
            turn += 1
            var pid: pid_t = 0
            let received = try? buffer.withUnsafeMutableBytes { b throws(SystemError) in
                try Posix.nonBlocking("recvmsg", "\(id)'s notification socket") {
                    lc_recv_notify(run.notify, b.baseAddress, UInt(b.count), &pid)
                }
            }
            guard let n = received.flatMap({ $0 }) else { return }  // all read (or failed: next turn)
            guard n <= buffer.count else {
                logger.warning(
                    "\(id): notification of \(n) bytes ignored (at most \(buffer.count))", metadata: ["app": "\(id)"])
                continue
            }
            guard pid > 0, run.group.contains(pid) else {
                logger.warning(
                    "\(id): notification from pid \(pid), not one of its processes, ignored", metadata: ["app": "\(id)"]
                )
                continue
            }
            for line in String(decoding: buffer[0..<n], as: UTF8.self).split(separator: "\n") {
                if line == "READY=1" {
                    record(id, .notified, detail: "READY=1")
                    submit(.ready(id, generation: run.generation))
                } else if line.hasPrefix("STATUS=") {
                    run.statusLine = String(line.dropFirst("STATUS=".count).prefix(256))
                    record(id, .notified, detail: "STATUS=" + (run.statusLine ?? ""))
                } else if line == "STOPPING=1" {
                    record(id, .notified, detail: "STOPPING=1")
                }
            }
        }
    }
}
