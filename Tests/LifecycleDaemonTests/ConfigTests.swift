import Foundation
import LifecycleCore
@testable import LifecycleDaemon
import Testing

func write(_ text: String, _ name: String = "app.toml") -> String {
    let dir = FileManager.default.temporaryDirectory.path + "/cfg-\(UUID().uuidString.prefix(8))"
    try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    let path = dir + "/" + name
    try? text.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

@Suite struct ManifestTests {
    @Test func fullManifest() throws {
        let m = try ConfigLoader.loadApp(path: write("""
            command = ["example-recorder", "--log", "/tmp/x"]
            environment = { GREETING = "hello", LANG = "C" }
            working_directory = "/tmp"
            delivery = "signals"
            background_modes = ["audio"]
            exits_on_suspend = true
            autostart = "background"

            [timeouts]
            launch = 2
            event = 1.5
            background = 3
            terminate = 4
            background_task_budget = 20
            expiration_warning = 2
            background_grace = 0.25

            [signals]
            willResignActive = "SIGUSR1"
            willTerminate = "none"
            didBecomeActive = "SIGRTMIN+2"
            """, "player.toml"))
        #expect(m.name == "player")
        #expect(m.command == ["example-recorder", "--log", "/tmp/x"])
        #expect(m.environment == ["GREETING": "hello", "LANG": "C"])
        #expect(m.policy.delivery == .signals)
        #expect(m.policy.continuousBackground && m.policy.exitsOnSuspend)
        #expect(m.policy.eventTimeout == .milliseconds(1500))
        #expect(m.policy.backgroundGrace == .milliseconds(250))
        #expect(m.signals[.willResignActive] == SIGUSR1)
        #expect(m.signals[.willTerminate] == nil)
        #expect(m.autostart == .background)
    }

    @Test func defaultsFollowTheReference() throws {
        let m = try ConfigLoader.loadApp(path: write("command = [\"x\"]\n"))
        #expect(m.policy == AppPolicy())
        #expect(m.policy.launchTimeout == .seconds(5) && m.policy.backgroundTaskBudget == .seconds(30))
        #expect(m.signals == [.willTerminate: SIGTERM])
        #expect(m.policy.delivery == .library)
    }

    func error(_ text: String, _ name: String = "app.toml") -> ConfigError? {
        let path = write(text, name)
        do { _ = try ConfigLoader.loadApp(path: path); return nil } catch {
            #expect(error.file == path)
            return error
        }
    }

    @Test func unknownKeyNamesFileLineAndKey() {
        let e = error("command = [\"x\"]\n\n[timeouts]\nlaunch = 1\nlunch = 2\n")
        #expect(e?.line == 5)
        #expect(e?.key == "timeouts.lunch")
        #expect(e?.message == "unknown key")
        #expect(e?.description.hasSuffix("app.toml:5: timeouts.lunch: unknown key") == true)
    }

    @Test func badValues() {
        #expect(error("command = \"x\"\n")?.message == "expected an array of strings, got string")
        #expect(error("command = [\"x\"]\ndelivery = \"smoke\"\n")?.line == 2)
        #expect(error("command = [\"x\"]\nbackground_modes = [\"teleport\"]\n")?.message.hasPrefix("unknown background mode \"teleport\"") == true)
        #expect(error("command = [\"x\"]\n[timeouts]\nevent = -1\n")?.key == "timeouts.event")
        #expect(error("command = [\"x\"]\n[signals]\nwillTerminate = \"SIGNOPE\"\n")?.message == "unknown signal \"SIGNOPE\"")
        #expect(error("command = [\"x\"]\nenvironment = { A = 1 }\n")?.key == "environment.A")
        #expect(error("command = [\"x\"]\nenvironment = { A = 1 }\n")?.line == 2)
        #expect(error("delivery = \"library\"\n")?.message == "missing: every app needs a command")
        #expect(error("command = [\"x\"]\n", "bad name!.toml")?.message.contains("may only use letters") == true)
    }

    @Test func syntaxErrorsPointAtTheirLine() {
        let e = error("command = [\"x\"]\n\nthis is = = not toml\n")
        #expect(e?.line == 3)
        #expect(e?.message.hasPrefix("TOML syntax") == true)
    }
}

@Suite struct DaemonConfigTests {
    @Test func badManifestIsSkippedOthersLoad() throws {
        let path = write("apps_dir = \"apps\"\nforeground_slots = 2\n", "lifecycled.toml")
        let dir = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: dir + "/apps", withIntermediateDirectories: true)
        try "command = [\"a\"]\n".write(toFile: dir + "/apps/good.toml", atomically: true, encoding: .utf8)
        try "command = [\"a\"]\ncolour = \"red\"\n".write(toFile: dir + "/apps/bad.toml", atomically: true, encoding: .utf8)
        try "not a manifest".write(toFile: dir + "/apps/README", atomically: true, encoding: .utf8)
        let (config, apps, problems) = try ConfigLoader.load(path: path)
        #expect(config.foregroundSlots == 2)
        #expect(config.appsDirectory == dir + "/apps")
        #expect(apps.map(\.name) == ["good"])
        #expect(problems.count == 1)
        #expect(problems.first?.description == dir + "/apps/bad.toml:2: colour: unknown key")
    }

    @Test func daemonErrors() {
        func e(_ text: String) -> ConfigError? {
            do { _ = try ConfigLoader.loadDaemon(path: write(text, "d.toml")); return nil } catch { return error }
        }
        #expect(e("foreground_slots = 0\n")?.message == "0 is out of range 1...64")
        #expect(e("control_socket_mode = \"999\"\n")?.key == "control_socket_mode")
        #expect(e("cgroup_root = \"relative\"\n")?.message.contains("absolute") == true)
        #expect(e("\n\nfrobnicate = true\n")?.line == 3)
    }

    @Test func shippedDefaultConfigIsValid() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
        let (config, apps, problems) = try ConfigLoader.load(path: root + "/config/lifecycled.toml")
        #expect(problems.isEmpty)
        #expect(Set(apps.map(\.name)) == ["recorder", "saver", "worker", "plain"])
        #expect(config.foregroundSlots == 1)
    }
}
