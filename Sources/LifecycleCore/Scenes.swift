// Scenes and displays (docs/lifecycle.md, "Scenes"). Since iOS 13 an app may
// show several scenes, each with its own lifecycle; the app's state is its
// most active scene's. Here:
//
//   where        each scene is on one display; a display's slots hold scenes
//   which        `activate` names a scene, or gets the app's most recent one
//   the order    the app is never less active than any of its scenes: it
//                enters the foreground before its first scene does, becomes
//                active before its first scene does, and leaves after its
//                last one (`sceneTurn`)
//   moving       a scene shown on another display leaves the old one through
//                the background, then comes up on the new one
//   discarding   the app switcher's swipe: the scene is disconnected, its
//                session forgotten, and the app told (didDiscardSceneSessions)
//                now, or after its next launch
//   memory       at critical, background scenes of running apps are
//                disconnected (sessions kept) before any app is killed
//
// An app that does not opt in has one implicit scene, `main`, and hears only
// the app-level events, exactly as before scenes existed.

/// One scene session of an app.
struct SceneRecord: Sendable, Equatable, Codable {
    /// The display it is shown on.
    var display: DisplayID
    /// Where it has been told it is (scene apps; `main` of an app without
    /// scenes is never told: the app is).
    var told: SceneState = .unattached
    /// When it was last activated: `activate` with no scene takes the most recent.
    var lastUsed: Instant = .zero
    /// Connected before: a connection after this one is "restored".
    var connectedBefore = false
    /// Shown on `display` now, but still in the foreground of this one: it
    /// goes through the background first.
    var leaving: DisplayID?
    /// Discarded by the user: disconnected, then forgotten.
    var discarding = false
    /// Disconnected (or being disconnected) for memory: stays unattached
    /// until shown again.
    var shed = false

    init(display: DisplayID) { self.display = display }

    /// The display its events name: where it is in the foreground.
    var shownOn: DisplayID { leaving ?? display }
}

extension SceneRecord: JSONWritable {
    /// As synthesized (LifecycleModel/JSONWriting.swift): a field added
    /// above goes here too.
    func write(json w: inout JSONWriter) throws {
        w.openObject()
        try w.field("display", display)
        try w.field("told", told)
        try w.field("lastUsed", lastUsed)
        try w.field("connectedBefore", connectedBefore)
        try w.field("leaving", ifPresent: leaving)
        try w.field("discarding", discarding)
        try w.field("shed", shed)
        w.closeObject()
    }
}

extension SceneState {
    /// unattached -1, background 0, inactive 1, active 2.
    var level: Int { rank - 1 }
}

extension Supervisor.Target {
    /// The app-level counterpart of a scene's level (suspended counts as
    /// background, terminated as unattached).
    var level: Int {
        switch self {
        case .active: 2
        case .inactive: 1
        case .background, .suspended: 0
        case .terminated: -1
        }
    }
}

extension Supervisor {
    // MARK: - Where

    /// The display an app goes to when none is named.
    func defaultDisplay(_ id: AppID) -> DisplayID {
        if let d = apps[id]?.policy.display, displays[d] != nil { return d }
        return displays.first
    }

    /// Where the front wants the app: its most prominent scene's placement
    /// (a scene leaving a display is not placed).
    func placement(of id: AppID) -> Foreground.Placement? {
        guard let app = apps[id] else { return nil }
        return app.scenes.compactMap { name, scene in
            scene.leaving == nil ? displays.placement(SceneRef(id, name), on: scene.display) : nil
        }.max()
    }

    /// In a slot of an unlocked display.
    func shown(_ id: AppID) -> Bool { placement(of: id) != nil }

    /// Launched and not yet placed: inactive when shown, or while a scene
    /// of it is still in the foreground (on its way out).
    func launchedInFront(_ id: AppID) -> Bool {
        shown(id) || apps[id]?.scenes.values.contains { $0.told > .background } == true
    }

    /// A scene of the app is on its way from one display to another.
    func moving(_ id: AppID) -> Bool { apps[id]?.scenes.values.contains { $0.leaving != nil } == true }

    /// Scenes told active on display `d` (an app without scenes: its main
    /// scene, when the app is active), but `except`.
    func activeScenes(on d: DisplayID, except: SceneRef? = nil) -> Int {
        var n = 0
        // Only an active app holds one (AppTable.active).
        for id in apps.active {
            guard let app = apps[id] else { continue }
            n += Self.activeScenes(id, app, on: d, except: except)
        }
        return n
    }

    /// The same count over every app, for the invariants: it holds the
    /// index of active apps to the table.
    func activeScenesOfEveryApp(on d: DisplayID) -> Int {
        apps.reduce(0) { $0 + Self.activeScenes($1.key, $1.value, on: d, except: nil) }
    }

    private static func activeScenes(_ id: AppID, _ app: AppRecord, on d: DisplayID, except: SceneRef?) -> Int {
        var n = 0
        for (name, scene) in app.scenes where scene.shownOn == d && SceneRef(id, name) != except {
            let active = app.policy.scenes ? scene.told == .active : app.state == .active
            if active { n += 1 }
        }
        return n
    }

    /// The scene `activate` means: the one named; else the app's most
    /// recent on the display named (or anywhere, when none is); else a new
    /// one, `main` or, when `main` is on another display, named after the
    /// display. Refused when a name is bad or the app does not use scenes.
    func resolveScene(_ id: AppID, scene: SceneID?, display: DisplayID?) -> Result<(SceneID, DisplayID), Refusal> {
        let app = apps[id]!
        if let display, displays[display] == nil { return .failure(.unknownDisplay(display)) }
        if let scene {
            guard SceneNames.valid(scene) else { return .failure(.badSceneName(scene)) }
            guard app.policy.scenes || scene == SceneNames.main else { return .failure(.noScenes(id)) }
            if app.scenes[scene] == nil, app.policy.scenes, app.scenes.count >= app.policy.maxScenes {
                return .failure(.tooManyScenes(id, app.policy.maxScenes))
            }
            return .success((scene, display ?? app.scenes[scene]?.display ?? defaultDisplay(id)))
        }
        if !app.policy.scenes {
            return .success((SceneNames.main, display ?? app.scenes[SceneNames.main]?.display ?? defaultDisplay(id)))
        }
        if let recent = mostRecentScene(id, on: display) { return .success((recent, app.scenes[recent]!.display)) }
        let d = display ?? defaultDisplay(id)
        for name in [SceneNames.main, d] where app.scenes[name] == nil {
            if app.scenes.count >= app.policy.maxScenes { return .failure(.tooManyScenes(id, app.policy.maxScenes)) }
            return .success((name, d))
        }
        return .failure(.sceneNeeded(id, d))
    }

    // MARK: - Commands

    /// `activate APP [--display D] [--scene S]`.
    mutating func activateScene(_ id: AppID, scene: SceneID?, display: DisplayID?) {
        let (name, d): (SceneID, DisplayID)
        switch resolveScene(id, scene: scene, display: display) {
        case .failure(let why): return refuse(why)
        case .success(let found): (name, d) = found
        }
        if displays[d]!.isLocked { return refuse(.screenLocked) }
        let app = apps[id]!
        if app.phase != .notRunning, app.stop != nil || app.killing != nil { return refuse(.stopping(id)) }
        prepareScene(id, name, on: d)
        app.startable ? launch(id, .foreground) : bringToFront(id)
    }

    /// The scene exists, on `d`, and is the app's most recent: what
    /// `takeForegroundSlot` shows next.
    mutating func prepareScene(_ id: AppID, _ name: SceneID, on d: DisplayID) {
        let now = now
        update(id) {
            var scene = $0.scenes[name] ?? SceneRecord(display: d)
            if scene.display != d {
                // Moving: it leaves the display it is in the foreground of first.
                let inFront = $0.policy.scenes ? scene.told > .background : $0.state == .active || $0.state == .inactive
                if scene.leaving == nil, $0.phase != .notRunning, inFront {
                    scene.leaving = scene.display
                }
                scene.display = d
            }
            // The most recent, strictly (two activations may share an instant).
            let latest = $0.scenes.filter { $0.key != name }.map(\.value.lastUsed).max()
            scene.lastUsed = latest.map { max(now, $0 + .nanoseconds(1)) } ?? now
            scene.shed = false
            scene.discarding = false  // shown again before it was gone: kept
            $0.scenes[name] = scene
        }
        for other in displays.names where other != d { displays.with(other) { $0.remove(SceneRef(id, name)) } }
    }

    /// The scene `activate` with nothing named would show, ready to show.
    mutating func defaultScene(_ id: AppID) -> SceneRef? {
        guard case .success(let (name, d)) = resolveScene(id, scene: nil, display: nil) else { return nil }
        if apps[id]!.scenes[name] == nil { prepareScene(id, name, on: d) }
        return SceneRef(id, name)
    }

    /// The scene an openURL to a scene app names: its most recent.
    func defaultSceneContext(_ id: AppID) -> SceneContext? {
        guard apps[id]?.policy.scenes == true, let name = mostRecentScene(id) else { return nil }
        return SceneContext(scene: name, display: apps[id]!.scenes[name]!.shownOn, restored: nil)
    }

    /// The app's most recently activated scene (on `display`, when named).
    func mostRecentScene(_ id: AppID, on display: DisplayID? = nil) -> SceneID? {
        apps[id]!.scenes.filter { display == nil || $0.value.display == display }
            .max { ($0.value.lastUsed, $1.key) < ($1.value.lastUsed, $0.key) }?.key
    }

    /// The display the app's next activation would use, for the lock check.
    func displayOf(_ id: AppID) -> DisplayID {
        guard case .success(let (_, d)) = resolveScene(id, scene: nil, display: nil) else { return defaultDisplay(id) }
        return d
    }

    /// `discard APP SCENE`.
    mutating func discard(_ id: AppID, _ name: SceneID) {
        let app = apps[id]!
        guard app.policy.scenes else { return refuse(.noScenes(id)) }
        guard let scene = app.scenes[name] else { return refuse(.unknownScene(id, name)) }
        displays.forEach { $0.remove(SceneRef(id, name)) }
        if scene.told == .unattached {
            update(id) {
                $0.scenes[name] = nil
                $0.discarded.append(name)
            }
        } else {
            update(id) { $0.scenes[name]!.discarding = true }
        }
        advance(id)
    }

    /// One display's home, interruptions and lock.
    mutating func displayCommand(_ d: DisplayID, _ command: DisplayCommand) {
        guard displays[d] != nil else { return refuse(.unknownDisplay(d)) }
        switch command {
        case .home:
            for ref in displays.with(d, { $0.clear() }) { sync(ref.app); advance(ref.app) }
            // A restart under way brings its app back in front only if
            // nobody went home meanwhile: the apps with one (AppTable keeps
            // them), not every app, at every home.
            for id in apps.restartingToFront.sorted() where displayOf(id) == d {
                update(id) { $0.restartTo = .background }
            }
        case .interruptionBegan:
            if displays.with(d, { $0.beginInterruption() }) { advanceFront(of: d) }
        case .interruptionEnded:
            guard let last = displays.with(d, { $0.endInterruption() }) else { return refuse(.noInterruption) }
            if last { advanceFront(of: d) }
        case .lock, .unlock:
            guard displays.with(d, { $0.setLocked(command == .lock) }) else {
                if command == .unlock && displays[d]!.sessionLocked { return refuse(.sessionLocked) }
                return refuse(command == .lock ? .alreadyLocked : .notLocked)
            }
            advanceFront(of: d)
        }
    }

    mutating func advanceFront(of d: DisplayID) {
        for id in displays[d]!.apps { sync(id); advance(id) }
    }

    // MARK: - The order of events

    enum SceneTurn { case delivered, appMay, wait }

    /// Where the scene is wanted: connected and active, inactive or in the
    /// background, or unattached (the app is stopping, the scene was
    /// discarded or shed, or it never connected and is not shown).
    func sceneTarget(_ id: AppID, _ name: SceneID, _ scene: SceneRecord, _ app: AppRecord) -> SceneState {
        if app.stop != nil || scene.discarding || scene.shed { return .unattached }
        if scene.leaving != nil { return min(scene.told, .background) }
        switch displays.placement(SceneRef(id, name), on: scene.display) {
        case .front?: return .active
        case .interrupted?: return .inactive
        case nil: return scene.told == .unattached ? .unattached : .background
        }
    }

    /// For an app with scenes, settled where it is told `told`: the next
    /// scene event, or whether the app itself may step now. Scenes go down
    /// before the app, and up after it, one level at a time.
    mutating func sceneTurn(_ id: AppID, told: Told, goal: Target) -> SceneTurn {
        let app = apps[id]!
        let level: Int
        switch told {
        case .launched: level = launchedInFront(id) ? 1 : 0
        case .background: level = 0
        case .inactive: level = 1
        case .active: level = 2
        }
        let highest = app.scenes.values.map(\.told.level).max() ?? -1
        if goal.level < level && level > highest { return .appMay }
        let names = app.scenes.keys.sorted()
        for name in names {
            let scene = app.scenes[name]!
            let want = sceneTarget(id, name, scene, app)
            guard scene.told > want else { continue }
            let event: LifecycleEvent =
                switch scene.told {
                case .active: .sceneWillResignActive
                case .inactive: .sceneDidEnterBackground
                default: .sceneDidDisconnect
                }
            deliverScene(id, name, event)
            return .delivered
        }
        if goal.level > level && level <= highest { return .appMay }
        for name in names {
            let scene = app.scenes[name]!
            let want = sceneTarget(id, name, scene, app)
            guard scene.told < want, scene.told.level + 1 <= level else { continue }
            let event: LifecycleEvent
            switch scene.told {
            case .unattached: event = .sceneWillConnect
            case .background: event = .sceneWillEnterForeground
            default:
                // Never more active scenes on a display than its slots.
                let slots = displays[scene.display]?.slots ?? 1
                if activeScenes(on: scene.display, except: SceneRef(id, name)) >= slots { continue }
                event = .sceneDidBecomeActive
            }
            deliverScene(id, name, event)
            return .delivered
        }
        return goal.level > level ? .wait : .appMay
    }

    /// Sends one scene event and moves the scene's told state.
    mutating func deliverScene(_ id: AppID, _ name: SceneID, _ event: LifecycleEvent) {
        let scene = apps[id]!.scenes[name]!
        let context = SceneContext(
            scene: name, display: scene.shownOn,
            restored: event == .sceneWillConnect ? scene.connectedBefore : nil)
        // Launched to open a URL: the first scene connected gets it as a
        // connection option (iOS's URL contexts).
        let url = event == .sceneWillConnect && apps[id]!.launchReason == .url ? apps[id]!.launchURL : nil
        update(id) {
            if url != nil { $0.launchURL = nil }
            var s = $0.scenes[name]!
            s.told = event.sceneState!
            if event == .sceneWillConnect { s.connectedBefore = true }
            if s.told <= .background { s.leaving = nil }
            if event == .sceneDidDisconnect {
                // (A scene shed for memory stays marked so until shown again.)
                if s.discarding {
                    $0.scenes[name] = nil
                    $0.discarded.append(name)
                    return
                }
            }
            $0.scenes[name] = s
        }
        deliver(id, event, url: url, scene: context)
    }

    /// An app without scenes that moved display: once in the background
    /// (or not running) it has left the old one.
    mutating func settleMove(_ id: AppID) {
        guard let app = apps[id], !app.policy.scenes, app.scenes[SceneNames.main]?.leaving != nil else { return }
        switch app.phase {
        case .running(.active), .running(.inactive): return
        default: update(id) { $0.scenes[SceneNames.main]!.leaving = nil }
        }
    }

    /// What an ended run leaves of the scenes: sessions, unattached; those
    /// being discarded are forgotten and told at the next launch.
    mutating func scenesEnded(_ id: AppID, _ scenes: [SceneID: SceneRecord], discarded: [SceneID]) {
        update(id) {
            $0.discarded = discarded
            for (name, var scene) in scenes.sorted(by: { $0.key < $1.key }) {
                if scene.discarding {
                    $0.discarded.append(name)
                    continue
                }
                scene.told = .unattached
                scene.leaving = nil
                scene.shed = false
                $0.scenes[name] = scene
            }
        }
    }

    /// A user's quit of an app with scenes discards its sessions, as the
    /// switcher's swipe of the app does on iOS.
    mutating func discardAllScenes(_ id: AppID) {
        guard apps[id]!.policy.scenes, !apps[id]!.scenes.isEmpty else { return }
        update(id) {
            for name in $0.scenes.keys { $0.scenes[name]!.discarding = true }
        }
    }

    // MARK: - Memory

    /// At critical, before any app is killed: background scenes of apps
    /// that run (not suspended: thawing one to tell it would cost what is
    /// short) are disconnected. True when any was.
    mutating func shedScenes() -> Bool {
        var shed = false
        for id in appIDs {
            let app = apps[id]!
            guard app.policy.scenes, case .running = app.phase, killable(app), app.stop == nil else { continue }
            let names = app.scenes.keys.sorted().filter { name in
                let scene = app.scenes[name]!
                return scene.told == .background && !scene.discarding && !scene.shed
                    && displays.placement(SceneRef(id, name), on: scene.display) == nil
            }
            guard !names.isEmpty else { continue }
            for name in names {
                update(id) { $0.scenes[name]!.shed = true }
                effects.append(.sceneShed(id, name))
            }
            advance(id)
            shed = true
        }
        return shed
    }
}
