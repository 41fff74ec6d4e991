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

    /// A stop or kill waits for the process it found to end: not running,
    /// or another process prewarmed in its place (an `always` app).
    @Test func anEndIsReachedByNotRunningOrANewPrewarm() {
        func report(_ state: LifecycleState, pid: Int32?) -> StatusReport {
            var r = Self.report(state, window: nil)
            r.apps[0].pid = pid
            return r
        }
        let goal = Goal.of(ControlRequest(.stop, app: "a"), before: report(.active, pid: 10))
        #expect(goal == Goal.ended("a", after: 10))
        #expect(goal?.reached(report(.notRunning, pid: nil)) == true)
        #expect(goal?.reached(report(.prewarmed, pid: 11)) == true, "prewarmed again: the run ended")
        #expect(goal?.reached(report(.background, pid: 10)) == false)
        // The stop of a prewarmed process: done once that process is gone.
        let held = Goal.of(ControlRequest(.kill, app: "a"), before: report(.prewarmed, pid: 12))
        #expect(held?.reached(report(.prewarmed, pid: 12)) == false, "not reaped yet")
        #expect(held?.reached(report(.notRunning, pid: nil)) == true)
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
