import Foundation
@preconcurrency import Glibc
import LifecycleControl
import LifecycleTestKit
import Testing

func activate(_ d: DaemonUnderTest, _ app: String, scene: String? = nil, display: String? = nil) throws {
    var r = ControlRequest(.activate, app: app)
    r.scene = scene
    r.display = display
    try d.command(r)
}

func on(_ command: ControlRequest.Command, _ display: String) -> ControlRequest {
    var r = ControlRequest(command)
    r.display = display
    return r
}

/// App `s` shows nav on the centre display, then media on the cluster.
func showNavAndMedia(_ d: DaemonUnderTest, _ f: Follower) throws {
    try activate(d, "s", scene: "nav", display: "centre")
    try f.acknowledged("s", "sceneDidBecomeActive", scene: "nav")
    try activate(d, "s", scene: "media", display: "cluster")
    try f.acknowledged("s", "sceneDidBecomeActive", scene: "media")
}

/// Scenes on two displays, observed by real apps through a real daemon
/// (docs/lifecycle.md, "Scenes").
@Suite struct SceneEndToEndTests {
    @Test(arguments: Client.allCases) func everyEventOrderPerSceneOnTwoDisplays(client: Client) throws {
        let s = scratch(), log = s + "/s.events"
        let d = try DaemonUnderTest(apps: ["s": recorder(log, "scenes = true", client: client)], daemon: twoDisplays)
        let f = try d.follow(["s"])

        // Launch into the foreground with a scene on the centre display.
        try activate(d, "s", scene: "nav", display: "centre")
        try f.acknowledged("s", "sceneDidBecomeActive", scene: "nav")
        #expect(
            lines(log) == [
                "willFinishLaunching", "didFinishLaunching", "sceneWillConnect nav centre new",
                "sceneWillEnterForeground nav centre", "didBecomeActive", "sceneDidBecomeActive nav centre",
            ])
        // A second scene on the cluster.
        try activate(d, "s", scene: "media", display: "cluster")
        try f.acknowledged("s", "sceneDidBecomeActive", scene: "media")
        #expect(
            lines(log).suffix(3) == [
                "sceneWillConnect media cluster new", "sceneWillEnterForeground media cluster",
                "sceneDidBecomeActive media cluster",
            ])
        // An interruption on the cluster only.
        try d.command(on(.interruptionBegin, "cluster"))
        try f.acknowledged("s", "sceneWillResignActive", scene: "media")
        try d.command(on(.interruptionEnd, "cluster"))
        try f.acknowledged("s", "sceneDidBecomeActive", scene: "media")
        #expect(lines(log).suffix(2) == ["sceneWillResignActive media cluster", "sceneDidBecomeActive media cluster"])
        // Home on the cluster only: the app stays in the foreground.
        try d.command(on(.home, "cluster"))
        try f.acknowledged("s", "sceneDidEnterBackground", scene: "media")
        #expect(
            lines(log).suffix(2) == ["sceneWillResignActive media cluster", "sceneDidEnterBackground media cluster"])
        #expect(try d.status("s").state == .active)
        // Home on the centre: the last foreground scene, then the app.
        try d.command(on(.home, "centre"))
        try f.state("s", "suspended")
        #expect(
            lines(log).suffix(4) == [
                "sceneWillResignActive nav centre", "willResignActive", "sceneDidEnterBackground nav centre",
                "didEnterBackground",
            ])
        // Back: its most recent scene.
        try d.command(ControlRequest(.activate, app: "s"))
        try f.acknowledged("s", "sceneDidBecomeActive", scene: "media")
        #expect(
            lines(log).suffix(4) == [
                "willEnterForeground", "sceneWillEnterForeground media cluster", "didBecomeActive",
                "sceneDidBecomeActive media cluster",
            ])
        let scenes = try #require(try d.status("s").scenes)
        #expect(scenes.map(\.name) == ["media", "nav"])
        #expect(scenes.map(\.state) == [.active, .background])
        // Quit.
        try d.command(ControlRequest(.stop, app: "s"))
        #expect(try f.terminated("s").reason == "stopped-by-user")
        #expect(
            lines(log).suffix(7) == [
                "sceneWillResignActive media cluster", "willResignActive", "sceneDidEnterBackground media cluster",
                "didEnterBackground", "sceneDidDisconnect media cluster", "sceneDidDisconnect nav centre",
                "willTerminate",
            ])
        // The quit discarded its sessions: told after the next launch.
        try activate(d, "s", scene: "nav", display: "centre")
        try f.acknowledged("s", "sceneDidBecomeActive", scene: "nav")
        let next = lines(log).drop { $0 != "willTerminate" }.dropFirst().filter { !$0.hasPrefix("#") }
        #expect(
            Array(next.prefix(4)) == [
                "willFinishLaunching", "didFinishLaunching", "didDiscardSceneSessions media,nav",
                "sceneWillConnect nav centre new",
            ])
        #expect(try d.stop() == 0)
    }

    @Test func anAppWithoutScenesMovesBetweenDisplaysAndAnotherKeepsItsFront() throws {
        let s = scratch(), a = s + "/a.events", b = s + "/b.events"
        let d = try DaemonUnderTest(
            apps: ["a": recorder(a), "b": recorder(b, "scenes = true")], daemon: twoDisplays)
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")
        try activate(d, "b", scene: "gauge", display: "cluster")
        try f.acknowledged("b", "sceneDidBecomeActive", scene: "gauge")
        // a moves to the cluster: b's scene there goes to the background, and b with it.
        try activate(d, "a", display: "cluster")
        try f.acknowledged("b", "didEnterBackground")
        try f.state("b", "suspended")
        try f.acknowledged("a", "didBecomeActive")
        #expect(
            lines(a).suffix(4) == ["willResignActive", "didEnterBackground", "willEnterForeground", "didBecomeActive"])
        let report = try d.command(ControlRequest(.status)).status!
        let displays = try #require(report.daemon.displays)
        #expect(displays.map(\.name) == ["centre", "cluster"])
        #expect(displays.map(\.front) == [[], ["a"]])
        #expect(try d.status("a").scenes?.map(\.display) == ["cluster"])
        #expect(try d.stop() == 0)
    }

    @Test func discardARunningSceneAndOneOfAnAppThatIsNotRunning() throws {
        let s = scratch(), log = s + "/s.events"
        let d = try DaemonUnderTest(apps: ["s": recorder(log, "scenes = true")], daemon: twoDisplays)
        let f = try d.follow(["s"])
        try showNavAndMedia(d, f)
        var discard = ControlRequest(.discard, app: "s")
        discard.scene = "media"
        try d.command(discard)
        try f.acknowledged("s", "didDiscardSceneSessions", scene: "media")
        #expect(
            lines(log).suffix(4) == [
                "sceneWillResignActive media cluster", "sceneDidEnterBackground media cluster",
                "sceneDidDisconnect media cluster", "didDiscardSceneSessions media",
            ])
        #expect(try d.status("s").scenes?.map(\.name) == ["nav"])
        // An unknown scene, an app without scenes: refused, named.
        let again = try d.client().send(discard)
        #expect(again.error?.refusal == "unknown-scene")
        // A crash keeps the session; a discard while not running is told after the next launch.
        try d.command(ControlRequest(.kill, app: "s"))
        try f.terminated("s")
        try activate(d, "s", scene: "nav", display: "centre")
        try f.acknowledged("s", "sceneDidBecomeActive", scene: "nav")
        #expect(lines(log).contains("didDiscardSceneSessions nav"), "a user's kill discards every session")
        #expect(try d.stop() == 0)
    }

    @Test func memoryPressureDisconnectsBackgroundScenesBeforeKillingAnApp() throws {
        let s = scratch(), log = s + "/s.events", other = s + "/b.events"
        let d = try DaemonUnderTest(
            apps: ["s": recorder(log, "scenes = true"), "b": recorder(other)], daemon: twoDisplays)
        let f = try d.follow()
        try d.command(ControlRequest(.launch, app: "b", background: true))
        try f.state("b", "suspended")
        try showNavAndMedia(d, f)
        try d.command(on(.home, "cluster"))
        try f.acknowledged("s", "sceneDidEnterBackground", scene: "media")

        var critical = ControlRequest(.pressure)
        critical.level = "critical"
        try d.command(critical)
        try f.acknowledged("s", "sceneDidDisconnect", scene: "media")
        #expect(try d.status("b").state == .suspended, "no app killed while a scene could go")
        #expect(try d.status("s").scenes?.first { $0.name == "media" }?.shed == true)
        // Still critical: now an app goes, the suspended one first.
        try d.command(critical)
        #expect(try f.terminated("b").reason == "memory-pressure")
        #expect(try d.status("s").state == .active)
        // The session comes back, restored, when shown again.
        var normal = ControlRequest(.pressure)
        normal.level = "normal"
        try d.command(normal)
        try activate(d, "s", scene: "media", display: "cluster")
        try f.acknowledged("s", "sceneDidBecomeActive", scene: "media")
        #expect(lines(log).contains("sceneWillConnect media cluster restored"))
        #expect(try d.stop() == 0)
    }

    @Test func scenesSurviveADaemonKilledAndAReload() throws {
        let s = scratch(), log = s + "/s.events"
        let d = try DaemonUnderTest(apps: ["s": recorder(log, "scenes = true")], daemon: twoDisplays)
        let f = try d.follow(["s"])
        try showNavAndMedia(d, f)
        let before = try d.status("s")

        #expect(try d.crash(with: SIGKILL) == (true, SIGKILL))
        let d2 = try DaemonUnderTest(after: d)
        let after = try d2.status("s")
        #expect(after.pid == before.pid, "the same process, re-adopted")
        #expect(after.scenes == before.scenes)
        #expect(
            try d2.command(ControlRequest(.status)).status!.daemon.displays?.map(\.front) == [["s/nav"], ["s/media"]])
        // The re-adopted app goes on hearing its scenes' events.
        let f2 = try d2.follow(["s"])
        try d2.command(on(.home, "cluster"))
        try f2.acknowledged("s", "sceneDidEnterBackground", scene: "media")
        #expect(try d2.status("s").state == .active)

        // A reload that changes nothing of the displays keeps every scene where it is.
        let reload = try d2.client().send(ControlRequest(.reload))
        #expect(reload.ok)
        #expect(try d2.status("s").scenes?.map(\.state) == [.background, .active])
        #expect(reload.reload?.needRestart == [])
        // A display added: named as waiting for the next start; nothing moves.
        let file = d2.path("lifecycled.toml")
        try (try String(contentsOfFile: file, encoding: .utf8) + "\n[[display]]\nname = \"rear\"\n").write(
            toFile: file, atomically: true, encoding: .utf8)
        let changed = try d2.client().send(ControlRequest(.reload))
        #expect(changed.reload?.needRestart == ["display"])
        #expect(try d2.command(ControlRequest(.status)).status!.daemon.displays?.map(\.name) == ["centre", "cluster"])
        #expect(try d2.status("s").scenes?.map(\.state) == [.background, .active])
        try d2.command(ControlRequest(.stop, app: "s"))
        try f2.terminated("s")
        #expect(try d2.stop() == 0)
    }

    @Test func supervisorctlShowsDisplaysAndScenesAndWaits() throws {
        let s = scratch(), log = s + "/s.events"
        let d = try DaemonUnderTest(apps: ["s": recorder(log, "scenes = true")], daemon: twoDisplays)
        // activate waits until the scene is in front; home --display until it left.
        #expect(try d.ctl(["activate", "s", "--scene", "nav", "--display", "centre"]).0 == 0)
        #expect(lines(log).last == "sceneDidBecomeActive nav centre")
        #expect(try d.ctl(["activate", "s", "--scene", "media", "--display", "cluster"]).0 == 0)
        #expect(lines(log).last == "sceneDidBecomeActive media cluster")
        #expect(try d.ctl(["home", "--display", "cluster"]).0 == 0)
        #expect(lines(log).last == "sceneDidEnterBackground media cluster")
        let (code, out, _) = try d.ctl(["scenes"])
        #expect(code == 0)
        #expect(out.contains("centre   1      s/nav"), "\(out)")
        #expect(out.contains("s    media  cluster  background"), "\(out)")
        let status = try d.ctl(["status"]).1
        #expect(status.contains("media@cluster background, nav@centre active"), "\(status)")
        #expect(status.contains("display centre: s/nav (1 slot)") && status.contains("display cluster: - (1 slot)"))
        #expect(try d.ctl(["discard", "s", "media"]).0 == 0)
        #expect(lines(log).last == "didDiscardSceneSessions media")
        let bad = try d.ctl(["home", "--display", "rear"])
        #expect(bad.0 == 1 && bad.2.contains("unknown display 'rear'"))
        #expect(try d.stop() == 0)
    }

    @Test func homeOnEveryDisplayWaitsForTheScenesOfAnAppWithScenes() throws {
        // The app never returns from sceneDidEnterBackground: home cannot be
        // done, and says so after --timeout (it would return at once if it
        // looked for the app's main scene, which an app with scenes may lack).
        let s = scratch(), log = s + "/s.events"
        let d = try DaemonUnderTest(
            apps: ["s": recorder(log, "scenes = true", arguments: ["--hang", "sceneDidEnterBackground"])],
            daemon: twoDisplays)
        #expect(try d.ctl(["activate", "s", "--scene", "nav", "--display", "centre"]).0 == 0)
        let home = try d.ctl(["home", "--timeout", "1"])
        #expect(home.0 == 7, "\(home)")
        #expect(lines(log).last == "sceneDidEnterBackground nav centre")
        #expect(try d.stop() == 0)
    }

    @Test func badDisplaysAndScenesAreClearErrors() throws {
        let d = try DaemonUnderTest(apps: ["a": recorder(scratch() + "/a.events")], daemon: twoDisplays)
        let unknown = try d.client().send(on(.home, "rear"))
        #expect(unknown.error?.refusal == "unknown-display")
        #expect(unknown.error?.message == "unknown display 'rear'")
        var scene = ControlRequest(.activate, app: "a")
        scene.scene = "second"
        let noScenes = try d.client().send(scene)
        #expect(noScenes.error?.refusal == "no-scenes")
        var discard = ControlRequest(.discard, app: "a")
        let missing = try d.client().send(discard)
        #expect(missing.error?.code == .badRequest)
        discard.scene = "main"
        #expect(try d.client().send(discard).error?.refusal == "no-scenes")
        #expect(try d.stop() == 0)
    }
}
