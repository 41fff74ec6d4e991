import Foundation
import Testing

@testable import LifecycleCore

/// The crash policy (Restarts.swift), with the manual clock.
@Suite struct RestartTests {
    func policy(_ when: RestartWhen, limit: Int = 5) -> AppPolicy {
        var p = AppPolicy()
        p.restart.when = when
        p.restart.limit = limit
        return p
    }

    func scheduled(_ effects: [Effect], _ id: AppID) -> (at: Instant, attempt: Int)? {
        for case .relaunchScheduled(id, let at, let attempt) in effects { return (at, attempt) }
        return nil
    }

    func spawned(_ effects: [Effect], _ id: AppID) -> LaunchMode? {
        for case .spawn(id, _, let mode) in effects { return mode }
        return nil
    }

    @Test func noneByDefault() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        h.exit("a", .exited(1))
        #expect(h.supervisor.nextDeadline() == nil)
        #expect(h.supervisor.snapshot("a")!.relaunchAt == nil)
    }

    @Test func onFailureRelaunchesFailuresOnly() {
        var h = Harness(["a": policy(.onFailure)])
        h.launchActive("a")
        let clean = h.send(.exited("a", generation: h.generation("a"), .exited(0)))
        #expect(scheduled(clean, "a") == nil, "exit 0 is not a failure")
        h.launchActive("a")
        let term = h.send(.exited("a", generation: h.generation("a"), .signaled(15)))
        #expect(scheduled(term, "a") == nil, "SIGTERM counts as clean, as systemd's SuccessExitStatus")
        h.launchActive("a")
        let crash = h.send(.exited("a", generation: h.generation("a"), .signaled(11)))
        #expect(scheduled(crash, "a")?.attempt == 1)
    }

    @Test func alwaysRelaunchesACleanExitButNeverAUsersStopOrAPressureKill() {
        var h = Harness(["a": policy(.always)])
        h.launchActive("a")
        #expect(scheduled(h.send(.exited("a", generation: h.generation("a"), .exited(0))), "a") != nil)
        h.send(.stop("a"))  // cancels the relaunch
        #expect(h.supervisor.nextDeadline() == nil)
        h.launchActive("a")
        h.send(.stop("a"))
        h.ackAll("a")
        let stopped = h.send(.exited("a", generation: h.generation("a"), .exited(0)))
        #expect(scheduled(stopped, "a") == nil, "a user's stop is not relaunched")
        #expect(
            RestartPolicy.relaunches(policy(.always).restart)(after: .memoryPressure(footprint: 1, simulated: false))
                == false)
        #expect(RestartPolicy.relaunches(policy(.always).restart)(after: .killedByUser) == false)
        #expect(
            RestartPolicy.relaunches(policy(.always).restart)(after: .shutdown(killedAfterDeadline: false)) == false)
    }

    /// 1 s, 2 s, 4 s, ... up to the cap, each with at most 10 % more.
    @Test func delaysGrowGeometricallyToTheCapWithJitter() {
        var p = policy(.onFailure, limit: 0)
        p.restart.maxDelay = .seconds(10)
        var h = Harness(["a": p])
        var steps: [Duration] = []
        h.launchActive("a")
        for _ in 0..<6 {
            let effects = h.send(.exited("a", generation: h.generation("a"), .exited(3)))
            guard let s = scheduled(effects, "a") else { Issue.record("no relaunch"); return }
            steps.append(s.at - h.now)
            // The relaunch itself, not a user's launch (which starts counting again).
            h.now = s.at
            #expect(spawned(h.send(.tick), "a") == .foreground, "ended in front, a slot free: back in front")
            h.ackAll("a")
        }
        let nominal: [Duration] = [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(10), .seconds(10)]
        for (got, want) in zip(steps, nominal) {
            #expect(got >= want && got <= want + want / 10, "\(got) for \(want)")
        }
    }

    @Test func tooManyEndsInTheWindowLeaveItFailedUntilAUserLaunches() {
        var h = Harness(["a": policy(.onFailure, limit: 2)])
        h.send(.launch("a", .background))
        h.ackAll("a")
        var failed: AppFailure?
        for _ in 0..<3 {
            let effects = h.send(.exited("a", generation: h.generation("a"), .exited(1)))
            for case .failed("a", let f) in effects { failed = f }
            guard let s = scheduled(effects, "a") else { break }
            h.now = s.at
            #expect(spawned(h.send(.tick), "a") == .background, "ended in the background: back there")
            h.ackAll("a")
        }
        #expect(failed?.ends == 3)
        #expect(failed?.reason == .exited(code: 1))
        #expect(h.supervisor.snapshot("a")!.failure != nil)
        #expect(h.supervisor.nextDeadline() == nil, "no relaunch once failed")
        h.launchActive("a")
        #expect(h.supervisor.snapshot("a")!.failure == nil, "a user's launch clears it")
        #expect(h.supervisor.snapshot("a")!.recentEnds == 0)
        #expect(scheduled(h.send(.exited("a", generation: h.generation("a"), .exited(1))), "a")?.attempt == 1)
    }

    @Test func endsOutsideTheWindowAreForgotten() {
        var p = policy(.onFailure, limit: 2)
        p.restart.window = .seconds(30)
        var h = Harness(["a": p])
        h.launchActive("a")
        for _ in 0..<5 {
            h.advance(.seconds(40))
            let effects = h.send(.exited("a", generation: h.generation("a"), .exited(1)))
            guard let s = scheduled(effects, "a") else { Issue.record("no relaunch"); return }
            #expect(s.attempt == 1, "each end alone in its window")
            h.now = s.at
            h.send(.tick)
            h.ackAll("a")
        }
    }

    /// One that crashed in front comes back in the background when the
    /// user has put another app in front meanwhile.
    @Test func aRelaunchNeverTakesASlotFromAnotherApp() {
        var h = Harness(["a": policy(.onFailure), "b": AppPolicy()])
        h.launchActive("a")
        let s = scheduled(h.send(.exited("a", generation: h.generation("a"), .exited(1))), "a")!
        h.launchActive("b")
        h.now = s.at
        #expect(spawned(h.send(.tick), "a") == .background)
        h.ackAll("a")
        #expect(h.state("b") == .active)
        #expect(h.state("a") == .suspended, "in the background, then suspended")
    }

    @Test func aShutdownOrAReloadToNoCancelsTheRelaunch() {
        var h = Harness(["a": policy(.onFailure), "b": policy(.onFailure)])
        h.launchActive("a")
        h.exit("a", .exited(1))
        h.send(.launch("b", .background))
        h.ackAll("b")
        h.exit("b", .exited(1))
        #expect(h.supervisor.snapshot("a")!.relaunchAt != nil)
        h.send(.reconfigure(["a": AppPolicy(), "b": policy(.onFailure)]))
        #expect(h.supervisor.snapshot("a")!.relaunchAt == nil, "restart = no now")
        h.send(.shutdown)
        #expect(h.supervisor.nextDeadline() == nil)
        h.advance(.seconds(60))
        #expect(h.state("b") == .notRunning)
    }

    /// The count, the relaunch due and the failure are in the saved state.
    @Test func aRestoredCoreKeepsCountingAndRelaunchesOnTime() throws {
        var h = Harness(["a": policy(.onFailure, limit: 2)])
        h.launchActive("a")
        let s = scheduled(h.send(.exited("a", generation: h.generation("a"), .exited(1))), "a")!
        let bytes = try JSONEncoder().encode(h.supervisor.saved)
        var restored = Supervisor(
            restoring: try JSONDecoder().decode(CoreState.self, from: bytes), foregroundSlots: 1,
            apps: ["a": policy(.onFailure, limit: 2)])
        #expect(restored.snapshot("a")!.recentEnds == 1)
        #expect(restored.nextDeadline() == s.at)
        #expect(spawned(restored.handle(.tick, now: s.at), "a") == .foreground)
    }

    /// `restart APP`: stopped as the user would, then launched into its place.
    @Test func aRestartStopsThenLaunchesIntoThePlaceItHad() {
        var h = Harness(slots: 2, apps: ["front", "back", "idle"])
        h.launchActive("front")
        h.send(.launch("back", .background))
        h.ackAll("back")
        for id in ["front", "back"] {
            let gen = h.generation(id)
            h.send(.restart(id))
            #expect(h.ackAll(id).last == .willTerminate || h.supervisor.snapshot(id)!.stopping)
            let effects = h.send(.exited(id, generation: gen, .exited(0)))
            #expect(spawned(effects, id) == (id == "front" ? .foreground : .background), "\(id)")
            h.ackAll(id)
        }
        #expect(h.state("front") == .active)
        #expect(spawned(h.send(.restart("idle")), "idle") == .foreground, "not running: launched")
    }

    /// A `home` while a restart of the app in front is under way: it comes
    /// back in the background, not in front (found by the chaos walk: a
    /// restart carried across a daemon crash took the front after home).
    @Test func aHomeDuringARestartSendsItBackToTheBackground() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        let gen = h.generation("a")
        h.send(.restart("a"))
        h.send(.display(nil, .home))
        h.ackAll("a")
        #expect(spawned(h.send(.exited("a", generation: gen, .exited(0))), "a") == .background)
    }

    @Test func aStopOrAShutdownDuringARestartWins() {
        var h = Harness(apps: ["a", "b"])
        h.launchActive("a")
        h.send(.restart("a"))
        h.send(.stop("a"))
        h.ackAll("a")
        #expect(spawned(h.send(.exited("a", generation: h.generation("a"), .exited(0))), "a") == nil)
        h.launchActive("b")
        h.send(.restart("b"))
        h.send(.shutdown)
        h.ackAll("b")
        #expect(spawned(h.send(.exited("b", generation: h.generation("b"), .exited(0))), "b") == nil)
    }

    /// A restart of `a` under way (stopping), the core saved and restored
    /// with `apps` configured.
    func restartedThenRestored(_ apps: [AppID]) throws -> (Harness, Supervisor) {
        var h = Harness(apps: apps)
        h.launchActive("a")
        h.send(.restart("a"))
        h.ackAll("a")
        let bytes = try JSONEncoder().encode(h.supervisor.saved)
        let restored = Supervisor(
            restoring: try JSONDecoder().decode(CoreState.self, from: bytes), foregroundSlots: 1,
            apps: Dictionary(uniqueKeysWithValues: apps.map { ($0, AppPolicy()) }))
        return (h, restored)
    }

    @Test func aRestartUnderWaySurvivesARestore() throws {
        var (h, restored) = try restartedThenRestored(["a"])
        let effects = restored.handle(.exited("a", generation: h.generation("a"), .exited(0)), now: h.now)
        #expect(spawned(effects, "a") == .foreground)
    }

    /// `home` looks for a restart under way among the running apps only: a
    /// restored core knows which they are, so a home after the restore
    /// still sends the restarted app to the background.
    @Test func aHomeAfterARestoreStillFindsTheRestartUnderWay() throws {
        var (h, restored) = try restartedThenRestored(["a", "b", "c"])
        _ = restored.handle(.display(nil, .home), now: h.now)
        let effects = restored.handle(.exited("a", generation: h.generation("a"), .exited(0)), now: h.now)
        #expect(spawned(effects, "a") == .background)
    }
}
