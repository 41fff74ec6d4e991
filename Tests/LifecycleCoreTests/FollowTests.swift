import Foundation
import Testing

@testable import LifecycleCore

/// A compositor drives the front (Follow.swift, docs/focus.md): the rules
/// from windows to fronts, and what the core does with a front, on a
/// manual clock.
@Suite struct FollowTests {
    static func window(
        _ app: AppID?, _ display: DisplayID? = "main", focused: Bool = false, visible: Bool = true, rank: Int
    ) -> WindowFact {
        WindowFact(app: app, display: display, focused: focused, visible: visible, rank: rank)
    }

    @Test func theFocusedAppIsActiveAVisibleOneInactiveAHiddenOneLeaves() {
        let fronts = Follow.fronts(
            [
                Self.window("a", focused: true, rank: 0), Self.window("b", rank: 1),
                Self.window("c", visible: false, rank: 2), Self.window(nil, rank: 3),
            ], policies: ["main": .seat])
        #expect(fronts == ["main": ShownFront(visible: ["b", "a"], hidden: ["c"], focused: "a")])
    }

    @Test func anAppWithAVisibleWindowIsVisibleWhateverItsOtherWindows() {
        let fronts = Follow.fronts(
            [Self.window("a", visible: false, rank: 0), Self.window("a", rank: 3), Self.window("b", rank: 1)],
            policies: ["main": .seat])
        #expect(fronts["main"] == ShownFront(visible: ["a", "b"], hidden: [], focused: nil))
    }

    @Test func theSeatPolicyLeavesADisplayWithoutTheFocusWithNoActiveApp() {
        let windows = [
            Self.window("nav", "centre", focused: true, rank: 0),
            Self.window("gauge", "cluster", rank: 0), Self.window("media", "cluster", rank: 1),
        ]
        let seat = Follow.fronts(windows, policies: ["centre": .seat, "cluster": .seat])
        #expect(seat["cluster"] == ShownFront(visible: ["media", "gauge"], hidden: [], focused: nil))
        #expect(seat["centre"]?.focused == "nav")
        // Each display its own: the cluster keeps its most recently focused app active.
        let own = Follow.fronts(windows, policies: ["centre": .display, "cluster": .display])
        #expect(own["cluster"]?.focused == "gauge")
        #expect(own["centre"]?.focused == "nav")
    }

    @Test func anAppBelongsToTheDisplayOfItsBestWindowAndOthersCountForNothing() {
        let fronts = Follow.fronts(
            [
                Self.window("a", "cluster", visible: false, rank: 0), Self.window("a", "centre", rank: 2),
                Self.window("b", nil, visible: false, rank: 0),  // the scratchpad: on no display
                Self.window("c", "rear", rank: 0),  // a display nobody follows
            ], policies: ["centre": .seat, "cluster": .seat])
        #expect(fronts["centre"] == ShownFront(visible: ["a"], hidden: [], focused: nil))
        #expect(fronts["cluster"] == ShownFront())
    }

    @Test func theCoreShowsWhatTheCompositorShowsPastItsSlots() {
        var h = Harness(slots: 1, apps: ["a", "b", "c"])
        h.launchActive("a")
        h.launchActive("b")  // one slot: a goes to the background, and is frozen
        h.ackAll("a")
        #expect(h.state("a") == .suspended)
        h.launchActive("c")
        h.ackAll("b")
        // The compositor shows a and b side by side, b focused; c on another workspace.
        let shown = h.send(.shown("main", ShownFront(visible: ["a", "b"], hidden: ["c"], focused: "b")))
        let first = shown.first {
            if case .thaw("a") = $0 { return true }
            if case .deliver("a", _) = $0 { return true }
            return false
        }
        #expect(first == .thaw("a"), "thawed before anything is said to it")
        h.ackAll("a")
        h.ackAll("b")
        h.ackAll("c")
        #expect(h.state("a") == .inactive)
        #expect(h.state("b") == .active)
        #expect(h.state("c") == .suspended)
        // The focus moves to a: a active, b inactive; nothing else moves.
        h.eventsUntilQuiet("a", after: h.send(.shown("main", ShownFront(visible: ["b", "a"], focused: "a"))))
        h.ackAll("b")
        #expect(h.state("a") == .active)
        #expect(h.state("b") == .inactive)
        #expect(h.state("c") == .suspended, "an app the report does not mention keeps its place")
        // b's window hidden: b leaves the front, and is frozen.
        h.eventsUntilQuiet("b", after: h.send(.shown("main", ShownFront(visible: ["a"], hidden: ["b"], focused: "a"))))
        #expect(h.state("b") == .suspended)
        #expect(h.state("a") == .active)
    }

    /// A layer surface (a launcher, an on-screen keyboard) takes the
    /// keyboard: the compositor's interruption. Every shown app inactive,
    /// under either policy; nothing leaves the front, nothing is frozen;
    /// when it goes, the focused app is active again. It survives the save.
    @Test func anOverlayWithTheKeyboardIsAnInterruption() throws {
        let windows = [Self.window("a", focused: false, rank: 0), Self.window("b", rank: 1)]
        let fronts = Follow.fronts(windows, policies: ["main": .display], overlaid: ["main"])
        #expect(fronts["main"] == ShownFront(visible: ["b", "a"], hidden: [], focused: "a", overlaid: true))

        var h = Harness(slots: 1, apps: ["a", "b"])
        h.launchActive("a")
        h.launchActive("b")
        h.ackAll("a")
        h.send(.shown("main", ShownFront(visible: ["b", "a"], focused: "a")))
        h.ackAll("a")
        h.ackAll("b")
        #expect(h.state("a") == .active)
        h.eventsUntilQuiet(
            "a", after: h.send(.shown("main", ShownFront(visible: ["b", "a"], focused: "a", overlaid: true))))
        #expect(h.state("a") == .inactive)
        #expect(h.state("b") == .inactive)
        h.advance(.seconds(60))
        h.ackAll("a")
        h.ackAll("b")
        #expect(h.state("a") == .inactive && h.state("b") == .inactive, "shown: never sent to the background")
        let front = h.supervisor.displays["main"]!
        let back = try JSONDecoder().decode(Foreground.self, from: try JSONEncoder().encode(front))
        #expect(back == front && back.overlaid)
        // The launcher closes: a has the keyboard again.
        h.eventsUntilQuiet("a", after: h.send(.shown("main", ShownFront(visible: ["b", "a"], focused: "a"))))
        #expect(h.state("a") == .active)
        #expect(h.state("b") == .inactive)
    }

    /// The session's screen locker locks it (the follower reads logind):
    /// the followed display locked as by `lock`: its apps to the
    /// background and frozen after their grace, activations refused,
    /// `unlock` the locker's, not an operator's; an operator's own lock
    /// stays when the session unlocks. Saved with the display.
    @Test func theSessionsLockLocksTheDisplayUntilItsLockerUnlocks() throws {
        var h = Harness(slots: 1, apps: ["a", "b"])
        h.launchActive("a")
        h.send(.shown("main", ShownFront(visible: ["a"], focused: "a")))
        #expect(h.state("a") == .active)
        h.eventsUntilQuiet("a", after: h.send(.shown("main", ShownFront(visible: ["a"], focused: "a", locked: true))))
        #expect(h.state("a") == .suspended)
        #expect(h.supervisor.displays["main"]!.isLocked && h.supervisor.locked)
        #expect(h.send(.launch("b", .foreground)).contains(.refused(.screenLocked)))
        #expect(h.send(.display(nil, .unlock)).contains(.refused(.sessionLocked)))
        #expect(h.send(.display("main", .unlock)).contains(.refused(.sessionLocked)))
        let front = h.supervisor.displays["main"]!
        let back = try JSONDecoder().decode(Foreground.self, from: try JSONEncoder().encode(front))
        #expect(back == front && back.sessionLocked && !back.locked)
        // The locker unlocks: a, still shown and focused, active again.
        h.eventsUntilQuiet("a", after: h.send(.shown("main", ShownFront(visible: ["a"], focused: "a"))))
        #expect(h.state("a") == .active)
        // An operator's lock outlives the session's unlock.
        h.send(.display(nil, .lock))
        h.send(.shown("main", ShownFront(visible: ["a"], focused: "a", locked: true)))
        h.eventsUntilQuiet("a", after: h.send(.shown("main", ShownFront(visible: ["a"], focused: "a"))))
        #expect(h.supervisor.displays["main"]!.locked)
        #expect(h.state("a") != .active)
    }

    /// One window, one scene: an app with scenes whose windows the shell
    /// bound to its scenes `one` and `two`, both on the centre display.
    /// The rules hold scene by scene: the focused window's scene active,
    /// the other inactive; `two`'s window hidden, `two` leaves the front
    /// (background) while `one` stays active, and the app with it.
    @Test func eachWindowOfASceneAppIsOneScene() {
        let windows = [
            WindowFact(app: "s", scene: "one", display: "main", focused: true, visible: true, rank: 0),
            WindowFact(app: "s", scene: "two", display: "main", focused: false, visible: true, rank: 1),
        ]
        #expect(
            Follow.fronts(windows, policies: ["main": .seat])["main"]
                == ShownFront(visible: ["s/two", "s/one"], focused: "s/one"))

        var p = AppPolicy()
        p.scenes = true
        var h = Harness(slots: 1, ["s": p])
        h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "one", display: nil)))
        h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "two", display: nil)))
        #expect(
            h.linesUntilQuiet(
                "s", after: h.send(.shown("main", ShownFront(visible: ["s/two", "s/one"], focused: "s/one"))))
                == [
                    "sceneWillResignActive two main", "sceneWillEnterForeground one main",
                    "sceneDidBecomeActive one main",
                ])
        #expect(
            h.linesUntilQuiet(
                "s", after: h.send(.shown("main", ShownFront(visible: ["s/one"], hidden: ["s/two"], focused: "s/one"))))
                == ["sceneDidEnterBackground two main"])
        #expect(h.state("s") == .active)
        let scenes = h.supervisor.snapshot("s")!.scenes
        #expect(scenes.first { $0.name == "one" }?.state == .active)
        #expect(scenes.first { $0.name == "two" }?.state == .background)
    }

    /// An app with no window at all keeps its place, its activeness with
    /// it: activated by an operator (or launching, its window not there
    /// yet), it stays active through a report that focuses nothing of
    /// ours; a window of another app focused takes the focus from it.
    @Test func anAppWithNoWindowKeepsTheFocusTheCompositorDoesNotGiveElsewhere() {
        var h = Harness(slots: 1, apps: ["a", "b"])
        h.launchActive("b")
        h.send(.shown("main", ShownFront(visible: ["b"], focused: "b")))
        h.launchActive("a")  // no window: an operator's activation
        h.ackAll("b")
        #expect(h.state("a") == .active)
        h.eventsUntilQuiet("a", after: h.send(.shown("main", ShownFront(visible: ["b"]))))
        #expect(h.state("a") == .active, "the compositor focuses nothing of ours: a keeps the focus")
        #expect(h.state("b") == .inactive)
        h.eventsUntilQuiet("a", after: h.send(.shown("main", ShownFront(visible: ["b"], focused: "b"))))
        #expect(h.state("b") == .active)
        #expect(h.state("a") == .inactive, "b's window focused: the focus is b's")

        // Activated before the compositor's first report: the same.
        var first = Harness(slots: 1, apps: ["c"])
        first.launchActive("c")
        first.eventsUntilQuiet("c", after: first.send(.shown("main", ShownFront())))
        #expect(first.state("c") == .active)
    }

    @Test func anActivationOnAFollowedDisplayEvictsNothingShown() {
        var h = Harness(slots: 1, apps: ["a", "b", "c"])
        h.launchActive("a")
        h.launchActive("b")
        h.ackAll("a")
        h.send(.shown("main", ShownFront(visible: ["a", "b"], focused: "b")))
        h.ackAll("a")
        h.ackAll("b")
        // An operator's activate of c: c gets the focus; a and b stay shown (inactive).
        h.launchActive("c")
        h.ackAll("b")
        #expect(h.state("c") == .active)
        #expect(h.state("a") == .inactive)
        #expect(h.state("b") == .inactive)
    }

    @Test func aFollowedFrontSurvivesTheSaveAndAReconfiguredSlotCount() throws {
        var h = Harness(slots: 1, apps: ["a", "b"])
        h.launchActive("a")
        h.launchActive("b")
        h.send(.shown("main", ShownFront(visible: ["a", "b"], focused: "a")))
        let front = h.supervisor.displays["main"]!
        let data = try JSONEncoder().encode(front)
        let back = try JSONDecoder().decode(Foreground.self, from: data)
        #expect(back == front)
        #expect(back.followed && back.focus == SceneRef("a", SceneNames.main))
        #expect(front.resized(to: 1).scenes.count == 2, "what is shown is not cut to the slots")
    }

    /// The shell found the app playing audio when the core would freeze
    /// it: thawed and held in the background, never suspended while it
    /// plays; once it stops, suspended as any app sent home.
    @Test func anAppPlayingAudioIsHeldInTheBackground() {
        var h = Harness(slots: 1, apps: ["a"])
        h.launchActive("a")
        let home = h.send(.display("main", .home))
        h.eventsUntilQuiet("a", after: home)
        #expect(h.state("a") == .suspended)
        let held = h.send(.hold("a", generation: h.generation("a"), .audio, true))
        #expect(held.contains(.thaw("a")))
        #expect(h.state("a") == .background)
        h.advance(.seconds(3600))
        #expect(h.state("a") == .background, "held while it plays")
        #expect(h.supervisor.snapshot("a")!.holds == [.audio])
        let done = h.send(.hold("a", generation: h.generation("a"), .audio, false))
        #expect(done.contains(.freeze("a")))
        #expect(h.state("a") == .suspended)
    }
}
