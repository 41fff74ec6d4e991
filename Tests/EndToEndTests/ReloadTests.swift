import Foundation
import LifecycleControl
import LifecycleTestKit
import Testing

// Issue 13, part 1: a reload applies the configuration app by app, and
// disturbs nothing that did not change.

@Suite struct ReloadTests {
    static let plain = "command = [\"sleep\", \"100000\"]\ndelivery = \"signals\"\n"

    func write(_ d: DaemonUnderTest, _ name: String, _ text: String) throws {
        try text.write(toFile: d.path("apps/\(name).toml"), atomically: true, encoding: .utf8)
    }

    @Test func aReloadAddsRemovesAndChangesAppByApp() throws {
        let d = try DaemonUnderTest(apps: [
            "keep": Self.plain, "change": Self.plain, "gone": Self.plain, "idle": Self.plain, "broken": Self.plain,
        ])
        let f = try d.follow()
        try d.command(ControlRequest(.launch, app: "keep", background: true))
        try f.state("keep", "suspended")
        _ = try f.wait("keep frozen") { $0.app == "keep" && $0.kind == .frozen }
        let keepEvents = try #require(try d.command(ControlRequest(.events, apps: ["keep"])).events).count
        try d.command(ControlRequest(.activate, app: "change"))
        try f.state("change", "active")
        try d.command(ControlRequest(.launch, app: "gone", background: true))
        try f.state("gone", "suspended")
        let keepPID = try #require(try d.status("keep").pid)
        let changePID = try #require(try d.status("change").pid)

        try write(d, "change", Self.plain + "environment = { CHANGED = \"1\" }\n")
        try write(d, "idle", Self.plain + "# only a comment is new\n")
        try write(d, "broken", "command = [\"sleep\"\n")
        try write(d, "new", Self.plain + "autostart = \"background\"\n")
        unlink(d.path("apps/gone.toml"))
        try
            "apps_dir = \"apps\"\nevent_history = 10000\nstate_directory = \"state\"\nruntime_directory = \"run\"\nforeground_slots = 2\n"
            .write(toFile: d.path("lifecycled.toml"), atomically: true, encoding: .utf8)

        // A dry run says all of it and applies nothing.
        let (dryCode, dry, dryErr) = try d.ctl(["reload", "--dry-run"])
        #expect(dryCode == 0, "\(dryErr)")
        #expect(dry.contains("dry run: nothing applied\nadded: new\nremoved: gone"), "\(dry)")
        #expect(dry.contains("changed: change (at each running app's next launch)"), "\(dry)")
        #expect(dry.contains("unchanged: 3"), "keep, idle (a comment), broken (kept): \(dry)")
        #expect(dry.contains("failed: \(d.path("apps/broken.toml")):"), "\(dry)")
        #expect(dry.contains("needs a daemon restart: foreground_slots"), "\(dry)")
        #expect(try d.status("gone").pid != nil)
        #expect(try d.client().send(ControlRequest(.status, apps: ["new"])).error?.code == .unknownApp)

        let (code, out, err) = try d.ctl(["reload"])
        #expect(code == 0, "\(err)")
        #expect(out.hasPrefix("added: new\nremoved: gone"), "\(out)")
        let end = try f.terminated("gone")
        #expect(end.reason == "stopped-by-user", "stopped as if the user quit it")
        try f.state("new", "suspended")  // autostarted into the background
        #expect(try d.client().send(ControlRequest(.status, apps: ["gone"])).error?.code == .unknownApp, "then gone")
        #expect(try d.status("keep").pid == keepPID, "unchanged: not disturbed")
        #expect(try d.status("keep").changePending == nil)
        let changed = try d.status("change")
        #expect(changed.pid == changePID && changed.state == .active, "changed: runs on")
        #expect(changed.changePending == true)
        #expect(try d.status("broken").state == .notRunning, "kept its previous manifest")
        #expect(
            try d.command(ControlRequest(.events, apps: ["keep"])).events?.count == keepEvents,
            "no event for an unchanged app")

        // --restart-changed relaunches it into the state it was in.
        let (code2, out2, err2) = try d.ctl(["reload", "--restart-changed"])
        #expect(code2 == 0 && out2.contains("restarting: change"), "\(out2) \(err2)")
        _ = try f.terminated("change")
        try f.state("change", "active")
        let relaunched = try d.status("change")
        #expect(relaunched.pid != changePID && relaunched.changePending == nil)
        let env = try String(contentsOfFile: "/proc/\(relaunched.pid!)/environ", encoding: .utf8)
        #expect(env.contains("CHANGED=1"), "the new manifest")
        #expect(try d.status("keep").pid == keepPID)
        #expect(try d.stop() == 0)
    }

    /// A broken daemon file changes nothing and says where.
    @Test func aBrokenDaemonFileChangesNothing() throws {
        let d = try DaemonUnderTest(apps: ["a": Self.plain])
        try write(d, "b", Self.plain)
        try "apps_dir = \"apps\"\nforeground_slots = \"many\"\n".write(
            toFile: d.path("lifecycled.toml"), atomically: true, encoding: .utf8)
        let (code, _, err) = try d.ctl(["reload"])
        #expect(code == 1)
        #expect(err.contains("the daemon file is broken, nothing changed: \(d.path("lifecycled.toml")):2"), "\(err)")
        #expect(try d.client().send(ControlRequest(.status, apps: ["b"])).error?.code == .unknownApp)
        #expect(try d.stop() == 0)
    }

    /// SIGHUP reloads, telling the service manager RELOADING=1 with the
    /// time, then READY=1 when done (what `systemctl reload` waits for).
    /// A change pending survives a daemon crash: the new daemon still
    /// shows it, from the fingerprint the run was launched with.
    @Test func sighupReloadsAndAPendingChangeSurvivesACrash() throws {
        let d = try DaemonUnderTest(apps: ["a": Self.plain])
        let f = try d.follow()
        try d.command(ControlRequest(.launch, app: "a", background: true))
        try f.state("a", "suspended")
        try write(d, "a", Self.plain + "environment = { CHANGED = \"1\" }\n")
        try write(d, "b", Self.plain)
        kill(d.pid, SIGHUP)
        #expect(try d.notify.waitFor(prefix: "MONOTONIC_USEC=", seconds: 10) { UInt64($0.dropFirst(15)) != nil } != nil)
        #expect(d.notify.waitFor("READY=1", count: 2, seconds: 10))
        #expect(d.notify.received.contains("RELOADING=1"))
        #expect(try d.status("b").state == .notRunning)
        #expect(try d.status("a").changePending == true)

        #expect(try d.crash(with: SIGKILL) == (true, SIGKILL))
        let d2 = try DaemonUnderTest(after: d)
        #expect(try d2.status("a").changePending == true, "still pending after the crash")
        #expect(try d2.stop() == 0)
    }

    /// Reloads racing each other (two clients and a SIGHUP at once) are
    /// taken one after the other by the loop: each answers, the app is
    /// added once, and nothing else moves.
    @Test func reloadsRacingEachOtherAreTakenInTurn() throws {
        let d = try DaemonUnderTest(apps: ["keep": Self.plain])
        let f = try d.follow()
        try d.command(ControlRequest(.launch, app: "keep", background: true))
        try f.state("keep", "suspended")
        let pid = try d.status("keep").pid
        try write(d, "new", Self.plain)
        let a = try d.client(), b = try d.client()
        try a.write(ControlRequest(.reload))
        try b.write(ControlRequest(.reload))
        kill(d.pid, SIGHUP)
        let first = try #require(try a.readResponse().reload)
        let second = try #require(try b.readResponse().reload)
        // Whichever came first added it (the SIGHUP's report is in the log); the others found it there.
        #expect((first.added + second.added).count <= 1, "added once: \(first.added) \(second.added)")
        #expect(second.added.isEmpty && second.unchanged == ["keep", "new"], "the last one found nothing to do")
        let names = try #require(try d.command(ControlRequest(.status)).status).apps.map(\.name)
        #expect(names == ["keep", "new"])
        #expect(try d.status("keep").pid == pid)
        #expect(try d.client().send(ControlRequest(.status, apps: ["new"])).ok)
        #expect(try d.stop() == 0)
    }
}
