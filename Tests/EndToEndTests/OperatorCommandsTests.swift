import Foundation
import LifecycleControl
import LifecycleTestKit
import Testing

// Issue 13, part 4: the commands operators reach for: restart, signal, pid, avail.

@Suite struct OperatorCommandsTests {
    static let plain = "command = [\"sleep\", \"100000\"]\ndelivery = \"signals\"\n"

    @Test func restartRelaunchesIntoThePlaceItHad() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: ["rec": recorder(s + "/rec", client: .swift), "bg": Self.plain])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "rec"))
        try f.acknowledged("rec", "didBecomeActive")
        try d.command(ControlRequest(.launch, app: "bg", background: true))
        try f.state("bg", "suspended")
        let recPID = try #require(try d.status("rec").pid)
        let bgPID = try #require(try d.status("bg").pid)

        let (code, _, err) = try d.ctl(["restart", "rec"])
        #expect(code == 0, "\(err)")
        let rec = try d.status("rec")
        #expect(rec.pid != recPID && rec.state == .active, "a new run, in front: \(rec)")
        #expect(rec.lastTermination?.reason == .stoppedByUser)
        let (code2, _, err2) = try d.ctl(["restart", "bg"])
        #expect(code2 == 0, "\(err2)")
        let bg = try d.status("bg")
        #expect(bg.pid != bgPID && (bg.state == .background || bg.state == .suspended), "\(bg)")
        #expect(
            lines(s + "/rec").suffix(3) == ["# previous: stopped-by-user", "didFinishLaunching", "didBecomeActive"],
            "launched again, told why the previous run ended")
        #expect(try d.stop() == 0)
    }

    @Test func signalGoesToTheMainProcessAndBadNamesAreNamed() throws {
        // A plain program that writes down the signals it takes.
        let s = scratch()
        let script =
            "trap 'echo USR1 >> \(s)/got' USR1; trap 'echo RT3 >> \(s)/got' RTMIN+3; while :; do sleep 0.05; done"
        let d = try DaemonUnderTest(apps: [
            "trapper": "command = [\"bash\", \"-c\", \"\(script)\"]\ndelivery = \"signals\"\n", "idle": Self.plain,
        ])
        let f = try d.follow()
        try d.command(ControlRequest(.activate, app: "trapper"))
        try f.state("trapper", "active")
        #expect(try d.ctl(["signal", "USR1", "trapper"]).0 == 0)
        try waitForLine(s + "/got", "USR1")
        #expect(try d.ctl(["signal", "SIGRTMIN+3", "trapper"]).0 == 0)
        try waitForLine(s + "/got", "RT3")
        let sent = try f.wait("signal record") { $0.kind == .signal }
        #expect(sent.detail == "SIGUSR1")

        let (bad, _, badErr) = try d.ctl(["signal", "SIGNOPE", "trapper"])
        #expect(bad == 64 && badErr.contains("unknown signal 'SIGNOPE'"), "\(badErr)")
        let (stop, _, stopErr) = try d.ctl(["signal", "STOP", "trapper"])
        #expect(stop == 64 && stopErr.contains("freezes and thaws apps itself"), "\(stopErr)")
        var raw = ControlRequest(.signal, app: "trapper")
        raw.signal = "CONT"
        #expect(try d.client().send(raw).error?.code == .badRequest, "the daemon checks again")
        let (notRunning, _, nrErr) = try d.ctl(["signal", "TERM", "idle"])
        #expect(notRunning == 1 && nrErr.contains("'idle' is not running"), "\(nrErr)")
        #expect(try d.ctl(["signal", "TERM", "nosuch"]).0 == 2)

        // pid: the app's, the daemon's, and a clear error.
        let (_, pid, _) = try d.ctl(["pid", "trapper"])
        #expect(Int32(pid.trimmingCharacters(in: .whitespacesAndNewlines)) == (try d.status("trapper").pid))
        let (_, daemonPID, _) = try d.ctl(["pid"])
        #expect(Int32(daemonPID.trimmingCharacters(in: .whitespacesAndNewlines)) == d.pid)
        let (idle, _, idleErr) = try d.ctl(["pid", "idle"])
        #expect(idle == 1 && idleErr.contains("not running"))
        #expect(try d.stop() == 0)
    }

    @Test func availListsEveryManifestAndWhatAReloadWouldDo() throws {
        let d = try DaemonUnderTest(apps: ["ok": Self.plain, "edited": Self.plain, "gone": Self.plain])
        try (Self.plain + "restart = \"always\"\n").write(
            toFile: d.path("apps/edited.toml"), atomically: true, encoding: .utf8)
        try (Self.plain + "autostart = \"background\"\n").write(
            toFile: d.path("apps/new.toml"), atomically: true, encoding: .utf8)
        try "command = [\"sleep\"\nbad".write(toFile: d.path("apps/broken.toml"), atomically: true, encoding: .utf8)
        unlink(d.path("apps/gone.toml"))

        let (code, out, _) = try d.ctl(["avail", "--json"])
        #expect(code == 1, "a broken file: exit 1")
        let apps = try JSONDecoder().decode([AvailableApp].self, from: Data(out.utf8))
        let byName = Dictionary(uniqueKeysWithValues: apps.map { ($0.name, $0) })
        #expect(byName["ok"]?.config == .ok && byName["ok"]?.inForce == true)
        #expect(byName["edited"]?.config == .changed && byName["edited"]?.restart == "always")
        #expect(
            byName["new"]?.config == .new && byName["new"]?.inForce == false && byName["new"]?.autostart == "background"
        )
        #expect(byName["gone"]?.config == .gone && byName["gone"]?.inForce == true)
        #expect(byName["broken"]?.config == .broken && byName["broken"]?.error?.contains("broken.toml:") == true)
        let (_, table, _) = try d.ctl(["avail"])
        #expect(table.hasPrefix("NAME    CONFIG   IN FORCE"), "\(table)")
        #expect(try d.stop() == 0)
    }

    /// The bash completion generated from the command tree completes
    /// commands, and app names from the daemon that answers.
    @Test func bashCompletesCommandsAndAppNames() throws {
        let d = try DaemonUnderTest(apps: ["alpha": Self.plain, "beta": Self.plain])
        let (code, script, _) = try run([binary("supervisorctl"), "--generate-completion-script", "bash"])
        #expect(code == 0)
        try script.write(toFile: d.path("supervisorctl.bash"), atomically: true, encoding: .utf8)
        func complete(_ words: [String]) throws -> [String] {
            let line = words.joined(separator: " ")
            let probe = """
                source \(d.path("supervisorctl.bash"))
                COMP_WORDS=(\(words.map { "'\($0)'" }.joined(separator: " "))); COMP_CWORD=\(words.count - 1)
                COMP_LINE='\(line)'; COMP_POINT=${#COMP_LINE}
                _supervisorctl supervisorctl '\(words.last!)' '\(words[words.count - 2])'
                printf '%s\\n' "${COMPREPLY[@]}"
                """
            var env = ProcessInfo.processInfo.environment
            env["LIFECYCLED_SOCKET"] = d.socket
            env["PATH"] = buildDirectory + ":" + (env["PATH"] ?? "/usr/bin:/bin")
            let (_, out, err) = try run(["/bin/bash", "-c", probe], environment: env)
            #expect(err.isEmpty, "\(err)")
            return out.split(separator: "\n").map(String.init)
        }
        #expect(try complete(["supervisorctl", "res"]) == ["restart"])
        #expect(try complete(["supervisorctl", "restart", "al"]) == ["alpha"])
        #expect(Set(try complete(["supervisorctl", "signal", "USR1", ""])) == ["alpha", "beta"])
        #expect(try d.stop() == 0)
    }
}
