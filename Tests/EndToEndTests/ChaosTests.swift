import Foundation
@preconcurrency import Glibc
import CLifecycleShim
import LifecycleControl
import LifecycleOS
import LifecycleTestKit
import Testing

/// The real daemon tested the way the core is, by seeded chaos (issue 27):
/// a random walk of commands, app kills, reloads, daemon kill -9s at random
/// instants (settled, right after an answer, within milliseconds of a
/// command, during the next daemon's start) and SIGSTOPs longer than a
/// deadline, over real apps (Swift and C recorders, a plain program, a
/// crash-looping app, a worker with a background task, an app woken for
/// fetches and pushes). After every restart
/// and every few steps the daemon's word is checked against the kernel and
/// the apps' own logs (`Chaos.violations`).
///
/// The seed is printed; `CHAOS_SEED=N` replays the same walk of actions
/// (the instants between them are the machine's). `CHAOS_STEPS` sets its
/// length: `make test` runs a short walk, `make chaos` a long one.
@Suite(.serialized) struct ChaosTests {
    @Test func aSeededRandomWalkOverTheRealDaemonKeepsEveryInvariant() throws {
        let env = ProcessInfo.processInfo.environment
        let seed = env["CHAOS_SEED"].flatMap { UInt64($0) } ?? UInt64(Date().timeIntervalSince1970 * 1000) % 1_000_000
        let steps = env["CHAOS_STEPS"].flatMap { Int($0) } ?? 150
        print("chaos: seed \(seed), \(steps) steps; replay with CHAOS_SEED=\(seed) CHAOS_STEPS=\(steps) make chaos")
        let chaos = try Chaos(seed: seed)
        do {
            try chaos.walk(steps)
        } catch {
            let file = chaos.scratch + "/chaos-failure.txt"
            let records = chaos.records.all.map {
                "\($0.monotonic / 1_000_000) \($0.app) \($0.kind.rawValue) \($0.from ?? "") \($0.to ?? "") \($0.event?.rawValue ?? "") \($0.reason ?? "") \($0.detail ?? "")"
            }
            try?
                ("\(error)\n\nTRAIL\n" + chaos.trail.joined(separator: "\n") + "\n\nRECORDS\n"
                + records.joined(separator: "\n")
                + "\n\nDAEMON LOG\n" + chaos.daemon.daemonLog).write(toFile: file, atomically: true, encoding: .utf8)
            let recent = chaos.trail.suffix(25).joined(separator: "\n")
            Issue.record(
                "chaos seed \(seed), step \(chaos.step): \(error)\nthe walk, records and log: \(file)\n\(recent)")
        }
        print("chaos: seed \(seed): \(chaos.summary)")
        _ = try? chaos.daemon.stop()
    }
}

/// Follows one daemon's records on a thread of its own until it goes away.
final class RecordCollector: @unchecked Sendable {
    private let lock = NSLock()
    private var records: [EventRecord] = []

    func follow(_ client: ControlClient) {
        nonisolated(unsafe) let client = client  // used by that thread alone from here on
        let thread = Thread { [self] in
            try? client.follow { record in
                self.lock.lock()
                self.records.append(record)
                self.lock.unlock()
                return true
            }
        }
        thread.start()
    }

    var all: [EventRecord] {
        lock.lock()
        defer { lock.unlock() }
        return records
    }
}

final class Chaos {
    var random: SplitMix64
    let scratch: String
    var daemon: DaemonUnderTest
    var step = 0
    /// What happened, one line per action (printed with a failure).
    var trail: [String] = []
    let records = RecordCollector()
    /// Processes of each app the test itself SIGKILLed.
    var killedByTest: [String: Int] = [:]
    /// The last answered command that said where an app must end up, by
    /// app (`stop`), and whether `home` was the last display command.
    var mustBeStopped: Set<String> = []
    var homeLast = false
    var counts: [String: Int] = [:]
    var checks = 0

    static let recorders = ["swift", "c", "fetcher"]
    static let apps = ["swift", "c", "plain", "crashy", "worker", "fetcher"]

    init(seed: UInt64) throws {
        random = SplitMix64(state: seed)
        scratch = EndToEndTests.scratch()
        let s = scratch
        let slow = "[timeouts]\nevent = 2\nbackground_grace = 0.3\n"
        daemon = try DaemonUnderTest(apps: [
            "swift": "command = [\"example-recorder\", \"--log\", \"\(s)/swift\"]\n\(slow)",
            "c": "command = [\"\(repositoryRoot)/.build/clib/c-recorder\", \"--log\", \"\(s)/c\"]\n\(slow)",
            "plain": "command = [\"example-plain\", \"--log\", \"\(s)/plain\"]\ndelivery = \"signals\"\n\(slow)",
            "crashy": """
            command = ["sh", "-c", "sleep 0.4; exit 3", "\(s)/crashy"]
            delivery = "signals"
            restart = "on-failure"

            [backoff]
            delay = 0.05
            limit = 5
            window = 20

            """,
            // Woken in the background every second, and by pushes.
            "fetcher": "command = [\"example-recorder\", \"--log\", \"\(s)/fetcher\"]\n"
                + "background_modes = [\"fetch\", \"remote-notification\"]\n\(slow)[fetch]\ninterval = 1\n",
            "worker":
                "command = [\"example-worker\", \"--log\", \"\(s)/worker\", \"--work-ms\", \"1500\"]\n\(slow)",
        ])
        records.follow(try daemon.client())
    }

    var summary: String {
        counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + ", checks \(checks)"
    }

    func pick<T>(_ items: [T]) -> T { items[Int(random.next() % UInt64(items.count))] }
    func chance(_ percent: UInt64) -> Bool { random.next() % 100 < percent }
    func micros(_ upTo: UInt32) -> UInt32 { UInt32(random.next() % UInt64(upTo + 1)) }

    func note(_ action: String) {
        trail.append("\(step): \(action)")
        counts[action.split(separator: " ").first.map(String.init) ?? action, default: 0] += 1
    }

    func walk(_ steps: Int) throws {
        for n in 1...steps {
            step = n
            let roll = random.next() % 100
            switch roll {
            case 0..<62: try command()
            case 62..<70: try killApp()
            case 70..<80: try killDaemon()
            case 80..<85: try stall()
            case 85..<89: try reload()
            default: try check()
            }
            // Time for the daemon to act between two actions (or not).
            let pause = micros(40_000)
            if chance(70) { usleep(pause) }
        }
        try check()
    }

    // MARK: - Actions

    func command() throws {
        let app = pick(Self.apps)
        var request: ControlRequest
        switch random.next() % 10 {
        case 0, 1: request = ControlRequest(.activate, app: app)
        case 2: request = ControlRequest(.launch, app: app, background: true)
        case 3: request = ControlRequest(.home)
        case 4: request = ControlRequest(.stop, app: app)
        case 5: request = ControlRequest(.restart, app: app)
        case 6: request = ControlRequest(.kill, app: app)
        case 7: request = ControlRequest(.interruptionBegin)
        case 8:
            request = ControlRequest(.push, app: app)
            request.payload = "{\"step\": \(step)}"
        default: request = ControlRequest(.interruptionEnd)
        }
        let before = request.app.flatMap { try? daemon.status($0) }
        let response = try daemon.client().send(request)
        note(
            "\(request.command.rawValue) \(request.app ?? "")"
                + (before.map { " (was \($0.state.rawValue)\($0.pid.map { " pid \($0)" } ?? ""))" } ?? "")
                + (response.ok ? "" : " refused: \(response.error?.refusal ?? "?")"))
        if response.ok { expect(request) }
    }

    /// What an answered command promises until a later one touches the app.
    func expect(_ request: ControlRequest) {
        switch request.command {
        case .stop: mustBeStopped.insert(request.app!)
        case .activate, .launch, .restart:
            mustBeStopped.remove(request.app!)
            // A restart of an app not running launches it in front.
            if request.command != .launch { homeLast = false }
        case .home: homeLast = true
        default: break
        }
    }

    func killApp() throws {
        let app = pick(Self.apps)
        guard let pid = try daemon.status(app).pid else { return note("kill-app \(app) (not running)") }
        note("kill-app \(app) pid \(pid)")
        kill(pid, SIGKILL)
        killedByTest[app, default: 0] += 1
    }

    /// kill -9 at one of the instants the issue names, then a new daemon
    /// (sometimes itself killed during its start first).
    func killDaemon() throws {
        switch random.next() % 4 {
        case 0:
            note("crash settled")
        case 1:
            let app = pick(Self.apps)
            let request = chance(50) ? ControlRequest(.activate, app: app) : ControlRequest(.home)
            note("crash after-answer \(request.command.rawValue) \(request.app ?? "")")
            let response = try daemon.client().send(request)
            if response.ok { expect(request) }
        default:
            let app = pick(Self.apps)
            let request =
                chance(50)
                ? ControlRequest(.restart, app: app) : ControlRequest(chance(50) ? .stop : .activate, app: app)
            let delay = micros(3000)
            note("crash within-ms \(request.command.rawValue) \(app) +\(delay)us")
            let c = try daemon.client()
            try c.write(request)
            usleep(delay)
            // Answered or not, it may have been carried out: nothing is promised.
            mustBeStopped.remove(app)
            if request.command != .stop { homeLast = false }
        }
        _ = try daemon.crash(with: SIGKILL)
        if chance(30) {
            let delay = micros(60_000)
            note("crash during-start +\(delay)us")
            try DaemonUnderTest.killDuringStart(after: daemon, microseconds: delay)
        }
        daemon = try DaemonUnderTest(after: daemon)
        records.follow(try daemon.client())
        try check()
    }

    /// SIGSTOP, sometimes longer than the 2 s event deadline.
    func stall() throws {
        let app = pick(Self.apps)
        let length = 100_000 + micros(2_400_000)
        note("stall \(length / 1000)ms after activate \(app)")
        let c = try daemon.client()
        try c.write(ControlRequest(.activate, app: app))
        kill(daemon.pid, SIGSTOP)
        usleep(length)  // the stall itself
        kill(daemon.pid, SIGCONT)
        mustBeStopped.remove(app)
        homeLast = false
        _ = try c.readResponse()
    }

    func reload() throws {
        note("reload")
        kill(daemon.pid, SIGHUP)
    }

    // MARK: - Checks against the kernel

    /// Waits (at most 20 s) until every invariant holds at once; the
    /// violations still seen then are the failure.
    func check() throws {
        checks += 1
        var last: [String] = []
        let deadline = Date().addingTimeInterval(20)
        while true {
            last = try violations()
            if last.isEmpty { return }
            guard Date() < deadline else { break }
            usleep(20_000)
        }
        // The apps named, as the daemon's log tells their story.
        let named = Self.apps.filter { app in last.contains { $0.hasPrefix(app + ":") || $0.contains(" \(app) ") } }
        let story = daemon.daemonLog.split(separator: "\n").filter { line in
            named.contains { line.contains("app=\($0) ") || line.contains(" \($0): ") }
        }
        let encoder = JSONEncoder()
        let statuses = named.compactMap { (try? daemon.status($0)).flatMap { try? encoder.encode($0) } }
            .map { String(decoding: $0, as: UTF8.self) }
        throw TestFailure(
            "invariants broken:\n  " + last.joined(separator: "\n  ") + "\nstatus: \(statuses)\ndaemon log tail:\n"
                + daemon.daemonLog.split(separator: "\n").suffix(30).joined(separator: "\n")
                + (story.isEmpty ? "" : "\nthe daemon's log of \(named.joined(separator: ", ")):\n")
                + story.suffix(40).joined(separator: "\n"))
    }

    func violations() throws -> [String] {
        var problems: [String] = []
        let apps = daemon.cgroupPath + "/apps"
        var status: [String: AppStatus] = [:]
        for app in Self.apps { status[app] = try daemon.status(app) }
        // One run per app, nothing stray: every populated group is the one
        // of the process the daemon names for its app.
        var groupOf: [String: String] = [:]
        for app in Self.apps {
            guard let pid = status[app]!.pid else { continue }
            guard let group = Self.group(of: pid, under: apps) else {
                problems.append("\(app): pid \(pid) is not in any app group (gone, or outside)")
                continue
            }
            if !group.hasPrefix(app + ".") { problems.append("\(app): pid \(pid) is in \(group)") }
            groupOf[app] = group
        }
        for group in (try? FileManager.default.contentsOfDirectory(atPath: apps)) ?? [] {
            let procs = Self.pids(apps + "/" + group)
            guard !procs.isEmpty else { continue }
            let app = String(group[..<(group.lastIndex(of: ".") ?? group.endIndex)])
            if groupOf[app] != group {
                problems.append("stray: \(group) holds \(procs) (\(app) is \(groupOf[app] ?? "not running"))")
            }
        }
        // No orphan: every live process started from this test's apps is in an app group.
        for pid in Self.processes(mentioning: scratch) where Self.group(of: pid, under: apps) == nil {
            problems.append("orphan: pid \(pid) (\(Self.commandLine(pid))) is in no app group")
        }
        // Suspended exactly when frozen.
        for (app, group) in groupOf {
            let frozen = ((try? Posix.readFile(apps + "/" + group + "/cgroup.events")) ?? "").contains("frozen 1")
            if frozen != (status[app]!.state == .suspended) {
                problems.append(
                    "\(app) is \(status[app]!.state.rawValue) but its group is \(frozen ? "" : "not ")frozen")
            }
        }
        // One slot.
        let active = Self.apps.filter { status[$0]!.state == .active }
        if active.count > 1 { problems.append("\(active) active with one slot") }
        // What was answered carried out.
        for app in mustBeStopped where status[app]!.state != .notRunning {
            problems.append("\(app): stop was answered, it is \(status[app]!.state.rawValue)")
        }
        if homeLast, let app = active.first { problems.append("home was answered, \(app) is active") }
        // Each app's events in a legal order, no callback twice.
        for app in Self.recorders {
            if let broken = legalOrder(lines(scratch + "/" + app)) { problems.append("\(app): \(broken)") }
        }
        // Every end recorded with its true reason: a SIGKILL the daemon
        // says it did not send is one the test sent.
        var signaled: [String: Int] = [:]
        for r in records.all where r.kind == .terminated && r.reason == "signaled" && r.detail?.contains("9") == true {
            signaled[r.app, default: 0] += 1
        }
        // Every app here answers within microseconds: a watchdog that
        // fired judged the daemon's stall, not the app.
        for r in records.all where r.kind == .terminated && (r.reason ?? "").hasSuffix("watchdog") {
            problems.append("\(r.app): ended by the \(r.reason!) (\(r.detail ?? "")), yet it answers at once")
        }
        for (app, n) in signaled where n > killedByTest[app, default: 0] {
            problems.append(
                "\(app): \(n) ends by SIGKILL recorded as unexplained, the test sent \(killedByTest[app, default: 0])")
        }
        return problems
    }

    /// The app group (its name) holding `pid`, from /proc/PID/cgroup.
    static func group(of pid: Int32, under apps: String) -> String? {
        guard let text = try? Posix.readFile("/proc/\(pid)/cgroup") else { return nil }
        let mount = Cgroups.v2Mount() ?? "/sys/fs/cgroup/unified"
        for line in text.split(separator: "\n") where line.hasPrefix("0::") {
            let path = mount + line.dropFirst(3)
            guard path.hasPrefix(apps + "/") else { return nil }
            return path.dropFirst(apps.count + 1).split(separator: "/").first.map(String.init)
        }
        return nil
    }

    static func pids(_ group: String) -> [Int32] {
        ((try? Posix.readFile(group + "/cgroup.procs")) ?? "").split(separator: "\n").compactMap { Int32($0) }
    }

    static func commandLine(_ pid: Int32) -> String {
        ((try? Posix.readFile("/proc/\(pid)/cmdline")) ?? "").replacingOccurrences(of: "\0", with: " ")
    }

    /// Live processes (not zombies) whose command line names `text`.
    static func processes(mentioning text: String) -> [Int32] {
        let all = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return all.compactMap { Int32($0) }.filter { pid in
            guard commandLine(pid).contains(text) else { return false }
            let stat = (try? Posix.readFile("/proc/\(pid)/stat")) ?? ""
            guard let close = stat.lastIndex(of: ")") else { return false }
            return !stat[close...].hasPrefix(") Z")
        }
    }
}
