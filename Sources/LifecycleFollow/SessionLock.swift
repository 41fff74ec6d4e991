import CSystemd
@preconcurrency import Glibc

// The session's lock, as systemd-logind knows it: its `LockedHint`, which a
// screen locker sets (GNOME's and KDE's do; with swaylock, swayidle's hooks
// do: docs/focus.md). The follower's own session (logind's `session/auto`:
// the caller's session, else the user's graphical one), watched by its
// PropertiesChanged signal on the system bus; every read bounded by a
// timeout, so a hung logind delays a report by at most that and stalls
// nothing else.

public final class SessionLock {
    private var bus: OpaquePointer?
    private var match: OpaquePointer?
    private let path: String
    let say: (String) -> Void
    /// The last LockedHint read; nil when logind could not say.
    public private(set) var locked: Bool?

    /// Throws when there is no system bus or no session to watch.
    public init(say: @escaping (String) -> Void) throws(FollowError) {
        self.say = say
        var b: OpaquePointer?
        var r = sd_bus_open_system(&b)
        guard r >= 0, let b else { throw FollowError("no system bus (\(Self.errno(r)))") }
        bus = b
        sd_bus_set_method_call_timeout(b, 500_000)
        // The session's own path: signals come from it, not from `auto`.
        var error = sd_bus_error()
        var id: UnsafeMutablePointer<CChar>?
        r = sd_bus_get_property_string(
            b, "org.freedesktop.login1", "/org/freedesktop/login1/session/auto", "org.freedesktop.login1.Session", "Id",
            &error, &id)
        defer { sd_bus_error_free(&error) }
        guard r >= 0, let id else {
            let why = error.message.map { String(cString: $0) } ?? Self.errno(r)
            sd_bus_unref(b)
            bus = nil
            throw FollowError("logind names no session of this user (\(why))")
        }
        var encoded: UnsafeMutablePointer<CChar>?
        r = sd_bus_path_encode("/org/freedesktop/login1/session", id, &encoded)
        free(id)
        guard r >= 0, let encoded else {
            sd_bus_unref(b)
            bus = nil
            throw FollowError("logind's session path: \(Self.errno(r))")
        }
        path = String(cString: encoded)
        free(encoded)
        var slot: OpaquePointer?
        r = sd_bus_match_signal(
            b, &slot, "org.freedesktop.login1", path, "org.freedesktop.DBus.Properties", "PropertiesChanged", nil, nil)
        guard r >= 0 else {
            sd_bus_unref(b)
            bus = nil
            throw FollowError("watching logind's session: \(Self.errno(r))")
        }
        match = slot
        read()
    }

    deinit {
        sd_bus_slot_unref(match)
        sd_bus_flush_close_unref(bus)
    }

    /// Readable when logind (or the bus) has something to say; -1 once the bus is gone.
    public var descriptor: Int32 { bus.map { sd_bus_get_fd($0) } ?? -1 }

    /// Takes what came; true when the lock changed. A signal that came
    /// while the property was read waits in sd-bus's queue, not on the
    /// socket: processed until nothing is left.
    public func readEvents() -> Bool {
        let was = locked
        while let bus {
            var processed = false
            var r: Int32
            repeat {
                r = sd_bus_process(bus, nil)
                if r > 0 { processed = true }
            } while r > 0
            if r < 0 {
                say("the system bus went away (\(Self.errno(r))): the session's lock is no longer followed")
                sd_bus_slot_unref(match)
                match = nil
                sd_bus_unref(bus)
                self.bus = nil
                locked = nil
                break
            }
            guard processed else { break }
            read()
        }
        return was != locked
    }

    private func read() {
        guard let bus else { return }
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var value: Int32 = 0
        let r = sd_bus_get_property_trivial(
            bus, "org.freedesktop.login1", path, "org.freedesktop.login1.Session", "LockedHint", &error,
            CChar(UInt8(ascii: "b")), &value)
        if r < 0 {
            if locked != nil { say("logind did not say whether the session is locked: \(Self.errno(r))") }
            locked = nil
        } else {
            locked = value != 0
        }
    }

    static func errno(_ r: Int32) -> String { String(cString: strerror(-r)) }
}
