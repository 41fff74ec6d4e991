import Foundation
import LifecycleCore
@testable import LifecycleDaemon
import LifecycleTestKit
import Testing

func write(_ text: String, _ name: String = "app.toml") -> String {
    let path = scratchDirectory("cfg") + "/" + name
    try? text.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

/// The error loading an app manifest with `text` gives (it names the file), or nil.
func appError(_ text: String, _ name: String = "app.toml") -> ConfigError? {
    let path = write(text, name)
    do { _ = try ConfigLoader.loadApp(path: path); return nil } catch {
        #expect(error.file == path)
        return error
    }
}

/// The error loading a daemon config with `text` gives, or nil.
func daemonError(_ text: String) -> ConfigError? {
    do { _ = try ConfigLoader.loadDaemon(path: write(text, "d.toml")); return nil } catch { return error }
}

@Suite struct ManifestTests {
    @Test func fullManifest() throws {
        let m = try ConfigLoader.loadApp(
            path: write(
                """
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

    @Test func unknownKeyNamesFileLineAndKey() {
        let e = appError("command = [\"x\"]\n\n[timeouts]\nlaunch = 1\nlunch = 2\n")
        #expect(e?.line == 5)
        #expect(e?.key == "timeouts.lunch")
        #expect(e?.message == "unknown key")
        #expect(e?.description.hasSuffix("app.toml:5: timeouts.lunch: unknown key") == true)
    }

    @Test func badValues() {
        #expect(appError("command = \"x\"\n")?.message == "expected an array of strings, got string")
        #expect(appError("command = [\"x\"]\ndelivery = \"smoke\"\n")?.line == 2)
        #expect(
            appError("command = [\"x\"]\nbackground_modes = [\"teleport\"]\n")?.message.hasPrefix(
                "unknown background mode \"teleport\"") == true)
        #expect(appError("command = [\"x\"]\n[timeouts]\nevent = -1\n")?.key == "timeouts.event")
        #expect(
            appError("command = [\"x\"]\n[signals]\nwillTerminate = \"SIGNOPE\"\n")?.message
                == "unknown signal \"SIGNOPE\"")
        #expect(appError("command = [\"x\"]\nenvironment = { A = 1 }\n")?.key == "environment.A")
        #expect(appError("command = [\"x\"]\nenvironment = { A = 1 }\n")?.line == 2)
        #expect(appError("delivery = \"library\"\n")?.message == "missing: every app needs a command")
        #expect(appError("command = [\"x\"]\n", "bad name!.toml")?.message.contains("may only use letters") == true)
    }

    @Test func crashPolicy() throws {
        let m = try ConfigLoader.loadApp(
            path: write(
                "command = [\"x\"]\nrestart = \"on-failure\"\n"
                    + "[backoff]\ndelay = 0.5\nmax_delay = 60\nlimit = 0\nwindow = 30\n"))
        #expect(m.policy.restart.when == .onFailure)
        #expect(m.policy.restart.delay == .milliseconds(500) && m.policy.restart.maxDelay == .seconds(60))
        #expect(m.policy.restart.limit == 0 && m.policy.restart.window == .seconds(30))
        let bad = appError("command = [\"x\"]\nrestart = \"sometimes\"\n")
        #expect(bad?.line == 2 && bad?.message == "expected \"no\", \"on-failure\" or \"always\", got \"sometimes\"")
        #expect(appError("command = [\"x\"]\n[backoff]\ndelay = 10\nmax_delay = 5\n")?.key == "backoff.delay")
        #expect(appError("command = [\"x\"]\n[backoff]\ndelay = 0.001\n")?.message.hasPrefix("at least 0.01 s") == true)
        #expect(appError("command = [\"x\"]\n[backoff]\nlimit = -1\n")?.key == "backoff.limit")
        #expect(appError("command = [\"x\"]\n[backoff]\ntries = 3\n")?.message == "unknown key")
    }

    @Test func syntaxErrorsPointAtTheirLine() {
        let e = appError("command = [\"x\"]\n\nthis is = = not toml\n")
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
        try "command = [\"a\"]\ncolour = \"red\"\n".write(
            toFile: dir + "/apps/bad.toml", atomically: true, encoding: .utf8)
        try "not a manifest".write(toFile: dir + "/apps/README", atomically: true, encoding: .utf8)
        let (config, apps, problems) = try ConfigLoader.load(path: path)
        #expect(config.foregroundSlots == 2)
        #expect(config.appsDirectory == dir + "/apps")
        #expect(apps.map(\.name) == ["good"])
        #expect(problems.count == 1)
        #expect(problems.first?.description == dir + "/apps/bad.toml:2: colour: unknown key")
    }

    /// Many manifests are read on several threads: every one is read, in
    /// name order, and each bad one is reported with its own line.
    @Test func manyManifestsLoadInOrderWithTheirOwnErrors() throws {
        let path = write("apps_dir = \"apps\"\n", "lifecycled.toml")
        let dir = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: dir + "/apps", withIntermediateDirectories: true)
        for i in 0..<300 {
            let text = i % 50 == 7 ? "command = [\"a\"]\n\n  timeouts = 3\n" : "  command = [ \"app\(i)\" ]  \n"
            try text.write(toFile: dir + String(format: "/apps/app%03d.toml", i), atomically: true, encoding: .utf8)
        }
        let (_, apps, problems) = try ConfigLoader.load(path: path)
        let bad = Set((0..<300).filter { $0 % 50 == 7 })
        #expect(apps.map(\.name) == (0..<300).filter { !bad.contains($0) }.map { String(format: "app%03d", $0) })
        #expect(apps.map { $0.command[0] } == (0..<300).filter { !bad.contains($0) }.map { "app\($0)" })
        #expect(
            problems.map(\.description)
                == bad.sorted().map { String(format: "\(dir)/apps/app%03d.toml:3: timeouts: expected a table", $0) })
    }

    /// Documented in configuration.md and the default config: "none" is the
    /// process-group fallback, as `--cgroup-root none` is.
    @Test func cgroupRootNoneIsAccepted() throws {
        for root in ["none", "auto", "/lifecycled"] {
            let c = try ConfigLoader.loadDaemon(path: write("cgroup_root = \"\(root)\"\n", "lifecycled.toml"))
            #expect(c.cgroupRoot == root)
        }
    }

    @Test func daemonErrors() {
        let e = daemonError
        #expect(e("foreground_slots = 0\n")?.message == "0 is out of range 1...64")
        #expect(e("control_socket_mode = \"999\"\n")?.key == "control_socket_mode")
        #expect(e("cgroup_root = \"relative\"\n")?.message.contains("absolute") == true)
        #expect(e("\n\nfrobnicate = true\n")?.line == 3)
    }

    @Test func shippedDefaultConfigIsValid() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
        let (config, apps, problems) = try ConfigLoader.load(path: root + "/config/lifecycled.toml")
        #expect(problems.isEmpty)
        #expect(
            Set(apps.map(\.name)) == [
                "recorder", "saver", "worker", "plain", "c-recorder", "python-recorder", "news", "dash",
            ])
        #expect(config.foregroundSlots == 1)
        #expect(config.displays == [DisplaySpec(name: "main", slots: 1)])
        #expect(apps.first { $0.name == "dash" }?.policy.scenes == true)
    }
}

@Suite struct DirectoryConfigTests {
    @Test func runtimeAndStateDirectoriesAreRelativeToTheDaemonFile() throws {
        let path = write("runtime_directory = \"run\"\nstate_directory = \"/var/lib/x\"\n", "d.toml")
        let c = try ConfigLoader.loadDaemon(path: path)
        #expect(c.runtimeDirectory == (path as NSString).deletingLastPathComponent + "/run")
        #expect(c.stateDirectory == "/var/lib/x")
    }

    @Test func theRuntimeDirectoryDefaultsToSystemdsOrRun() {
        let expected = ProcessInfo.processInfo.environment["RUNTIME_DIRECTORY"] ?? "/run/lifecycled"
        #expect(DaemonConfig().runtimeDirectory == expected)
    }
}

@Suite struct MemoryConfigTests {
    func daemon(_ text: String) throws(ConfigError) -> DaemonConfig {
        try ConfigLoader.loadDaemon(path: write(text, "d.toml"))
    }

    @Test func everyKey() throws {
        let c = try daemon(
            """
            state_directory = "/var/lib/elsewhere"
            [memory]
            monitor = true
            interval = 2
            min_interval = 0.05
            fill_rate = "4G"
            available_warning = "3G"
            available_critical = 5
            stall_warning = "off"
            stall_critical = 60
            psi_trigger = false
            budget = "1.5G"
            budget_warning = 80
            budget_critical = 110
            hysteresis = 1
            kill_history = 50
            reclaim = false
            foreground_low = "256M"
            """
        ).memory
        #expect(!c.reclaim && c.foregroundLow == 256 << 20)
        #expect(c.interval == .seconds(2) && c.minInterval == .milliseconds(50))
        #expect(c.fillRate == 4 << 30)
        #expect(c.availableWarning == .bytes(3 << 30) && c.availableCritical == .percent(5))
        #expect(c.stallWarning == nil && c.stallCritical == 60 && !c.psiTrigger)
        #expect(c.budget == 3 << 29 && c.budgetWarning == 80 && c.budgetCritical == 110)
        #expect(c.hysteresis == 1 && c.killHistory == 50)
        // Amounts become shares of MemTotal for the gauge.
        let t = c.thresholds(total: 12 << 30)
        #expect(t.availableWarning == 25 && t.availableCritical == 5 && t.budgetCritical == 110)
    }

    @Test func defaultsAreSane() throws {
        let c = try daemon("").memory
        #expect(c.monitor && c.psiTrigger && c.budget == nil)
        #expect(c.reclaim && c.foregroundLow == .max, "reclaim where swap exists; the foreground protected whole")
        let cpu = try daemon("").cpu
        #expect(cpu.weights && cpu.foregroundWeight == 1000 && cpu.backgroundWeight == 50)
        let t = c.thresholds(total: 1 << 34)
        #expect(t.availableWarning == 20 && t.availableCritical == 10)
        #expect(t.budgetWarning == nil && t.budgetCritical == nil, "no budget, no budget thresholds")
    }

    @Test func sizes() {
        #expect(parseSize("512M") == 512 << 20)
        #expect(parseSize("1.5G") == 3 << 29)
        #expect(parseSize("64KiB") == 64 << 10)
        #expect(parseSize("100") == 100)
        #expect(parseSize("2gb") == 2 << 30)
        for bad in ["", "M", "lots", "1.5.5G", "-1G", "12X"] { #expect(parseSize(bad) == nil, "\(bad)") }
    }

    @Test func errorsNameFileLineAndKey() {
        let e = daemonError("log_level = \"info\"\n[memory]\nbudget = \"lots\"\n")
        #expect(e?.line == 3 && e?.key == "memory.budget")
        #expect(e?.message.contains("expected a size like") == true)
        #expect(daemonError("[memory]\nstall_warning = 120\n")?.message == "120.0 % is out of range 0...100")
        #expect(daemonError("[memory]\nbudget_warning = 95\nbudget_critical = 90\n")?.key == "memory.budget_warning")
        #expect(
            daemonError("[memory]\navailable_warning = 5\n")?.message.contains("must not be below available_critical")
                == true)
        #expect(daemonError("[memory]\ninterval = 0.001\n")?.key == "memory.min_interval")
        #expect(daemonError("[memory]\nforeground_low = \"most\"\n")?.key == "memory.foreground_low")
        #expect(daemonError("[memory]\nreclaim = \"yes\"\n")?.key == "memory.reclaim")
        #expect(
            daemonError("[memory]\nwobble = 1\n")?.description.hasSuffix("d.toml:2: memory.wobble: unknown key") == true
        )
    }

    /// [memory] and [cpu] change at the next start, and a reload says so.
    @Test func aReloadNamesMemoryAndCPUChangesAsNeedingARestart() throws {
        let before = try daemon("")
        let after = try daemon("[memory]\nreclaim = false\n[cpu]\nforeground_weight = 2000\n")
        #expect(Daemon.settingsNeedingRestart(from: before, to: after) == ["memory", "cpu"])
        #expect(Daemon.settingsNeedingRestart(from: before, to: before).isEmpty)
    }

    @Test func cpuWeightsAndTheirErrors() throws {
        let c = try daemon("[cpu]\nweights = true\nforeground_weight = 5000\nbackground_weight = 1\n").cpu
        #expect(c.weights && c.foregroundWeight == 5000 && c.backgroundWeight == 1)
        #expect(try !daemon("[cpu]\nweights = false\n").cpu.weights)
        #expect(daemonError("[cpu]\nforeground_weight = 0\n")?.key == "cpu.foreground_weight")
        #expect(daemonError("[cpu]\nbackground_weight = 10001\n")?.line == 2)
        #expect(daemonError("[cpu]\nshares = 3\n")?.message.contains("unknown key") == true)
        #expect(daemonError("cpu = 3\n")?.key == "cpu")
    }

    @Test func appMemory() throws {
        let m = try ConfigLoader.loadApp(
            path: write(
                """
                command = ["x"]
                [memory]
                band = "low"
                limit = "256M"
                last_notice = true
                last_notice_timeout = 0.5
                [signals]
                didReceiveMemoryWarning = "SIGUSR2"
                willBeKilledForMemory = "SIGRTMIN+1"
                """))
        #expect(m.policy.memory.band == .low && m.policy.memory.limit == 256 << 20)
        #expect(m.policy.memory.lastNotice && m.policy.memory.lastNoticeTimeout == .milliseconds(500))
        #expect(m.signals[.didReceiveMemoryWarning] == SIGUSR2)
        let player = try ConfigLoader.loadApp(path: write("command = [\"x\"]\nbackground_modes = [\"audio\"]\n"))
        #expect(player.policy.memory.band == .high, "an app someone listens to is killed last")
        let plain = try ConfigLoader.loadApp(path: write("command = [\"x\"]\n"))
        #expect(
            plain.policy.memory.band == .normal && plain.policy.memory.limit == nil && !plain.policy.memory.lastNotice)
    }

    @Test func appMemoryErrors() {
        func e(_ text: String) -> ConfigError? { appError("command = [\"x\"]\n[memory]\n" + text) }
        #expect(e("band = \"vip\"\n")?.key == "memory.band")
        #expect(e("band = \"vip\"\n")?.line == 3)
        #expect(e("limit = 0\n")?.message == "must be more than 0 bytes")
        #expect(e("last_notice_timeout = 10\n")?.message.hasPrefix("at most 5 s") == true)
        #expect(e("colour = 1\n")?.key == "memory.colour")
    }
}

/// The config parser fed broken files: every error names the file and, where
/// there is one, the right line; nothing crashes.
@Suite struct BrokenConfigTests {
    @Test func syntaxErrorsOnTheirLine() {
        let cases: [(String, Int)] = [
            ("command = [\"x\"]\n\n\nname = \"unterminated\n", 4),
            ("command = [\"x\"]\n[timeouts\nlaunch = 1\n", 2),
            ("command = [\"x\"]\ncommand = [\"y\"]\n", 2),  // duplicate key
            ("command = [\"x\"]\n[timeouts]\nlaunch = 1\n[timeouts]\nevent = 1\n", 4),  // duplicate table
            ("command = [\"x\",\n  \"y\"\n\nbroken = 1\n", 4),  // unterminated array
            ("command = [\"x\"]\nenvironment = { A = \"1\", \n", 2),
            ("command = [\"x\"]\nlimit = 12abc\n", 2),
        ]
        for (text, line) in cases {
            let e = appError(text)
            #expect(
                e?.message.hasPrefix("TOML syntax") == true, "\(text.debugDescription): \(e?.description ?? "accepted")"
            )
            #expect(e?.line == line, "\(text.debugDescription): \(e?.description ?? "accepted")")
        }
    }

    @Test func garbageAndEmptiness() {
        let binary = String(decoding: (0..<512).map { UInt8(($0 * 37 + 11) % 256) }, as: UTF8.self)
        #expect(appError(binary) != nil)
        #expect(appError("")?.message == "missing: every app needs a command")
        let bom = appError("\u{FEFF}command = [\"x\"]\n")
        #expect(bom == nil || bom?.line == 1)
        let path = FileManager.default.temporaryDirectory.path + "/cfg-missing-\(UUID().uuidString.prefix(8))/app.toml"
        do { _ = try ConfigLoader.loadApp(path: path); Issue.record("a missing file loaded") } catch {
            #expect(error.message == "does not exist")
        }
    }

    @Test func wrongTypesInNestedTablesOnTheirLine() {
        let e = appError("command = [\"x\"]\n\n[memory]\nband = \"low\"\nlast_notice = \"yes\"\n")
        #expect(e?.line == 5 && e?.key == "memory.last_notice")
        #expect(e?.message == "expected true or false, got string")
        let t = appError("command = [\"x\"]\n[timeouts]\nlaunch = [1, 2]\n")
        #expect(t?.line == 3 && t?.key == "timeouts.launch")
        let s = appError("command = [\"x\"]\n[signals]\ndidBecomeActive = 10\n")
        #expect(s?.line == 3 && s?.key == "signals.didBecomeActive")
        let c = appError("command = [\"x\", 3]\n")
        #expect(c?.line == 1 && c?.message == "expected an array of strings, found integer")
        let r = appError("command = [\"x\"]\nreadiness = \"notify\"\n")
        #expect(r?.key == "readiness" && r?.message.contains("only for delivery = \"signals\"") == true)
    }

    @Test func brokenDaemonFilesStopTheDaemonWithTheLine() {
        let e = daemonError
        #expect(e("log_level = \"info\"\n[memory\n")?.line == 2)
        #expect(e("foreground_slots = \"two\"\n")?.message == "expected an integer, got string")
        #expect(e("\n\n[memory]\n\nbudget = -5\n")?.line == 5)
        #expect(e("event_history = 99999999999\n")?.message.contains("out of range") == true)
    }
}

/// Files that are not what their name says (issue 12): each gets an error
/// naming the file, never its content, and nothing hangs.
@Suite struct ConfigFileEdgeTests {
    @Test func aNULByteIsRejectedWithItsLine() {
        let e = appError("command = [\"a\"]\n# fine\nautostart = \"no\"\u{0}\ncolour = \"red\"\n")
        #expect(e?.line == 3)
        #expect(e?.message == "contains a NUL byte (a TOML file is text)")
    }

    @Test func aDirectoryFIFOOrSymlinkLoopNamedTomlIsAClearError() throws {
        let dir = scratchDirectory("edge")
        try FileManager.default.createDirectory(atPath: dir + "/apps/dir.toml", withIntermediateDirectories: true)
        #expect(mkfifo(dir + "/apps/fifo.toml", 0o600) == 0)
        #expect(symlink(dir + "/apps/loop.toml", dir + "/apps/loop.toml") == 0)
        try Data([0x63, 0x6F, 0xFF, 0xFE, 0x0A]).write(to: URL(fileURLWithPath: dir + "/apps/binary.toml"))
        try Data(repeating: 0x23, count: Document.maxSize + 1).write(to: URL(fileURLWithPath: dir + "/apps/big.toml"))
        try "command = [\"a\"]\n".write(toFile: dir + "/apps/good.toml", atomically: true, encoding: .utf8)
        try "apps_dir = \"apps\"\n".write(toFile: dir + "/lifecycled.toml", atomically: true, encoding: .utf8)
        let (_, apps, problems) = try ConfigLoader.load(path: dir + "/lifecycled.toml")
        #expect(apps.map(\.name) == ["good"])
        #expect(
            problems.map(\.description) == [
                "\(dir)/apps/big.toml: is larger than 1024 KiB",
                "\(dir)/apps/binary.toml: is not UTF-8 text",
                "\(dir)/apps/dir.toml: is a directory, not a file",
                "\(dir)/apps/fifo.toml: is a FIFO, not a regular file",
                "\(dir)/apps/loop.toml: is a loop of symbolic links",
            ])
    }
}

@Suite struct CredentialKeysTests {
    @Test func userGroupCapabilitiesAndUmask() throws {
        let m = try ConfigLoader.loadApp(
            path: write(
                """
                command = ["x"]
                user = "nobody"
                supplementary_groups = ["nogroup", 4]
                capabilities = ["CAP_NET_BIND_SERVICE", "kill"]
                umask = "0027"
                no_new_privileges = false
                """))
        #expect(m.credentials.uid == 65534 && m.credentials.gid == 65534)
        #expect(m.credentials.groups == [65534, 4])
        #expect(m.credentials.keepCapabilities == (1 << 10) | (1 << 5))
        #expect(m.credentials.umask == 0o027 && !m.credentials.noNewPrivileges)
        #expect(m.account?.name == "nobody")
        // An id without an entry, as systemd takes it; the group of the same number.
        let n = try ConfigLoader.loadApp(path: write("command = [\"x\"]\nuser = 4242\ngroup = \"nogroup\"\n"))
        #expect(n.credentials.uid == 4242 && n.credentials.gid == 65534 && n.account?.name == "4242")
        // Defaults: the daemon's user, no new privileges, umask 0022, every capability.
        let d = try ConfigLoader.loadApp(path: write("command = [\"x\"]\n"))
        #expect(d.credentials.uid == nil && d.credentials.noNewPrivileges && d.credentials.umask == 0o022)
        #expect(d.credentials.keepCapabilities == .max)
    }

    @Test func badCredentialsNameTheKey() {
        #expect(
            appError("command = [\"x\"]\nuser = \"no-such-user-here\"\n")?.message
                == "no such user \"no-such-user-here\"")
        #expect(appError("command = [\"x\"]\ngroup = \"no-such-group-here\"\n")?.key == "group")
        #expect(appError("command = [\"x\"]\nuser = -1\n")?.line == 2)
        #expect(appError("command = [\"x\"]\numask = \"0999\"\n")?.message.contains("octal mask") == true)
        #expect(
            appError("command = [\"x\"]\ncapabilities = [\"CAP_FLY\"]\n")?.message.contains("unknown capability")
                == true)
    }
}

@Suite struct DisplayAndSceneConfigTests {
    @Test func displaysInOrderWithTheirSlots() throws {
        let c = try ConfigLoader.loadDaemon(
            path: write(
                """
                [[display]]
                name = "centre"
                slots = 2

                [[display]]
                name = "cluster"
                """, "d.toml"))
        #expect(c.displays == [DisplaySpec(name: "centre", slots: 2), DisplaySpec(name: "cluster", slots: 1)])
        // None declared: one, main, with foreground_slots.
        let plain = try ConfigLoader.loadDaemon(path: write("foreground_slots = 3\n", "d.toml"))
        #expect(plain.displays == [DisplaySpec(name: "main", slots: 3)])
    }

    @Test func badDisplaysNameTheirKeyAndLine() {
        let e = daemonError
        #expect(e("[[display]]\nslots = 1\n")?.message == "a [[display]] needs a name")
        #expect(e("[[display]]\nname = \"a b\"\n")?.key == "display.name")
        #expect(
            e("[[display]]\nname = \"x\"\n[[display]]\nname = \"x\"\n")?.message == "display \"x\" is declared twice")
        #expect(e("[[display]]\nname = \"x\"\nslots = 0\n")?.message == "0 is out of range 1...64")
        #expect(e("[[display]]\nname = \"x\"\nsize = 1\n")?.key == "display.size")
        let both = e("foreground_slots = 2\n[[display]]\nname = \"x\"\n")
        #expect(both?.key == "foreground_slots")
        #expect(both?.message == "not with [[display]]: each display has its own slots")
        #expect(e("display = 3\n")?.key == "display")
    }

    @Test func manifestScenesAndDisplay() throws {
        let m = try ConfigLoader.loadApp(
            path: write("command = [\"/bin/true\"]\nscenes = true\nmax_scenes = 3\ndisplay = \"cluster\"\n"))
        #expect(m.policy.scenes && m.policy.maxScenes == 3 && m.policy.display == "cluster")
        #expect(
            appError("command = [\"/bin/true\"]\ndelivery = \"signals\"\nscenes = true\n")?.message
                == "needs delivery = \"library\": a plain program cannot be told of scenes")
        #expect(appError("command = [\"/bin/true\"]\nmax_scenes = 0\n")?.key == "max_scenes")
        #expect(appError("command = [\"/bin/true\"]\ndisplay = \"a/b\"\n")?.key == "display")
    }
}
