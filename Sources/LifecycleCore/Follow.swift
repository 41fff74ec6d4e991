// A compositor drives the front (docs/focus.md). A follower in the user's
// session reports every window it sees; the shell says which app owns
// each (by its process's cgroup, or its app_id) and which display its
// output belongs to; the rules here turn those facts into each display's
// front: the focused app active, an app with a visible window inactive, an
// app whose windows are all hidden out of the front (background, then
// suspended after its grace), an app with no window where it was. For an
// app with scenes whose window the shell bound to one of its scenes, the
// same rules hold scene by scene: one window, one scene.

/// Why the shell holds an app from freezing, beyond what the core knows
/// (tasks, continuous modes, wake-ups): what a frozen app would harm.
public enum Hold: String, Sendable, Equatable, Hashable, Comparable, Codable, CaseIterable {
    /// One of its processes holds an audio playback device open.
    case audio
    /// The compositor's follower was lost while the app's windows were
    /// hidden: shown since, perhaps; nothing is frozen on window grounds
    /// until the follower is back.
    case followerLost = "follower-lost"

    public static func < (a: Hold, b: Hold) -> Bool { a.rawValue < b.rawValue }
}

/// Which app a followed display makes active.
public enum FocusPolicy: String, Sendable, Equatable, Codable, CaseIterable {
    /// Only the app with the seat's keyboard focus, wherever it is (a desktop).
    case seat
    /// Each display its own most recently focused visible app (a car's
    /// cluster and centre screen, a multi-screen kiosk): touching one
    /// screen leaves the other's app active.
    case display
}

/// What a window shows: its app's scene on the window's display, or, for
/// an app with scenes whose window the shell bound to one, that scene.
public struct ShownScene: Sendable, Hashable, Comparable, Codable, ExpressibleByStringLiteral,
    CustomStringConvertible
{
    public var app: AppID
    /// Nil: the app's most recent scene on the display (an app without
    /// scenes: its one scene, `main`).
    public var scene: SceneID?

    public init(_ app: AppID, _ scene: SceneID? = nil) {
        self.app = app
        self.scene = scene
    }

    /// `app`, or `app/scene`.
    public init(stringLiteral value: String) {
        let parts = value.split(separator: "/", maxSplits: 1).map(String.init)
        self.init(parts[0], parts.count > 1 ? parts[1] : nil)
    }

    public static func < (a: ShownScene, b: ShownScene) -> Bool { (a.app, a.scene ?? "") < (b.app, b.scene ?? "") }
    public var description: String { scene.map { "\(app)/\($0)" } ?? app }
}

/// One window as the shell knows it.
public struct WindowFact: Sendable, Equatable {
    /// The app it belongs to; nil: unmanaged (never touched).
    public var app: AppID?
    /// The scene of `app` it shows, when the shell bound it to one.
    public var scene: SceneID?
    /// The display its output belongs to; nil: none (a hidden scratchpad,
    /// an output no display lists).
    public var display: DisplayID?
    /// It has the seat's focus.
    public var focused: Bool
    /// The compositor shows it (its workspace is shown, it is not
    /// minimised, under a fullscreen window or in the scratchpad).
    public var visible: Bool
    /// How recently it had the focus on its output: 0 the most recent.
    public var rank: Int

    public init(app: AppID?, scene: SceneID? = nil, display: DisplayID?, focused: Bool, visible: Bool, rank: Int) {
        self.app = app
        self.scene = scene
        self.display = display
        self.focused = focused
        self.visible = visible
        self.rank = rank
    }
}

/// What one display shows, app (or scene) by app.
public struct ShownFront: Sendable, Equatable, Codable {
    /// Apps (scenes) with a visible window here, the least recently focused first.
    public var visible: [ShownScene]
    /// Apps (scenes) with windows here, none of them visible.
    public var hidden: [ShownScene]
    /// The app (scene) to make active (nil: none).
    public var focused: ShownScene?
    /// Something that is not a window has the keyboard here (a launcher, an
    /// on-screen keyboard, a notification that takes input: a layer
    /// surface): an interruption, every shown app inactive.
    public var overlaid: Bool
    /// The user's session is locked (its screen locker says so): locked
    /// as by `lock`, nothing shown.
    public var locked: Bool

    public init(
        visible: [ShownScene] = [], hidden: [ShownScene] = [], focused: ShownScene? = nil, overlaid: Bool = false,
        locked: Bool = false
    ) {
        self.visible = visible
        self.hidden = hidden
        self.focused = focused
        self.overlaid = overlaid
        self.locked = locked
    }
}

public enum Follow {
    /// Each followed display's front, from every window the follower saw.
    /// An app belongs to the display of its best window (the focused one,
    /// else a visible one, else the most recently focused); unmanaged
    /// windows and windows on no display count for nothing.
    /// `overlaid`: the displays where something that is not a window has
    /// the keyboard; `locked`: the session is locked (every display).
    public static func fronts(
        _ windows: [WindowFact], policies: [DisplayID: FocusPolicy], overlaid: Set<DisplayID> = [], locked: Bool = false
    ) -> [DisplayID: ShownFront] {
        struct Seen {
            var visibleRank: Int?
            var focused = false
        }
        let managed = windows.filter { $0.app != nil && $0.display.map { policies[$0] != nil } == true }
        func unit(_ w: WindowFact) -> ShownScene { ShownScene(w.app!, w.scene) }
        // First the display of each app's (scene's) best window, then what it has there.
        var best: [ShownScene: (key: (Int, Int, Int), display: DisplayID)] = [:]
        for w in managed {
            let key = (w.focused ? 0 : 1, w.visible ? 0 : 1, w.rank)
            if let b = best[unit(w)], b.key <= key { continue }
            best[unit(w)] = (key, w.display!)
        }
        var apps: [ShownScene: (display: DisplayID, seen: Seen)] = [:]
        for w in managed where best[unit(w)]?.display == w.display {
            var seen = apps[unit(w)]?.seen ?? Seen()
            if w.visible { seen.visibleRank = min(seen.visibleRank ?? w.rank, w.rank) }
            if w.focused && w.visible { seen.focused = true }
            apps[unit(w)] = (w.display!, seen)
        }
        var fronts: [DisplayID: ShownFront] = [:]
        for (display, policy) in policies {
            let here = apps.filter { $0.value.display == display }.mapValues(\.seen)
            // The least recently focused first; ties by name, so the order is one.
            let visible = here.compactMap { app, seen in seen.visibleRank.map { (app, $0) } }
                .sorted { ($0.1, $0.0) > ($1.1, $1.0) }.map(\.0)
            let hidden = here.filter { $0.value.visibleRank == nil }.map(\.key).sorted()
            let seat = here.first { $0.value.focused }?.key
            let focused: ShownScene? =
                switch policy {
                case .seat: seat
                case .display: seat ?? visible.last
                }
            fronts[display] = ShownFront(
                visible: visible, hidden: hidden, focused: focused, overlaid: overlaid.contains(display), locked: locked
            )
        }
        return fronts
    }
}

extension Supervisor {
    /// What display `d` shows, from its follower.
    mutating func shown(_ d: DisplayID, _ front: ShownFront) {
        guard let before = displays[d] else { return refuse(.unknownDisplay(d)) }
        /// The app's scene on `d` (the one named, for a window bound to a
        /// scene), brought there when it is on another display; nil for an
        /// app not running or on its way out.
        func scene(_ shown: ShownScene, bring: Bool) -> SceneRef? {
            let id = shown.app
            guard let app = apps[id], app.phase != .notRunning, app.stop == nil, app.killing == nil else { return nil }
            if let name = shown.scene, let record = app.scenes[name], !record.discarding {
                if bring && record.display != d { prepareScene(id, name, on: d) }
                return SceneRef(id, name)
            }
            if let name = mostRecentScene(id, on: d) { return SceneRef(id, name) }
            guard bring, case .success(let (name, _)) = resolveScene(id, scene: nil, display: d) else { return nil }
            prepareScene(id, name, on: d)
            return SceneRef(id, name)
        }
        let pairs = front.visible.compactMap { s in scene(s, bring: true).map { (s, $0) } }
        // Two windows may come to one scene (an unbound one shows the app's
        // most recent): once, where it is the most recently focused.
        var shown: [SceneRef] = []
        for ref in pairs.map(\.1).reversed() where !shown.contains(ref) { shown.insert(ref, at: 0) }
        let hidden = Set(front.hidden.compactMap { scene($0, bring: false) }).subtracting(shown)
        var focus = front.focused.flatMap { f in pairs.first { $0.0 == f }?.1 }
        // The compositor focuses nothing of ours: an app with no window at
        // all that has the focus (a windowless app an operator activated, an
        // app whose window is not there yet) keeps it: it keeps its place.
        // Before the first report, the focus is the most recent front scene.
        if focus == nil, let kept = before.followed ? before.focus : before.scenes.last,
            !(front.visible + front.hidden).contains(where: { $0.app == kept.app })
        {
            focus = kept
        }
        if let focus, focus != before.focus { recordUse(focus.app) }
        displays.with(d) {
            $0.show(shown, hidden: hidden, focus: focus, overlaid: front.overlaid, sessionLocked: front.locked)
        }
        // Shown here: in no other display's front.
        for other in displays.names where other != d {
            displays.with(other) { f in for ref in shown { f.remove(ref) } }
        }
        let after = displays[d]!
        guard after != before else { return }
        var concerned = Set(before.scenes.map(\.app)).union(after.scenes.map(\.app)).union(hidden.map(\.app))
        if let f = before.focus { concerned.insert(f.app) }
        for id in concerned.sorted() {
            sync(id)
            advance(id)
        }
    }
}
