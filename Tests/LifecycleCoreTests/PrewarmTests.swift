import Foundation
import Testing

@testable import LifecycleCore

/// Prewarming (Prewarm.swift, docs/lifecycle.md "Prewarming"), on a manual clock.
@Suite struct PrewarmTests {
    static func policy(_ prewarm: PrewarmPolicy, plain: Bool = false) -> AppPolicy {
        var p = plain ? AppPolicy.plain : AppPolicy()
        if plain { p.awaitsReadiness = true }
        p.prewarm = prewarm
        return p
    }

    /// A harness whose budget has room for `room` prewarms never measured.
    static func world(_ apps: [AppID: AppPolicy], room: UInt64 = 4) -> Harness {
        var h = Harness(apps)
        h.supervisor.prewarmBudget = room * Supervisor.prewarmGuess
        return h
    }

    static func prewarmed(_ effects: [Effect]) -> [AppID] {
        effects.compactMap { if case .prewarm(let id, _) = $0 { id } else { nil } }
    }

    static func spawned(_ effects: [Effect]) -> [AppID] {
        effects.compactMap { if case .spawn(let id, _, _) = $0 { id } else { nil } }
    }

    /// The app says it is at its first event.
    static func hold(_ h: inout Harness, _ id: AppID) -> [Effect] {
        h.send(.prewarmed(id, generation: h.generation(id)))
    }

    @Test func anAlwaysAppIsHeldFrozenAndAnActivationOnlyDeliversTheLaunchEvents() {
        var h = Self.world(["a": Self.policy(.always)])
        let first = h.send(.tick)
        #expect(Self.prewarmed(first) == ["a"])
        #expect(h.state("a") == .prewarmed)
        #expect(Harness.events("a", in: first).isEmpty, "told nothing")
        let generation = h.generation("a")
        #expect(Self.hold(&h, "a").contains(.freeze("a")))
        #expect(h.supervisor.snapshot("a")!.launching == false)

        let use = h.send(.activate("a"))
        #expect(use.contains(.thaw("a")))
        #expect(Self.spawned(use).isEmpty, "the prewarmed process is taken over, not a new one")
        #expect(h.generation("a") == generation, "the same run")
        #expect(
            h.eventsUntilQuiet("a", after: use) == [.willFinishLaunching, .didFinishLaunching, .didBecomeActive])
        #expect(h.state("a") == .active)
        #expect(h.killReason("a") == nil, "each acknowledged in turn")
        #expect(h.supervisor.apps["a"]!.launchReason == .user)
        #expect(h.supervisor.apps["a"]!.history.uses.count == 1, "the use is the user's, the prewarm was not")
        #expect(h.transitions("a") == [.prewarmed, .inactive, .active])

        // It ends on its own: prewarmed again at once.
        #expect(Self.prewarmed(h.send(.exited("a", generation: generation, .exited(0)))) == ["a"])
    }

    @Test func aPrewarmIsNotAUseAndItsEndIsNotACrash() {
        var p = Self.policy(.always)
        p.restart.when = .always
        var h = Self.world(["a": p])
        h.send(.tick)
        #expect(h.supervisor.apps["a"]!.history.uses.isEmpty)
        // It dies on its own before it is held: not relaunched, and not
        // prewarmed again until its manifest changes.
        let end = h.send(.exited("a", generation: h.generation("a"), .signaled(11)))
        #expect(!end.contains { if case .relaunchScheduled = $0 { true } else { false } })
        #expect(Self.prewarmed(end).isEmpty)
        #expect(h.supervisor.apps["a"]!.history.prewarmRefusal?.contains("while it was prewarming") == true)
        #expect(h.supervisor.apps["a"]!.restarts == nil, "no end counted")
        var changed = p
        changed.launchTimeout = .seconds(9)
        #expect(Self.prewarmed(h.send(.reconfigure(["a": changed]))) == ["a"], "a changed manifest may try again")
    }

    @Test func oneThatNeverSaysItIsHeldIsGivenUpAtItsLaunchTimeout() {
        var h = Self.world(["a": Self.policy(.always)])
        h.send(.tick)
        h.advance(.seconds(5))
        guard case .prewarmDropped(let why)? = h.killReason("a") else {
            Issue.record("not given up: \(String(describing: h.killReason("a")))")
            return
        }
        #expect(why.contains("not at its first event"))
        #expect(Self.prewarmed(h.send(.exited("a", generation: h.generation("a"), .signaled(9)))).isEmpty)
        #expect(h.supervisor.snapshot("a")!.last?.reason.code == .prewarmDropped)
    }

    @Test func theBudgetHoldsAndRoomMadeLetsTheNextIn() {
        var h = Self.world(
            ["a": Self.policy(.always), "b": Self.policy(.always), "c": Self.policy(.always)], room: 2)
        #expect(Self.prewarmed(h.send(.tick)) == ["a", "b"])
        #expect(h.state("c") == .notRunning)
        #expect(h.supervisor.snapshot("c")!.prewarmWaiting, "status says why")
        _ = Self.hold(&h, "a")
        // A use of `a` makes room: `c` takes it.
        let use = h.send(.activate("a"))
        #expect(Self.prewarmed(use) == ["c"])
        // What a prewarm held once measured is its next estimate; measured
        // smaller than the guess, it makes room at once.
        _ = Self.hold(&h, "b")
        _ = Self.hold(&h, "c")
        var room = Self.world(
            ["a": Self.policy(.always), "b": Self.policy(.always), "c": Self.policy(.always)], room: 2)
        room.supervisor.prewarmBudget = 70 << 20  // two guesses and a little
        #expect(Self.prewarmed(room.send(.tick)) == ["a", "b"])
        _ = Self.hold(&room, "a")
        #expect(
            Self.prewarmed(room.send(.measured("a", generation: room.generation("a"), footprint: 5 << 20))) == ["c"])
        #expect(room.supervisor.apps["a"]!.history.prewarmFootprint == 5 << 20)
        h.send(.measured("b", generation: h.generation("b"), footprint: 6 << 20))
        h.send(.kill("b"))
        h.exit("b", .signaled(9))
        #expect(h.supervisor.apps["b"]!.history.prewarmFootprint == 6 << 20)
    }

    @Test func neverAndPlainProgramsThatDoNotSayAreNotPrewarmed() {
        var h = Self.world([
            "never": Self.policy(.never),
            "plain": {
                var p = AppPolicy.plain
                p.prewarm = .always  // no readiness: nowhere to hold it
                return p
            }(),
        ])
        #expect(Self.prewarmed(h.send(.tick)).isEmpty)
        var off = Self.world(["a": Self.policy(.always)], room: 0)
        #expect(Self.prewarmed(off.send(.tick)).isEmpty, "a budget of 0: no prewarming")
    }

    @Test func aPlainProgramIsHeldAtReadyAndActivatedWithoutASpawn() {
        var h = Self.world(["p": Self.policy(.always, plain: true)])
        #expect(Self.prewarmed(h.send(.tick)) == ["p"])
        #expect(h.send(.ready("p", generation: h.generation("p"))).contains(.freeze("p")))
        let use = h.send(.activate("p"))
        #expect(use.contains(.thaw("p")) && Self.spawned(use).isEmpty)
        #expect(h.state("p") == .active, "ready already: it goes straight to the front")
    }

    @Test func memoryShortDropsPrewarmsFirstAndNormalBringsThemBack() {
        var h = Self.world(["a": Self.policy(.always), "s": AppPolicy()])
        h.send(.tick)
        _ = Self.hold(&h, "a")
        h.suspend("s")
        #expect(h.supervisor.memoryKillOrder() == ["a", "s"], "prewarmed before suspended")
        h.memory(.warning)
        guard case .prewarmDropped(let why)? = h.killReason("a") else {
            Issue.record("not dropped at warning")
            return
        }
        #expect(why.contains("warning"))
        #expect(h.state("s") == .suspended, "the suspended app is left alone")
        #expect(Self.prewarmed(h.send(.exited("a", generation: h.generation("a"), .signaled(9)))).isEmpty)
        #expect(Self.prewarmed(h.memory(.normal)) == ["a"])
    }

    @Test func aPredictedUseIsPrewarmedBeforeItAndGivenUpUnused() {
        var h = Self.world(["a": Self.policy(.predicted)])
        let day = Duration.seconds(86_400)
        // Used at 09:00 three days running.
        for d in 0..<3 {
            h.now = Instant.zero + day * d + .seconds(9 * 3600)
            h.launchActive("a")
            h.exit("a", .exited(0))  // on its own: not a user's quit
        }
        // The next morning: the window opens at 08:30.
        h.now = Instant.zero + day * 3 + .seconds(6 * 3600)
        #expect(Self.prewarmed(h.send(.tick)).isEmpty)
        #expect(h.supervisor.nextDeadline() == Instant.zero + day * 3 + .seconds(8 * 3600 + 1800))
        #expect(h.supervisor.snapshot("a")!.prewarmAt == h.supervisor.nextDeadline(), "status says when")
        h.now = h.supervisor.nextDeadline()!
        #expect(Self.prewarmed(h.send(.tick)) == ["a"])
        _ = Self.hold(&h, "a")
        // Unused by 09:30: given up.
        h.now = Instant.zero + day * 3 + .seconds(9 * 3600 + 1800)
        h.send(.tick)
        guard case .prewarmDropped(let why)? = h.killReason("a") else {
            Issue.record("kept")
            return
        }
        #expect(why.contains("not used"))
    }

    /// Stopped by the user, a prewarm is not made again until the user
    /// launches the app; a user's quit of the running app keeps only a
    /// predicted prewarm away (an `always` app is prewarmed again).
    @Test func aStopEndsAPrewarmAtOnceAndKeepsItAwayUntilAUserLaunch() {
        var h = Self.world(["a": Self.policy(.always)])
        h.send(.tick)
        _ = Self.hold(&h, "a")
        let stop = h.send(.stop("a"))
        #expect(stop.contains { if case .kill("a", .stoppedByUser) = $0 { true } else { false } })
        #expect(Self.prewarmed(h.send(.exited("a", generation: h.generation("a"), .signaled(9)))).isEmpty)
        #expect(h.state("a") == .notRunning)
        // A user's launch lifts it; its end brings the prewarm back.
        h.launchActive("a")
        #expect(Self.prewarmed(h.send(.exited("a", generation: h.generation("a"), .exited(0)))) == ["a"])
        // Quit as it runs: prewarmed again, being `always`.
        _ = Self.hold(&h, "a")
        h.launchActive("a")
        h.send(.kill("a"))
        #expect(Self.prewarmed(h.send(.exited("a", generation: h.generation("a"), .signaled(9)))) == ["a"])
    }

    @Test func aRestartKeepsAHeldPrewarmAndGivesUpOneOnItsWay() {
        var h = Self.world(["a": Self.policy(.always), "b": Self.policy(.always)])
        h.send(.tick)
        _ = Self.hold(&h, "a")  // b is still on its way
        var restored = Harness(["a": Self.policy(.always), "b": Self.policy(.always)])
        restored.supervisor = Supervisor(
            restoring: h.supervisor.saved, foregroundSlots: 1,
            apps: ["a": Self.policy(.always), "b": Self.policy(.always)], afterCrash: true)
        restored.supervisor.prewarmBudget = 4 * Supervisor.prewarmGuess
        restored.now = h.now
        let first = restored.send(.tick)
        #expect(first.contains { if case .kill("b", .prewarmDropped) = $0 { true } else { false } })
        #expect(restored.state("a") == .prewarmed)
        let use = restored.send(.activate("a"))
        #expect(use.contains(.thaw("a")))
        #expect(restored.eventsUntilQuiet("a", after: use).first == .willFinishLaunching)
        // b's end is no crash and no refusal: it is prewarmed again.
        let end = restored.send(.exited("b", generation: restored.generation("b"), .signaled(9)))
        #expect(Self.prewarmed(end) == ["b"])
    }

    /// The deliveries to `id` in `effects`.
    static func delivered(_ id: AppID, in effects: [Effect]) -> [Delivered] {
        effects.compactMap { if case .deliver(id, let d) = $0 { d } else { nil } }
    }

    @Test func aHeldPrewarmsLaunchEventsGoTogetherEachAwaitedInTurn() {
        var h = Self.world(["a": Self.policy(.always)])
        h.send(.tick)
        _ = Self.hold(&h, "a")
        let use = h.send(.activate("a"))
        let sent = Self.delivered("a", in: use)
        #expect(sent.map(\.event) == [.willFinishLaunching, .didFinishLaunching, .didBecomeActive], "in one step")
        #expect(sent.map(\.behind) == [false, true, true])
        #expect(sent.map(\.sequence) == [1, 2, 3])
        #expect(h.supervisor.channelState("a")!.awaiting == [1, 2, 3])
        #expect(h.state("a") == .active, "told so: the app is on its way there")

        // Each awaited in turn, its deadline its whole timeout from the
        // acknowledgement before it: the app could not handle it sooner.
        let launch = Self.policy(.always).launchTimeout
        h.advance(launch - .milliseconds(1))
        h.send(.acknowledged("a", generation: h.generation("a"), sequence: 1))
        #expect(h.supervisor.channelState("a")!.awaiting == [2, 3])
        h.advance(launch - .milliseconds(1))
        #expect(h.killReason("a") == nil, "not judged from when it was sent")
        h.send(.acknowledged("a", generation: h.generation("a"), sequence: 2))
        let event = Self.policy(.always).eventTimeout
        h.advance(event - .milliseconds(1))
        let last = h.send(.acknowledged("a", generation: h.generation("a"), sequence: 3))
        #expect(Harness.events("a", in: last).isEmpty)
        #expect(h.supervisor.channelState("a")!.awaiting.isEmpty)
        #expect(h.killReason("a") == nil)
        #expect(h.transitions("a") == [.prewarmed, .inactive, .active])
    }

    @Test func aWarningOwedWaitsForTheLaunchEventsThatWentTogether() {
        var h = Self.world(["a": Self.policy(.always)])
        h.send(.tick)
        _ = Self.hold(&h, "a")
        h.supervisor.apps["a"]!.warningPending = true
        let use = h.send(.activate("a"))
        #expect(Harness.events("a", in: use) == [.willFinishLaunching, .didFinishLaunching, .didBecomeActive])
        h.send(.acknowledged("a", generation: h.generation("a"), sequence: 1))
        h.send(.acknowledged("a", generation: h.generation("a"), sequence: 2))
        let last = h.send(.acknowledged("a", generation: h.generation("a"), sequence: 3))
        #expect(Harness.events("a", in: last) == [.didReceiveMemoryWarning], "after the three, one at a time")
    }

    @Test func anEventGoingTogetherIsKilledAtItsOwnDeadlineAndAnswersOnlyInOrder() {
        var h = Self.world(["a": Self.policy(.always), "b": Self.policy(.always)])
        h.send(.tick)
        _ = Self.hold(&h, "a")
        _ = Self.hold(&h, "b")
        h.send(.activate("a"))
        h.send(.acknowledged("a", generation: h.generation("a"), sequence: 1))
        h.advance(Self.policy(.always).launchTimeout)
        #expect(h.killReason("a") == .launchWatchdog, "didFinishLaunching's deadline, from the first acknowledgement")

        h.send(.activate("b"))
        h.send(.acknowledged("b", generation: h.generation("b"), sequence: 2))
        guard case .protocolViolation(let why)? = h.killReason("b") else {
            Issue.record("an answer out of order is a violation")
            return
        }
        #expect(why == "acknowledged event 2, which was not awaiting an acknowledgement")
    }

    @Test func onlyAHeldPrewarmsLaunchGoesTogether() {
        // A prewarm taken over before it was held, and a cold launch: one
        // event at a time, as ever.
        var h = Self.world(["a": Self.policy(.always), "cold": AppPolicy()])
        h.send(.tick)
        let taken = h.send(.activate("a"))  // still prewarming
        #expect(Harness.events("a", in: taken) == [.willFinishLaunching])
        #expect(h.eventsUntilQuiet("a", after: taken) == [.willFinishLaunching, .didFinishLaunching, .didBecomeActive])
        let cold = h.send(.activate("cold"))
        #expect(Harness.events("cold", in: cold) == [.willFinishLaunching])

        // A held prewarm used in the background: its launch, then
        // didEnterBackground, together; a stop meanwhile waits for them.
        var b = Self.world(["a": Self.policy(.always)])
        b.send(.tick)
        _ = Self.hold(&b, "a")
        let background = b.send(.launch("a", .background))
        #expect(
            Harness.events("a", in: background) == [.willFinishLaunching, .didFinishLaunching, .didEnterBackground])
        #expect(Harness.events("a", in: b.send(.stop("a"))).isEmpty, "willTerminate waits for the three answers")
        b.send(.acknowledged("a", generation: b.generation("a"), sequence: 1))
        b.send(.acknowledged("a", generation: b.generation("a"), sequence: 2))
        let answered = b.send(.acknowledged("a", generation: b.generation("a"), sequence: 3))
        #expect(Harness.events("a", in: answered) == [.willTerminate])
    }

    @Test func theEventsBehindAreSavedByNameAndAtMostTwoAreRead() throws {
        var record = AppRecord()
        record.awaiting = Awaiting(event: .willFinishLaunching, sequence: 7)
        record.sequence = 9
        record.queued.append(.didFinishLaunching)
        record.queued.append(.didBecomeActive)
        let data = try JSONEncoder().encode(record)
        let text = String(decoding: data, as: UTF8.self)
        #expect(text.contains(#""queued":["didFinishLaunching","didBecomeActive"]"#), "\(text)")
        let back = try JSONDecoder().decode(AppRecord.self, from: data)
        #expect(back == record)
        #expect(back.queued.elements(after: back.awaiting!).map(\.sequence) == [8, 9])
        let three = text.replacingOccurrences(
            of: #""queued":["didFinishLaunching","didBecomeActive"]"#,
            with: #""queued":["didFinishLaunching","didBecomeActive","openURL"]"#)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(AppRecord.self, from: Data(three.utf8)) }
    }
}
