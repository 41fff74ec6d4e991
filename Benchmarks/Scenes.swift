// Scenes and displays (issue 15): activating an app on one display while
// another display's app stays active, against today's activate on one
// display, and a scene app switching scenes on one display while it also
// shows one on the other; three daemons, measured side by side, in turns.
import Foundation
@preconcurrency import Glibc
import LifecycleControl
import LifecycleTestKit

/// One daemon and the switch measured on it: request sent to the
/// acknowledgement that ends the activation.
struct ActivateRig {
    let d: DaemonUnderTest
    let f: Follower
    let c: ControlClient
    /// Sends the i-th activation; returns the record that ends it.
    let step: (Int, ControlClient, Follower, Int64) throws -> EventRecord

    func measure(_ i: Int, into s: inout Series) throws {
        let t0 = now()
        let done = try step(i, c, f, t0)
        s.add(microseconds: Double(done.monotonic - t0) / 1000)
    }
}

func activateRigs() throws -> (today: ActivateRig, twoDisplays: ActivateRig, scenes: ActivateRig) {
    func request(_ app: String, scene: String? = nil, display: String? = nil) -> ControlRequest {
        var r = ControlRequest(.activate, app: app)
        r.scene = scene
        r.display = display
        return r
    }
    func becameActive(_ f: Follower, _ app: String, _ event: String, _ t0: Int64) throws -> EventRecord {
        try f.wait("\(app) \(event)") {
            $0.app == app && $0.kind == .acknowledged && $0.event?.rawValue == event && $0.monotonic >= t0
        }
    }
    // Today: one display, a and b take turns in its slot.
    let one = try DaemonUnderTest(apps: ["a": recorderApp(), "b": recorderApp()])
    // Two displays: c stays active on the cluster while a and b take turns on the centre.
    let two = try DaemonUnderTest(
        apps: ["a": recorderApp(), "b": recorderApp(), "c": recorderApp()], daemon: twoDisplays)
    // A scene app with a scene on the cluster, switching two scenes on the centre.
    let sc = try DaemonUnderTest(apps: ["s": recorderApp("scenes = true")], daemon: twoDisplays)
    let rigs = (
        ActivateRig(d: one, f: try one.follow(), c: try one.client()) { i, c, f, t0 in
            let app = i % 2 == 0 ? "a" : "b"
            _ = try c.send(request(app))
            return try becameActive(f, app, "didBecomeActive", t0)
        },
        ActivateRig(d: two, f: try two.follow(), c: try two.client()) { i, c, f, t0 in
            let app = i % 2 == 0 ? "a" : "b"
            _ = try c.send(request(app, display: "centre"))
            return try becameActive(f, app, "didBecomeActive", t0)
        },
        ActivateRig(d: sc, f: try sc.follow(), c: try sc.client()) { i, c, f, t0 in
            let scene = i % 2 == 0 ? "left" : "right"
            _ = try c.send(request("s", scene: scene, display: "centre"))
            return try f.acknowledged("s", "sceneDidBecomeActive", scene: scene)
        }
    )
    // The fixed parts first: c on the cluster; s's gauge on the cluster.
    _ = try rigs.1.c.send(request("c", display: "cluster"))
    try rigs.1.f.acknowledged("c", "didBecomeActive")
    _ = try rigs.2.c.send(request("s", scene: "gauge", display: "cluster"))
    try rigs.2.f.acknowledged("s", "sceneDidBecomeActive", scene: "gauge")
    return rigs
}

func activateSideBySide() throws -> (today: Series, twoDisplays: Series, scenes: Series) {
    let rigs = try activateRigs()
    var today = Series(), two = Series(), scenes = Series()
    // Warm-up: every app launched once, outside the measurement.
    for i in 0..<2 {
        var ignored = Series()
        try rigs.today.measure(i, into: &ignored)
        try rigs.twoDisplays.measure(i, into: &ignored)
        try rigs.scenes.measure(i, into: &ignored)
    }
    // In turns, each first in a third of the rounds: none always measured cold.
    for i in 2..<(iterations / 4 + 2) {
        for k in 0..<3 {
            switch (i + k) % 3 {
            case 0: try rigs.today.measure(i, into: &today)
            case 1: try rigs.twoDisplays.measure(i, into: &two)
            default: try rigs.scenes.measure(i, into: &scenes)
            }
        }
    }
    for rig in [rigs.today, rigs.twoDisplays, rigs.scenes] { try rig.d.stop() }
    return (today, two, scenes)
}
