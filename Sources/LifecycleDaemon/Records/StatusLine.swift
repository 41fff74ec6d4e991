import LifecycleCore
import LifecycleOS

/// STATUS= for `systemctl status`: how many apps are in each state, and the
/// memory level when it is not normal. Sent at most every 250 ms and only
/// when it changed: sd_notify blocks when the manager's queue is full, and a
/// burst of transitions (a thousand apps launching) needs only the last one.
final class StatusLine {
    var counts: [LifecycleState: Int] = [:]
    private var last = ""
    private var due = false

    /// Something changed: send within 250 ms.
    func changed(_ daemon: Daemon) {
        guard !due else { return }
        due = true
        daemon.statusTimer?.arm(at: daemon.loop.now + 250_000_000)
    }

    func send(_ daemon: Daemon) {
        due = false
        let order: [LifecycleState] = [.active, .inactive, .background, .suspended, .prewarmed, .notRunning]
        let parts = order.compactMap { s in counts[s, default: 0] > 0 ? "\(counts[s]!) \(s.rawValue)" : nil }
        var text = "\(daemon.manifests.count) apps" + (parts.isEmpty ? "" : ": " + parts.joined(separator: ", "))
        let level = daemon.supervisor.memoryLevel
        if level != .normal { text += "; memory \(level.rawValue)" }
        guard text != last else { return }
        last = text
        Systemd.notify("STATUS=\(text)")
    }
}
