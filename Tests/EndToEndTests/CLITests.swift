import Foundation
@preconcurrency import Glibc
import LifecycleControl
import LifecycleTestKit
import Testing

/// supervisorctl as a user meets it: output, JSON, exit codes, permissions.
@Suite struct SupervisorctlTests {
    @Test func statusTableAndJSON() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: ["a": recorder(s + "/a"), "b": recorder(s + "/b")])
        let f = try d.follow()
        #expect(try d.ctl(["activate", "a"]).0 == 0)
        try f.acknowledged("a", "didBecomeActive")
        let (code, out, _) = try d.ctl(["status"])
        #expect(code == 0)
        let rows = out.split(separator: "\n")
        #expect(rows.first?.hasPrefix("NAME") == true)
        #expect(rows.contains { $0.hasPrefix("a ") && $0.contains("active") })
        #expect(rows.contains { $0.hasPrefix("b ") && $0.contains("not-running") })

        let (jcode, json, _) = try d.ctl(["status", "--json", "a"])
        #expect(jcode == 0)
        let report = try JSONDecoder().decode(StatusReport.self, from: Data(json.utf8))
        #expect(report.apps.count == 1)
        #expect(report.apps[0].name == "a" && report.apps[0].state == .active && report.apps[0].pid != nil)
        #expect(try d.stop() == 0)
    }

    @Test func exitCodes() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: ["a": recorder(s + "/a")])
        let unknown = try d.ctl(["activate", "nope"])
        #expect(unknown.0 == 2)
        #expect(unknown.2.contains("unknown app 'nope'"))
        let refused = try d.ctl(["stop", "a"])
        #expect(refused.0 == 1)
        #expect(refused.2.contains("'a' is not running"))
        #expect(try d.ctl(["interruption", "end"]).0 == 1)
        // Scripts get the refusal's stable code beside the sentence.
        let raw = try d.client().send(ControlRequest(.unlock))
        #expect(raw.ok == false && raw.error?.code == .refused && raw.error?.refusal == "not-locked")
        #expect(try d.ctl(["interruption", "sideways"]).0 == 64)
        #expect(try d.stop() == 0)
        let none = try run([binary("supervisorctl"), "status", "--socket", d.socket])
        #expect(none.0 == 4)
        #expect(none.2.contains("cannot reach lifecycled"))
    }

    /// As systemctl does: the command returns once the change happened, or
    /// says why it did not.
    @Test func changesWaitForTheirOutcome() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: [
            "a": recorder(s + "/a"),
            "b": recorder(s + "/b"),
            "missing": "command = [\"/nonexistent/app\"]\n",
            "hangs": recorder(s + "/h", "[timeouts]\nlaunch = 0.3", arguments: ["--hang", "didFinishLaunching"]),
            "slow": recorder(s + "/slow", "[timeouts]\nevent = 3", arguments: ["--hang", "didBecomeActive"]),
        ])
        let first = try d.ctl(["activate", "a", "--timeout", "5"])
        #expect(first.0 == 0, "\(first)")
        #expect(try d.status("a").state == .active, "active when activate returns")
        #expect(try d.ctl(["launch", "--background", "b"] + ["--timeout", "5"]).0 == 0, "[launch, --background, b]")
        let b = try d.status("b")
        #expect(b.launching == false && b.awaiting == nil && [.background, .suspended].contains(b.state))
        #expect(try d.ctl(["lock"] + ["--timeout", "5"]).0 == 0, "[lock]")
        #expect(try d.status("a").state != .active)
        #expect(try d.ctl(["unlock"] + ["--timeout", "5"]).0 == 0, "[unlock]")
        #expect(try d.status("a").state == .active)
        #expect(try d.ctl(["home"] + ["--timeout", "5"]).0 == 0, "[home]")
        #expect([.background, .suspended].contains(try d.status("a").state))
        #expect(try d.ctl(["stop", "b"] + ["--timeout", "5"]).0 == 0, "[stop, b]")
        #expect(try d.status("b").state == .notRunning)

        let missing = try d.ctl(["activate", "missing"])
        #expect(missing.0 == 6 && missing.2.contains("missing ended instead: launch-failed"), "\(missing)")
        let hangs = try d.ctl(["launch", "hangs"])
        #expect(hangs.0 == 6 && hangs.2.contains("hangs ended instead: launch-watchdog"), "\(hangs)")
        let slow = try d.ctl(["activate", "slow", "--timeout", "0.5"])
        #expect(slow.0 == 7 && slow.2.contains("not done within 0.5 s"), "\(slow)")
        let f = try d.follow(["a"])
        #expect(try d.ctl(["activate", "a", "--no-block"]).0 == 0)
        try f.acknowledged("a", "didBecomeActive")
        #expect(try d.stop() == 0)
    }

    @Test func eventsShowTransitionsAndAcknowledgementTimes() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: ["a": recorder(s + "/a")])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")
        let (code, out, _) = try d.ctl(["events", "a"])
        #expect(code == 0)
        #expect(out.contains("a  not-running -> inactive"))
        #expect(out.contains("a  acknowledged didBecomeActive in"))
        let (_, json, _) = try d.ctl(["events", "--json"])
        let records = try json.split(separator: "\n").map {
            try JSONDecoder().decode(EventRecord.self, from: Data($0.utf8))
        }
        let ack = try #require(records.first { $0.kind == .acknowledged && $0.event == .didBecomeActive })
        #expect((ack.latencyMicroseconds ?? -1) >= 0)
        #expect(try d.stop() == 0)
    }

    @Test func changesNeedPermissionReadingDoesNot() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: ["a": recorder(s + "/a")])
        chmod(d.dir, 0o755)
        let read = try d.ctl(["status"], user: "nobody")
        #expect(read.0 == 0, "status as nobody: \(read.2)")
        let change = try d.ctl(["activate", "a"], user: "nobody")
        #expect(change.0 == 3)
        #expect(change.2.contains("permission denied"))
        #expect(try d.status("a").state == .notRunning)
        #expect(try d.stop() == 0)
    }

    @Test func membersOfTheControlGroupMayChangeThings() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: ["a": recorder(s + "/a")], daemon: "control_group = \"daemon\"")
        chmod(d.dir, 0o755)
        let argv = [
            "/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--groups=daemon",
            binary("supervisorctl"), "activate", "a", "--socket", d.socket,
        ]
        let (code, _, err) = try run(argv)
        #expect(code == 0, "a member of the control group was refused: \(err)")
        #expect(try d.status("a").state != .notRunning)
        #expect(try d.stop() == 0)
    }

    @Test func jetsamAndPressure() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: ["a": recorder(s + "/a"), "b": recorder(s + "/b")])
        chmod(d.dir, 0o755)
        let f = try d.follow()
        #expect(try d.ctl(["jetsam"]).1.contains("no kills for memory recorded"))
        #expect(try d.ctl(["pressure", "sideways"]).0 == 64)
        #expect(try d.ctl(["jetsam", "--limit", "-1"]).0 == 64)
        #expect(try d.ctl(["pressure", "critical"], user: "nobody").0 == 3, "pressure changes things")
        #expect(try d.ctl(["jetsam"], user: "nobody").0 == 0, "jetsam only reads")

        #expect(try d.ctl(["launch", "--background", "a"]).0 == 0)
        try f.state("a", "suspended")
        #expect(try d.ctl(["activate", "b"]).0 == 0)
        try f.acknowledged("b", "didBecomeActive")
        #expect(try d.ctl(["pressure", "warning"]).0 == 0)
        try f.acknowledged("b", "didReceiveMemoryWarning")
        #expect(try d.ctl(["pressure", "critical"]).0 == 0)
        try f.terminated("a")

        let (_, table, _) = try d.ctl(["jetsam"])
        let rows = table.split(separator: "\n")
        #expect(rows.first?.hasPrefix("TIME") == true)
        #expect(
            rows.count == 2 && rows[1].contains("  a  ") && rows[1].contains("memory-pressure")
                && rows[1].contains("critical (simulated)"))
        let (_, status, _) = try d.ctl(["status"])
        #expect(status.contains("MEMORY") && status.contains("BAND"))
        #expect(status.split(separator: "\n").contains { $0.hasPrefix("memory: ") })
        let (_, events, _) = try d.ctl(["events"])
        #expect(events.contains("*  memory normal -> warning"))
        #expect(events.contains("a  jetsam"))
        #expect(try d.stop() == 0)
    }

    @Test func malformedRequestsGetAnErrorAndTheDaemonCarriesOn() throws {
        let d = try DaemonUnderTest(apps: ["a": recorder("/dev/null")])
        let c = try d.client()
        try c.writeRaw(Array("this is not json\n".utf8))
        let r = try c.readResponse()
        #expect(!r.ok && r.error?.code == .badRequest)
        try c.writeRaw(Array("{\"command\":\"explode\"}\n".utf8))
        #expect(try c.readResponse().error?.code == .badRequest)
        #expect(try d.command(ControlRequest(.status)).ok)
        #expect(try d.stop() == 0)
    }
}
