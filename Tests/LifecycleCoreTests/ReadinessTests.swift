import Testing
@testable import LifecycleCore

/// Plain programs that speak sd_notify: the launch completes at READY=1.
@Suite struct ReadinessTests {
    var notifying: AppPolicy {
        var p = AppPolicy.plain
        p.awaitsReadiness = true
        p.launchTimeout = .seconds(2)
        return p
    }

    @Test func theLaunchCompletesAtReady() {
        var h = Harness(["p": notifying])
        let launch = h.send(.activate("p"))
        #expect(launch.contains(.spawn("p", generation: 1, mode: .foreground)))
        #expect(h.state("p") == .inactive, "launched, not yet ready")
        #expect(h.advance(.seconds(1)).isEmpty)
        let ready = h.send(.ready("p", generation: 1))
        #expect(
            ready == [.transition("p", from: .inactive, to: .active)],
            "silently: no signal right after readiness either")
        #expect(h.advance(.seconds(5)).isEmpty, "no launch watchdog once ready")
    }

    @Test func noReadinessInTimeIsTheLaunchWatchdog() {
        var h = Harness(["p": notifying])
        h.send(.launch("p", .background))
        #expect(h.state("p") == .background)
        #expect(h.advance(.milliseconds(1999)).isEmpty)
        #expect(h.advance(.milliseconds(1)) == [.kill("p", .launchWatchdog)])
    }

    @Test func stoppedBeforeItIsReady() {
        var h = Harness(["p": notifying])
        h.send(.activate("p"))
        #expect(Harness.events("p", in: h.send(.stop("p"))) == [.willTerminate])
        #expect(h.advance(.seconds(5)) == [.kill("p", .stoppedByUser(killedAfterDeadline: true))])
    }

    @Test func readyTwiceOrFromAnyoneElseIsIgnored() {
        var h = Harness(["p": notifying, "q": .plain])
        h.send(.activate("p"))
        h.send(.ready("p", generation: 1))
        #expect(h.send(.ready("p", generation: 1)).isEmpty)
        h.send(.launch("q", .background))
        #expect(h.send(.ready("q", generation: 1)).isEmpty, "q does not await readiness")
        #expect(h.send(.ready("p", generation: 7)).isEmpty, "another run")
    }

    @Test func warningsWaitForReadiness() {
        var h = Harness(["p": notifying])
        h.send(.activate("p"))
        #expect(
            Harness.events("p", in: h.send(.memory(MemoryReport(measurements: Harness.measurements(.warning))))) == [])
        #expect(Harness.events("p", in: h.send(.ready("p", generation: 1))) == [.didReceiveMemoryWarning])
    }
}
