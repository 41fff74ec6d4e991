import Foundation
@preconcurrency import Glibc
import LifecycleControl
import LifecycleTestKit
import Testing

/// Background fetch, pushes, open URL and restoration data, with real apps
/// (the recorders and example-news) under a real daemon.
@Suite struct WakeupEndToEndTests {
    static let modes = "background_modes = [\"fetch\", \"remote-notification\"]"

    /// The wake record `code` (fetch, push, push-held, answered, ...) of `app`.
    @discardableResult
    func wake(_ f: Follower, _ app: String, _ code: String, _ match: @escaping (EventRecord) -> Bool = { _ in true })
        throws -> EventRecord
    {
        try f.wait("\(app) wake \(code)") { $0.app == app && $0.kind == .wake && $0.reason == code && match($0) }
    }

    /// Active, then home: suspended, and used once (so its fetches are not stretched for disuse).
    func suspended(_ d: DaemonUnderTest, _ f: Follower, _ app: String) throws {
        try d.command(ControlRequest(.activate, app: app))
        try f.acknowledged(app, "didBecomeActive")
        try d.command(ControlRequest(.home))
        try f.state(app, "suspended")
    }

    /// Apps a and b, recorders of `client` with both wake-up modes, and a follower of both.
    func twoApps(_ client: Client) throws -> (String, DaemonUnderTest, Follower) {
        let s = scratch()
        let d = try DaemonUnderTest(
            apps: [
                "a": recorder(s + "/a", Self.modes, client: client),
                "b": recorder(s + "/b", Self.modes, client: client),
            ])
        return (s, d, try d.follow(["a", "b"]))
    }

    @Test(arguments: Client.allCases) func fetchesASuspendedAppAndANotRunningOne(client: Client) throws {
        let (s, d, f) = try twoApps(client)
        try suspended(d, f, "a")
        try d.command(ControlRequest(.fetch, app: "a"))
        let answer = try wake(f, "a", "answered")
        #expect(answer.to == "new-data" && answer.event == .performFetch)
        try f.state("a", "suspended")
        #expect(lines(s + "/a").suffix(1) == ["performFetch"])

        try d.command(ControlRequest(.fetch, app: "b"))
        try wake(f, "b", "answered")
        try f.state("b", "suspended")
        #expect(
            lines(s + "/b") == [
                "willFinishLaunching", "# launch.reason: fetch", "didFinishLaunching", "didEnterBackground",
                "performFetch",
            ])
        #expect(try d.status("b").nextFetchIn != nil)
        #expect(try d.stop() == 0)
    }

    @Test func aScheduledFetchComesByItselfWithinItsWindow() throws {
        let s = scratch()
        let d = try DaemonUnderTest(
            apps: ["a": recorder(s + "/a", Self.modes + "\n[fetch]\ninterval = 1")], daemon: "fetch_window = 1")
        let f = try d.follow(["a"])
        try suspended(d, f, "a")
        let due = try wake(f, "a", "fetch")
        #expect(due.detail == "fetch due", "scheduled, not asked for")
        #expect(try wake(f, "a", "answered").to == "new-data")
        try f.state("a", "suspended")
        #expect(try d.stop() == 0)
    }

    @Test func aFetchThatHangsIsKilledAndTheNextComesLater() throws {
        let s = scratch()
        let d = try DaemonUnderTest(
            apps: [
                "a": recorder(
                    s + "/a", Self.modes + "\n[fetch]\ntimeout = 1\ninterval = 60",
                    arguments: ["--hang", "performFetch"])
            ])
        let f = try d.follow(["a"])
        try suspended(d, f, "a")
        try d.command(ControlRequest(.fetch, app: "a"))
        let end = try f.terminated("a")
        #expect(end.reason == "event-watchdog")
        let missed = try wake(f, "a", "unanswered")
        #expect(missed.event == .performFetch)
        // One strike doubles the interval: the next fetch in about 120 s.
        let next = try #require(try d.status("a").nextFetchIn)
        #expect(next > 100 && next <= 120)
        #expect(try d.stop() == 0)
    }

    @Test(arguments: Client.allCases) func pushesReachRunningSuspendedAndNotRunningApps(client: Client) throws {
        let (s, d, f) = try twoApps(client)
        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")
        var push = ControlRequest(.push, app: "a")
        push.payload = #"{"n":1}"#
        try d.command(push)
        try wake(f, "a", "answered")
        #expect(lines(s + "/a").suffix(2) == ["didReceiveRemoteNotification", #"# push.payload: {"n":1}"#])
        #expect(try d.status("a").state == .active, "a push leaves a running app where it is")

        try d.command(ControlRequest(.home))
        try f.state("a", "suspended")
        push.payload = #"{"n":2}"#
        try d.command(push)
        try wake(f, "a", "answered")
        try f.state("a", "suspended")
        #expect(lines(s + "/a").suffix(2) == ["didReceiveRemoteNotification", #"# push.payload: {"n":2}"#])

        push.app = "b"
        push.payload = #"{"n":3}"#
        try d.command(push)
        try wake(f, "b", "answered")
        #expect(
            lines(s + "/b") == [
                "willFinishLaunching", "# launch.reason: remote-notification", #"# push.payload: {"n":3}"#,
                "didFinishLaunching", "didEnterBackground", "didReceiveRemoteNotification",
                #"# push.payload: {"n":3}"#,
            ])
        #expect(try d.stop() == 0)
    }

    @Test func pushesOverTheBudgetAreCoalescedAndTheNewestDelivered() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: ["a": recorder(s + "/a", Self.modes + "\n[push]\nbudget = 1")])
        let f = try d.follow(["a"])
        try suspended(d, f, "a")
        #expect(try d.ctl(["push", "a", #"{"n":1}"#]).0 == 0)
        try wake(f, "a", "answered")  // the first, within the budget
        try f.state("a", "suspended")
        for n in 2...3 {
            let (code, _, err) = try d.ctl(["push", "a", #"{"n":\#(n)}"#])
            #expect(code == 0, "\(err)")
        }
        try wake(f, "a", "push-held") { $0.detail?.contains("over its budget of 1") == true }
        try wake(f, "a", "push-held") { $0.detail?.contains("replacing the one held") == true }
        #expect(try d.status("a").heldPush == true)
        // The app runs anyway: the newest rides along, the coalesced one never comes.
        try d.command(ControlRequest(.activate, app: "a"))
        try wake(f, "a", "answered")
        #expect(lines(s + "/a").contains(#"# push.payload: {"n":3}"#))
        #expect(!lines(s + "/a").contains(#"# push.payload: {"n":2}"#))
        #expect(try d.status("a").heldPush == nil)
        #expect(try d.stop() == 0)
    }

    @Test func theAsyncSequenceAnswersAndThePayloadComesFromAFileOrStandardInput() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: ["a": recorder(s + "/a", Self.modes, arguments: ["--async"])])
        let f = try d.follow(["a"])
        try suspended(d, f, "a")
        try d.command(ControlRequest(.fetch, app: "a"))
        #expect(try wake(f, "a", "answered").to == "new-data")
        try f.state("a", "suspended")
        try #"{"from":"file"}"#.write(toFile: s + "/payload.json", atomically: true, encoding: .utf8)
        #expect(try d.ctl(["push", "a", "--file", s + "/payload.json"]).0 == 0)
        #expect(try wake(f, "a", "answered").to == "new-data")
        try f.state("a", "suspended")
        let (rc, _, err) = try run([
            "/bin/sh", "-c",
            "echo '{\"from\":\"stdin\"}' | \(binary("supervisorctl")) push a - --socket \(d.path("control.sock"))",
        ])
        #expect(rc == 0, "\(err)")
        try wake(f, "a", "answered")
        #expect(lines(s + "/a").contains(#"# push.payload: {"from":"file"}"#))
        #expect(lines(s + "/a").contains(#"# push.payload: {"from":"stdin"}"#))
        #expect(try d.stop() == 0)
    }

    @Test func heldPushesAndFetchSchedulesSurviveARestartAndAReloadAddsWakeUps() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: ["a": recorder(s + "/a", Self.modes + "\n[push]\nbudget = 1")])
        let f = try d.follow(["a"])
        try suspended(d, f, "a")
        #expect(try d.ctl(["push", "a", #"{"n":1}"#]).0 == 0)
        try wake(f, "a", "answered")
        try f.state("a", "suspended")
        #expect(try d.ctl(["push", "a", #"{"n":2}"#]).0 == 0)
        try wake(f, "a", "push-held")
        let before = try d.status("a")
        _ = try d.crash(with: SIGKILL)

        let again = try DaemonUnderTest(after: d)
        let after = try again.status("a")
        #expect(after.pid == before.pid && after.state == .suspended)
        #expect(after.heldPush == true, "the held push is part of the saved state")
        #expect(after.nextFetchIn != nil && after.nextFetchIn! <= before.nextFetchIn!)

        // A reload adds an app with a URL scheme and the fetch mode: both work at once.
        try recorder(s + "/b", Self.modes + "\nurl_schemes = [\"bee\"]").write(
            toFile: again.path("apps/b.toml"), atomically: true, encoding: .utf8)
        #expect(try again.ctl(["reload"]).0 == 0)
        #expect(try again.status("b").nextFetchIn != nil)
        let g = try again.follow(["b"])
        #expect(try again.ctl(["open", "bee:hive"]).0 == 0)
        try g.acknowledged("b", "didBecomeActive")
        #expect(lines(s + "/b").contains("# launch.url: bee:hive"))
        #expect(try again.stop() == 0)
    }

    @Test func aBadPayloadIsAClearError() throws {
        let d = try DaemonUnderTest(apps: ["a": recorder("/dev/null", Self.modes)])
        let (code, _, err) = try d.ctl(["push", "a", "{not json"])
        #expect(code == 64 && err.contains("payload is not JSON"), "\(err)")
        let (big, _, bigErr) = try d.ctl(["push", "a", "{\"x\":\"" + String(repeating: "y", count: 5000) + "\"}"])
        #expect(big == 64 && bigErr.contains("at most 4096"), "\(bigErr)")
        var raw = ControlRequest(.push, app: "a")
        raw.payload = "[1]"
        #expect(throws: (any Error).self) { try d.command(raw) }
        #expect(try d.stop() == 0)
    }

    @Test func noWakeUpsAfterAUserQuitUntilALaunch() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: ["a": recorder(s + "/a", Self.modes + "\n[fetch]\ninterval = 1")])
        let f = try d.follow(["a"])
        try suspended(d, f, "a")
        try d.command(ControlRequest(.stop, app: "a"))
        try f.terminated("a")
        let status = try d.status("a")
        #expect(status.quit == true && status.nextFetchIn == nil)
        let (code, _, err) = try d.ctl(["fetch", "a"])
        #expect(code != 0 && err.contains("quit by the user"), "\(err)")
        #expect(try d.ctl(["push", "a", #"{"held":true}"#]).0 == 0)
        try wake(f, "a", "push-held") { $0.detail?.contains("quit by the user") == true }
        #expect(try d.status("a").state == .notRunning, "not woken")

        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")
        #expect(lines(s + "/a").contains(#"# push.payload: {"held":true}"#), "handed over at the launch")
        #expect(try d.status("a").quit == nil)
        #expect(try d.stop() == 0)
    }

    @Test func openingAURLRoutesItByScheme() throws {
        let s = scratch()
        let d = try DaemonUnderTest(
            apps: [
                "browser": recorder(s + "/browser", "url_schemes = [\"https\", \"http\"]"),
                "other": recorder(s + "/other"),
            ])
        let f = try d.follow(["browser", "other"])
        let (code, _, err) = try d.ctl(["open", "gopher://x"])
        #expect(code != 0 && err.contains("no app opens 'gopher:' URLs"), "\(err)")

        #expect(try d.ctl(["open", "https://example.com/a"]).0 == 0)
        try f.acknowledged("browser", "didBecomeActive")
        #expect(lines(s + "/browser").prefix(2) == ["willFinishLaunching", "# launch.reason: url"])
        #expect(lines(s + "/browser").contains("# launch.url: https://example.com/a"))

        try d.command(ControlRequest(.activate, app: "other"))
        try f.state("browser", "suspended")
        #expect(try d.ctl(["open", "http://example.com/b"]).0 == 0)
        try f.acknowledged("browser", "openURL")
        #expect(
            lines(s + "/browser").suffix(4) == [
                "willEnterForeground", "didBecomeActive", "openURL", "# url: http://example.com/b",
            ])
        #expect(try d.status("browser").state == .active)
        #expect(try d.stop() == 0)
    }

    @Test func restorationDataBringsANewsReaderBackWhereItWasAfterAMemoryKill() throws {
        let s = scratch()
        let log = s + "/news"
        let d = try DaemonUnderTest(
            apps: ["news": "command = [\"\(binary("example-news"))\", \"--log\", \"\(log)\"]\n\(Self.modes)\n"])
        let f = try d.follow(["news"])
        try d.command(ControlRequest(.activate, app: "news"))
        try f.acknowledged("news", "didBecomeActive")
        try waitForLine(log, "launched reason=user place=0 fetched=0")
        try d.command(ControlRequest(.home))
        try f.state("news", "suspended")
        try f.wait("restoration saved") { $0.app == "news" && $0.kind == .restoration }
        let saved = try #require(lines(log).last { $0.hasPrefix("saved place ") })
        let place = Int(saved.dropFirst("saved place ".count))!
        try d.command(ControlRequest(.fetch, app: "news"))
        try wake(f, "news", "answered")
        #expect(try d.status("news").restorationBytes != nil)

        try d.command(ControlRequest(.pressure, level: "critical"))
        #expect(try f.terminated("news").reason == "memory-pressure")
        try d.command(ControlRequest(.pressure, level: "normal"))
        try d.command(ControlRequest(.activate, app: "news"))
        try f.acknowledged("news", "didBecomeActive")
        #expect(lines(log).contains("launched reason=user place=\(place) fetched=1 restored=yes"))

        // A user quit discards it: the next launch starts afresh.
        try d.command(ControlRequest(.stop, app: "news"))
        try f.terminated("news")
        #expect(try d.status("news").restorationBytes == nil)
        try d.command(ControlRequest(.activate, app: "news"))
        try f.acknowledged("news", "didBecomeActive")
        #expect(lines(log).last { $0.hasPrefix("launched") } == "launched reason=user place=0 fetched=0")
        #expect(try d.stop() == 0)
    }

    /// The history is written a second after a change; a daemon killed
    /// within that second leaves the change in the runtime state only, and
    /// the next daemon writes it to the history from there.
    @Test func aChangeTheHistoryDidNotGetBeforeACrashIsWrittenByTheNextDaemon() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: ["a": recorder(s + "/a", Self.modes)])
        let f = try d.follow()
        try suspended(d, f, "a")
        try d.command(ControlRequest(.kill, app: "a"))  // a quit
        try f.terminated("a")
        _ = try d.crash(with: SIGKILL)  // (within the second, unless the machine stalls that long)
        let next = try DaemonUnderTest(after: d)
        #expect(try next.status("a").quit == true, "from the runtime state")
        try waitForLine(next.dir + "/daemon.log", "the history written again") {
            $0.contains("written again from the state the last daemon left")
        }
        // Killed too: a clean stop would write the row itself (its last step touches every app).
        _ = try next.crash(with: SIGKILL)
        try FileManager.default.removeItem(atPath: next.path("run/state.db"))  // as a reboot would
        let fresh = try DaemonUnderTest(after: next)
        #expect(try fresh.status("a").quit == true, "from the history")
        #expect(try fresh.stop() == 0)
    }

    /// Once the runtime state is gone (a clean stop, a reboot), an app's
    /// last termination is the history's: `status` shows it (without the
    /// pid, which names nothing now) and how long the app has been down.
    @Test func theLastTerminationOutlivesACleanStop() throws {
        let s = scratch()
        let d = try DaemonUnderTest(
            apps: ["a": recorder(s + "/a"), "b": recorder(s + "/b"), "never": recorder(s + "/never")])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")
        try d.command(ControlRequest(.kill, app: "a"))
        try f.terminated("a")
        let killed = try #require(try d.status("a").lastTermination)
        try d.command(ControlRequest(.launch, app: "b", background: true))
        try f.state("b", "suspended")
        #expect(try d.stop() == 0)  // b ends with the daemon

        let next = try DaemonUnderTest(after: d)
        let a = try next.status("a")
        let ended = try #require(a.lastTermination, "a's last termination, from the history")
        #expect(ended.reason == .killedByUser && ended.description == killed.description, "\(ended)")
        #expect(abs(ended.time - killed.time) < 0.01, "\(ended.time) against \(killed.time)")
        #expect(ended.pid == nil)
        let down = Date().timeIntervalSince1970 - killed.time
        #expect(a.state == .notRunning && a.secondsInState > 0 && a.secondsInState <= down + 0.01, "\(a)")
        #expect(try next.status("b").lastTermination?.reason == .shutdown)
        #expect(try next.status("never").lastTermination == nil)
        #expect(try next.stop() == 0)
    }

    @Test func theHistoryOutlivesTheDaemonAndAKillInTheMiddleOfWriting() throws {
        let s = scratch()
        let d = try DaemonUnderTest(
            apps: [
                "saver":
                    "command = [\"/usr/bin/env\", \"python3\", \"\(repositoryRoot)/Tests/rogue/rogue.py\", \"save-loop\"]\n"
                    + "background_modes = [\"audio\"]\n",
                "a": recorder(s + "/a", Self.modes),
            ])
        let f = try d.follow()
        try suspended(d, f, "a")
        try d.command(ControlRequest(.kill, app: "a"))  // a quit, written to the history
        try f.terminated("a")
        try d.command(ControlRequest(.launch, app: "saver", background: true))
        // 64 KiB of restoration data, again and again, hundreds of times a second.
        for _ in 0..<20 { try f.wait("saves") { $0.app == "saver" && $0.kind == .restoration } }
        _ = try d.crash(with: SIGKILL)
        let history = d.path("state/history.db")
        let (rc, out, err) = try run([
            "/usr/bin/env", "python3", "-c",
            """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1])
            print(db.execute("PRAGMA integrity_check").fetchone()[0])
            data = db.execute("SELECT data FROM restoration WHERE id = ?", (b"saver",)).fetchone()[0]
            print(len(data), len(set(data)))
            """, history,
        ])
        #expect(rc == 0, "\(out) \(err)")
        #expect(out.split(separator: "\n").first == "ok", "\(out)")
        #expect(out.split(separator: "\n").last == "65536 1", "one whole save, not a mix: \(out)")

        // A fresh boot's daemon (no runtime state) reads the history: still quit.
        try? FileManager.default.removeItem(atPath: d.path("run/state.db"))
        let again = try DaemonUnderTest(after: d)
        #expect(try again.status("a").quit == true)
        #expect(try again.status("saver").restorationBytes == 65536)
        #expect(try again.stop() == 0)
    }
}
