import Foundation
import LifecycleWire
import Testing

@testable import LifecycleClient

/// Records every scene callback with the scene's state as the callback sees it.
@MainActor final class SceneRecorder: ApplicationDelegate, SceneDelegate {
    var log: [String] = []
    func sceneDelegate(_ application: Application, for scene: Scene) -> (any SceneDelegate)? { self }
    func didDiscardSceneSessions(_ application: Application, scenes: [String]) {
        log.append("discard " + scenes.joined(separator: ","))
    }
    func note(_ e: String, _ s: Scene) { log.append("\(e) \(s.name) \(s.display) \(s.state.rawValue)") }
    func sceneWillConnect(_ s: Scene) { note("connect" + (s.restored ? " restored" : ""), s) }
    func sceneWillEnterForeground(_ s: Scene) { note("enter", s) }
    func sceneDidBecomeActive(_ s: Scene) { note("active", s) }
    func sceneWillResignActive(_ s: Scene) { note("resign", s) }
    func sceneDidEnterBackground(_ s: Scene) { note("background", s) }
    func sceneDidDisconnect(_ s: Scene) { note("disconnect", s) }
    func openURL(_ application: Application, url: String, in scene: Scene) { log.append("url \(url) in \(scene.name)") }
}

func sceneEvent(
    _ seq: UInt32, _ event: LifecycleEvent, scene: String? = "nav", display: String = "centre",
    extra: [KeyValue] = []
) -> DaemonMessage {
    var options = extra
    if let scene { options.insert(KeyValue(SceneOptionKey.scene, scene), at: 0) }
    if event.isSceneEvent { options.insert(KeyValue(SceneOptionKey.display, display), at: min(1, options.count)) }
    return .event(EventMessage(sequence: seq, event: event, deadline: nil, budgetEnd: nil, options: options))
}

/// The Swift client's scenes against a fake daemon: the same cases as the C
/// library's tests (clib/tests/test_lifecycle.c), the same words.
@MainActor @Suite struct SceneClientTests {
    @Test func eachSceneEventReachesItsDelegateWithTheSceneMoved() throws {
        let d = try FakeDaemon()
        let recorder = SceneRecorder()
        let app = Application(delegate: recorder, channel: d.channel)
        d.send(sceneEvent(1, .sceneWillConnect, extra: [KeyValue(SceneOptionKey.session, "restored")]))
        d.send(sceneEvent(2, .sceneWillEnterForeground))
        d.send(sceneEvent(3, .sceneDidBecomeActive))
        d.send(sceneEvent(4, .openURL, extra: [KeyValue(LaunchOptionKey.eventURL, "x:1")]))
        d.send(sceneEvent(5, .sceneWillResignActive))
        d.send(sceneEvent(6, .sceneDidEnterBackground))
        d.send(sceneEvent(7, .sceneDidDisconnect))
        d.send(
            sceneEvent(8, .didDiscardSceneSessions, scene: nil, extra: [KeyValue(SceneOptionKey.scenes, "nav,media")]))
        d.stopSending()
        #expect(app.run() == .closed)
        #expect(
            recorder.log == [
                "connect restored nav centre background", "enter nav centre inactive", "active nav centre active",
                "url x:1 in nav", "resign nav centre inactive", "background nav centre background",
                "disconnect nav centre unattached", "discard nav,media",
            ])
        #expect(app.scenes.isEmpty, "a disconnected scene is forgotten")
        for seq in UInt32(1)...8 { #expect(d.take() == .acknowledge(sequence: seq)) }
    }

    @Test func aSceneEventWithoutItsSceneIsAChannelErrorInTheCLibrarysWords() throws {
        let d = try FakeDaemon()
        let app = Application(delegate: SceneRecorder(), channel: d.channel)
        d.send(sceneEvent(1, .sceneDidBecomeActive, scene: nil))
        #expect(
            app.run() == .protocolViolation("sceneDidBecomeActive: option scene missing"))
        let header = try String(
            contentsOf: repository.appendingPathComponent("docs/protocol.md"), encoding: .utf8)
        #expect(header.contains("protocol violation by the daemon: EVENT: option scene missing"))
    }

    @Test func badNamesAndEmptyListsAreRejected() throws {
        for (message, error) in [
            (
                sceneEvent(1, .sceneWillConnect, scene: "a b"),
                "sceneWillConnect: option scene: not a scene name (1 to 64 of A-Z a-z 0-9 . _ -)"
            ),
            (
                sceneEvent(1, .didDiscardSceneSessions, scene: nil, extra: [KeyValue(SceneOptionKey.scenes, "a,,b")]),
                "didDiscardSceneSessions: option scenes: not scene names separated by commas (1 to 64 of A-Z a-z 0-9 . _ -)"
            ),
            (sceneEvent(1, .didDiscardSceneSessions, scene: nil), "didDiscardSceneSessions: option scenes missing"),
        ] {
            let d = try FakeDaemon()
            let app = Application(delegate: SceneRecorder(), channel: d.channel)
            d.send(message)
            #expect(app.run() == .protocolViolation(error))
        }
    }

    @Test func atMost64ScenesAreKept() throws {
        let d = try FakeDaemon()
        let app = Application(delegate: SceneRecorder(), channel: d.channel)
        for i in 0..<65 { d.send(sceneEvent(UInt32(i + 1), .sceneWillConnect, scene: "s\(i)")) }
        #expect(app.run() == .protocolViolation("sceneWillConnect: 65 scenes connected, more than 64"))
        #expect(app.scenes.count == 64)
    }

    @Test func theAsyncSequenceNamesEachEventsScene() async throws {
        let d = try FakeDaemon()
        let events = LifecycleEvents(channel: d.channel)
        d.send(sceneEvent(1, .sceneWillConnect, display: "cluster", extra: [KeyValue(SceneOptionKey.session, "new")]))
        d.send(sceneEvent(2, .didDiscardSceneSessions, scene: nil, extra: [KeyValue(SceneOptionKey.scenes, "a,b")]))
        var iterator = events.makeAsyncIterator()
        let first = try #require(await iterator.next())
        #expect(first.name == "sceneWillConnect" && first.scene == "nav" && first.display == "cluster")
        #expect(first.restored == false)
        let second = try #require(await iterator.next())
        #expect(second.discardedScenes == ["a", "b"])
    }
}
