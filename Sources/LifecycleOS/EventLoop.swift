@preconcurrency import Glibc
import CSystemd
import SystemPackage

/// The daemon's one loop and one wait: libsystemd's sd-event (epoll, a
/// timerfd, signalfd, and automatic watchdog pings when WatchdogSec= is set).
/// Single-threaded: every handler runs on the thread that called `run()`.
///
/// Or, for the shell's tests, a loop driven by hand (as swift-nio's
/// EmbeddedEventLoop): `EventLoop.manual()` has a clock of its own that only
/// `advance` moves, fires timers in deadline order as it passes them, hands
/// descriptors that are ready (poll(2), never waiting) to their handlers at
/// each turn, and delivers signals the test raises. `now` is the loop's
/// clock either way: the shell reads no other.
public final class EventLoop {
    let event: OpaquePointer?
    private var sources: [ObjectIdentifier: Source] = [:]
    /// A manual loop's clock, nanoseconds; nil: CLOCK_MONOTONIC.
    private var manualNow: Int64?
    /// Arms in order, so that timers due at the same instant fire as armed.
    private var armings: UInt64 = 0

    public init() throws(SystemError) {
        var e: OpaquePointer?
        let r = sd_event_new(&e)
        guard r >= 0, let e else { throw SystemError("sd_event_new", errno: .init(rawValue: -r)) }
        event = e
    }

    private init(manualAt start: Int64) {
        event = nil
        manualNow = start
    }

    /// A loop driven by hand, its clock at `start` (nanoseconds).
    public static func manual(at start: Int64 = 1_000_000_000) -> EventLoop { EventLoop(manualAt: start) }

    deinit {
        for s in sources.values { s.release() }
        if let event { sd_event_unref(event) }
    }

    /// The loop's clock (CLOCK_MONOTONIC nanoseconds, or the manual time).
    public var now: Int64 { manualNow ?? Posix.monotonicNanoseconds() }

    /// A registered source; `cancel()` removes it.
    public final class Source {
        fileprivate var pointer: OpaquePointer?
        /// A timer's second sd-event source, made the first time it is
        /// armed at or before now: a defer source, which runs at the next
        /// turn of the loop without the kernel's timer (see `arm(at:)`).
        fileprivate var soon: OpaquePointer?
        fileprivate let io: ((UInt32) -> Void)?
        fileprivate let fire: (() -> Void)?
        fileprivate let signal: ((signalfd_siginfo) -> Void)?
        fileprivate weak var loop: EventLoop?
        /// A manual loop's view of the source: its descriptor and the
        /// events wanted, or the timer's deadline and when it was armed.
        fileprivate var fd: Int32 = -1
        fileprivate var events: UInt32 = 0
        fileprivate var deadline: Int64?
        fileprivate var armedAs: UInt64 = 0
        fileprivate var signalNumber: Int32 = 0

        fileprivate init(
            io: ((UInt32) -> Void)? = nil, fire: (() -> Void)? = nil,
            signal: ((signalfd_siginfo) -> Void)? = nil
        ) {
            self.io = io
            self.fire = fire
            self.signal = signal
        }

        fileprivate func release() {
            for p in [pointer, soon].compactMap({ $0 }) {
                sd_event_source_set_enabled(p, Int32(SD_EVENT_OFF))
                sd_event_source_unref(p)
            }
            pointer = nil
            soon = nil
        }

        public func cancel() {
            release()
            deadline = nil
            loop?.sources[ObjectIdentifier(self)] = nil
        }

        /// Timers: fires once at `monotonicNanoseconds`, or never if nil.
        /// A deadline already reached (`arm(at: loop.now)`: "at the end of
        /// this turn", as the save is) fires at the next turn through a
        /// defer source, not the timerfd: a timerfd armed to expire at
        /// once programs the CPU's timer and takes its interrupt, which in
        /// a virtual machine costs two exits, about 20 µs a turn here
        /// (docs/performance.md, "What is inside a pinned round trip").
        public func arm(at monotonicNanoseconds: Int64?) {
            if let loop, loop.event == nil {
                deadline = monotonicNanoseconds
                loop.armings += 1
                armedAs = loop.armings
                return
            }
            guard let p = pointer else { return }
            guard let ns = monotonicNanoseconds else {
                sd_event_source_set_enabled(p, Int32(SD_EVENT_OFF))
                if let soon { sd_event_source_set_enabled(soon, Int32(SD_EVENT_OFF)) }
                return
            }
            if ns <= Posix.monotonicNanoseconds(), let soon = soonSource() {
                sd_event_source_set_enabled(p, Int32(SD_EVENT_OFF))
                sd_event_source_set_enabled(soon, Int32(SD_EVENT_ONESHOT))
                return
            }
            if let soon { sd_event_source_set_enabled(soon, Int32(SD_EVENT_OFF)) }
            // Round up: firing a microsecond early would find nothing due.
            sd_event_source_set_time(p, UInt64(max(0, (ns + 999) / 1000)))
            sd_event_source_set_enabled(p, Int32(SD_EVENT_ONESHOT))
        }

        /// The defer source, made on first use (most timers never need it).
        private func soonSource() -> OpaquePointer? {
            if let soon { return soon }
            guard let event = loop?.event else { return nil }
            var q: OpaquePointer?
            let r = sd_event_add_defer(
                event, &q,
                { _, ud in
                    Unmanaged<Source>.fromOpaque(ud!).takeUnretainedValue().fire!()
                    return 0
                }, Unmanaged.passUnretained(self).toOpaque())
            guard r >= 0, let q else { return nil }  // the timerfd, then
            sd_event_source_set_enabled(q, Int32(SD_EVENT_OFF))
            soon = q
            return q
        }

        /// IO sources: which events to wait for (EPOLLIN, EPOLLOUT).
        public func setEvents(_ events: UInt32) {
            self.events = events
            if let p = pointer { sd_event_source_set_io_events(p, events) }
        }
    }

    private func register(
        _ s: Source, _ body: (OpaquePointer, UnsafeMutableRawPointer) -> (Int32, OpaquePointer?)
    ) throws(SystemError) -> Source {
        s.loop = self
        guard let event else {
            sources[ObjectIdentifier(s)] = s
            return s
        }
        let (r, p) = body(event, Unmanaged.passUnretained(s).toOpaque())
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
        let s = Source(io: handler)
        s.fd = fd
        s.events = events
        return try register(s) { event, ud in
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
        let s = try register(Source(fire: handler)) { event, ud in
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
        let s = Source(signal: handler)
        s.signalNumber = sig
        return try register(s) { event, ud in
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
    public func enableWatchdog() -> Bool { event.map { sd_event_set_watchdog($0, 1) > 0 } ?? false }

    public func run() throws(SystemError) {
        guard let event else { preconditionFailure("a manual loop is driven by advance(), not run()") }
        let r = sd_event_loop(event)
        if r < 0 { throw SystemError("sd_event_loop", errno: .init(rawValue: -r)) }
    }

    /// A manual loop only notes it (`exited`): the test decides what follows.
    public func exit() {
        if let event { sd_event_exit(event, 0) } else { exited = true }
    }

    /// A manual loop was asked to exit.
    public private(set) var exited = false
}

// MARK: - Driving a manual loop

extension EventLoop {
    /// One turn: every watched descriptor that is ready now goes to its
    /// handler (once each), then every timer due at `now`, in order.
    public func turn() {
        precondition(event == nil, "only a manual loop is driven by hand")
        dispatchReady()
        while let due = nextTimer(dueBy: now) { fire(due) }
    }

    /// Moves the clock forward by `duration`, firing each timer it passes
    /// at its own deadline (the clock reads that deadline in its handler),
    /// with a turn at each; descriptors are looked at first.
    public func advance(by duration: Duration) {
        let (seconds, attoseconds) = duration.components
        advance(to: now + seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    public func advance(to target: Int64) {
        precondition(event == nil, "only a manual loop is driven by hand")
        dispatchReady()
        while let due = nextTimer(dueBy: target) {
            manualNow = max(now, due.deadline!)
            fire(due)
            dispatchReady()
        }
        manualNow = max(now, target)
        turn()
    }

    /// Moves the clock without turning the loop: the process was stopped
    /// (SIGSTOP, swap, a debugger) for `duration`; what came due meanwhile
    /// fires at the next turn.
    public func stall(by duration: Duration) {
        precondition(event == nil, "only a manual loop is driven by hand")
        let (seconds, attoseconds) = duration.components
        manualNow = now + seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    /// The earliest armed deadline of a manual loop, if any.
    public var nextDeadline: Int64? { sources.values.compactMap(\.deadline).min() }

    /// Delivers `signal` to its handler, as signalfd would.
    public func raise(_ signal: Int32) {
        var info = signalfd_siginfo()
        info.ssi_signo = UInt32(signal)
        for s in sources.values where s.signalNumber == signal { s.signal?(info) }
    }

    private func nextTimer(dueBy limit: Int64) -> Source? {
        sources.values.filter { $0.fire != nil && ($0.deadline ?? .max) <= limit }
            .min { ($0.deadline!, $0.armedAs) < ($1.deadline!, $1.armedAs) }
    }

    private func fire(_ s: Source) {
        s.deadline = nil  // one-shot, as sd-event's ONESHOT
        s.fire?()
    }

    private func dispatchReady() {
        let watched = sources.values.filter { $0.io != nil && $0.fd >= 0 && $0.events != 0 }
        guard !watched.isEmpty else { return }
        var fds = watched.map { pollfd(fd: $0.fd, events: Int16(truncatingIfNeeded: $0.events), revents: 0) }
        guard Glibc.poll(&fds, nfds_t(fds.count), 0) > 0 else { return }
        for (s, p) in zip(watched, fds) where p.revents != 0 && s.loop != nil && sources[ObjectIdentifier(s)] != nil {
            s.io?(UInt32(UInt16(bitPattern: p.revents)))
        }
    }
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
