@preconcurrency import Glibc
import CSystemd

/// The daemon's one loop and one wait: libsystemd's sd-event (epoll, a
/// timerfd, signalfd, and automatic watchdog pings when WatchdogSec= is set).
/// Single-threaded: every handler runs on the thread that called `run()`.
public final class EventLoop {
    let event: OpaquePointer
    private var sources: [ObjectIdentifier: Source] = [:]

    public init() throws(SystemError) {
        var e: OpaquePointer?
        let r = sd_event_new(&e)
        guard r >= 0, let e else { throw SystemError("sd_event_new", errno: .init(rawValue: -r)) }
        event = e
    }

    deinit {
        for s in sources.values { s.release() }
        sd_event_unref(event)
    }

    /// A registered source; `cancel()` removes it.
    public final class Source {
        fileprivate var pointer: OpaquePointer?
        fileprivate let io: ((UInt32) -> Void)?
        fileprivate let fire: (() -> Void)?
        fileprivate let signal: ((signalfd_siginfo) -> Void)?
        fileprivate weak var loop: EventLoop?

        fileprivate init(
            io: ((UInt32) -> Void)? = nil, fire: (() -> Void)? = nil,
            signal: ((signalfd_siginfo) -> Void)? = nil
        ) {
            self.io = io
            self.fire = fire
            self.signal = signal
        }

        fileprivate func release() {
            if let p = pointer {
                sd_event_source_set_enabled(p, Int32(SD_EVENT_OFF))
                sd_event_source_unref(p)
            }
            pointer = nil
        }

        public func cancel() {
            release()
            loop?.sources[ObjectIdentifier(self)] = nil
        }

        /// Timers: fires once at `monotonicNanoseconds`, or never if nil.
        public func arm(at monotonicNanoseconds: Int64?) {
            guard let p = pointer else { return }
            guard let ns = monotonicNanoseconds else {
                sd_event_source_set_enabled(p, Int32(SD_EVENT_OFF))
                return
            }
            // Round up: firing a microsecond early would find nothing due.
            sd_event_source_set_time(p, UInt64(max(0, (ns + 999) / 1000)))
            sd_event_source_set_enabled(p, Int32(SD_EVENT_ONESHOT))
        }

        /// IO sources: which events to wait for (EPOLLIN, EPOLLOUT).
        public func setEvents(_ events: UInt32) {
            if let p = pointer { sd_event_source_set_io_events(p, events) }
        }
    }

    private func register(_ s: Source, _ body: (UnsafeMutableRawPointer) -> (Int32, OpaquePointer?)) throws(SystemError)
        -> Source
    {
        s.loop = self
        let (r, p) = body(Unmanaged.passUnretained(s).toOpaque())
        guard r >= 0, let p else { throw SystemError("sd_event_add", errno: .init(rawValue: -r)) }
        s.pointer = p
        sources[ObjectIdentifier(s)] = s
        return s
    }

    /// Calls `handler(revents)` whenever `fd` is ready.
    @discardableResult
    public func watch(
        fd: Int32, events: UInt32 = IOEvents.readable,
        _ handler: @escaping (UInt32) -> Void
    ) throws(SystemError) -> Source {
        try register(Source(io: handler)) { ud in
            var p: OpaquePointer?
            let r = sd_event_add_io(
                event, &p, fd, events,
                { _, _, revents, ud in
                    Unmanaged<Source>.fromOpaque(ud!).takeUnretainedValue().io!(revents)
                    return 0
                }, ud)
            return (r, p)
        }
    }

    /// A one-shot CLOCK_MONOTONIC timer, disarmed until `arm(at:)`. Accuracy
    /// is 1 µs: sd-event's default of 250 ms would blur every deadline.
    public func timer(_ handler: @escaping () -> Void) throws(SystemError) -> Source {
        let s = try register(Source(fire: handler)) { ud in
            var p: OpaquePointer?
            let r = sd_event_add_time(
                event, &p, CLOCK_MONOTONIC, UInt64.max, 1,
                { _, _, ud in
                    Unmanaged<Source>.fromOpaque(ud!).takeUnretainedValue().fire!()
                    return 0
                }, ud)
            return (r, p)
        }
        s.arm(at: nil)
        return s
    }

    /// Takes `sig` through a signalfd. The signal must be blocked first.
    @discardableResult
    public func onSignal(_ sig: Int32, _ handler: @escaping (signalfd_siginfo) -> Void) throws(SystemError) -> Source {
        try register(Source(signal: handler)) { ud in
            var p: OpaquePointer?
            let r = sd_event_add_signal(
                event, &p, sig,
                { _, si, ud in
                    Unmanaged<Source>.fromOpaque(ud!).takeUnretainedValue().signal!(si!.pointee)
                    return 0
                }, ud)
            return (r, p)
        }
    }

    /// Pings the service manager's watchdog at half of WatchdogSec=, from the
    /// loop itself: a stuck loop stops the pings and systemd restarts us.
    public func enableWatchdog() -> Bool { sd_event_set_watchdog(event, 1) > 0 }

    public func run() throws(SystemError) {
        let r = sd_event_loop(event)
        if r < 0 { throw SystemError("sd_event_loop", errno: .init(rawValue: -r)) }
    }

    public func exit() { sd_event_exit(event, 0) }
}

/// epoll event bits (EPOLLIN and friends), for `EventLoop.watch`.
public enum IOEvents {
    public static let readable: UInt32 = 0x001
    /// EPOLLPRI: PSI triggers and cgroup.events notifications.
    public static let priority: UInt32 = 0x002
    public static let writable: UInt32 = 0x004
    public static let error: UInt32 = 0x008
    public static let hangup: UInt32 = 0x010
}
