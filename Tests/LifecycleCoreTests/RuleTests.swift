import Testing
@testable import LifecycleCore

/// One test per row of docs/lifecycle.md's tables, on a manual clock.
@Suite struct EventOrderTests {
    @Test func launchIntoForeground() {
        var h = Harness(apps: ["a"])
        let effects = h.send(.launch("a", .foreground))
        #expect(effects.first == .spawn("a", generation: 1, mode: .foreground))
        #expect(
            h.eventsUntilQuiet("a", after: effects) == [.willFinishLaunching, .didFinishLaunching, .didBecomeActive])
        #expect(h.state("a") == .active)
        #expect(h.transitions("a") == [.inactive, .active])
    }

    @Test func launchIntoBackgroundThenSuspended() {
        var h = Harness(apps: ["a"])
        let effects = h.send(.launch("a", .background))
        #expect(
            h.eventsUntilQuiet("a", after: effects) == [.willFinishLaunching, .didFinishLaunching, .didEnterBackground])
        #expect(h.log.contains(.freeze("a")))
        #expect(h.transitions("a") == [.background, .suspended])
    }

    @Test func launchDoesNotSendWillEnterForeground() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        #expect(!Harness.events("a", in: h.log).contains(.willEnterForeground))
    }

    @Test func leavingForegroundForAnotherApp() {
        var h = Harness(apps: ["a", "b"])
        h.launchActive("a")
        let effects = h.send(.activate("b"))
        #expect(h.eventsUntilQuiet("a", after: effects) == [.willResignActive, .didEnterBackground])
        h.ackAll("b")
        #expect(h.state("a") == .suspended)
        #expect(h.state("b") == .active)
        #expect(h.transitions("a") == [.inactive, .active, .inactive, .background, .suspended])
    }

    @Test func home() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        #expect(h.eventsUntilQuiet("a", after: h.send(.home)) == [.willResignActive, .didEnterBackground])
        #expect(h.state("a") == .suspended)
    }

    @Test func comesBackFromSuspended() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        h.eventsUntilQuiet("a", after: h.send(.home))
        let effects = h.send(.activate("a"))
        #expect(effects.first == .thaw("a"))
        #expect(h.eventsUntilQuiet("a", after: effects) == [.willEnterForeground, .didBecomeActive])
        #expect(h.transitions("a").suffix(3) == [.background, .inactive, .active])
    }

    @Test func interruptionBeginsAndEnds() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        #expect(h.eventsUntilQuiet("a", after: h.send(.interruptionBegan)) == [.willResignActive])
        #expect(h.state("a") == .inactive)
        #expect(h.eventsUntilQuiet("a", after: h.send(.interruptionEnded)) == [.didBecomeActive])
        #expect(h.state("a") == .active)
    }

    @Test func interruptedAppSentHomeGetsOnlyDidEnterBackground() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        h.eventsUntilQuiet("a", after: h.send(.interruptionBegan))
        #expect(h.eventsUntilQuiet("a", after: h.send(.home)) == [.didEnterBackground])
    }

    @Test func nestedInterruptionsEndTogether() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        h.eventsUntilQuiet("a", after: h.send(.interruptionBegan))
        #expect(h.eventsUntilQuiet("a", after: h.send(.interruptionBegan)) == [])
        #expect(h.eventsUntilQuiet("a", after: h.send(.interruptionEnded)) == [])
        #expect(h.eventsUntilQuiet("a", after: h.send(.interruptionEnded)) == [.didBecomeActive])
        #expect(h.send(.interruptionEnded) == [.refused(.noInterruption)])
    }

    @Test func lockAndUnlock() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        #expect(h.eventsUntilQuiet("a", after: h.send(.lock)) == [.willResignActive, .didEnterBackground])
        #expect(h.state("a") == .suspended)
        #expect(h.eventsUntilQuiet("a", after: h.send(.unlock)) == [.willEnterForeground, .didBecomeActive])
        #expect(h.state("a") == .active)
    }

    @Test func activatingWhileLockedIsRefused() {
        var h = Harness(apps: ["a"])
        h.send(.lock)
        #expect(h.send(.activate("a")) == [.refused(.screenLocked)])
        #expect(h.send(.launch("a", .background)).first == .spawn("a", generation: 1, mode: .background))
    }

    @Test func userQuitsFrontApp() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        #expect(
            h.eventsUntilQuiet("a", after: h.send(.stop("a"))) == [
                .willResignActive, .didEnterBackground, .willTerminate,
            ])
        h.exit("a")
        #expect(h.state("a") == .notRunning)
        #expect(h.supervisor.snapshot("a")!.last?.reason == .stoppedByUser(killedAfterDeadline: false))
    }

    @Test func stoppedWhileRunningInBackground() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        let r = h.send(.beginBackgroundTask("a", generation: 1, request: 1, name: "upload"))
        #expect(r == [.backgroundTaskReply("a", request: 1, task: 1, budgetEnd: nil)])
        h.eventsUntilQuiet("a", after: h.send(.home))
        #expect(h.state("a") == .background)
        #expect(h.eventsUntilQuiet("a", after: h.send(.stop("a"))) == [.willTerminate])
    }

    @Test func stoppedWhileSuspendedIsKilledWithoutNotice() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        h.eventsUntilQuiet("a", after: h.send(.home))
        let effects = h.send(.stop("a"))
        #expect(effects == [.kill("a", .stoppedByUser(killedAfterDeadline: false))])
        h.exit("a", .signaled(9))
        #expect(h.supervisor.snapshot("a")!.last?.reason == .stoppedByUser(killedAfterDeadline: false))
    }

    @Test func terminateDeadlineEndsInSigkill() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        h.eventsUntilQuiet("a", after: h.send(.stop("a")))
        #expect(h.advance(.milliseconds(4999)).isEmpty)
        #expect(h.advance(.milliseconds(1)) == [.kill("a", .stoppedByUser(killedAfterDeadline: true))])
    }

    @Test func unexpectedExitIsRecorded() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        h.exit("a", .exited(3))
        #expect(h.supervisor.snapshot("a")!.last?.reason == .exited(code: 3))
        #expect(h.supervisor.foreground.isEmpty)
        // The next launch tells the app why its previous run ended.
        let effects = h.send(.activate("a"))
        guard case .deliver(_, let d)? = effects.first(where: { if case .deliver = $0 { true } else { false } }) else {
            Issue.record("no delivery"); return
        }
        #expect(d.previous?.reason == .exited(code: 3))
        #expect(h.generation("a") == 2)
    }
}

@Suite struct DeadlineTests {
    @Test func launchWatchdog() {
        var h = Harness(apps: ["a"])
        h.send(.activate("a"))
        #expect(h.advance(.seconds(5)) == [.kill("a", .launchWatchdog)])
        h.exit("a", .signaled(9))
        #expect(h.supervisor.snapshot("a")!.last?.reason == .launchWatchdog)
    }

    @Test func eventWatchdog() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        h.send(.interruptionBegan)
        #expect(h.advance(.seconds(5)) == [.kill("a", .eventWatchdog(event: .willResignActive))])
    }

    @Test func backgroundWatchdog() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        h.send(.home)
        h.send(.acknowledged("a", generation: 1, sequence: h.outstanding("a")!.sequence))
        #expect(h.outstanding("a")?.event == .didEnterBackground)
        #expect(h.advance(.seconds(5)) == [.kill("a", .backgroundWatchdog)])
    }

    @Test func eachEventCarriesItsAbsoluteDeadline() {
        var policy = AppPolicy()
        policy.eventTimeout = .seconds(2)
        var h = Harness(["a": policy])
        h.launchActive("a")
        h.now = h.now + .seconds(10)
        h.send(.interruptionBegan)
        #expect(h.outstanding("a")?.deadline == h.now + .seconds(2))
    }

    @Test func deadlinePassedBeforeAckWins() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        h.send(.interruptionBegan)
        let seq = h.outstanding("a")!.sequence
        h.now = h.now + .seconds(6)
        #expect(
            h.send(.acknowledged("a", generation: 1, sequence: seq)) == [
                .kill("a", .eventWatchdog(event: .willResignActive))
            ])
    }
}

@Suite struct BackgroundTaskTests {
    /// Goes home and acks willResignActive; returns with didEnterBackground outstanding.
    func homeAwaitingDidEnterBackground(_ h: inout Harness) {
        h.send(.home)
        h.send(.acknowledged("a", generation: 1, sequence: h.outstanding("a")!.sequence))
    }

    @Test func taskKeepsAppRunningUntilItEnds() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        homeAwaitingDidEnterBackground(&h)
        let d = h.outstanding("a")!
        #expect(d.budgetEnd == h.now + .seconds(30))
        let reply = h.send(.beginBackgroundTask("a", generation: 1, request: 7, name: "save"))
        #expect(reply == [.backgroundTaskReply("a", request: 7, task: 1, budgetEnd: h.now + .seconds(30))])
        // The 5 s background watchdog no longer applies.
        #expect(h.advance(.seconds(6)).isEmpty)
        h.send(.acknowledged("a", generation: 1, sequence: d.sequence))
        #expect(h.state("a") == .background)
        #expect(h.send(.endBackgroundTask("a", generation: 1, task: 1)).contains(.freeze("a")))
        #expect(h.state("a") == .suspended)
    }

    @Test func expirationBeforeBudgetEndsThenKill() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        h.send(.beginBackgroundTask("a", generation: 1, request: 1, name: "t1"))
        h.send(.beginBackgroundTask("a", generation: 1, request: 2, name: "t2"))
        h.eventsUntilQuiet("a", after: h.send(.home))
        #expect(h.state("a") == .background)
        #expect(h.advance(.seconds(24)).isEmpty)
        #expect(h.advance(.seconds(1)) == [.expireBackgroundTasks("a", [1, 2])])
        h.send(.endBackgroundTask("a", generation: 1, task: 1))
        #expect(h.advance(.seconds(5)) == [.kill("a", .backgroundTaskExpired)])
    }

    @Test func oneBudgetSharedByAllTasksOfOneStay() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        h.send(.beginBackgroundTask("a", generation: 1, request: 1, name: "t1"))
        h.eventsUntilQuiet("a", after: h.send(.home))
        h.advance(.seconds(20))
        // A second task draws on the same budget: it ends at 30 s, not 50 s.
        #expect(
            h.send(.beginBackgroundTask("a", generation: 1, request: 2, name: "t2"))
                == [.backgroundTaskReply("a", request: 2, task: 2, budgetEnd: .zero + .seconds(30))])
        h.advance(.seconds(5))
        #expect(h.advance(.seconds(5)).contains(.kill("a", .backgroundTaskExpired)))
    }

    @Test func taskBegunAfterTheWarningIsWarnedAtOnce() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        h.send(.beginBackgroundTask("a", generation: 1, request: 1, name: "t1"))
        h.eventsUntilQuiet("a", after: h.send(.home))
        h.advance(.seconds(26))
        #expect(
            h.send(.beginBackgroundTask("a", generation: 1, request: 2, name: "late"))
                == [
                    .backgroundTaskReply("a", request: 2, task: 2, budgetEnd: .zero + .seconds(30)),
                    .expireBackgroundTasks("a", [2]),
                ])
    }

    @Test func budgetRestartsOnEachStay() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        h.send(.beginBackgroundTask("a", generation: 1, request: 1, name: "t1"))
        h.eventsUntilQuiet("a", after: h.send(.home))
        h.advance(.seconds(20))
        h.eventsUntilQuiet("a", after: h.send(.activate("a")))
        h.advance(.seconds(20))
        h.eventsUntilQuiet("a", after: h.send(.home))
        #expect(h.supervisor.snapshot("a")!.budgetEnd == h.now + .seconds(30))
        #expect(h.advance(.seconds(29)).contains(.expireBackgroundTasks("a", [1])))
    }

    @Test func exhaustedBudgetRefusesNewTasks() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        h.send(.beginBackgroundTask("a", generation: 1, request: 1, name: "t1"))
        h.eventsUntilQuiet("a", after: h.send(.home))
        // A continuous check at the exact end: the budget is spent.
        h.now = h.now + .seconds(30)
        let effects = h.send(.beginBackgroundTask("a", generation: 1, request: 2, name: "t2"))
        #expect(effects.contains(.kill("a", .backgroundTaskExpired)))
        #expect(
            effects.contains(.backgroundTaskReply("a", request: 2, task: nil, budgetEnd: nil))
                || effects.contains(.backgroundTaskReply("a", request: 2, task: nil, budgetEnd: .zero + .seconds(30))))
    }

    @Test func tooManyTasksGetTheInvalidID() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        for i in 0..<Supervisor.maxBackgroundTasks {
            h.send(.beginBackgroundTask("a", generation: 1, request: UInt32(i), name: "t"))
        }
        #expect(
            h.send(.beginBackgroundTask("a", generation: 1, request: 999, name: "t"))
                == [.backgroundTaskReply("a", request: 999, task: nil, budgetEnd: nil)])
    }

    @Test func endingAnUnknownTaskIsIgnored() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        #expect(h.send(.endBackgroundTask("a", generation: 1, task: 42)).isEmpty)
    }
}

@Suite struct BackgroundModeTests {
    @Test func continuousModePreventsSuspension() {
        var policy = AppPolicy()
        policy.backgroundModes = [.audio]
        var h = Harness(["a": policy])
        h.launchActive("a")
        h.eventsUntilQuiet("a", after: h.send(.home))
        h.advance(.seconds(3600))
        #expect(h.state("a") == .background)
        #expect(!h.log.contains(.freeze("a")))
    }

    @Test func exitsOnSuspendTerminatesInstead() {
        var policy = AppPolicy()
        policy.exitsOnSuspend = true
        var h = Harness(["a": policy])
        h.launchActive("a")
        #expect(
            h.eventsUntilQuiet("a", after: h.send(.home)) == [.willResignActive, .didEnterBackground, .willTerminate])
        #expect(!h.log.contains(.freeze("a")))
        h.exit("a")
        #expect(h.supervisor.snapshot("a")!.last?.reason == .exitedOnSuspend(killedAfterDeadline: false))
    }

    /// Locked, an exits-on-suspend app in front is terminated, and gives its
    /// slot up as a user quit does rather than hold it while it ends.
    @Test func exitsOnSuspendUnderTheLockGivesItsSlotUp() {
        var policy = AppPolicy()
        policy.exitsOnSuspend = true
        var h = Harness(["a": policy])
        h.launchActive("a")
        #expect(
            h.eventsUntilQuiet("a", after: h.send(.lock)) == [.willResignActive, .didEnterBackground, .willTerminate])
        #expect(h.supervisor.foreground.isEmpty)
        h.exit("a")
        #expect(h.state("a") == .notRunning)
    }
}

@Suite struct ForegroundSlotTests {
    @Test func oneSlotByDefault() {
        var h = Harness(apps: ["a", "b"])
        h.launchActive("a")
        h.launchActive("b")
        h.ackAll("a")
        #expect(h.supervisor.foreground == ["b"])
        #expect(h.state("a") == .suspended)
    }

    @Test func twoSlotsEvictTheLeastRecentlyActivated() {
        var h = Harness(slots: 2, apps: ["a", "b", "c"])
        h.launchActive("a")
        h.launchActive("b")
        #expect(h.state("a") == .active && h.state("b") == .active)
        h.launchActive("c")
        h.ackAll("a")
        #expect(h.supervisor.foreground == ["b", "c"])
        #expect(h.state("a") == .suspended)
        // Re-activating b makes a the oldest... a is not in front; c is now oldest.
        h.eventsUntilQuiet("a", after: h.send(.activate("a")))
        h.ackAll("b")
        #expect(h.supervisor.foreground == ["c", "a"])
        #expect(h.state("b") == .suspended)
    }
}

@Suite struct PlainProgramTests {
    @Test func signalsWithoutAcknowledgementsAndGraceBeforeFreeze() {
        var h = Harness(["p": .plain])
        let launch = h.send(.activate("p"))
        #expect(Harness.events("p", in: launch) == [], "no signal right after exec")
        #expect(h.state("p") == .active)
        let home = h.send(.home)
        #expect(Harness.events("p", in: home) == [.willResignActive, .didEnterBackground])
        #expect(home.allSatisfy { if case .deliver(_, let d) = $0 { d.deadline == nil } else { true } })
        #expect(h.state("p") == .background)
        #expect(h.advance(.milliseconds(4999)).isEmpty)
        #expect(h.advance(.milliseconds(1)) == [.freeze("p"), .transition("p", from: .background, to: .suspended)])
    }

    @Test func plainBackgroundLaunchIsSilentToo() {
        var h = Harness(["p": .plain])
        #expect(Harness.events("p", in: h.send(.launch("p", .background))) == [])
        #expect(h.state("p") == .background)
        #expect(h.advance(.seconds(5)).contains(.freeze("p")))
    }

    @Test func plainStopSendsWillTerminateThenKills() {
        var h = Harness(["p": .plain])
        h.send(.activate("p"))
        #expect(
            Harness.events("p", in: h.send(.stop("p"))) == [.willResignActive, .didEnterBackground, .willTerminate])
        #expect(h.advance(.seconds(5)) == [.kill("p", .stoppedByUser(killedAfterDeadline: true))])
    }
}

@Suite struct RobustnessTests {
    @Test func ackForAnEventNeverSentIsAProtocolViolation() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        #expect(
            h.send(.acknowledged("a", generation: 1, sequence: 77)) == [
                .kill(
                    "a", .protocolViolation(message: "acknowledged event 77, which was not awaiting an acknowledgement")
                )
            ])
    }

    @Test func reportsAboutAnEarlierRunAreIgnored() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        h.exit("a")
        h.launchActive("a")
        #expect(h.send(.exited("a", generation: 1, .exited(1))).isEmpty)
        #expect(h.state("a") == .active)
    }

    @Test func refusals() {
        var h = Harness(apps: ["a"])
        #expect(h.send(.activate("nope")) == [.refused(.unknownApp("nope"))])
        #expect(h.send(.stop("a")) == [.refused(.notRunning("a"))])
        #expect(h.send(.kill("a")) == [.refused(.notRunning("a"))])
        #expect(h.send(.unlock) == [.refused(.notLocked)])
        h.launchActive("a")
        #expect(h.send(.launch("a", .background)) == [.refused(.alreadyRunning("a", .active))])
    }

    @Test func killByUser() {
        var h = Harness(apps: ["a"])
        h.launchActive("a")
        #expect(h.send(.kill("a")) == [.kill("a", .killedByUser)])
        h.exit("a", .signaled(9))
        #expect(h.supervisor.snapshot("a")!.last?.reason == .killedByUser)
    }

    @Test func shutdownStopsEveryAppAsAUserQuitWould() {
        var h = Harness(slots: 2, apps: ["a", "b", "c"])
        h.launchActive("a")
        h.launchActive("b")
        h.eventsUntilQuiet("c", after: h.send(.launch("c", .background)))
        let effects = h.send(.shutdown)
        #expect(effects.contains(.kill("c", .shutdown(killedAfterDeadline: false))))
        #expect(h.eventsUntilQuiet("a", after: effects) == [.willResignActive, .didEnterBackground, .willTerminate])
        #expect(h.send(.activate("c")) == [.refused(.shuttingDown)])
        h.exit("a"); h.exit("b"); h.exit("c", .signaled(9))
        #expect(h.supervisor.allStopped)
        #expect(h.supervisor.snapshot("a")!.last?.reason == .shutdown(killedAfterDeadline: false))
    }

    @Test func launchFailureIsRecorded() {
        var h = Harness(apps: ["a"])
        h.send(.activate("a"))
        h.send(.launchFailed("a", generation: 1, message: "No such file or directory"))
        #expect(h.state("a") == .notRunning)
        #expect(h.supervisor.snapshot("a")!.last?.reason == .launchFailed(message: "No such file or directory"))
        #expect(h.supervisor.nextDeadline() == nil)
    }
}

/// Refusals reach people as sentences and scripts as stable codes.
@Suite struct RefusalTests {
    @Test func everyRefusalHasASentenceAndAStableCode() {
        let all: [(Refusal, String, String)] = [
            (.unknownApp("x"), "unknown-app", "unknown app 'x'"),
            (.alreadyRunning("x", .suspended), "already-running", "'x' is already running (suspended)"),
            (.notRunning("x"), "not-running", "'x' is not running"),
            (.stopping("x"), "stopping", "'x' is stopping"),
            (.screenLocked, "screen-locked", "the screen is locked"),
            (.alreadyLocked, "already-locked", "already locked"),
            (.notLocked, "not-locked", "not locked"),
            (.sessionLocked, "session-locked", "the session is locked: its screen locker unlocks it"),
            (.noInterruption, "no-interruption", "no interruption is in progress"),
            (.shuttingDown, "shutting-down", "the daemon is shutting down"),
        ]
        for (refusal, code, sentence) in all {
            #expect(refusal.code == code)
            #expect(refusal.description == sentence)
        }
    }
}

@Suite struct FreezeFailureTests {
    /// A suspended app whose freeze the kernel has not confirmed within
    /// the freeze deadline is killed, like one that missed a deadline, with
    /// the kernel's refusal when there was one; a confirmation in time, a
    /// thaw, or another run's report changes that as it should.
    @Test func aSuspendedAppThatCannotBeFrozenIsKilledAtTheFreezeDeadline() {
        var h = Harness(apps: ["a"])
        h.confirmsFreezes = false
        h.launchActive("a")
        h.eventsUntilQuiet("a", after: h.send(.home))
        #expect(h.state("a") == .suspended)
        _ = h.send(.freezeRefused("a", generation: h.generation("a") + 1, why: "x"))
        _ = h.send(.frozen("a", generation: h.generation("a") + 1))
        _ = h.advance(Supervisor.freezeDeadline - .nanoseconds(1))
        #expect(h.killReason("a") == nil, "not yet; another run's reports change nothing")
        _ = h.send(.freezeRefused("a", generation: h.generation("a"), why: "EMFILE"))
        _ = h.advance(.nanoseconds(1))
        #expect(h.killReason("a") == .freezeFailed(why: "the kernel refused: EMFILE"))
        #expect(h.killReason("a")?.code.rawValue == "freeze-failed")

        var late = Harness(apps: ["b"])
        late.confirmsFreezes = false
        late.launchActive("b")
        late.eventsUntilQuiet("b", after: late.send(.home))
        _ = late.advance(Supervisor.freezeDeadline)
        #expect(late.killReason("b") == .freezeFailed(why: "not frozen after 5 s"))
    }

    @Test func aConfirmedFreezeOrAThawEndsTheDeadline() {
        var h = Harness(apps: ["a"])
        h.confirmsFreezes = false
        h.launchActive("a")
        h.eventsUntilQuiet("a", after: h.send(.home))
        _ = h.advance(.seconds(1))
        _ = h.send(.frozen("a", generation: h.generation("a")))
        _ = h.advance(.seconds(10))
        #expect(h.killReason("a") == nil && h.state("a") == .suspended)

        var thawed = Harness(apps: ["b"])
        thawed.confirmsFreezes = false
        thawed.launchActive("b")
        thawed.eventsUntilQuiet("b", after: thawed.send(.home))
        _ = thawed.send(.freezeRefused("b", generation: thawed.generation("b"), why: "EMFILE"))
        thawed.eventsUntilQuiet("b", after: thawed.send(.activate("b")))
        #expect(thawed.state("b") == .active)
        _ = thawed.advance(.seconds(10))
        #expect(thawed.killReason("b") == nil, "a thawed app has no freeze to wait for")
        // Suspended again: a fresh deadline, and the old refusal is forgotten.
        thawed.eventsUntilQuiet("b", after: thawed.send(.home))
        _ = thawed.advance(Supervisor.freezeDeadline)
        #expect(thawed.killReason("b") == .freezeFailed(why: "not frozen after 5 s"))
    }
}

/// Deadlines are judged on what the app did: an answer the shell found
/// waiting when it first looked after the deadline (a stalled daemon)
/// goes before it; otherwise the deadline wins.
@Suite struct JudgedOnWhatTheAppDidTests {
    @Test(arguments: [true, false]) func anAnswerFoundAtTheFirstLookGoesBeforeItsDeadline(foundWaiting: Bool) {
        var h = Harness(["a": AppPolicy()])
        h.launchActive("a")
        h.send(.home)
        let d = h.outstanding("a")!
        #expect(d.event == .willResignActive)
        h.now = h.now + .seconds(30)  // the daemon was stopped; its timer has not fired
        #expect(h.supervisor.appsWithDeadlinesDue(at: h.now) == ["a"])
        let effects = h.supervisor.handle(
            .acknowledged("a", generation: 1, sequence: d.sequence), now: h.now, beforeDeadlines: foundWaiting)
        let killed = effects.contains { if case .kill("a", _) = $0 { true } else { false } }
        #expect(killed == !foundWaiting)
        if foundWaiting { #expect(Harness.events("a", in: effects) == [.didEnterBackground]) }
    }

    /// An event that left the shell late (the daemon stalled between the
    /// decision and the save) gives the app its whole time from then.
    @Test func anEventThatLeftLateMovesItsDeadline() {
        var h = Harness(["a": AppPolicy()])
        h.launchActive("a")
        h.send(.home)
        let d = h.outstanding("a")!
        h.now = h.now + .seconds(3)  // the daemon stalled before it could send
        h.send(.left("a", generation: 1, sequence: d.sequence, at: h.now))
        #expect(h.advance(.seconds(4.9)).isEmpty, "5 s from when it left, not from the decision")
        let late = h.advance(.seconds(0.2))
        #expect(late.contains { if case .kill("a", .eventWatchdog) = $0 { true } else { false } })
        // About an event no longer awaited (or another run's): nothing moves.
        var g = Harness(["a": AppPolicy()])
        g.launchActive("a")
        g.send(.home)
        let e = g.outstanding("a")!
        g.send(.left("a", generation: 1, sequence: e.sequence - 1, at: g.now + .seconds(3)))
        g.send(.left("a", generation: 2, sequence: e.sequence, at: g.now + .seconds(3)))
        #expect(g.advance(.seconds(5)).contains { if case .kill = $0 { true } else { false } })
    }
}
