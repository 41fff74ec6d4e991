import Foundation
@preconcurrency import Glibc
import LifecycleControl
import LifecycleTestKit
import Testing

/// The D-Bus interface (docs/dbus.md), exercised with real parts: a real
/// dbus-daemon of the test's own, the real daemon on it, and the clients
/// shell authors use (busctl, gdbus, and a Python shell with dbus-python).
@Suite(.serialized) struct DBusTests {
    static let name = "io.lifecycled.Lifecycle1"
    static let root = "/io/lifecycled/Lifecycle1"

    /// A daemon serving on a private bus, its name owned.
    static func daemon(_ apps: [String: String], daemon: String = "") throws -> (PrivateBus, DaemonUnderTest) {
        let bus = try PrivateBus()
        let d = try DaemonUnderTest(apps: apps, daemon: daemon, environment: bus.environment)
        chmod(d.dir, 0o755)
        try bus.waitForName()
        return (bus, d)
    }

    /// `busctl call` on the daemon: (exit code, output, error).
    static func call(
        _ bus: PrivateBus, _ path: String, _ iface: String, _ method: String, _ args: [String] = [],
        user: String? = nil
    ) throws -> (Int32, String, String) {
        try bus.busctl(["call", name, path, name + "." + iface, method] + args, user: user)
    }

    /// The error name gdbus reports for a call (busctl shows only errno text).
    static func error(_ bus: PrivateBus, _ path: String, _ method: String, _ args: [String]) throws -> String {
        let (_, _, err) = try run(
            ["/usr/bin/gdbus", "call", "--address", bus.address, "-d", name, "-o", path, "-m", method] + args)
        return err
    }

    /// The Python shell (Tests/dbus/shell.py): each step's outcome, the
    /// signals it saw, the snapshots before and after.
    static func shell(_ bus: PrivateBus, _ steps: [String]) throws -> [String: Any] {
        let (code, out, err) = try run(
            ["/usr/bin/python3", repositoryRoot + "/Tests/dbus/shell.py", bus.address] + steps)
        guard code == 0, let json = try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any] else {
            throw TestFailure("shell.py failed (\(code)): \(err)")
        }
        return json
    }

    /// Our interfaces in an introspection document, each as one string
    /// without its indentation.
    static func interfaces(_ xml: String) -> [String] {
        var found: [String] = []
        var rest = Substring(xml)
        while let start = rest.range(of: "<interface name=\"io.lifecycled."),
            let end = rest[start.upperBound...].range(of: "</interface>")
        {
            found.append(
                rest[start.lowerBound..<end.upperBound].split(separator: "\n")
                    .map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: "\n"))
            rest = rest[end.upperBound...]
        }
        return found
    }

    @Test func theInterfaceIsTheCheckedInXML() throws {
        let s = scratch()
        let (bus, d) = try Self.daemon(["a": recorder(s + "/a")])
        #expect(try d.ctl(["activate", "a"]).0 == 0)  // its scene has an object
        let (code, reply, err) = try Self.call(bus, Self.root, "Manager", "Home", ["a{sv}", "0"])
        #expect(code == 0, "\(err)")
        let operation = try #require(reply.split(separator: "\"").dropFirst().first.map(String.init))
        var live: [String] = []
        let objects = [
            Self.root, Self.root + "/app/a", operation, Self.root + "/display/main", Self.root + "/app/a/scene/main",
        ]
        for path in objects {
            live += Self.interfaces(try bus.busctl(["introspect", "--xml-interface", Self.name, path]).1)
        }
        // A monitor lives as long as the connection that made it: made and read on one.
        let monitor = try run([
            "/usr/bin/python3", "-c",
            """
            import dbus, sys
            n, b = "\(Self.name)", dbus.bus.BusConnection(sys.argv[1])
            m = b.get_object(n, "\(Self.root)").CreateMonitor(dbus.Dictionary({}, signature="sv"), dbus_interface=n + ".Manager")
            print(b.get_object(n, m).Introspect(dbus_interface="org.freedesktop.DBus.Introspectable"))
            """, bus.address,
        ])
        #expect(monitor.0 == 0, "\(monitor.2)")
        live += Self.interfaces(monitor.1)
        let file = try String(contentsOfFile: repositoryRoot + "/docs/io.lifecycled.Lifecycle1.xml", encoding: .utf8)
        #expect(live.count == 6)
        #expect(live == Self.interfaces(file), "docs/io.lifecycled.Lifecycle1.xml is not what the daemon serves")
        #expect(try d.stop() == 0)
    }

    /// A Python shell launches, activates, sends home, restarts and stops
    /// an app; each operation ends done; the signals, applied to the
    /// snapshot taken before, give the snapshot after, for every object
    /// (apps, their scenes, displays, operations); each names only values
    /// that changed; the JSON socket agrees.
    @Test func aPythonShellDrivesTheLifecycleAndTheSignalsAddUp() throws {
        let s = scratch()
        let (bus, d) = try Self.daemon(["a": recorder(s + "/a"), "b": recorder(s + "/b")])
        let steps = ["Launch:a", "Activate:a", "Home", "Activate:a", "Restart:a", "Stop:a", "Launch:b"]
        let out = try Self.shell(bus, steps)
        let results = try #require(out["results"] as? [[String]])
        #expect(results == Array(repeating: ["done", ""], count: steps.count))

        typealias Properties = [String: Any]
        /// Every object's interfaces of ours, by path.
        func objects(_ snapshot: Any?) -> [String: [String: Properties]] {
            var out: [String: [String: Properties]] = [:]
            for (path, ifaces) in (snapshot as? [String: [String: Properties]]) ?? [:] {
                out[path] = ifaces.filter { $0.key.hasPrefix(Self.name) }
            }
            return out
        }
        var state = objects(out["before"])
        #expect(state.count >= 3, "two apps and a display (scenes come with a launch)")
        let signals = try #require(out["signals"] as? [[String: Any]])
        var finished = 0
        var changes: Set<String> = []
        for signal in signals {
            let path = signal["path"] as? String ?? ""
            switch signal["signal"] as? String {
            case "OperationFinished": finished += 1
            case "InterfacesAdded":
                let added = (signal["interfaces"] as? [String: Properties] ?? [:]).filter {
                    $0.key.hasPrefix(Self.name)
                }
                state[path, default: [:]].merge(added) { $1 }
            case "InterfacesRemoved":
                for iface in signal["removed"] as? [String] ?? [] { state[path]?[iface] = nil }
                if state[path]?.isEmpty == true { state[path] = nil }
            case "PropertiesChanged":
                let iface = signal["interface"] as? String ?? ""
                let changed = try #require(signal["changed"] as? Properties)
                #expect(state[path]?[iface] != nil, "\(path) signalled \(iface), which it does not have")
                for (key, value) in changed {
                    let was = state[path]?[iface]?[key].map { "\($0)" }
                    #expect(was != nil, "\(path) signalled \(iface).\(key), which it does not have")
                    #expect(was != "\(value)", "\(path) signalled \(key) = \(value), which it already was")
                    state[path]?[iface]?[key] = value
                    changes.insert(String(iface.split(separator: ".").last ?? "") + "." + key)
                }
            default: break
            }
        }
        #expect(finished == steps.count, "OperationFinished reaches the requester, once per operation")
        for kind in ["App.State", "App.Pid", "App.Awaiting", "Scene.State", "Scene.InFront", "Display.Front"] {
            #expect(changes.contains(kind), "no PropertiesChanged carried \(kind): \(changes.sorted())")
        }
        let after = objects(out["after"])
        #expect(Set(state.keys) == Set(after.keys), "the objects the signals leave are the snapshot's")
        for (path, ifaces) in after {
            for (iface, properties) in ifaces {
                for (key, value) in properties where key != "Footprint" {
                    #expect(
                        "\(state[path]?[iface]?[key] ?? "nil")" == "\(value)",
                        "\(path) \(iface).\(key): signals and snapshot disagree")
                }
            }
        }
        // GetManagedObjects says what each object's GetAll says.
        let each = out["each"] as? [String: [String: [String: Any]]] ?? [:]
        let whole = out["after"] as? [String: [String: [String: Any]]] ?? [:]
        #expect(each.count == whole.count && each.count >= 4)
        for (path, ifaces) in each {
            for (iface, properties) in ifaces {
                let listed = whole[path]?[iface] ?? [:]
                #expect(listed.keys.sorted() == properties.keys.sorted(), "\(path) \(iface)")
                for (key, value) in properties where key != "Footprint" {
                    #expect("\(listed[key] ?? "nil")" == "\(value)", "\(path) \(iface).\(key)")
                }
            }
        }
        #expect(after[Self.root + "/app/a"]?[Self.name + ".App"]?["State"] as? String == "not-running")
        #expect(after[Self.root + "/app/b"]?[Self.name + ".App"]?["State"] as? String == "active")
        #expect(try d.status("b").state == .active)
        #expect(try d.stop() == 0)
    }

    /// Outcomes say why: a launch that fails is `failed` with the
    /// termination code; one a kill overtook is `superseded`.
    @Test func outcomesSayWhy() throws {
        let s = scratch()
        let (bus, d) = try Self.daemon([
            "gone": "command = [\"/nonexistent/app\"]\n",
            "hangs": recorder(s + "/h", arguments: ["--hang", "didFinishLaunching"]),
        ])
        let failed = try Self.shell(bus, ["Launch:gone"])
        #expect(failed["results"] as? [[String]] == [["failed", "launch-failed"]])

        let (code, reply, err) = try Self.call(bus, Self.root + "/app/hangs", "App", "Launch", ["a{sv}", "0"])
        #expect(code == 0, "\(err)")
        let operation = try #require(reply.split(separator: "\"").dropFirst().first.map(String.init))
        try waitUntil("hangs is launching") { try d.status("hangs").awaiting?.rawValue == "didFinishLaunching" }
        #expect(try Self.call(bus, Self.root + "/app/hangs", "App", "Kill", ["a{sv}", "0"]).0 == 0)
        let wait = try bus.busctl(["call", Self.name, operation, Self.name + ".Operation", "Wait"])
        #expect(wait.1.trimmingCharacters(in: .whitespacesAndNewlines) == "ss \"superseded\" \"killed-by-user\"")
        #expect(try d.stop() == 0)
    }

    /// A later command that changes the same front before an operation's
    /// outcome is known supersedes it, naming itself; a reload that removes
    /// the app an operation waits for cancels it. Neither waits 300 s.
    @Test func aLaterCommandSupersedesAndARemovedAppCancels() throws {
        let s = scratch()
        let (bus, d) = try Self.daemon([
            "h": recorder(s + "/h", arguments: ["--hang", "didFinishLaunching"]),
            "g": recorder(s + "/g", arguments: ["--hang", "didFinishLaunching"]),
        ])
        func start(_ app: String) throws -> String {
            let (code, reply, err) = try Self.call(bus, Self.root + "/app/" + app, "App", "Launch", ["a{sv}", "0"])
            #expect(code == 0, "\(err)")
            return try #require(reply.split(separator: "\"").dropFirst().first.map(String.init))
        }
        func wait(_ operation: String) throws -> String {
            try bus.busctl(["call", Self.name, operation, Self.name + ".Operation", "Wait"]).1
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let launch = try start("h")
        try waitUntil("h is launching") { try d.status("h").awaiting?.rawValue == "didFinishLaunching" }
        #expect(try Self.call(bus, Self.root, "Manager", "Home", ["a{sv}", "0"]).0 == 0)
        #expect(try wait(launch) == "ss \"superseded\" \"home\"")

        let other = try start("g")
        try waitUntil("g is launching") { try d.status("g").awaiting?.rawValue == "didFinishLaunching" }
        unlink(d.dir + "/apps/g.toml")
        let (code, _, err) = try run([binary("supervisorctl"), "reload", "--socket", d.socket])
        #expect(code == 0, "\(err)")
        #expect(try wait(other) == "ss \"canceled\" \"app-removed\"")
        #expect(try d.stop() == 0)
    }

    @Test func badCallsAndRefusalsAreNamedErrors() throws {
        let s = scratch()
        let (bus, d) = try Self.daemon(["a": recorder(s + "/a")])
        let manager = Self.name + ".Manager"
        #expect(
            try Self.error(bus, Self.root, manager + ".GetApp", ["nope"]).contains(
                "Lifecycle1.Error.NoSuchApp: unknown app 'nope'"))
        let bogus = try Self.error(bus, Self.root + "/app/a", Self.name + ".App.Launch", ["{'bogus': <true>}"])
        #expect(bogus.contains("org.freedesktop.DBus.Error.InvalidArgs: unknown option 'bogus'"), "\(bogus)")
        let wrongType = try Self.error(bus, Self.root + "/app/a", Self.name + ".App.Activate", ["{'scene': <1>}"])
        #expect(wrongType.contains("InvalidArgs: option 'scene' must be a string"), "\(wrongType)")
        let notForStop = try Self.error(bus, Self.root + "/app/a", Self.name + ".App.Stop", ["{'display': <'main'>}"])
        #expect(notForStop.contains("InvalidArgs: option 'display' does not apply to Stop"), "\(notForStop)")
        let notLocked = try Self.error(bus, Self.root, manager + ".Unlock", ["{}"])
        #expect(notLocked.contains("io.lifecycled.Lifecycle1.Refused.NotLocked: not-locked: "), "\(notLocked)")
        let badPush = try Self.error(bus, Self.root + "/app/a", Self.name + ".App.Push", ["'[1]'", "{}"])
        #expect(badPush.contains("InvalidArgs"), "\(badPush)")
        let badSignal = try Self.error(bus, Self.root + "/app/a", Self.name + ".App.Signal", ["'STOP'"])
        #expect(badSignal.contains("InvalidArgs"), "\(badSignal)")
        #expect(try d.stop() == 0)
    }

    /// Anyone may read; changing needs root or the control group, as on
    /// the JSON socket (the bus daemon vouches for the caller's groups).
    @Test func changesNeedPermissionReadingDoesNot() throws {
        let s = scratch()
        let (bus, d) = try Self.daemon(["a": recorder(s + "/a")], daemon: "control_group = \"daemon\"")
        let app = Self.root + "/app/a"
        #expect(try Self.call(bus, Self.root, "Manager", "GetApp", ["s", "a"], user: "nobody").0 == 0)
        #expect(try bus.busctl(["get-property", Self.name, app, Self.name + ".App", "State"], user: "nobody").0 == 0)
        let (denied, _, why) = try Self.call(bus, app, "App", "Launch", ["a{sv}", "0"], user: "nobody")
        #expect(denied != 0 && why.contains("ccess denied"), "\(why)")
        #expect(try d.status("a").state == .notRunning)
        let member = try run(
            asUser(
                "nobody", groups: "daemon",
                [
                    "/usr/bin/busctl",
                    "--address=\(bus.address)", "call", Self.name, app, Self.name + ".App", "Launch", "a{sv}", "0",
                ]))
        #expect(member.0 == 0, "a member of the control group was refused: \(member.2)")
        try waitUntil("a runs") { try d.status("a").state != .notRunning }
        #expect(try d.stop() == 0)
    }

    /// The bus daemon dies and comes back: the name comes back. The
    /// daemon is killed -9: the next one takes the name and its apps.
    @Test func theNameComesBackAfterTheBusOrTheDaemonDies() throws {
        let s = scratch()
        let (bus, d) = try Self.daemon(["a": recorder(s + "/a")])
        #expect(try d.ctl(["activate", "a"]).0 == 0)
        try bus.crash(restart: true)
        try bus.waitForName()
        let state = try bus.busctl(["get-property", Self.name, Self.root + "/app/a", Self.name + ".App", "State"])
        #expect(state.1.contains("\"active\""), "\(state)")

        _ = try d.crash(with: SIGKILL)
        let next = try DaemonUnderTest(after: d)
        try bus.waitForName()
        let pid = try bus.busctl(["get-property", Self.name, Self.root + "/app/a", Self.name + ".App", "Pid"])
        #expect(pid.1.trimmingCharacters(in: .whitespacesAndNewlines) == "u \(try next.status("a").pid ?? -1)")
        #expect(try next.stop() == 0)
    }

    /// While the bus is gone the daemon publishes nothing (nobody is
    /// there); what changed meanwhile is what the bus shows once it is back.
    @Test func whatChangedWhileTheBusWasGoneShowsOnceItIsBack() throws {
        let s = scratch()
        let (bus, d) = try Self.daemon(["a": recorder(s + "/a"), "b": recorder(s + "/b")])
        #expect(try d.ctl(["activate", "a"]).0 == 0)
        try bus.waitForName()
        try bus.crash(restart: false)
        try waitUntil("the daemon saw the bus go") {
            (try? String(contentsOfFile: d.dir + "/daemon.log", encoding: .utf8))?
                .contains("the system bus went away") ?? false
        }
        #expect(try d.ctl(["launch", "--background", "b"]).0 == 0)
        #expect(try d.ctl(["home"]).0 == 0)
        try waitUntil("a and b suspended") {
            try d.status("a").state == .suspended && d.status("b").state == .suspended
        }
        try bus.start()
        try bus.waitForName()
        for app in ["a", "b"] {
            let state = try bus.busctl([
                "--timeout=10", "get-property", Self.name, Self.root + "/app/" + app, Self.name + ".App", "State",
            ])
            #expect(state.1.contains("\"suspended\""), "\(app): \(state)")
            let pid = try bus.busctl([
                "--timeout=10", "get-property", Self.name, Self.root + "/app/" + app, Self.name + ".App", "Pid",
            ])
            #expect(pid.1.trimmingCharacters(in: .whitespacesAndNewlines) == "u \(try d.status(app).pid ?? -1)")
        }
        #expect(try d.stop() == 0)
    }

    /// Without a bus the daemon works and says so once.
    @Test func withoutABusTheDaemonSaysSoOnceAndWorks() throws {
        let s = scratch()
        let d = try DaemonUnderTest(apps: ["a": recorder(s + "/a")])
        #expect(try d.ctl(["activate", "a"]).0 == 0)
        let log = try String(contentsOfFile: d.dir + "/daemon.log", encoding: .utf8)
        #expect(log.components(separatedBy: "no system bus").count == 2, "\(log)")
        #expect(try d.stop() == 0)
    }

    /// A reload adds and removes objects; one that changes nothing emits
    /// no signal at all.
    @Test func reloadsAddAndRemoveObjectsAndANoOpReloadIsSilent() throws {
        let s = scratch()
        let (bus, d) = try Self.daemon(["a": recorder(s + "/a"), "b": recorder(s + "/b")])
        let reload = "exec:\(binary("supervisorctl")) reload --socket \(d.socket)"
        let quiet = try Self.shell(bus, [reload])
        #expect(quiet["results"] as? [[String]] == [["ran", "0"]])
        #expect(
            (quiet["signals"] as? [Any])?.isEmpty == true, "a reload that changed nothing: \(quiet["signals"] ?? "")")

        try recorder(s + "/c").write(toFile: d.dir + "/apps/c.toml", atomically: true, encoding: .utf8)
        unlink(d.dir + "/apps/b.toml")
        let changed = try Self.shell(bus, [reload])
        let signals = (changed["signals"] as? [[String: Any]] ?? []).map {
            "\($0["signal"] ?? "") \(($0["path"] as? String ?? "").split(separator: "/").last ?? "")"
        }
        #expect(
            signals == ["InterfacesRemoved b", "InterfacesAdded c"]
                || signals == ["InterfacesAdded c", "InterfacesRemoved b"], "\(signals)")
        #expect(try Self.call(bus, Self.root, "Manager", "GetApp", ["s", "c"]).0 == 0)
        #expect(try Self.call(bus, Self.root, "Manager", "GetApp", ["s", "b"]).0 != 0)
        let list = try Self.call(bus, Self.root, "Manager", "ListApps")
        #expect(list.1.contains("\"a\"") && list.1.contains("\"c\"") && !list.1.contains("\"b\""), "\(list)")
        #expect(try d.stop() == 0)
    }

    /// Under the stock system bus policy with the project's policy file
    /// included: root's daemon owns the name, anyone may read, and a call
    /// that changes something reaches the daemon, which refuses it (it is
    /// the daemon that decides, not the bus); nobody else may own the name.
    @Test func theShippedBusPolicyLetsTheDaemonDecide() throws {
        let s = scratch()
        let bus = try PrivateBus(including: repositoryRoot + "/dbus/io.lifecycled.Lifecycle1.conf")
        let d = try DaemonUnderTest(apps: ["a": recorder(s + "/a")], environment: bus.environment)
        try bus.waitForName()
        let app = Self.root + "/app/a"
        #expect(try Self.call(bus, Self.root, "Manager", "GetApp", ["s", "a"], user: "nobody").0 == 0)
        #expect(try bus.busctl(["get-property", Self.name, app, Self.name + ".App", "State"], user: "nobody").0 == 0)
        let objects = try bus.busctl(
            ["call", Self.name, Self.root, "org.freedesktop.DBus.ObjectManager", "GetManagedObjects"], user: "nobody")
        #expect(objects.0 == 0, "\(objects.2)")
        let (_, _, denied) = try Self.asNobody(bus, app, Self.name + ".App.Launch")
        #expect(
            denied.contains("permission denied: 'launch' needs root"), "the daemon refused it, not the bus: \(denied)")
        let own = try run(
            asUser(
                "nobody",
                [
                    "/usr/bin/python3", "-c",
                    "import dbus, sys; b = dbus.bus.BusConnection(sys.argv[1]); b.request_name('io.lifecycled.Lifecycle1')",
                    bus.address,
                ]))
        #expect(own.0 != 0 && own.2.contains("AccessDenied"), "nobody may not own the name: \(own)")
        // Every interface reaches the daemon: a display's, a scene's, a monitor's.
        #expect(try d.ctl(["activate", "a"]).0 == 0)
        for (path, method) in [
            (Self.root + "/display/main", Self.name + ".Display.Lock"),
            (app + "/scene/main", Self.name + ".Scene.Discard"),
        ] {
            let refused = try Self.asNobody(bus, path, method)
            #expect(refused.2.contains("permission denied"), "\(method): the daemon decides, not the bus: \(refused.2)")
        }
        let monitor = try run(
            asUser(
                "nobody",
                [
                    "/usr/bin/python3", "-c",
                    """
                    import dbus, sys
                    n, b = "\(Self.name)", dbus.bus.BusConnection(sys.argv[1])
                    m = b.get_object(n, "\(Self.root)").CreateMonitor(dbus.Dictionary({}, signature="sv"), dbus_interface=n + ".Manager")
                    b.get_object(n, m).Close(dbus_interface=n + ".Monitor")
                    """, bus.address,
                ]))
        #expect(monitor.0 == 0, "nobody may watch and close its monitor: \(monitor.2)")
        #expect(try Self.call(bus, app, "App", "Stop", ["a{sv}", "0"]).0 == 0, "root may")
        #expect(try d.stop() == 0)
    }

    /// A call as nobody, with gdbus (which names the error it gets).
    static func asNobody(_ bus: PrivateBus, _ path: String, _ method: String) throws -> (Int32, String, String) {
        try run(
            asUser(
                "nobody",
                ["/usr/bin/gdbus", "call", "--address", bus.address, "-d", name, "-o", path, "-m", method, "{}"]))
    }

    /// polkit decides for callers who are neither root nor in the control
    /// group, per app through the details: a rule lets nobody bring `a`
    /// to the front and nothing else; without a rule polkit would ask for
    /// a password, which a call that does not allow interaction is told.
    @Test func polkitDecidesPerAppForOthers() throws {
        let s = scratch()
        let bus = try PrivateBus()
        let polkit = try PrivatePolkit(
            on: bus, policy: repositoryRoot + "/dbus/io.lifecycled.Lifecycle1.policy",
            rules: """
                polkit.addRule(function(action, subject) {
                    if (action.id == "io.lifecycled.Lifecycle1.launch" && subject.user == "nobody" &&
                        action.lookup("app") == "a" && action.lookup("verb") == "activate")
                        return polkit.Result.YES;
                });
                """)
        let d = try DaemonUnderTest(
            apps: ["a": recorder(s + "/a"), "b": recorder(s + "/b")], daemon: "control_group = \"daemon\"",
            environment: bus.environment)
        chmod(d.dir, 0o755)
        try bus.waitForName()
        let a = try Self.asNobody(bus, Self.root + "/app/a", Self.name + ".App.Activate")
        #expect(a.0 == 0 && a.1.contains("/operation/"), "a rule lets nobody activate a: \(a)")
        try waitUntil("a in front") { try d.status("a").state == .active }
        let b = try Self.asNobody(bus, Self.root + "/app/b", Self.name + ".App.Activate")
        #expect(b.2.contains("InteractiveAuthorizationRequired"), "no rule for b: \(b.2)")
        let stop = try Self.asNobody(bus, Self.root + "/app/a", Self.name + ".App.Stop")
        #expect(stop.2.contains("InteractiveAuthorizationRequired"), "the rule is for launch only: \(stop.2)")
        #expect(try d.status("b").state == .notRunning && d.status("a").state == .active)
        // The control group needs no polkit.
        let member = try run(
            asUser(
                "nobody", groups: "daemon",
                [
                    "/usr/bin/busctl",
                    "--address=\(bus.address)", "call", Self.name, Self.root + "/app/b", Self.name + ".App", "Launch",
                    "a{sv}", "0",
                ]))
        #expect(member.0 == 0, "\(member.2)")
        #expect(try d.stop() == 0)

        // dbus_authorization = "group": polkit is never asked, its rule grants nothing.
        let g = try DaemonUnderTest(
            apps: ["a": recorder(s + "/ga")], daemon: "dbus_authorization = \"group\"", environment: bus.environment)
        chmod(g.dir, 0o755)
        try bus.waitForName()
        let refused = try Self.asNobody(bus, Self.root + "/app/a", Self.name + ".App.Activate")
        #expect(refused.2.contains("AccessDenied: permission denied: 'activate' needs root"), "\(refused.2)")
        withExtendedLifetime(polkit) {}
        #expect(try g.stop() == 0)
    }

    /// Without polkitd: `auto` falls back to the group rule; `polkit`
    /// refuses, saying polkit is not running; the control group may either way.
    @Test func withoutPolkitdAutoFallsBackAndPolkitRefuses() throws {
        let s = scratch()
        for (mode, expected) in [
            ("auto", "needs root or membership of the control group"), ("polkit", "polkit is not running"),
        ] {
            let bus = try PrivateBus()
            let d = try DaemonUnderTest(
                apps: ["a": recorder(s + "/a-\(mode)")],
                daemon: "control_group = \"daemon\"\ndbus_authorization = \"\(mode)\"", environment: bus.environment)
            chmod(d.dir, 0o755)
            try bus.waitForName()
            let nobody = try Self.asNobody(bus, Self.root + "/app/a", Self.name + ".App.Activate")
            #expect(nobody.2.contains("AccessDenied") && nobody.2.contains(expected), "\(mode): \(nobody.2)")
            let member = try run(
                asUser(
                    "nobody", groups: "daemon",
                    [
                        "/usr/bin/busctl",
                        "--address=\(bus.address)", "call", Self.name, Self.root + "/app/a", Self.name + ".App",
                        "Launch",
                        "a{sv}", "0",
                    ]))
            #expect(member.0 == 0, "\(mode): \(member.2)")
            #expect(try d.stop() == 0)
        }
    }

    /// polkitd stopped (SIGSTOP): a caller that floods the daemon with calls
    /// polkit must decide has 16 waiting at most, the rest refused at once
    /// (LimitsExceeded); root's own call is not held up (the loop never
    /// waits for polkit); once polkitd goes on, every waiting call is answered.
    @Test func aFloodOfCallsWaitingForPolkitIsBoundedAndBlocksNoOne() throws {
        let s = scratch()
        let bus = try PrivateBus()
        let polkit = try PrivatePolkit(
            on: bus, policy: repositoryRoot + "/dbus/io.lifecycled.Lifecycle1.policy", rules: "")
        let d = try DaemonUnderTest(apps: ["a": recorder(s + "/a")], environment: bus.environment)
        chmod(d.dir, 0o755)
        try bus.waitForName()
        let (code, out, err) = try run(
            [
                "/usr/bin/python3", repositoryRoot + "/Tests/dbus/flood.py", bus.address, "\(polkit.pid)",
                Self.root + "/app/a", "40",
            ])
        #expect(code == 0, "\(err)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any])
        let early = json["early"] as? [String] ?? []
        #expect(early.count == 24 && early.allSatisfy { $0.hasSuffix("LimitsExceeded") }, "\(early)")
        let all = json["all"] as? [String] ?? []
        #expect(all.count == 40)
        #expect(all.filter { $0.hasSuffix("InteractiveAuthorizationRequired") }.count == 16, "\(all)")
        #expect(try d.status("a").state == .notRunning)
        #expect(try d.stop() == 0)
    }

    /// A monitor is the lossless history `events --follow` gives, over the
    /// bus: every record about its apps, in order, numbered 1, 2, 3 ...
    /// without a gap; eight a connection; closed by its owner.
    @Test func aMonitorIsTheEventHistoryInOrderWithoutAGap() throws {
        let s = scratch()
        let (bus, d) = try Self.daemon(["a": recorder(s + "/a"), "b": recorder(s + "/b")])
        #expect(try d.ctl(["launch", "--background", "b"]).0 == 0)
        let script =
            "\(binary("supervisorctl")) activate a --socket \(d.socket) && \(binary("supervisorctl")) home --socket \(d.socket)"
        let (code, out, err) = try run(
            ["/usr/bin/python3", repositoryRoot + "/Tests/dbus/monitor.py", bus.address, "a", "/bin/sh", "-c", script])
        #expect(code == 0, "\(err)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any])
        let records = try #require(json["records"] as? [[Any]])
        #expect(records.map { $0[0] as? Int ?? 0 } == Array(1...records.count), "numbered without a gap")
        let overBus = try records.map {
            try JSONDecoder().decode(EventRecord.self, from: Data(($0[1] as? String ?? "").utf8))
        }
        #expect(overBus.allSatisfy { $0.app == "a" }, "only the app it follows")
        // The same records as the daemon's own history of a, in order.
        let (_, history, _) = try d.ctl(["events", "--json", "a"])
        let kept = try history.split(separator: "\n").map {
            try JSONDecoder().decode(EventRecord.self, from: Data($0.utf8))
        }
        // a was not running before the monitor: its history starts with what the monitor saw.
        #expect(overBus.count >= 6 && overBus == Array(kept.prefix(overBus.count)), "\(overBus) against \(kept)")
        #expect((json["refused"] as? String ?? "").hasSuffix("LimitsExceeded"), "a ninth monitor")
        #expect((json["again"] as? String ?? "").contains("/monitor/"), "one closed makes room for another")
        // Its owner gone, the monitors end, and the daemon serves on (an
        // owner's end once left sd-bus re-dispatching the tracker for ever).
        let after = try bus.busctl([
            "--timeout=5", "call", Self.name, Self.root, Self.name + ".Manager", "GetApp", "s", "a",
        ])
        #expect(after.0 == 0, "\(after.2)")
        #expect(try d.stop() == 0)
    }

    /// Displays and scenes are objects too: a scene brought to the front of
    /// a display through its app, then discarded through its own object;
    /// a display locked through its own; each object's properties follow.
    /// A monitor whose signals cannot leave (the bus daemon stopped, the
    /// daemon's queue to it past its bound) loses records, and is told so:
    /// one `Lost(first, last)` before the next record, and every sequence
    /// number is either a record or inside a Lost range, in order.
    @Test func aMonitorThatFellBehindIsToldWhatItLost() throws {
        let s = scratch()
        let (bus, d) = try Self.daemon(["a": recorder(s + "/a")])
        #expect(try d.ctl(["launch", "--background", "a"]).0 == 0)
        let (code, out, err) = try run(
            [
                "/usr/bin/python3", repositoryRoot + "/Tests/dbus/lost.py", bus.address, "\(bus.pid)", d.socket, "a",
                "150",
            ])
        #expect(code == 0, "\(err)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: [[Any]]])
        #expect(json.count == 8)
        for (monitor, signals) in json {
            var next = 1
            var lost = 0
            for signal in signals {
                let kind = signal.first as? String
                let numbers = signal.dropFirst().compactMap { $0 as? Int }
                #expect(numbers.first == next, "\(monitor): \(signal) where \(next) was next")
                if kind == "Lost" {
                    lost += 1
                    #expect(numbers.count == 2 && numbers[1] >= numbers[0])
                }
                next = (numbers.last ?? next) + 1
            }
            #expect(lost >= 1, "\(monitor) was never told it lost records")
            #expect(signals.last?.first as? String == "Record")
        }
        #expect(try d.stop() == 0)
    }

    /// A compositor's own plugin reports over the bus (Manager.ReportShown,
    /// the socket's `shown` document): the focused app active; an
    /// Activate of a hidden app sends the raise to that caller alone (a
    /// CompositorRequest signal) and the operation is done once the next
    /// report shows it focused; status names the plugin's source; a report
    /// that is not one is InvalidArgs.
    @Test func aCompositorReportsOverTheBus() throws {
        let sleeper = "command = [\"/bin/sleep\", \"100000\"]\ndelivery = \"signals\"\n"
        let (bus, d) = try Self.daemon(["a": sleeper, "b": sleeper])
        #expect(try d.ctl(["launch", "--background", "a"]).0 == 0)
        #expect(try d.ctl(["launch", "--background", "b"]).0 == 0)
        let a = try #require(try d.status("a").pid)
        let b = try #require(try d.status("b").pid)
        let (code, out, err) = try run(
            ["/usr/bin/python3", repositoryRoot + "/Tests/dbus/reporter.py", bus.address, "\(a)", "\(b)"])
        #expect(code == 0, "\(err)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any], "\(out)")
        let raise = (json["request"] as? [String: Any])?["raise"] as? [String: Any]
        #expect(raise?["window"] as? String == "wb", "\(json)")
        #expect(json["result"] as? [String] == ["done", ""], "\(json)")
        #expect(json["bad"] as? String == "org.freedesktop.DBus.Error.InvalidArgs", "\(json)")
        #expect(try d.status("b").state == .active)
        #expect(try d.status("a").state == .inactive)
        let follower = try d.command(ControlRequest(.status)).status?.daemon.follower
        #expect(follower?.source == "test-plugin" && follower?.state == "following")
        #expect(try d.stop() == 0)
    }

    @Test func displaysAndScenesAreObjects() throws {
        let s = scratch()
        let (bus, d) = try Self.daemon(["s": recorder(s + "/s", "scenes = true")], daemon: twoDisplays)
        let app = Self.root + "/app/s"
        func property(_ path: String, _ iface: String, _ name: String) throws -> String {
            try bus.busctl(["get-property", Self.name, path, Self.name + "." + iface, name]).1
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        func wait(_ path: String) throws -> String {
            try bus.busctl(["call", Self.name, path, Self.name + ".Operation", "Wait"]).1
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        func operation(_ reply: (Int32, String, String)) throws -> String {
            #expect(reply.0 == 0, "\(reply.2)")
            return try #require(reply.1.split(separator: "\"").dropFirst().first.map(String.init))
        }
        let map = try operation(
            Self.call(bus, app, "App", "Activate", ["a{sv}", "2", "scene", "s", "map", "display", "s", "cluster"]))
        #expect(try wait(map) == "ss \"done\" \"\"")
        let scene = app + "/scene/map"
        #expect(try property(scene, "Scene", "State") == "s \"active\"")
        #expect(try property(scene, "Scene", "InFront") == "b true")
        #expect(try property(scene, "Scene", "App") == "o \"\(app)\"")
        #expect(try property(Self.root + "/display/cluster", "Display", "Front") == "as 1 \"s/map\"")
        #expect(try property(app, "App", "Scenes") == "as 1 \"map\"")

        let notHere = try Self.error(
            bus, Self.root + "/display/cluster", Self.name + ".Display.Home", ["{'display': <'centre'>}"])
        #expect(notHere.contains("InvalidArgs: option 'display' is the object's own here"), "\(notHere)")
        let lock = try operation(Self.call(bus, Self.root + "/display/cluster", "Display", "Lock", ["a{sv}", "0"]))
        #expect(try wait(lock) == "ss \"done\" \"\"")
        #expect(try property(Self.root + "/display/cluster", "Display", "Locked") == "b true")
        #expect(try property(Self.root + "/display/centre", "Display", "Locked") == "b false")
        let unlock = try operation(Self.call(bus, Self.root + "/display/cluster", "Display", "Unlock", ["a{sv}", "0"]))
        #expect(try wait(unlock) == "ss \"done\" \"\"")

        let discard = try operation(Self.call(bus, scene, "Scene", "Discard", ["a{sv}", "0"]))
        #expect(try wait(discard) == "ss \"done\" \"\"")
        let objects = try bus.busctl([
            "call", Self.name, Self.root, "org.freedesktop.DBus.ObjectManager", "GetManagedObjects",
        ])
        #expect(!objects.1.contains("/scene/map"), "the discarded scene's object is gone")
        #expect(try d.status("s").scenes?.contains { $0.name == "map" } != true)
        #expect(try d.stop() == 0)
    }

    /// The bus daemon stopped (SIGSTOP): the lifecycle goes on as if there
    /// were no bus (an app brought to the front, sent home, frozen; the
    /// socket answers); once the bus daemon goes on, what the bus shows
    /// catches up with the daemon's state.
    @Test func aStalledBusStallsNothingAndCatchesUp() throws {
        let s = scratch()
        let (bus, d) = try Self.daemon(["a": recorder(s + "/a")])
        let f = try d.follow(["a"])
        bus.pause(true)
        defer { bus.pause(false) }
        for _ in 0..<20 {
            #expect(try d.ctl(["activate", "a"]).0 == 0)
            #expect(try d.ctl(["home"]).0 == 0)
        }
        _ = try f.state("a", "suspended")
        #expect(try d.status("a").frozen == true)
        bus.pause(false)
        let state = try bus.busctl([
            "--timeout=10", "get-property", Self.name, Self.root + "/app/a", Self.name + ".App", "State",
        ])
        #expect(state.1.contains("\"suspended\""), "\(state)")
        let frozen = try bus.busctl([
            "--timeout=10", "get-property", Self.name, Self.root + "/app/a", Self.name + ".App", "Frozen",
        ])
        #expect(frozen.1.contains("true"), "\(frozen)")
        #expect(try d.stop() == 0)
    }

    /// A lease: Display.BeginInterruption gives a descriptor; the
    /// interruption lasts while its holder keeps it, ends when the holder
    /// closes it or dies, and does not outlive the daemon (a kill -9: the
    /// next daemon ends it).
    @Test func anInterruptionLastsAsLongAsItsLease() throws {
        let s = scratch()
        let (bus, d) = try Self.daemon(["a": recorder(s + "/a")])
        #expect(try d.ctl(["activate", "a"]).0 == 0)
        let display = Self.root + "/display/main"
        func interruptions() throws -> String {
            try bus.busctl(["get-property", Self.name, display, Self.name + ".Display", "Interruptions"]).1
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        // A holder that takes the lease, says so, and keeps it until stdin closes.
        func holder() throws -> (Process, Pipe) {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            p.arguments = [
                "-c",
                """
                import dbus, sys
                b = dbus.bus.BusConnection(sys.argv[1])
                lease = b.get_object("\(Self.name)", "\(display)").BeginInterruption(
                    dbus.Dictionary({}, signature="sv"), dbus_interface="\(Self.name).Display")
                fd = lease.take()
                print("held", fd, flush=True)
                sys.stdin.read()
                """, bus.address,
            ]
            let out = Pipe(), input = Pipe()
            p.standardOutput = out
            p.standardInput = input
            try p.run()
            let line = String(decoding: out.fileHandleForReading.availableData, as: UTF8.self)
            #expect(line.hasPrefix("held"), "\(line)")
            return (p, input)
        }
        let f = try d.follow(["a"])
        let (first, stdin) = try holder()
        _ = try f.acknowledged("a", "willResignActive")
        #expect(try interruptions() == "u 1")
        try stdin.fileHandleForWriting.close()  // the holder ends, and its descriptor with it
        first.waitUntilExit()
        _ = try f.acknowledged("a", "didBecomeActive")
        #expect(try interruptions() == "u 0")

        let (second, _) = try holder()
        _ = try f.acknowledged("a", "willResignActive")
        _ = try d.crash(with: SIGKILL)
        let next = try DaemonUnderTest(after: d)
        try bus.waitForName()
        #expect(try interruptions() == "u 0", "the earlier daemon's lease ended with it")
        try waitUntil("a active again") { try next.status("a").state == .active }
        kill(second.processIdentifier, SIGKILL)
        second.waitUntilExit()
        let log = try String(contentsOfFile: d.dir + "/daemon.log", encoding: .utf8)
        #expect(log.contains("held by the earlier daemon's D-Bus leases"))
        #expect(try next.stop() == 0)
    }

    /// An operation still under way when the daemon re-executes ends
    /// `lost`, with the reason, rather than with a broken connection.
    @Test func anOperationUnderWayWhenTheDaemonReexecutesIsLost() throws {
        let s = scratch()
        let (bus, d) = try Self.daemon(["h": recorder(s + "/h", arguments: ["--hang", "didFinishLaunching"])])
        let (code, out, err) = try run([
            "/usr/bin/python3", "-c",
            """
            import dbus, dbus.mainloop.glib, subprocess, sys
            from gi.repository import GLib
            dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
            n, b = "\(Self.name)", dbus.bus.BusConnection(sys.argv[1])
            op = b.get_object(n, "\(Self.root)/app/h").Launch(dbus.Dictionary({}, signature="sv"), dbus_interface=n + ".App")
            got = []
            # Sent now (a proxy's call would wait for a name lookup until the loop turns).
            b.call_async(n, op, n + ".Operation", "Wait", "", (), lambda r, why: got.append(f"{r} {why}"),
                         lambda e: got.append(e.get_dbus_name()), timeout=60)
            b.get_object(n, op).Get(n + ".Operation", "State", dbus_interface="org.freedesktop.DBus.Properties")  # Wait is in
            subprocess.run(sys.argv[2:], check=True, stdout=subprocess.DEVNULL)
            while not got:
                GLib.MainContext.default().iteration(True)
            print(got[0])
            """, bus.address, binary("supervisorctl"), "daemon-reexec", "--socket", d.socket,
        ])
        #expect(code == 0, "\(err)")
        #expect(out.trimmingCharacters(in: .whitespacesAndNewlines) == "lost daemon-reexec", "\(out)")
        #expect(try d.stop() == 0)
    }

    /// The lifecycle orders hold when a shell drives it over D-Bus: a
    /// Swift and a Python app through launch, activation, home, lock,
    /// restart, stop and kill; every operation done; each app's log a legal
    /// order (the end-to-end tests' own judge); the bus's final state the
    /// socket's.
    @Test func theLifecycleOrdersHoldOverDBus() throws {
        let s = scratch()
        let (bus, d) = try Self.daemon([
            "a": recorder(s + "/a"), "p": recorder(s + "/p", client: .python),
        ])
        let steps = [
            "Launch:a", "Activate:p", "Home", "Activate:a", "Lock", "Unlock", "Restart:a", "Activate:p", "Stop:a",
            "Kill:p", "Launch:a", "Activate:a",
        ]
        let out = try Self.shell(bus, steps)
        #expect(
            out["results"] as? [[String]] == Array(repeating: ["done", ""], count: steps.count),
            "\(out["results"] ?? "")")
        for app in ["a", "p"] {
            let log = lines(s + "/" + app)
            #expect(legalOrder(log) == nil, "\(app): \(legalOrder(log) ?? "")")
        }
        let a = lines(s + "/a").filter { !$0.hasPrefix("#") }.map { String($0.split(separator: " ")[0]) }
        #expect(a.prefix(3) == ["willFinishLaunching", "didFinishLaunching", "didBecomeActive"])
        #expect(a.filter { $0 == "willFinishLaunching" }.count == 3, "launched, restarted, launched again: \(a)")
        #expect(a.contains("willTerminate"))
        let after = out["after"] as? [String: [String: [String: Any]]] ?? [:]
        for app in ["a", "p"] {
            let state = after[Self.root + "/app/" + app]?[Self.name + ".App"]?["State"] as? String
            #expect(state == (try d.status(app).state.rawValue), "\(app)")
        }
        #expect(try d.status("a").state == .active && d.status("p").state == .notRunning)
        #expect(try d.stop() == 0)
    }

    /// The C shell of docs/dbus.md, as the page has it: compiled with sd-bus
    /// and run, it brings nav to the front of the cluster and prints the
    /// outcome. And dbus-send, the reference implementation's client, reads.
    @Test func theCShellOfTheDocsWorksAndDbusSendReads() throws {
        let s = scratch()
        let (bus, d) = try Self.daemon(["nav": recorder(s + "/nav")], daemon: twoDisplays)
        let page = try String(contentsOfFile: repositoryRoot + "/docs/dbus.md", encoding: .utf8)
        let start = try #require(page.range(of: "## A shell in C (sd-bus)\n\n```c\n"))
        let end = try #require(page[start.upperBound...].range(of: "```"))
        try String(page[start.upperBound..<end.lowerBound]).write(
            toFile: s + "/shell.c", atomically: true, encoding: .utf8)
        let flags = try run(["/usr/bin/pkg-config", "--cflags", "--libs", "libsystemd"]).1
            .split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.filter { !$0.isEmpty }
        let cc = try run(["/usr/bin/gcc", "-Wall", "-Werror", "-o", s + "/shell", s + "/shell.c"] + flags)
        #expect(cc.0 == 0, "\(cc.2)")
        var env = ProcessInfo.processInfo.environment
        env["DBUS_SYSTEM_BUS_ADDRESS"] = bus.address
        let shell = try run([s + "/shell"], environment: env)
        #expect(shell.0 == 0 && shell.1.contains("activate: done"), "\(shell)")
        #expect(try d.status("nav").scenes?.first?.display == "cluster")
        #expect(try d.status("nav").state == .active)
        let sent = try run([
            "/usr/bin/dbus-send", "--bus=\(bus.address)", "--print-reply", "--dest=\(Self.name)", Self.root,
            Self.name + ".Manager.GetApp", "string:nav",
        ])
        #expect(sent.0 == 0 && sent.1.contains("object path \"\(Self.root)/app/nav\""), "\(sent)")
        #expect(try d.stop() == 0)
    }

    /// A client that subscribes to every signal of the daemon and never
    /// reads: the lifecycle goes on, and every other client is answered.
    @Test func aClientThatNeverReadsHarmsNoOne() throws {
        let s = scratch()
        let (bus, d) = try Self.daemon(["a": recorder(s + "/a"), "b": recorder(s + "/b")])
        let stuck = Process()
        stuck.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        stuck.arguments = [
            "-c",
            """
            import dbus, sys
            b = dbus.bus.BusConnection(sys.argv[1])
            b.add_match_string("type='signal',sender='\(Self.name)'")
            b.get_object("\(Self.name)", "\(Self.root)").CreateMonitor(
                dbus.Dictionary({}, signature="sv"), dbus_interface="\(Self.name).Manager")
            print("subscribed", flush=True)
            sys.stdin.read()
            """, bus.address,
        ]
        let out = Pipe(), input = Pipe()
        stuck.standardOutput = out
        stuck.standardInput = input
        try stuck.run()
        #expect(String(decoding: out.fileHandleForReading.availableData, as: UTF8.self).hasPrefix("subscribed"))
        let f = try d.follow(["b"])
        for _ in 0..<50 {
            #expect(try d.ctl(["activate", "a"]).0 == 0)
            #expect(try d.ctl(["activate", "b"]).0 == 0)
        }
        _ = try f.acknowledged("b", "didBecomeActive")
        let state = try bus.busctl([
            "--timeout=10", "get-property", Self.name, Self.root + "/app/b", Self.name + ".App", "State",
        ])
        #expect(state.1.contains("\"active\""), "\(state)")
        kill(stuck.processIdentifier, SIGKILL)
        stuck.waitUntilExit()
        #expect(try d.stop() == 0)
    }
}
