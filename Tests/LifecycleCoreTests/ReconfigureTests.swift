import Testing

@testable import LifecycleCore

/// A reload, in the core (Configuration.swift): per app, nothing disturbed
/// that did not change.
@Suite struct ReconfigureTests {
    var slow: AppPolicy {
        var p = AppPolicy()
        p.backgroundTimeout = .seconds(30)
        return p
    }

    @Test func aReloadThatChangesNothingEmitsNothing() {
        var h = Harness(apps: ["a", "b"])
        h.launchActive("a")
        let effects = h.send(.reconfigure(["a": AppPolicy(), "b": AppPolicy()]))
        #expect(effects.isEmpty)
    }

    @Test func aNewAppAppearsNotRunning() {
        var h = Harness(apps: ["a"])
        let effects = h.send(.reconfigure(["a": AppPolicy(), "new": AppPolicy()]))
        #expect(effects.isEmpty)
        #expect(h.state("new") == .notRunning)
        h.launchActive("new")
        #expect(h.state("new") == .active)
    }

    /// A running app keeps the policy it was launched with until it ends;
    /// a stopped one takes the new one at once.
    @Test func aChangedPolicyWaitsForTheNextLaunch() {
        var h = Harness(apps: ["a", "idle"])
        h.launchActive("a")
        h.send(.reconfigure(["a": slow, "idle": slow]))
        #expect(h.supervisor.snapshot("a")!.changePending)
        #expect(!h.supervisor.snapshot("idle")!.changePending, "not running: in force at once")
        #expect(h.supervisor.apps["idle"]!.policy == slow)
        #expect(h.supervisor.apps["a"]!.policy == AppPolicy(), "the launched policy stays in force")
        // Put back as it was: nothing pending any more.
        h.send(.reconfigure(["a": AppPolicy(), "idle": slow]))
        #expect(!h.supervisor.snapshot("a")!.changePending)
        h.send(.reconfigure(["a": slow, "idle": slow]))
        h.send(.stop("a"))
        h.ackAll("a")
        h.exit("a")
        #expect(h.state("a") == .notRunning)
        #expect(!h.supervisor.snapshot("a")!.changePending)
        #expect(h.supervisor.apps["a"]!.policy == slow, "in force from the next launch")
    }

    /// A removed app that runs is stopped as if the user quit it, then is
    /// gone; one that does not run is gone at once.
    @Test func aRemovedAppIsStoppedThenForgotten() {
        var h = Harness(apps: ["a", "b", "c"])
        h.launchActive("a")
        let effects = h.send(.reconfigure(["c": AppPolicy()]))
        #expect(effects.contains(.forgotten("b")), "b was not running")
        #expect(h.supervisor.snapshot("b") == nil)
        #expect(h.supervisor.snapshot("a")!.removing)
        #expect(h.ackAll("a").last == .willTerminate)
        #expect(h.send(.activate("a")).contains(.refused(.stopping("a"))))
        h.exit("a")
        #expect(h.log.contains(.forgotten("a")))
        #expect(h.supervisor.snapshot("a") == nil)
        let terminated = h.log.compactMap { if case .terminated("a", let r) = $0 { r.reason } else { nil } }
        #expect(terminated == [.stoppedByUser(killedAfterDeadline: false)])
        #expect(h.send(.launch("a", .foreground)).contains(.refused(.unknownApp("a"))))
    }

    /// Put back before it ended: it is no longer removed, and runs on.
    @Test func anAppPutBackBeforeItEndedStays() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        h.send(.reconfigure([:]))
        h.send(.reconfigure(["a": slow]))
        #expect(!h.supervisor.snapshot("a")!.removing)
        #expect(h.supervisor.snapshot("a")!.changePending)
        h.ackAll("a")
        h.exit("a")
        #expect(!h.log.contains(.forgotten("a")))
        #expect(h.supervisor.apps["a"]!.policy == slow)
    }

    /// A memory limit added by a reload is enforced from the next launch.
    @Test func aLimitAddedByAReloadCountsFromTheNextLaunch() {
        var limitedPolicy = AppPolicy()
        limitedPolicy.memory.limit = 1 << 20
        var h = Harness(apps: ["a"])
        h.send(.reconfigure(["a": limitedPolicy]))
        #expect(h.supervisor.limited == ["a"])
        h.send(.reconfigure([:]))
        #expect(h.supervisor.limited.isEmpty)
    }
}
