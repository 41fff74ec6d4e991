import LifecycleControl
import Testing

/// The waiting rule supervisorctl and the D-Bus operations share
/// (LifecycleControl/Goal.swift): with a compositor's follower, an app is
/// in front only once the compositor no longer shows its windows hidden.
@Suite struct GoalTests {
    static func report(_ state: LifecycleState, window: String?) -> StatusReport {
        var a = AppStatus(
            name: "a", state: state, pid: 10, secondsInState: 0, delivery: .library, backgroundTasks: [],
            backgroundTimeRemaining: nil, awaiting: nil, lastTermination: nil)
        a.window = window
        return StatusReport(
            daemon: DaemonStatus(
                pid: 1, foregroundSlots: 1, foreground: ["a"], locked: false, interruptions: 0, confinement: "x",
                shuttingDown: false),
            apps: [a])
    }

    @Test func anActivationWaitsForTheCompositorToShowTheApp() {
        #expect(Goal.inFront("a").reached(Self.report(.active, window: nil)), "no follower: as before")
        #expect(!Goal.inFront("a").reached(Self.report(.active, window: "hidden")))
        #expect(Goal.inFront("a").reached(Self.report(.active, window: "shown")))
        #expect(Goal.inFront("a").reached(Self.report(.active, window: "focused")))
        #expect(!Goal.sceneInFront("a", scene: nil, display: nil).reached(Self.report(.active, window: "hidden")))
        #expect(!Goal.inFront("a").reached(Self.report(.background, window: "focused")))
    }
}
