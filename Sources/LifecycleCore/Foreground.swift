// Who is in front, display by display. The planner asks this room where a
// scene belongs instead of reading slots, the lock and interruptions itself.
// An app that does not use scenes has one, `main` (docs/lifecycle.md, "Scenes").

/// One scene of one app: what a foreground slot holds.
public struct SceneRef: Sendable, Hashable, Comparable, Codable, JSONWritable, CustomStringConvertible {
    public var app: AppID
    public var scene: SceneID

    /// As synthesized, by hand (LifecycleModel/JSONWriting.swift).
    public func write(json w: inout JSONWriter) throws {
        w.openObject()
        try w.field("app", app)
        try w.field("scene", scene)
        w.closeObject()
    }

    public init(_ app: AppID, _ scene: SceneID) {
        self.app = app
        self.scene = scene
    }

    public static func < (a: SceneRef, b: SceneRef) -> Bool { (a.app, a.scene) < (b.app, b.scene) }

    /// `app`, or `app/scene` for a scene other than main.
    public var description: String { scene == SceneNames.main ? app : "\(app)/\(scene)" }
}

/// The foreground of one display: a fixed number of slots, held by the
/// most recently activated scenes, a lock, and interruptions on top.
public struct Foreground: Sendable, Equatable, Codable, JSONWritable {
    public let name: DisplayID
    /// How many scenes may be in the foreground at once.
    public let slots: Int
    /// Scenes holding a slot, least recently activated first.
    public private(set) var scenes: [SceneRef] = []
    /// Interruptions in progress (alerts, banners); the front scenes are inactive.
    public private(set) var interruptions = 0
    public private(set) var locked = false
    /// A compositor's follower says what this display shows (Follow.swift):
    /// from then on only `focus` is active, the other front scenes inactive.
    public private(set) var followed = false
    /// The scene the follower says has the focus (nil: none of the front's).
    public private(set) var focus: SceneRef?
    /// The follower says something that is not a window has the keyboard
    /// here (a launcher, an on-screen keyboard): the compositor's
    /// interruption, every front scene inactive while it lasts. Apart from
    /// `interruptions`, which count what operators began and end.
    public private(set) var overlaid = false
    /// The follower says the user's session is locked (logind's LockedHint,
    /// set by the screen locker): locked as by `lock`, until it says
    /// otherwise. Apart from `locked`, which operators set and clear.
    public private(set) var sessionLocked = false
    /// Locked, by an operator or by the session: nothing is shown.
    public var isLocked: Bool { locked || sessionLocked }

    public init(name: DisplayID = SceneNames.defaultDisplay, slots: Int) {
        precondition(slots >= 1, "at least one foreground slot")
        self.name = name
        self.slots = slots
    }

    private enum CodingKeys: String, CodingKey {
        case name, slots, scenes, apps, interruptions, locked, followed, focus, overlaid, sessionLocked
    }

    /// A front saved before displays (0.14 and earlier) had no name and
    /// held apps: each is its app's main scene on the default display.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decodeIfPresent(DisplayID.self, forKey: .name) ?? SceneNames.defaultDisplay
        slots = try c.decode(Int.self, forKey: .slots)
        if let scenes = try c.decodeIfPresent([SceneRef].self, forKey: .scenes) {
            self.scenes = scenes
        } else {
            scenes = try (c.decodeIfPresent([AppID].self, forKey: .apps) ?? []).map { SceneRef($0, SceneNames.main) }
        }
        interruptions = try c.decodeIfPresent(Int.self, forKey: .interruptions) ?? 0
        locked = try c.decodeIfPresent(Bool.self, forKey: .locked) ?? false
        followed = try c.decodeIfPresent(Bool.self, forKey: .followed) ?? false
        focus = try c.decodeIfPresent(SceneRef.self, forKey: .focus)
        overlaid = try c.decodeIfPresent(Bool.self, forKey: .overlaid) ?? false
        sessionLocked = try c.decodeIfPresent(Bool.self, forKey: .sessionLocked) ?? false
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(name, forKey: .name)
        try c.encode(slots, forKey: .slots)
        try c.encode(scenes, forKey: .scenes)
        try c.encode(interruptions, forKey: .interruptions)
        try c.encode(locked, forKey: .locked)
        if followed { try c.encode(followed, forKey: .followed) }
        try c.encode(ifPresent: focus, forKey: .focus)
        if overlaid { try c.encode(overlaid, forKey: .overlaid) }
        if sessionLocked { try c.encode(sessionLocked, forKey: .sessionLocked) }
    }

    /// The same, by hand (LifecycleModel/JSONWriting.swift): the save's
    /// front part, written again whenever the front changes.
    public func write(json w: inout JSONWriter) throws {
        w.openObject()
        try w.field("name", name)
        try w.field("slots", slots)
        w.key("scenes")
        try w.array(scenes)
        try w.field("interruptions", interruptions)
        try w.field("locked", locked)
        try w.field("followed", followed, unless: false)
        try w.field("focus", ifPresent: focus)
        try w.field("overlaid", overlaid, unless: false)
        try w.field("sessionLocked", sessionLocked, unless: false)
        w.closeObject()
    }

    /// The apps with a scene in a slot, least recently activated first.
    public var apps: [AppID] {
        var seen: Set<AppID> = []
        return scenes.map(\.app).filter { seen.insert($0).inserted }
    }

    func holds(_ ref: SceneRef) -> Bool { scenes.contains(ref) }
    func holds(app id: AppID) -> Bool { scenes.contains { $0.app == id } }

    /// Where the front wants the scene: active, inactive under an
    /// interruption, or nil when it is not shown (not in a slot, or locked).
    func placement(_ ref: SceneRef) -> Placement? {
        guard !isLocked, holds(ref) else { return nil }
        if followed && (focus != ref || overlaid) { return .interrupted }  // shown, without the focus: inactive
        return interruptions > 0 ? .interrupted : .front
    }

    enum Placement: Comparable { case interrupted, front }

    /// Puts `ref` in the most recent slot; returns the scenes that lost
    /// theirs (the least recently activated, when the slots were full).
    mutating func take(_ ref: SceneRef) -> [SceneRef] {
        scenes.removeAll { $0 == ref }
        scenes.append(ref)
        if followed { focus = ref }  // until the compositor says otherwise
        // Followed, the compositor decides what leaves: nothing shown is evicted.
        let evicted = followed ? [] : Array(scenes.prefix(max(0, scenes.count - slots)))
        scenes.removeFirst(evicted.count)
        return evicted
    }

    mutating func remove(_ ref: SceneRef) {
        scenes.removeAll { $0 == ref }
        if focus == ref { focus = nil }
    }
    mutating func remove(app id: AppID) {
        scenes.removeAll { $0.app == id }
        if focus?.app == id { focus = nil }
    }

    /// What the compositor shows (Follow.swift): `shown` enter the front
    /// (least recently focused first; past the slots if need be: what the
    /// user sees is never sent to the background), `hidden` leave it, the
    /// rest keep their place; `focus` is the one active scene, unless the
    /// display is `overlaid`; `sessionLocked` the session's lock.
    mutating func show(
        _ shown: [SceneRef], hidden: Set<SceneRef>, focus: SceneRef?, overlaid: Bool = false,
        sessionLocked: Bool = false
    ) {
        scenes.removeAll { hidden.contains($0) || shown.contains($0) }
        scenes.append(contentsOf: shown)
        if let focus, let i = scenes.firstIndex(of: focus) { scenes.append(scenes.remove(at: i)) }
        followed = true
        self.overlaid = overlaid
        self.sessionLocked = sessionLocked
        self.focus = focus.flatMap { scenes.contains($0) ? $0 : nil }
    }

    /// The same front with `slots` slots (a restart on a changed config):
    /// with fewer, the least recently activated scenes lose theirs.
    func resized(to slots: Int) -> Foreground {
        var f = Foreground(name: name, slots: slots)
        f.scenes = followed ? scenes : Array(scenes.suffix(slots))
        f.interruptions = interruptions
        f.locked = locked
        f.followed = followed
        f.overlaid = overlaid
        f.sessionLocked = sessionLocked
        f.focus = focus.flatMap { f.scenes.contains($0) ? $0 : nil }
        return f
    }

    /// Empties every slot ("home"); returns who held them.
    mutating func clear() -> [SceneRef] {
        defer {
            scenes = []
            focus = nil
        }
        return scenes
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

/// A display as the configuration declares it: its name and its slots.
public struct DisplaySpec: Sendable, Equatable, Codable {
    public var name: DisplayID
    public var slots: Int
    public init(name: DisplayID, slots: Int) {
        self.name = name
        self.slots = slots
    }
    /// What a daemon file that declares no display has: one, `main`.
    public static func single(slots: Int) -> [DisplaySpec] {
        [DisplaySpec(name: SceneNames.defaultDisplay, slots: slots)]
    }
}

/// Every display's foreground, in the order the configuration declares
/// them: the first is the default (where an app goes when none is named).
public struct Displays: Sendable, Equatable, Codable, JSONWritable {
    public private(set) var all: [Foreground]

    /// As synthesized, by hand (LifecycleModel/JSONWriting.swift).
    public func write(json w: inout JSONWriter) throws {
        w.openObject()
        w.key("all")
        try w.array(all)
        w.closeObject()
    }

    private enum CodingKeys: String, CodingKey { case all }

    /// Saved before displays (0.14 and earlier): one foreground.
    public init(from decoder: any Decoder) throws {
        if let c = try? decoder.container(keyedBy: CodingKeys.self), c.contains(.all) {
            all = try c.decode([Foreground].self, forKey: .all)
        } else {
            all = [try Foreground(from: decoder)]
        }
        if all.isEmpty {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "no display"))
        }
    }

    init(_ specs: [DisplaySpec]) {
        precondition(!specs.isEmpty, "at least one display")
        all = specs.map { Foreground(name: $0.name, slots: $0.slots) }
    }

    public var names: [DisplayID] { all.map(\.name) }
    public var first: DisplayID { all[0].name }

    public subscript(name: DisplayID) -> Foreground? { all.first { $0.name == name } }

    /// Changes the display named `name` (which must exist).
    mutating func with<T>(_ name: DisplayID, _ body: (inout Foreground) -> T) -> T {
        let i = all.firstIndex { $0.name == name }!
        return body(&all[i])
    }

    mutating func forEach(_ body: (inout Foreground) -> Void) {
        for i in all.indices { body(&all[i]) }
    }

    func placement(_ ref: SceneRef, on display: DisplayID) -> Foreground.Placement? {
        self[display]?.placement(ref)
    }

    func holds(app id: AppID) -> Bool { all.contains { $0.holds(app: id) } }

    mutating func remove(app id: AppID) { forEach { $0.remove(app: id) } }

    /// The saved displays under today's configuration: a display kept keeps
    /// its front (resized), one added starts empty, one gone is dropped
    /// (its scenes go back to the background).
    func reconfigured(to specs: [DisplaySpec]) -> Displays {
        var d = Displays(specs)
        for i in d.all.indices {
            if let old = self[d.all[i].name] { d.all[i] = old.resized(to: d.all[i].slots) }
        }
        return d
    }
}
