import Testing

@testable import LifecycleCore

/// Background fetch, pushes and open URL (Wakeups.swift), with the manual clock.
@Suite struct WakeupTests {
    static let minute = Duration.seconds(60)

    func policy(_ modes: BackgroundModes = [.fetch, .remoteNotification], schemes: [String] = []) -> AppPolicy {
        var p = AppPolicy()
        p.backgroundModes = modes
        p.urlSchemes = schemes
        return p
    }

    func notes(_ h: Harness, _ id: AppID) -> [WakeNote] {
        h.log.compactMap { if case .wake(id, let n) = $0 { n } else { nil } }
    }

    func spawned(_ effects: [Effect], _ id: AppID) -> LaunchMode? {
        for case .spawn(id, _, let mode) in effects { return mode }
        return nil
    }

    /// Launched, used once (so fetches are not stretched for disuse), then sent home: suspended.
    func suspendedApp(_ h: inout Harness, _ id: AppID) {
        h.launchActive(id)
        h.eventsUntilQuiet(id, after: h.send(.home))
        #expect(h.state(id) == .suspended)
    }

    /// Answers the outstanding wake-up with `result`.
    func complete(_ h: inout Harness, _ id: AppID, _ result: WakeResult) {
        let d = h.outstanding(id)!
        #expect(d.event.isWake)
        h.send(.completed(id, generation: h.generation(id), sequence: d.sequence, result: result))
    }

    @Test func aFetchThawsASuspendedAppAndSuspendsItAfterTheAnswer() {
        var h = Harness(["news": policy()])
        suspendedApp(&h, "news")
        let window = h.supervisor.snapshot("news")!.nextFetch!
        #expect(window.earliest == Instant.zero + Self.minute * 15, "used just now: the minimum interval")
        #expect(window.latest == window.earliest + h.supervisor.fetchWindow)
        h.now = window.latest
        let effects = h.send(.tick)
        #expect(effects.contains(.thaw("news")))
        let d = h.outstanding("news")!
        #expect(d.event == .performFetch && d.deadline == h.now + .seconds(30))
        #expect(h.state("news") == .background)
        complete(&h, "news", .newData)
        #expect(h.state("news") == .suspended)
        #expect(
            notes(h, "news").contains { if case .answered(.performFetch, .newData, _) = $0 { true } else { false } })
        #expect(h.supervisor.snapshot("news")!.nextFetch!.earliest == h.now + Self.minute * 15)
    }

    @Test func aFetchLaunchesANotRunningAppIntoTheBackgroundSayingWhy() {
        var h = Harness(["news": policy()])
        suspendedApp(&h, "news")
        h.send(.exited("news", generation: h.generation("news"), .signaled(9)))  // killed while suspended
        let window = h.supervisor.snapshot("news")!.nextFetch!
        h.now = window.latest
        let effects = h.send(.tick)
        #expect(spawned(effects, "news") == .background)
        let launch = h.outstanding("news")!
        #expect(launch.event == .willFinishLaunching && launch.launch?.reason == .fetch)
        #expect(h.ackAll("news") == [.willFinishLaunching, .didFinishLaunching, .didEnterBackground, .performFetch])
    }

    @Test func aFetchNotAnsweredInTimeKillsAndStretchesTheNext() {
        var h = Harness(["news": policy()])
        suspendedApp(&h, "news")
        h.send(.fetch("news"))
        #expect(h.outstanding("news")?.event == .performFetch)
        h.advance(.seconds(30))
        #expect(h.killReason("news") == .eventWatchdog(event: .performFetch))
        h.exit("news", .signaled(9))
        #expect(notes(h, "news").contains { if case .unanswered(.performFetch, _) = $0 { true } else { false } })
        let window = h.supervisor.snapshot("news")!.nextFetch!
        #expect(window.earliest == h.now + Self.minute * 30, "one strike doubles the interval")
    }

    @Test func noDataAnswersInARowStretchTheInterval() {
        var h = Harness(["news": policy()])
        suspendedApp(&h, "news")
        for _ in 0..<3 {
            h.send(.fetch("news"))
            complete(&h, "news", .noData)
        }
        #expect(h.supervisor.snapshot("news")!.nextFetch!.earliest == h.now + Self.minute * 30)
        h.send(.fetch("news"))
        complete(&h, "news", .newData)
        #expect(h.supervisor.snapshot("news")!.nextFetch!.earliest == h.now + Self.minute * 15)
    }

    @Test func anAppNeverUsedIsFetchedRarely() {
        var h = Harness(["news": policy()])
        h.send(.tick)
        #expect(h.supervisor.snapshot("news")!.nextFetch!.earliest == Instant.zero + Self.minute * 15 * 16)
    }

    @Test func fetchesDueWithinTheWindowWakeTheMachineOnce() {
        var h = Harness(["a": policy(), "b": policy(), "c": policy()])
        suspendedApp(&h, "a")
        h.advance(Self.minute * 2)
        suspendedApp(&h, "b")
        h.advance(Self.minute * 10)
        suspendedApp(&h, "c")
        let a = h.supervisor.snapshot("a")!.nextFetch!
        let b = h.supervisor.snapshot("b")!.nextFetch!
        #expect(h.supervisor.nextDeadline() == a.latest)
        h.now = a.latest
        let effects = h.send(.tick)
        #expect(b.earliest <= a.latest)
        #expect(Harness.events("a", in: effects) == [.performFetch])
        #expect(Harness.events("b", in: effects) == [.performFetch], "b's window was open: it goes along")
        #expect(Harness.events("c", in: effects).isEmpty, "c's window opens later")
    }

    @Test func aRegularUseIsFetchedShortlyBefore() {
        var p = policy()
        p.fetch.interval = .seconds(6 * 3600)
        var h = Harness(["news": p])
        h.now = Instant.zero + Supervisor.day * 10 + .seconds(8 * 3600)  // 08:00 on day 10
        for day in 0..<3 {
            if day > 0 { h.now = h.now + Supervisor.day }
            // Nine answers without data: its fetches come 8x the interval
            // apart (48 h), later than tomorrow's use.
            h.supervisor.apps["news"]!.history.noData = 9
            h.launchActive("news")
            h.eventsUntilQuiet("news", after: h.send(.home))
        }
        // Fetched at 08:00 - 10 min - the window at the latest, the next day.
        let window = h.supervisor.snapshot("news")!.nextFetch!
        let use = h.now + Supervisor.day
        #expect(window.latest <= use - Supervisor.fetchLead)
        #expect(window.earliest >= use - Supervisor.fetchLead - h.supervisor.fetchWindow)
    }

    @Test func aUserQuitEndsWakeUpsUntilALaunchAndDiscardsRestorationData() {
        var h = Harness(["news": policy()])
        suspendedApp(&h, "news")
        h.send(.stop("news"))
        h.ackAll("news")
        let end = h.send(.exited("news", generation: h.generation("news"), .signaled(9)))
        #expect(end.contains(.discardRestoration("news", why: "the user quit it")), "what it saved on its way out too")
        #expect(h.supervisor.snapshot("news")!.nextFetch == nil)
        #expect(h.send(.fetch("news")) == [.refused(.quitByUser("news"))])
        let push = h.send(.push("news", payload: "{}"))
        #expect(spawned(push, "news") == nil, "no wake-up after a quit")
        #expect(h.supervisor.snapshot("news")!.heldPush)
        h.advance(.seconds(86_400 * 3))
        #expect(h.state("news") == .notRunning)
        h.send(.launch("news", .foreground))
        let launch = h.outstanding("news")!
        #expect(launch.launch?.pushPayload == "{}", "the held push is handed over at the launch")
        #expect(h.supervisor.snapshot("news")!.nextFetch != nil)
    }

    @Test func pushesGoToRunningSuspendedAndNotRunningApps() {
        var h = Harness(["news": policy(), "mail": policy()])
        h.launchActive("news")
        let running = h.send(.push("news", payload: "{\"a\":1}"))
        let d = running.compactMap { if case .deliver("news", let d) = $0 { d } else { nil } }.first!
        #expect(d.event == .didReceiveRemoteNotification && d.payload == "{\"a\":1}")
        complete(&h, "news", .newData)
        #expect(h.state("news") == .active)
        h.eventsUntilQuiet("news", after: h.send(.home))
        let thawed = h.send(.push("news", payload: "{\"b\":2}"))
        #expect(thawed.contains(.thaw("news")))
        complete(&h, "news", .noData)
        #expect(h.state("news") == .suspended)
        let launched = h.send(.push("mail", payload: "{\"c\":3}"))
        #expect(spawned(launched, "mail") == .background)
        #expect(h.outstanding("mail")?.launch?.pushPayload == "{\"c\":3}")
        #expect(h.outstanding("mail")?.launch?.reason == .remoteNotification)
        #expect(h.ackAll("mail").last == .didReceiveRemoteNotification)
    }

    @Test func pushesToARunningAppAreEachDeliveredInTurn() {
        var h = Harness(["news": policy()])
        h.launchActive("news")
        for i in 0..<3 { h.send(.push("news", payload: "\(i)")) }
        var payloads: [String] = []
        while let d = h.outstanding("news"), d.event == .didReceiveRemoteNotification {
            payloads.append(d.payload!)
            complete(&h, "news", .newData)
        }
        #expect(payloads == ["0", "1", "2"], "none lost while the first was being answered")
        for i in 0..<(Wakes.maxQueuedPushes + 2) { h.send(.push("news", payload: "\(i)")) }
        #expect(h.supervisor.apps["news"]!.wakes.pushes.count == Wakes.maxQueuedPushes)
        #expect(h.supervisor.apps["news"]!.wakes.pushes.last?.payload == "\(Wakes.maxQueuedPushes + 1)")
    }

    @Test func pushesOverTheBudgetAreCoalescedAndDeliveredWhenItFrees() {
        var p = policy()
        p.push.budget = 2
        var h = Harness(["news": p])
        suspendedApp(&h, "news")
        for i in 0..<2 {
            h.send(.push("news", payload: "\(i)"))
            complete(&h, "news", .newData)
        }
        let third = h.send(.push("news", payload: "2"))
        #expect(!third.contains(.thaw("news")), "the budget is spent")
        h.send(.push("news", payload: "3"))
        #expect(notes(h, "news").contains(.pushHeld(why: "over its budget of 2 wake-ups an hour", replaced: true)))
        h.advance(Supervisor.hour)
        let d = h.outstanding("news")!
        #expect(d.event == .didReceiveRemoteNotification && d.payload == "3", "only the newest is kept")
    }

    @Test func withoutTheModeAPushIsHeldForTheNextLaunch() {
        var h = Harness(["plainish": policy([])])
        let effects = h.send(.push("plainish", payload: "{}"))
        #expect(spawned(effects, "plainish") == nil)
        h.send(.launch("plainish", .background))
        #expect(h.outstanding("plainish")?.launch?.pushPayload == "{}")
        #expect(!h.ackAll("plainish").contains(.didReceiveRemoteNotification))
    }

    @Test func openingAURLBringsTheAppToTheFront() {
        var h = Harness(["browser": policy([], schemes: ["https"]), "other": AppPolicy()])
        #expect(h.send(.openURL("gopher://x")) == [.refused(.unknownScheme("gopher"))])
        #expect(h.send(.openURL("no-colon")) == [.refused(.badURL("no-colon"))])
        let launch = h.send(.openURL("HTTPS://example.com"))
        #expect(spawned(launch, "browser") == .foreground)
        #expect(h.outstanding("browser")?.launch?.url == "HTTPS://example.com")
        #expect(h.outstanding("browser")?.launch?.reason == .url)
        h.ackAll("browser")
        #expect(h.state("browser") == .active)
        h.launchActive("other")
        h.ackAll("browser")
        #expect(h.state("browser") == .suspended)
        let open = h.send(.openURL("https://two"))
        let events = h.eventsUntilQuiet("browser", after: open)
        #expect(events == [.willEnterForeground, .didBecomeActive, .openURL])
        #expect(h.state("browser") == .active)
    }

    @Test func aCrashDuringLaunchDiscardsRestorationData() {
        var h = Harness(["news": policy()])
        h.send(.launch("news", .foreground))
        let crash = h.send(.exited("news", generation: h.generation("news"), .signaled(11)))
        #expect(crash.contains { if case .discardRestoration("news", _) = $0 { true } else { false } })
        h.launchActive("news")
        let later = h.send(.exited("news", generation: h.generation("news"), .signaled(11)))
        #expect(!later.contains { if case .discardRestoration = $0 { true } else { false } })
    }

    @Test func completingAnEventThatIsNotAWakeIsAViolation() {
        var h = Harness(["news": policy()])
        h.send(.launch("news", .foreground))
        let d = h.outstanding("news")!
        h.send(.completed("news", generation: h.generation("news"), sequence: d.sequence, result: .newData))
        if case .protocolViolation = h.killReason("news") {} else { Issue.record("not killed for it") }
    }

    @Test func theHistoryTravelsToTheNextBoot() {
        var h = Harness(["news": policy()])
        suspendedApp(&h, "news")
        h.send(.kill("news"))
        h.exit("news")
        h.send(.push("news", payload: "x"))  // held: the user quit it
        let (history, last) = h.supervisor.history("news")!
        #expect(history.quit && history.held?.payload == "x" && history.uses.count == 1)
        // The next boot: the clock starts again, 1,000 s earlier in its own terms.
        var next = Supervisor(apps: ["news": policy()])
        next.restoreHistory(["news": (history.shifted(by: .seconds(1000)), last)])
        _ = next.handle(.launch("news", .foreground), now: .zero)
        #expect(next.snapshot("news")?.last?.reason == .killedByUser)
        #expect(next.snapshot("news")?.quit == false)
    }
}
