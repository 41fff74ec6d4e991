// Who is in front. The planner asks this room where an app belongs instead of
// reading slots, the lock and interruptions itself, so that several displays
// (each a Foreground of its own) can come without touching the planner.

/// The foreground of one display: a fixed number of slots, held by the
/// most recently activated apps, a lock, and interruptions on top.
public struct Foreground: Sendable, Equatable, Codable {
    /// How many apps may be in the foreground at once.
    public let slots: Int
    /// Apps holding a slot, least recently activated first.
    public private(set) var apps: [AppID] = []
    /// Interruptions in progress (alerts, banners); the front apps are inactive.
    public private(set) var interruptions = 0
    public private(set) var locked = false

    public init(slots: Int) {
        precondition(slots >= 1, "at least one foreground slot")
        self.slots = slots
    }

    func holds(_ id: AppID) -> Bool { apps.contains(id) }

    /// Shown to the user: in a slot, with the screen unlocked.
    func shows(_ id: AppID) -> Bool { !locked && holds(id) }

    /// Where the front wants the app: active, inactive under an
    /// interruption, or nil when it is not in front.
    func placement(_ id: AppID) -> Placement? {
        guard shows(id) else { return nil }
        return interruptions > 0 ? .interrupted : .front
    }

    enum Placement { case front, interrupted }

    /// Puts `id` in the most recent slot; returns the apps that lost theirs
    /// (the least recently activated, when the slots were full).
    mutating func take(_ id: AppID) -> [AppID] {
        apps.removeAll { $0 == id }
        apps.append(id)
        let evicted = Array(apps.prefix(max(0, apps.count - slots)))
        apps.removeFirst(evicted.count)
        return evicted
    }

    mutating func remove(_ id: AppID) { apps.removeAll { $0 == id } }

    /// The same front with `slots` slots (a restart on a changed config):
    /// with fewer, the least recently activated apps lose theirs.
    func resized(to slots: Int) -> Foreground {
        var f = Foreground(slots: slots)
        f.apps = Array(apps.suffix(slots))
        f.interruptions = interruptions
        f.locked = locked
        return f
    }

    /// Empties every slot ("home"); returns who held them.
    mutating func clear() -> [AppID] {
        defer { apps = [] }
        return apps
    }

    /// Returns true when this is the first interruption (the front changes).
    mutating func beginInterruption() -> Bool {
        interruptions += 1
        return interruptions == 1
    }

    /// Nil when no interruption is in progress; true when the last one ended.
    mutating func endInterruption() -> Bool? {
        guard interruptions > 0 else { return nil }
        interruptions -= 1
        return interruptions == 0
    }

    /// False when it already was so.
    mutating func setLocked(_ value: Bool) -> Bool {
        guard locked != value else { return false }
        locked = value
        return true
    }
}
