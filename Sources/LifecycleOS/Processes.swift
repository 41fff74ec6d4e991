@preconcurrency import Glibc
import CLifecycleShim

// The kernel's view of the processes the daemon supervises: pidfds, start
// times, ended children and how they ended, and the daemon's own standing
// as their reaper. The shell reaches them only through here.

/// How a process ended, as the kernel reports it.
public enum ProcessEnd: Sendable, Equatable {
    case exited(Int32)
    case signaled(Int32)
}

public enum Processes {
    /// A pidfd for `pid`, close-on-exec; nil when the process is gone (or
    /// the kernel has no pidfds).
    public static func pidfd(_ pid: pid_t) -> Int32? {
        let fd = lc_pidfd_open(pid)
        return fd >= 0 ? fd : nil
    }

    /// When `pid` started (field 22 of /proc/PID/stat, clock ticks since
    /// boot): with the pid, it names one process for the life of the
    /// machine. 0 when it cannot be read (the process is gone).
    public static func startTime(_ pid: pid_t) -> UInt64 { UInt64(lc_process_start_time(pid)) }

    /// Seconds since this process started (its last exec).
    public static func secondsSinceStart() -> Double {
        var boot = timespec()
        clock_gettime(CLOCK_BOOTTIME, &boot)
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        return Double(boot.tv_sec) + Double(boot.tv_nsec) / 1e9 - Double(startTime(getpid())) / ticks
    }

    /// The next child that ended, reaped, and how; nil when none has. Its
    /// status is read (WNOWAIT) before it is reaped, so none is lost.
    public static func reapEnded() -> (pid: pid_t, end: ProcessEnd)? {
        var st = lc_child_status()
        guard lc_peek_ended_child(&st) == 0, st.pid != 0 else { return nil }
        var reaped = lc_child_status()
        _ = lc_reap(st.pid, &reaped)
        return (st.pid, st.exited != 0 ? .exited(st.value) : .signaled(st.value))
    }

    /// Reaps `pid` if it is a child of ours that ended, and how; nil when
    /// it has not ended (or is not our child).
    public static func reap(_ pid: pid_t) -> ProcessEnd? {
        var st = lc_child_status()
        guard lc_reap(pid, &st) == 0, st.pid == pid else { return nil }
        return st.exited != 0 ? .exited(st.value) : .signaled(st.value)
    }

    /// How a process that is not our child ended: from its pidfd (Linux
    /// 6.15+, once its parent reaped it), or, while it is still a zombie
    /// its parent has not reaped, from /proc/`pid`/stat (any kernel).
    /// Throws EAGAIN while neither says yet; another errno on kernels
    /// without PIDFD_GET_INFO once the zombie is gone.
    public static func exitStatus(pidfd: Int32, pid: pid_t) throws(SystemError) -> ProcessEnd {
        var exited: Int32 = 0
        var value: Int32 = 0
        do {
            try Posix.call("ioctl(PIDFD_GET_INFO)", "pidfd \(pidfd)") { lc_pidfd_exit_status(pidfd, &exited, &value) }
        } catch {
            guard lc_zombie_exit_status(pid, &exited, &value) == 0 else { throw error }
            // The pid names our process only until it is reaped: a status
            // the pidfd has now has the last word; without one, the pidfd
            // that still reaches its process says /proc read our zombie.
            var again = (exited: Int32(0), value: Int32(0))
            if lc_pidfd_exit_status(pidfd, &again.exited, &again.value) == 0 {
                (exited, value) = again
            } else if !Posix.signal(pidfd: pidfd, 0) {
                throw error
            }
        }
        return exited != 0 ? .exited(value) : .signaled(value)
    }

    /// Orphaned descendants are reparented to this process (PR_SET_CHILD_SUBREAPER).
    @discardableResult
    public static func becomeSubreaper() -> Bool { lc_become_subreaper() == 0 }

    /// Whether orphaned descendants are reparented to this process.
    public static func isSubreaper() -> Bool { lc_is_subreaper() == 1 }

    /// Raises this process's priority to `nice` where it is lower (needs
    /// CAP_SYS_NICE; without it, or under a unit's own Nice=, left as is).
    public static func raisePriority(to nice: Int32) {
        let process = Int32(PRIO_PROCESS.rawValue)
        if getpriority(process, 0) > nice { setpriority(process, 0, nice) }
    }

    /// Signals the loop takes through signalfd are set back to their
    /// default disposition (one inherited as ignored, a script's `trap ''
    /// INT` or nohup, would discard the signal before signalfd sees it) and
    /// blocked; SIGPIPE is ignored (a peer that went is an error, not a death).
    public static func takeSignals(_ signals: [Int32]) {
        for s in signals { Glibc.signal(s, SIG_DFL) }
        Posix.blockSignals(signals)
        Glibc.signal(SIGPIPE, SIG_IGN)
    }
}
