import Foundation
import Testing

@testable import LifecycleCore

/// Scenes and displays (Scenes.swift, docs/lifecycle.md "Scenes"), on a
/// manual clock: two displays, `centre` and `cluster`, one slot each.
@Suite struct SceneTests {
    static let displays = [DisplaySpec(name: "centre", slots: 1), DisplaySpec(name: "cluster", slots: 1)]

    static var scenes: AppPolicy {
        var p = AppPolicy()
        p.scenes = true
        return p
    }

    static func harness(_ apps: [AppID: AppPolicy] = ["s": scenes]) -> Harness {
        Harness(displays: displays, apps)
    }

    @Test func theOneDisplayOrderRepeatedPerSceneOnTwoDisplays() {
        var h = Self.harness()
        // Launch into the foreground with a scene on the centre display.
        #expect(
            h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "nav", display: "centre"))) == [
                "willFinishLaunching", "didFinishLaunching", "sceneWillConnect nav centre new",
                "sceneWillEnterForeground nav centre", "didBecomeActive", "sceneDidBecomeActive nav centre",
            ])
        // A second scene on the cluster: the app is active already.
        #expect(
            h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "gauge", display: "cluster"))) == [
                "sceneWillConnect gauge cluster new", "sceneWillEnterForeground gauge cluster",
                "sceneDidBecomeActive gauge cluster",
            ])
        // An interruption on the cluster only.
        #expect(
            h.linesUntilQuiet("s", after: h.send(.display("cluster", .interruptionBegan)))
                == ["sceneWillResignActive gauge cluster"])
        #expect(h.state("s") == .active)
        #expect(
            h.linesUntilQuiet("s", after: h.send(.display("cluster", .interruptionEnded)))
                == ["sceneDidBecomeActive gauge cluster"])
        // Home on the cluster only: the app stays in the foreground.
        #expect(
            h.linesUntilQuiet("s", after: h.send(.display("cluster", .home)))
                == ["sceneWillResignActive gauge cluster", "sceneDidEnterBackground gauge cluster"])
        #expect(h.state("s") == .active)
        // Home on the centre: its last foreground scene goes, and the app after it.
        #expect(
            h.linesUntilQuiet("s", after: h.send(.display("centre", .home))) == [
                "sceneWillResignActive nav centre", "willResignActive", "sceneDidEnterBackground nav centre",
                "didEnterBackground",
            ])
        #expect(h.state("s") == .suspended)
        // Back: the most recent scene (gauge, on the cluster), the app first.
        let back = h.send(.activate("s"))
        #expect(back.first == .thaw("s"))
        #expect(
            h.linesUntilQuiet("s", after: back) == [
                "willEnterForeground", "sceneWillEnterForeground gauge cluster", "didBecomeActive",
                "sceneDidBecomeActive gauge cluster",
            ])
        // Quit: scenes down and disconnected, then the app terminates.
        #expect(
            h.linesUntilQuiet("s", after: h.send(.stop("s"))) == [
                "sceneWillResignActive gauge cluster", "willResignActive", "sceneDidEnterBackground gauge cluster",
                "didEnterBackground", "sceneDidDisconnect gauge cluster", "sceneDidDisconnect nav centre",
                "willTerminate",
            ])
    }

    @Test func aSceneSentHomeOnOneDisplayLeavesTheAppInTheForeground() {
        var h = Self.harness(["s": Self.scenes, "b": AppPolicy()])
        h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "nav", display: "centre")))
        h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "media", display: "cluster")))
        // Another app takes the centre: nav goes to the background, media stays active.
        let effects = h.send(.activateScene("b", scene: nil, display: "centre"))
        #expect(
            h.linesUntilQuiet("s", after: effects)
                == ["sceneWillResignActive nav centre", "sceneDidEnterBackground nav centre"])
        h.ackAll("b")
        #expect(h.state("s") == .active)
        #expect(h.state("b") == .active)
        let scenes = h.supervisor.snapshot("s")!.scenes
        #expect(scenes.map(\.name) == ["media", "nav"])
        #expect(scenes.map(\.state) == [.active, .background])
        #expect(h.supervisor.displays["centre"]!.scenes == [SceneRef("b", "main")])
        #expect(h.supervisor.displays["cluster"]!.scenes == [SceneRef("s", "media")])
    }

    @Test func anAppWithoutScenesMovesBetweenDisplays() {
        var h = Self.harness(["a": AppPolicy()])
        #expect(
            h.linesUntilQuiet("a", after: h.send(.activate("a")))
                == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
        #expect(h.supervisor.displays["centre"]!.scenes == [SceneRef("a", "main")])
        let moved = h.send(.activateScene("a", scene: nil, display: "cluster"))
        #expect(
            h.linesUntilQuiet("a", after: moved)
                == ["willResignActive", "didEnterBackground", "willEnterForeground", "didBecomeActive"])
        #expect(!moved.contains(.freeze("a")), "through the background, not frozen")
        #expect(h.supervisor.displays["centre"]!.scenes.isEmpty)
        #expect(h.supervisor.displays["cluster"]!.scenes == [SceneRef("a", "main")])
        #expect(h.supervisor.snapshot("a")!.scenes.map(\.display) == ["cluster"])
        // Without a display named it stays where it is now.
        h.linesUntilQuiet("a", after: h.send(.home))
        h.linesUntilQuiet("a", after: h.send(.activate("a")))
        #expect(h.supervisor.displays["cluster"]!.scenes == [SceneRef("a", "main")])
    }

    @Test func aSceneMovesBetweenDisplaysThroughTheBackground() {
        var h = Self.harness()
        h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "nav", display: "centre")))
        #expect(
            h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "nav", display: "cluster"))) == [
                // The app stays in the foreground (inactive) while its scene moves.
                "sceneWillResignActive nav centre", "willResignActive", "sceneDidEnterBackground nav centre",
                "sceneWillEnterForeground nav cluster", "didBecomeActive", "sceneDidBecomeActive nav cluster",
            ])
        #expect(h.supervisor.displays["centre"]!.scenes.isEmpty)
    }

    @Test func discardingARunningScene() {
        var h = Self.harness()
        h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "nav", display: "centre")))
        h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "media", display: "cluster")))
        #expect(
            h.linesUntilQuiet("s", after: h.send(.discard("s", "media"))) == [
                "sceneWillResignActive media cluster", "sceneDidEnterBackground media cluster",
                "sceneDidDisconnect media cluster", "didDiscardSceneSessions media",
            ])
        #expect(h.supervisor.snapshot("s")!.scenes.map(\.name) == ["nav"])
        #expect(h.supervisor.displays["cluster"]!.scenes.isEmpty)
        #expect(h.send(.discard("s", "media")) == [.refused(.unknownScene("s", "media"))])
    }

    @Test func sessionsDiscardedWhileNotRunningAreToldAtTheNextLaunch() {
        var h = Self.harness()
        h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "nav", display: "centre")))
        h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "media", display: "cluster")))
        h.send(.kill("s"))  // not a quit of its sessions: a kill by the user is
        h.exit("s", .signaled(9))
        #expect(h.supervisor.snapshot("s")!.scenes.isEmpty, "a user's kill discards every session")
        let lines = h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "nav", display: "centre")))
        #expect(lines.prefix(3) == ["willFinishLaunching", "didFinishLaunching", "didDiscardSceneSessions media,nav"])
        #expect(lines.contains("sceneWillConnect nav centre new"), "a discarded session is new again")
    }

    @Test func aCrashKeepsTheSessionsAndTheNextLaunchRestoresThem() {
        var h = Self.harness()
        h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "nav", display: "centre")))
        h.exit("s", .signaled(11))  // a crash: the sessions stay
        #expect(h.supervisor.snapshot("s")!.scenes.map(\.state) == [.unattached])
        let lines = h.linesUntilQuiet("s", after: h.send(.activate("s")))
        #expect(lines.contains("sceneWillConnect nav centre restored"))
        #expect(!lines.contains { $0.hasPrefix("didDiscardSceneSessions") })
        // A session discarded while the app is not running: told at the next launch.
        h.exit("s", .signaled(11))
        #expect(h.send(.discard("s", "nav")).isEmpty)
        let next = h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "nav", display: "centre")))
        #expect(next.prefix(3) == ["willFinishLaunching", "didFinishLaunching", "didDiscardSceneSessions nav"])
        #expect(next.contains("sceneWillConnect nav centre new"))
    }

    @Test func backgroundScenesAreDisconnectedForMemoryBeforeAnyAppIsKilled() {
        var h = Self.harness(["s": Self.scenes, "b": AppPolicy()])
        h.linesUntilQuiet("b", after: h.send(.launch("b", .background)))
        #expect(h.state("b") == .suspended)
        h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "nav", display: "centre")))
        h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "media", display: "cluster")))
        h.linesUntilQuiet("s", after: h.send(.display("cluster", .home)))
        let critical = h.send(.simulateMemoryLevel(.critical, MemoryReport()))
        #expect(critical.contains(.sceneShed("s", "media")))
        #expect(!critical.contains { if case .kill = $0 { true } else { false } }, "no app killed yet")
        #expect(
            h.linesUntilQuiet("s", after: critical) == ["didReceiveMemoryWarning", "sceneDidDisconnect media cluster"])
        #expect(h.supervisor.snapshot("s")!.scenes.first { $0.name == "media" }?.state == .unattached)
        // Still critical on fresh numbers: nothing left to shed, an app goes.
        let again = h.send(.simulateMemoryLevel(.critical, MemoryReport()))
        #expect(again.contains(.kill("b", .memoryPressure(footprint: nil, simulated: true))))
        // The shed session comes back, restored, when shown again.
        h.send(.simulateMemoryLevel(.normal, MemoryReport()))
        #expect(
            h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "media", display: "cluster"))).first
                == "sceneWillConnect media cluster restored")
    }

    @Test func aURLThatLaunchesASceneAppIsItsFirstScenesConnectionOption() {
        var p = Self.scenes
        p.urlSchemes = ["dash"]
        var h = Self.harness(["s": p])
        let effects = h.send(.openURL("dash:route/42"))
        h.ackAll("s")
        let connects = h.log.compactMap { e -> Delivered? in
            if case .deliver("s", let d) = e, d.event == .sceneWillConnect { d } else { nil }
        }
        #expect(connects.map(\.url) == ["dash:route/42"])
        #expect(Harness.events("s", in: h.log).filter { $0 == .openURL }.isEmpty, "in the options, not again")
        #expect(effects.contains(.spawn("s", generation: 1, mode: .foreground)))
        // A second scene connected later carries none.
        h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "two", display: "cluster")))
        let later = h.log.compactMap { e -> Delivered? in
            if case .deliver("s", let d) = e, d.event == .sceneWillConnect { d } else { nil }
        }
        #expect(later.count == 2 && later[1].url == nil)
    }

    @Test func jetsamCountsAnAppWithAnyForegroundSceneAsForeground() {
        var h = Self.harness(["s": Self.scenes, "b": AppPolicy()])
        h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "nav", display: "cluster")))
        h.linesUntilQuiet("b", after: h.send(.activateScene("b", scene: nil, display: "centre")))
        h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "other", display: "centre")))
        h.ackAll("b")
        #expect(h.state("s") == .active)
        #expect(h.supervisor.memoryKillOrder() == ["b", "s"])
    }

    @Test func neverMoreActiveScenesOnADisplayThanItsSlots() {
        var h = Self.harness(["s": Self.scenes, "t": Self.scenes])
        h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "nav", display: "centre")))
        // t's scene takes the centre's one slot: nav resigns before map becomes active.
        let start = h.log.count
        h.send(.activateScene("t", scene: "map", display: "centre"))
        h.ackAll("t")
        h.ackAll("s")
        let order = h.log[start...].compactMap { e -> String? in
            guard case .deliver(let id, let d) = e, let s = d.scene else { return nil }
            return "\(id) \(d.event.rawValue) \(s.scene)"
        }
        let resigned = order.firstIndex(of: "s sceneWillResignActive nav")
        let became = order.firstIndex(of: "t sceneDidBecomeActive map")
        #expect(resigned != nil && became != nil && resigned! < became!)
        #expect(h.supervisor.activeScenes(on: "centre") == 1)
        #expect(h.supervisor.snapshot("s")!.scenes.map(\.state) == [.background])
    }

    @Test func refusals() {
        var h = Self.harness(["s": Self.scenes, "a": AppPolicy()])
        #expect(h.send(.activateScene("s", scene: nil, display: "rear")) == [.refused(.unknownDisplay("rear"))])
        #expect(h.send(.activateScene("a", scene: "two", display: nil)) == [.refused(.noScenes("a"))])
        #expect(h.send(.activateScene("s", scene: "a b", display: nil)) == [.refused(.badSceneName("a b"))])
        #expect(h.send(.discard("a", "main")) == [.refused(.noScenes("a"))])
        #expect(h.send(.display("rear", .home)) == [.refused(.unknownDisplay("rear"))])
        #expect(h.send(.display("centre", .interruptionEnded)) == [.refused(.noInterruption)])
        h.send(.display("cluster", .lock))
        #expect(h.send(.activateScene("s", scene: nil, display: "cluster")) == [.refused(.screenLocked)])
        #expect(h.send(.display("cluster", .lock)) == [.refused(.alreadyLocked)])
        var p = Self.scenes
        p.maxScenes = 2
        var g = Self.harness(["s": p])
        g.linesUntilQuiet("s", after: g.send(.activateScene("s", scene: "one", display: nil)))
        g.linesUntilQuiet("s", after: g.send(.activateScene("s", scene: "two", display: nil)))
        #expect(g.send(.activateScene("s", scene: "three", display: nil)) == [.refused(.tooManyScenes("s", 2))])
    }

    @Test func theLockOfOneDisplayLeavesTheOtherShown() {
        var h = Self.harness()
        h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "nav", display: "centre")))
        h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "media", display: "cluster")))
        #expect(
            h.linesUntilQuiet("s", after: h.send(.display("centre", .lock)))
                == ["sceneWillResignActive nav centre", "sceneDidEnterBackground nav centre"])
        #expect(h.state("s") == .active)
        // The plain lock is every display's.
        h.linesUntilQuiet("s", after: h.send(.lock))
        #expect(h.state("s") == .suspended)
        h.send(.unlock)
        #expect(h.supervisor.displays.all.allSatisfy { !$0.locked })
    }

    @Test func scenesSurviveARestoreAndALegacyFrontIsRead() throws {
        var h = Self.harness()
        h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "nav", display: "centre")))
        h.linesUntilQuiet("s", after: h.send(.activateScene("s", scene: "media", display: "cluster")))
        let bytes = try JSONEncoder().encode(h.supervisor.saved)
        let state = try JSONDecoder().decode(CoreState.self, from: bytes)
        var restored = Supervisor(restoring: state, displays: Self.displays, apps: ["s": Self.scenes])
        #expect(restored.displays == h.supervisor.displays)
        #expect(restored.snapshot("s") == h.supervisor.snapshot("s"))
        // Restored under one display: the cluster's scene moves to it, in the background.
        restored = Supervisor(restoring: state, foregroundSlots: 1, apps: ["s": Self.scenes])
        #expect(restored.displays.names == ["main"])
        #expect(restored.snapshot("s")!.scenes.allSatisfy { $0.display == "main" })
        // Both scenes leave the foreground of the displays that are gone, through the background.
        let first = restored.handle(.tick, now: h.now)
        #expect(
            Harness.lines("s", in: first) == ["sceneWillResignActive media cluster"])
        #expect(restored.activeScenes(on: "main") == 0)
        // A front saved by 0.14: {"slots":1,"apps":["a"],"interruptions":0,"locked":false}.
        let legacy = try JSONDecoder().decode(
            Displays.self, from: Data(#"{"slots":1,"apps":["a"],"interruptions":0,"locked":false}"#.utf8))
        #expect(legacy.all.map(\.name) == ["main"])
        #expect(legacy.all[0].scenes == [SceneRef("a", "main")])
    }
}
