// lifecycled-bench: the numbers of docs/performance.md, measured against a
// real daemon and real apps. `make bench` builds in release mode and runs it;
// it prints a Markdown report. Options: --quick (fewer iterations);
// --durable, --wakeups, --scenes, --restarts, --events, --launches, --prewarm: one section alone;
// --pin one|two: processes pinned to one core or two (below).
import Foundation
@preconcurrency import Glibc
import CLifecycleShim
import Histogram
import LifecycleControl
import LifecycleOS
import LifecycleTestKit
import LifecycleWire

let quick = CommandLine.arguments.contains("--quick")
let iterations = quick ? 200 : 2000

/// An argument it does not know (a `--help`, a misspelt section) is an
/// error with the list, not a full run of every section.
let benchUsage = """
    usage: lifecycled-bench [--quick] [--pin one|two] [SECTION]
      no section: the table of docs/performance.md's "Results" (make bench)
      --events     event round trips against the raw floor (with --pin one|two)
      --launches   launch cost with 10, 100 and 1,000 apps running, and the burst
      --prewarm    a prewarmed activation against a cold launch
      --durable    bursts of commands and launches, each saved before it leaves
      --restarts   kill -9 and daemon-reexec blackouts (--only-1000: that row alone)
      --wakeups    pushes and fetch wake-ups
      --scenes     activate across displays and scenes
      --quick      fewer iterations
      --pin one    every process on CPU 0; two: the apps on CPU 1
    Run it from the repository's root (it finds the C recorder in .build/clib).

    """
do {
    // The options the usage names, and the floor's own child (--echo).
    let words = benchUsage.split { !($0.isLetter || $0.isNumber || $0 == "-") }
    let known = Set(words.filter { $0.hasPrefix("--") }.map(String.init) + ["--echo"])
    let args = Array(CommandLine.arguments.dropFirst())
    for (i, a) in args.enumerated() where !known.contains(a) && !(i > 0 && args[i - 1] == "--pin") {
        let help = a == "--help" || a == "-h"
        FileHandle.standardError.write(
            Data(((help ? "" : "lifecycled-bench: unknown argument '\(a)'\n") + benchUsage).utf8))
        exit(help ? 0 : 2)
    }
}

// A reader that goes early (`lifecycled-bench ... | head`) must not kill
// the bench by SIGPIPE between a daemon's start and its stop: that left the
// daemon, its apps and its cgroups behind. Its lines are lost instead, and
// every daemon is stopped as usual.
signal(SIGPIPE, SIG_IGN)

/// --pin one: every process on CPU 0 (the bench, the daemon, the apps, the
/// floor's echo); --pin two: the apps and the echo on CPU 1, the rest on
/// CPU 0. The bench re-executes itself under taskset, which every child
/// inherits; apps get their own taskset in front of their command.
let pin: String? = CommandLine.arguments.firstIndex(of: "--pin").map { i in
    guard i + 1 < CommandLine.arguments.count, ["one", "two"].contains(CommandLine.arguments[i + 1]) else {
        FileHandle.standardError.write(Data("--pin takes one or two\n".utf8))
        exit(2)
    }
    return CommandLine.arguments[i + 1]
}
if pin != nil, getenv("LIFECYCLED_BENCH_PINNED") == nil {
    setenv("LIFECYCLED_BENCH_PINNED", "1", 1)
    let argv = ["/usr/bin/taskset", "-c", "0"] + CommandLine.arguments
    var cArgs = argv.map { strdup($0) } + [nil]
    execv(argv[0], &cArgs)
    FileHandle.standardError.write(Data("cannot run taskset: \(String(cString: strerror(errno)))\n".utf8))
    exit(2)
}
/// What goes in front of an app's command (and the floor's echo) to put it on its core.
let appCore: [String] = pin == "two" ? ["/usr/bin/taskset", "-c", "1"] : []

/// Microsecond percentiles of a series, through an HdrHistogram.
struct Series {
    var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
    var count = 0
    mutating func add(microseconds: Double) { _ = histogram.record(UInt64(max(0, microseconds.rounded()))); count += 1 }
    func p(_ q: Double) -> UInt64 { histogram.valueAtPercentile(q) }
    var summary: String { "p50 \(p(50)) µs, p99 \(p(99)) µs, max \(histogram.max) µs (n = \(count))" }
}

func now() -> Int64 { lc_monotonic_ns() }
var report: [String] = []
@MainActor func out(_ s: String) { print(s); fflush(nil); report.append(s) }

// MARK: - The floor: a raw SOCK_SEQPACKET round trip between two processes

if CommandLine.arguments.contains("--echo") {
    // Child: echo every datagram on fd 3 until EOF.
    var buf = [UInt8](repeating: 0, count: 64)
    while true {
        let n = recv(3, &buf, buf.count, 0)
        if n <= 0 { exit(0) }
        _ = send(3, buf, n, 0)
    }
}

/// Moves the calling thread to `cpu` (what it spawns later inherits it).
/// Through dlsym: Glibc's module leaves sched_setaffinity out (_GNU_SOURCE).
func runHere(cpu: Int) {
    typealias SetAffinity = @convention(c) (pid_t, Int, UnsafeRawPointer) -> Int32
    guard let symbol = dlsym(nil, "sched_setaffinity") else { fatalError("no sched_setaffinity") }
    var set = cpu_set_t()
    set.__bits.0 = 1 << cpu
    if unsafeBitCast(symbol, to: SetAffinity.self)(0, MemoryLayout<cpu_set_t>.size, &set) != 0 {
        FileHandle.standardError.write(Data("cannot move to CPU \(cpu): \(String(cString: strerror(errno)))\n".utf8))
        exit(2)
    }
}

/// `pause` (µs): this process sleeps that long before each round trip,
/// so that each starts on a CPU that was idle, as a paced event does
/// (`roundTripUnwatched`); 0: back to back.
func rawFloor(pause: UInt32 = 0) throws -> Series {
    let (mine, theirs) = try UnixSocket.channelPair()
    try Posix.setNonBlocking(mine, false)
    let p = try Spawner.spawn(
        SpawnRequest(
            executable: appCore.first ?? CommandLine.arguments[0],
            arguments: Array(appCore.dropFirst()) + (appCore.isEmpty ? [] : [CommandLine.arguments[0]]) + ["--echo"],
            environment: [:], workingDirectory: nil, group: AppProcessGroup(),
            inherit: [(theirs, 3)]))
    close(theirs)
    let message = AppMessage.acknowledge(sequence: 1).encoded()
    var s = Series()
    var buf = [UInt8](repeating: 0, count: 64)
    for i in 0..<(iterations * 5 + 500) {
        if pause > 0 { usleep(pause) }
        let t0 = now()
        _ = send(mine, message, message.count, 0)
        _ = recv(mine, &buf, buf.count, 0)
        if i >= 500 { s.add(microseconds: Double(now() - t0) / 1000) }
    }
    close(mine)
    var st = lc_child_status()
    var pfd = pollfd(fd: p.pidfd, events: Int16(POLLIN), revents: 0)
    poll(&pfd, 1, 5000)
    lc_reap(p.pid, &st)
    return s
}

/// The floor with a real client in it: this process plays the daemon's
/// part and nothing more. It starts a recorder of `client` ("swift" or
/// "c") on a channel of its own (the variables a launch sets), takes it
/// through its launch events to active, then times each event as the
/// daemon does (stamped, encoded by LifecycleWire, sent; the
/// acknowledgement read), alternating willResignActive and
/// didBecomeActive. What this adds to the raw floor is the client
/// library and the recorder (its lines go to /dev/null): the least any
/// daemon could reach with that app. `pause` as for `rawFloor`.
///
/// Two knobs, for the experiment in docs/performance.md that asks whether
/// what the daemon does before a send slows the round trip after it:
/// LIFECYCLED_BENCH_PWRITES=N writes N pages of 4 KiB to a file in
/// TMPDIR before each event (a save's WAL frames), and
/// LIFECYCLED_BENCH_THRASH_KB=N touches N KiB of memory (its working set).
func clientFloor(client: String, pause: UInt32 = 0) throws -> Series {
    let (p, mine) = try startRecorder(client)
    var sequence: UInt32 = 0
    var buf = [UInt8](repeating: 0, count: 256)
    let environment = ProcessInfo.processInfo.environment
    let pages = Int(environment["LIFECYCLED_BENCH_PWRITES"] ?? "") ?? 0
    var scratch = [UInt8](repeating: 0, count: (Int(environment["LIFECYCLED_BENCH_THRASH_KB"] ?? "") ?? 0) * 1024)
    let wal = pages > 0 ? FileManager.default.temporaryDirectory.path + "/lifecycled-bench-wal-\(getpid())" : ""
    let walFD = pages > 0 ? open(wal, O_RDWR | O_CREAT | O_CLOEXEC, 0o600) : -1
    defer {
        if walFD >= 0 {
            close(walFD)
            unlink(wal)
        }
    }
    let page = [UInt8](repeating: 7, count: 4096)
    func roundTrip(_ event: LifecycleEvent) throws -> Int64 {
        sequence += 1
        if pause > 0 { usleep(pause) }
        for k in 0..<pages { _ = pwrite(walFD, page, page.count, off_t((Int(sequence) * pages + k) % 4096 * 4096)) }
        for j in stride(from: 0, to: scratch.count, by: 64) { scratch[j] &+= 1 }
        let t0 = now()
        sendEvent(mine, sequence, event)
        try awaitAcknowledgement(mine, sequence, client, &buf)
        return now() - t0
    }
    for event in [LifecycleEvent.willFinishLaunching, .didFinishLaunching, .didBecomeActive] {
        _ = try roundTrip(event)
    }
    var s = Series()
    for i in 0..<(iterations * 5 + 500) {
        let took = try roundTrip(i % 2 == 0 ? .willResignActive : .didBecomeActive)
        if i >= 500 { s.add(microseconds: Double(took) / 1000) }
    }
    endRecorder(p, mine)
    return s
}

/// `client`'s recorder started by the bench itself, as the daemon starts
/// an app (its channel on fd 3, the variables a launch sets; `prewarm`:
/// LIFECYCLE_PREWARM=1 too), and the bench's end of the channel.
func startRecorder(_ client: String, prewarm: Bool = false) throws -> (SpawnedProcess, Int32) {
    let (mine, theirs) = try UnixSocket.channelPair()
    try Posix.setNonBlocking(mine, false)
    let recorder =
        client == "c"
        ? [cRecorder(), "--log", "/dev/null", "--after-ack"]
        : [buildDirectory + "/example-recorder", "--log", "/dev/null", "--after-ack"]
    let argv = appCore + recorder
    var environment = [
        Wire.socketEnvironmentKey: "3", Wire.appNameEnvironmentKey: "a",
        Wire.protocolEnvironmentKey: String(Wire.version),
    ]
    if prewarm { environment[Wire.prewarmEnvironmentKey] = "1" }
    let p = try Spawner.spawn(
        SpawnRequest(
            executable: argv[0], arguments: Array(argv.dropFirst()), environment: environment,
            workingDirectory: nil, group: AppProcessGroup(), inherit: [(theirs, 3)]))
    close(theirs)
    return (p, mine)
}

/// Sends `event` to a recorder the bench plays the daemon for.
func sendEvent(_ channel: Int32, _ sequence: UInt32, _ event: LifecycleEvent) {
    let message = DaemonMessage.event(
        EventMessage(sequence: sequence, event: event, deadline: nil, budgetEnd: nil)
    ).encoded()
    _ = send(channel, message, message.count, 0)
}

/// Reads the recorder's messages into `buf` until the acknowledgement of `sequence`.
func awaitAcknowledgement(_ channel: Int32, _ sequence: UInt32, _ client: String, _ buf: inout [UInt8]) throws {
    while true {
        if case .acknowledge(sequence) = try readAppMessage(channel, client, "event \(sequence)", &buf) { return }
    }
}

/// One message from the recorder; its channel's end is an error naming `what` was awaited.
func readAppMessage(_ channel: Int32, _ client: String, _ what: String, _ buf: inout [UInt8]) throws -> AppMessage {
    let n = recv(channel, &buf, buf.count, 0)
    guard n > 0 else { throw TestFailure("the \(client) recorder closed its channel at \(what)") }
    return try AppMessage.decode(Array(buf[0..<n]))
}

/// Closes the recorder's channel (it ends), and reaps it (killed after 5 s).
func endRecorder(_ p: SpawnedProcess, _ channel: Int32) {
    close(channel)
    var pfd = pollfd(fd: p.pidfd, events: Int16(POLLIN), revents: 0)
    if poll(&pfd, 1, 5000) != 1 { _ = Posix.signal(pidfd: p.pidfd, SIGKILL) }
    var st = lc_child_status()
    lc_reap(p.pid, &st)
    close(p.pidfd)
}

/// Issue 31, part 3's floor: what any daemon could reach with `client`'s
/// recorder, the bench playing the daemon's part and nothing more (as
/// `clientFloor` does for one event). Each of 2 × `n` rounds times a cold
/// launch (the spawn to the acknowledged didBecomeActive, the three launch
/// events one at a time) and an activation of a prewarmed process: held
/// after its `prewarmed` in a cgroup of its own, frozen, idle for 20 ms,
/// then from the thaw to the acknowledged didBecomeActive, in turn with
/// the three events one at a time (today's protocol) and the three sent
/// together before any acknowledgement is read (what a protocol that
/// pipelined the launch events could reach at best): `n` of each. Nil
/// where there is no cgroup v2 freezer to hold a process with.
func prewarmFloor(client: String, n: Int) throws -> (cold: Series, oneByOne: Series, together: Series)? {
    guard let mount = Cgroups.v2Mount() else { return nil }
    let group = mount + "/lifecycled-bench-floor-\(getpid())"
    guard mkdir(group, 0o755) == 0 || errno == EEXIST else { return nil }
    defer { rmdir(group) }
    var buf = [UInt8](repeating: 0, count: 256)
    let launch: [LifecycleEvent] = [.willFinishLaunching, .didFinishLaunching, .didBecomeActive]

    // The launch events, numbered from 1: each acknowledged before the next, or all sent first.
    func launchEvents(_ channel: Int32, together: Bool = false) throws {
        for (i, event) in launch.enumerated() {
            sendEvent(channel, UInt32(i + 1), event)
            if !together { try awaitAcknowledgement(channel, UInt32(i + 1), client, &buf) }
        }
        if together { for i in launch.indices { try awaitAcknowledgement(channel, UInt32(i + 1), client, &buf) } }
    }
    func write(_ file: String, _ value: String) throws {
        try Posix.writeFile(group + "/" + file, value)
    }
    var cold = Series(), oneByOne = Series(), together = Series()
    for round in 0..<(2 * n) {
        let t0 = now()
        let (p, channel) = try startRecorder(client)
        try launchEvents(channel)
        cold.add(microseconds: Double(now() - t0) / 1000)
        endRecorder(p, channel)

        let (w, held) = try startRecorder(client, prewarm: true)
        try write("cgroup.procs", String(w.pid))
        while try readAppMessage(held, client, "prewarmed", &buf) != .prewarmed {}
        try write("cgroup.freeze", "1")
        while !(try Posix.readFile(group + "/cgroup.events")).contains("frozen 1") { usleep(100) }
        usleep(20_000)
        let t1 = now()
        try write("cgroup.freeze", "0")
        try launchEvents(held, together: round % 2 == 1)
        if round % 2 == 0 {
            oneByOne.add(microseconds: Double(now() - t1) / 1000)
        } else {
            together.add(microseconds: Double(now() - t1) / 1000)
        }
        endRecorder(w, held)
    }
    return (cold, oneByOne, together)
}

/// LIFECYCLED_BENCH_PERF=FILE: a system-wide profile (perf record -g) into
/// FILE (with `suffix`), from now until `stop` is called on it;
/// LIFECYCLED_BENCH_PERF_EVENTS=sched:sched_switch adds events (where
/// threads block). Nil when the variable is not set.
func startProfiler(suffix: String = "") throws -> Process? {
    let environment = ProcessInfo.processInfo.environment
    return try environment["LIFECYCLED_BENCH_PERF"].map { file in
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/perf")
        let events = environment["LIFECYCLED_BENCH_PERF_EVENTS"].map { ["-e", "cpu-clock", "-e", $0] } ?? []
        p.arguments = ["record", "-q", "-a", "-g", "-F", "4999", "-o", file + suffix] + events
        try p.run()
        Thread.sleep(forTimeInterval: 1)  // perf's own start-up, not part of what is measured
        return p
    }
}

/// LIFECYCLED_BENCH_TRACE=1: where one activation of `app` went, from the
/// daemon's records since `t0` (µs after it), on stderr, after `label`.
func trace(_ f: Follower, _ app: String, since t0: Int64, _ label: String, faults: Int? = nil) {
    guard ProcessInfo.processInfo.environment["LIFECYCLED_BENCH_TRACE"] != nil else { return }
    let records = f.seen.suffix(14).filter { $0.app == app && $0.monotonic >= t0 }.map {
        "\($0.kind.rawValue)\($0.event.map { " " + $0.rawValue } ?? "")\($0.to.map { " " + $0 } ?? "") +\(($0.monotonic - t0) / 1000)"
    }
    let taken = faults.map { "; \($0) page faults" } ?? ""
    FileHandle.standardError.write(Data("\(label): \(records.joined(separator: ", "))\(taken)\n".utf8))
}

/// The fields of /proc/PID/stat after the command (field 3 first: the
/// command may hold spaces and parentheses), or nil.
func statFields(_ pid: Int32) -> [Substring]? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = text.lastIndex(of: ")")
    else { return nil }
    return text[text.index(after: close)...].split(separator: " ")
}

/// The minor page faults a process has taken (field 10 of /proc/PID/stat), or nil.
func minorFaults(_ pid: Int32?) -> Int? {
    guard let pid, let fields = statFields(pid), fields.count > 7 else { return nil }
    return Int(fields[7])
}

/// Reads the follower's stream until `count` apps reached suspended: a
/// loop of its own, because `Follower.wait` keeps every record it did not
/// match, and with the 10,000 records of 1,000 launches its scans of them
/// took more of the machine than the daemon did (before issue 31 every
/// burst below was measured that way, on both sides of a comparison).
func awaitSuspended(_ f: Follower, _ count: Int) throws {
    var n = 0
    while n < count {
        let r = try f.client.readResponse()
        if let e = r.event, e.kind == .transition, e.to == "suspended" { n += 1 }
    }
}

// MARK: - Through the daemon

func recorderApp(_ extra: String = "") -> String {
    recorderCommand("swift", "/dev/null") + "\(extra)\n"
}

/// The C recorder, from the working directory (the usage says so). Missing,
/// the bench says so and stops, rather than failing later as a daemon's
/// closed connection when the first C app cannot be launched.
func cRecorder() -> String {
    let path = FileManager.default.currentDirectoryPath + "/.build/clib/c-recorder"
    guard FileManager.default.isExecutableFile(atPath: path) else {
        FileHandle.standardError.write(
            Data("lifecycled-bench: no \(path): run it from the repository's root, after make clib\n".utf8))
        exit(2)
    }
    return path
}

/// The recording app of each client library, writing to `log` (make bench
/// runs from the repository's root, where `make clib` put the C recorder).
/// `afterAck`: the Swift and C recorders write each event's line after
/// acknowledging it (the Python one before).
func recorderCommand(_ client: String, _ log: String, afterAck: Bool = false) -> String {
    let root = FileManager.default.currentDirectoryPath
    let after = afterAck ? ["--after-ack"] : []
    let argv: [String] =
        switch client {
        case "c": appCore + [cRecorder(), "--log", log] + after
        case "python":
            appCore + ["/usr/bin/env", "python3", root + "/Examples/python-recorder/recorder.py", "--log", log]
        default: appCore + [buildDirectory + "/example-recorder", "--log", log] + after
        }
    return "command = [" + argv.map { "\"\($0)\"" }.joined(separator: ", ") + "]\n"
}

/// Event round trip (the daemon sends an event, the app acknowledges it),
/// as the daemon measures it. No follower is attached while measuring: the
/// loop is paced by a FIFO the app writes each event to, and the latencies
/// are read from the daemon's history afterwards. The Swift and C apps
/// write the FIFO after their acknowledgement: written before it, the line
/// woke this process inside the round trip, and on one core it ran (and
/// sent the next request) before the daemon could read the acknowledgement.
///
/// `driverAway` (with --pin one): this process, which drives the loop,
/// moves to CPU 1 once the app is active, leaving CPU 0 to the daemon and
/// the app, the two processes of the round trip. On the core, it runs
/// inside the round trip it measures: the daemon's answer to its request
/// wakes it, and it reads the FIFO and sends the next request before the
/// daemon reads the acknowledgement (a kernel trace shows it: about 40 µs
/// of a 110 µs round trip, docs/performance.md).
func roundTrip(client: String = "swift", driverAway: Bool = false) throws -> Series {
    let dir = FileManager.default.temporaryDirectory.path + "/lifecycled-bench-\(getpid())"
    try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    let fifo = dir + "/events"
    unlink(fifo)
    mkfifo(fifo, 0o600)
    let reader = open(fifo, O_RDWR | O_CLOEXEC)  // RDWR: neither side blocks in open
    defer {
        close(reader)
        unlink(fifo)
        rmdir(dir)
    }
    let d = try DaemonUnderTest(
        apps: ["a": recorderCommand(client, fifo, afterAck: true)],
        daemon: "event_history = \(iterations * 4 + 100)")
    var stopped = false
    defer { if !stopped { _ = try? d.stop() } }  // a failure leaves no daemon behind
    let c = try d.client()
    var pending = ""
    var buf = [UInt8](repeating: 0, count: 4096)
    /// Reads the FIFO until the app has handled `event`; an app that says
    /// nothing for 30 s (it did not start: the bench runs from the
    /// repository's root, after make clib) is an error, not a hang.
    func handled(_ event: String) throws {
        while !pending.split(separator: "\n").contains(Substring(event)) {
            var ready = pollfd(fd: reader, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, 30_000) == 1 else {
                throw TestFailure("the \(client) app did not tell \(event) within 30 s: see \(d.dir)/daemon.log")
            }
            let n = read(reader, &buf, buf.count)
            if n <= 0 { return }
            pending += String(decoding: buf[0..<n], as: UTF8.self)
        }
        pending = ""
    }
    _ = try c.send(ControlRequest(.activate, app: "a"))
    try handled("didBecomeActive")
    if driverAway { runHere(cpu: 1) }
    defer { if driverAway { runHere(cpu: 0) } }
    for i in 0..<iterations {
        // An interruption makes one event each way: willResignActive, didBecomeActive.
        _ = try c.send(ControlRequest(i % 2 == 0 ? .interruptionBegin : .interruptionEnd))
        try handled(i % 2 == 0 ? "willResignActive" : "didBecomeActive")
    }
    var s = Series()
    let history = try c.send(ControlRequest(.events, apps: ["a"])).events ?? []
    for r in history.dropFirst(6) where r.kind == .acknowledged { s.add(microseconds: r.latencyMicroseconds ?? 0) }
    stopped = true
    try d.stop()
    return s
}

/// The same round trip with nothing but the daemon and the app inside it
/// (`driverAway`, with --pin one: this process on CPU 1 throughout). `roundTrip`'s
/// pacing still woke a third process from inside the window, on the other
/// core: the daemon's answer to the request, sent right after the event,
/// woke the driver blocked on it, and the app's line to the FIFO woke it
/// again; each wake-up of a process on another CPU is an interprocessor
/// interrupt the waker's CPU sends, a trap to the hypervisor in a virtual
/// machine. Here the app writes its lines to /dev/null and the driver is
/// paced by its own clock: it writes a request, sleeps 2 ms (an app's
/// round trip is a few dozen µs), and only then reads the answer, already
/// waiting, so that nothing is blocked on what the daemon or the app
/// writes while the event is out. The daemon's history says when the app
/// became active and holds every latency.
func roundTripUnwatched(client: String, driverAway: Bool) throws -> Series {
    let d = try DaemonUnderTest(
        apps: ["a": recorderCommand(client, "/dev/null", afterAck: true)],
        daemon: "event_history = \(iterations * 4 + 100)")
    var stopped = false
    defer { if !stopped { _ = try? d.stop() } }
    let c = try d.client()
    do {
        let f = try d.follow(["a"])  // closed before the round trips: no records go out while they run
        _ = try c.send(ControlRequest(.activate, app: "a"))
        try f.acknowledged("a", "didBecomeActive")
    }
    if driverAway { runHere(cpu: 1) }
    defer { if driverAway { runHere(cpu: 0) } }
    for i in 0..<iterations {
        try c.write(ControlRequest(i % 2 == 0 ? .interruptionBegin : .interruptionEnd))
        usleep(2000)
        guard try c.readResponse().ok else { throw TestFailure("interruption \(i) refused") }
    }
    let history = try c.send(ControlRequest(.events, apps: ["a"])).events ?? []
    var s = Series()
    for r in history.dropFirst(6) where r.kind == .acknowledged { s.add(microseconds: r.latencyMicroseconds ?? 0) }
    guard s.count >= iterations * 9 / 10 else {
        throw TestFailure("only \(s.count) of \(iterations) events acknowledged: see \(d.dir)/daemon.log")
    }
    stopped = true
    try d.stop()
    return s
}

/// Decision-to-frozen and thaw-to-active, from the daemon's own records.
func freezeAndThaw() throws -> (frozen: Series, thawToActive: Series) {
    let d = try DaemonUnderTest(apps: ["a": recorderApp()], daemon: "event_history = 0")
    let f = try d.follow(["a"])
    let c = try d.client()
    _ = try c.send(ControlRequest(.activate, app: "a"))
    try f.acknowledged("a", "didBecomeActive")
    var frozen = Series(), thaw = Series()
    for _ in 0..<(iterations / 10) {
        _ = try c.send(ControlRequest(.home))
        let fr = try f.wait("frozen") { $0.kind == .frozen }
        frozen.add(microseconds: fr.latencyMicroseconds ?? 0)
        _ = try c.send(ControlRequest(.activate, app: "a"))
        let thawed = try f.wait("thawed") { $0.kind == .thawed }
        let active = try f.acknowledged("a", "didBecomeActive")
        thaw.add(microseconds: Double(active.monotonic - thawed.monotonic) / 1000)
    }
    try d.stop()
    return (frozen, thaw)
}

/// The Swift example recorder run standalone (no daemon) to its
/// didBecomeActive and its exit, in microseconds.
func bareExec() throws -> Double {
    let devnull = open("/dev/null", O_WRONLY | O_CLOEXEC)
    defer { close(devnull) }
    let t0 = now()
    let p = try Spawner.spawn(
        SpawnRequest(
            executable: binary("example-recorder"),
            arguments: ["--log", "/dev/null", "--exit-when-active"],
            environment: [:], workingDirectory: nil, group: AppProcessGroup(),
            inherit: [(devnull, 2)]))
    var pfd = pollfd(fd: p.pidfd, events: Int16(POLLIN), revents: 0)
    poll(&pfd, 1, 10_000)
    let took = Double(now() - t0) / 1000
    var st = lc_child_status()
    lc_reap(p.pid, &st)
    close(p.pidfd)
    return took
}

/// Launch to active (acknowledged didBecomeActive) against a bare exec of
/// the same binary running standalone to didBecomeActive and exiting.
func launch() throws -> (supervised: Series, bare: Series) {
    let n = quick ? 30 : 200
    var bare = Series()
    for _ in 0..<n { bare.add(microseconds: try bareExec()) }
    let d = try DaemonUnderTest(apps: ["a": recorderApp()], daemon: "event_history = 0")
    let f = try d.follow(["a"])
    let c = try d.client()
    var supervised = Series()
    for _ in 0..<n {
        let t0 = now()
        _ = try c.send(ControlRequest(.activate, app: "a"))
        let active = try f.acknowledged("a", "didBecomeActive")
        supervised.add(microseconds: Double(active.monotonic - t0) / 1000)
        _ = try c.send(ControlRequest(.kill, app: "a"))
        try f.terminated("a")
    }
    try d.stop()
    return (supervised, bare)
}

/// Issue 31's launch targets: with `running` C recorders already launched
/// into the background (a burst, each launch answered before the next is
/// sent, to all suspended: `burst`), launch to active of one more app,
/// killed after each, against a bare exec of the same binary taken in
/// turn with it (the same machine, the same thousand processes beside).
func launchAmong(_ running: Int, n: Int) throws -> (
    supervised: Series, bare: Series, burstSeconds: Double, burstCPU: Double, burstUser: Double
) {
    var apps: [String: String] = ["a": recorderApp()]
    for i in 0..<running { apps[String(format: "app%04d", i)] = recorderCommand("c", "/dev/null") }
    let d = try DaemonUnderTest(apps: apps, daemon: "event_history = 0")
    let c = try d.client()
    let f = try d.follow()
    let before = usage(d.pid)
    let launching = now()
    for name in apps.keys.sorted() where name != "a" {
        _ = try c.send(ControlRequest(.launch, app: name, background: true))
    }
    let answered = now()
    try awaitSuspended(f, running)
    let burst = Double(now() - launching) / 1e9
    // The daemon's own CPU time in the burst (all its threads; not the
    // spawn helper's, nor the apps'): less swayed by the machine's mood.
    // Its user part is what the counted bench counts; the rest is the
    // kernel's work on its behalf (cgroups, the freezer, writes, sockets).
    let after = usage(d.pid), tick = Double(sysconf(Int32(_SC_CLK_TCK)))
    let burstCPU = Double(after.cpuTicks - before.cpuTicks) / tick
    let burstUser = Double(after.userTicks - before.userTicks) / tick
    if ProcessInfo.processInfo.environment["LIFECYCLED_BENCH_TRACE"] != nil {
        FileHandle.standardError.write(
            Data("\(running): every launch answered after \((answered - launching) / 1_000_000) ms\n".utf8))
    }
    let profiler = try startProfiler(suffix: ".\(running)")  // the measured launches
    defer {
        profiler?.interrupt()
        profiler?.waitUntilExit()
    }
    var supervised = Series(), bare = Series()
    for _ in 0..<n {
        bare.add(microseconds: try bareExec())
        let t0 = now()
        _ = try c.send(ControlRequest(.activate, app: "a"))
        let active = try f.acknowledged("a", "didBecomeActive")
        supervised.add(microseconds: Double(active.monotonic - t0) / 1000)
        trace(f, "a", since: t0, "\(running)")
        _ = try c.send(ControlRequest(.kill, app: "a"))
        try f.terminated("a")
    }
    try d.stop(seconds: 300)
    return (supervised, bare, burst, burstCPU, burstUser)
}

/// Issue 31's prewarm target: activation of a prewarmed app to its
/// acknowledged didBecomeActive against a cold launch of the same binary
/// (a second app that is never prewarmed), taken in turn, in one daemon.
/// After each kill the prewarmed app is prewarmed again, and the next
/// activation waits until it is held (frozen) again. `thaw`: the cold app
/// once it is active, sent home, suspended (frozen), and activated again
/// (willEnterForeground, didBecomeActive): what the issue's title compares
/// a prewarmed activation with.
func prewarmedAgainstCold(n: Int, client: String) throws -> (warm: Series, cold: Series, thaw: Series) {
    let app = recorderCommand(client, "/dev/null")
    let d = try DaemonUnderTest(
        apps: ["warm": app + "prewarm = \"always\"\n", "cold": app + "prewarm = \"never\"\n"],
        daemon: "event_history = 0\nprewarm_budget = \"off\"")
    let c = try d.client()
    let f = try d.follow()
    // The budget by a reload, so that the first prewarm comes after the follower.
    let file = try String(contentsOfFile: d.path("lifecycled.toml"), encoding: .utf8)
    try file.replacingOccurrences(of: "prewarm_budget = \"off\"", with: "prewarm_budget = \"256M\"")
        .write(toFile: d.path("lifecycled.toml"), atomically: true, encoding: .utf8)
    guard try c.send(ControlRequest(.reload)).ok else { throw TestFailure("reload refused") }
    var warm = Series(), cold = Series(), thaw = Series()
    for _ in 0..<n {
        try f.state("warm", "prewarmed")
        let held = try f.wait("warm frozen") { $0.app == "warm" && $0.kind == .frozen }
        for (name, series) in [("warm", 0), ("cold", 1)] {
            // The held process's page faults in its activation (traced):
            // how much of it was code it had never run.
            let faultsBefore = name == "warm" ? minorFaults(held.pid) : nil
            mark("activate \(name)")
            let t0 = now()
            _ = try c.send(ControlRequest(.activate, app: name))
            let active = try f.acknowledged(name, "didBecomeActive")
            let us = Double(active.monotonic - t0) / 1000
            let faults = faultsBefore.flatMap { before in minorFaults(held.pid).map { $0 - before } }
            trace(f, name, since: t0, name, faults: faults)
            if series == 0 { warm.add(microseconds: us) } else { cold.add(microseconds: us) }
            if series == 1 {
                _ = try c.send(ControlRequest(.home))
                _ = try f.wait("cold frozen") { $0.app == "cold" && $0.kind == .frozen }
                mark("thaw \(name)")
                let t1 = now()
                _ = try c.send(ControlRequest(.activate, app: name))
                let again = try f.acknowledged(name, "didBecomeActive")
                thaw.add(microseconds: Double(again.monotonic - t1) / 1000)
                trace(f, name, since: t1, "thaw")
            }
            _ = try c.send(ControlRequest(.kill, app: name))
            try f.terminated(name)
        }
    }
    try d.stop()
    return (warm, cold, thaw)
}

/// LIFECYCLED_BENCH_MARK=1: `text` into ftrace's trace_marker, so that a
/// kernel trace taken beside the bench (tracefs mounted at
/// /sys/kernel/tracing) shows where each measured activation starts.
let traceMarker: Int32 =
    ProcessInfo.processInfo.environment["LIFECYCLED_BENCH_MARK"] == nil
    ? -1 : open("/sys/kernel/tracing/trace_marker", O_WRONLY | O_CLOEXEC)
func mark(_ text: String) {
    if traceMarker >= 0 { _ = text.withCString { write(traceMarker, $0, strlen($0)) } }
}

/// Resident memory (kB), CPU ticks and context switches of a process, from
/// /proc; the switches of every thread (the memory sentinel has its own).
func usage(_ pid: Int32) -> (rssKB: Int, cpuTicks: Int, switches: Int, userTicks: Int) {
    func fields(_ path: String, _ body: (Substring, [Substring]) -> Void) {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        for line in text.split(separator: "\n") { body(line, line.split(whereSeparator: { $0 == " " || $0 == "\t" })) }
    }
    var rss = 0, sw = 0
    fields("/proc/\(pid)/status") { line, f in if line.hasPrefix("VmRSS:") { rss = Int(f[1]) ?? 0 } }
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
    for task in tasks {
        fields("/proc/\(pid)/task/\(task)/status") { line, f in
            if line.hasPrefix("voluntary_ctxt_switches:") || line.hasPrefix("nonvoluntary_ctxt_switches:") {
                sw += Int(f[1]) ?? 0
            }
        }
    }
    let fields = statFields(pid)!
    return (rss, (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0), sw, Int(fields[11]) ?? 0)
}

/// `count` plain programs (`/bin/sleep`, signals delivery) frozen 0.1 s after
/// they reach the background: small enough for a thousand on this machine.
func sleepers(_ count: Int) -> [String: String] {
    var apps: [String: String] = [:]
    for i in 0..<count {
        apps[String(format: "app%04d", i)] =
            "command = [\"/bin/sleep\", \"1000000\"]\ndelivery = \"signals\"\n[timeouts]\nbackground_grace = 0.1\n"
    }
    return apps
}

/// Daemon memory, idle CPU and wake-ups with `count` suspended apps, and the
/// time `status` takes.
func scale(_ count: Int) throws -> (rssMB: Double, idleCPU: Double, wakeups: Int, status: Series, ctl: Series) {
    let apps = sleepers(count)
    let d = try DaemonUnderTest(apps: apps, daemon: "event_history = 0")
    let f = try d.follow()
    let c = try d.client()
    for name in apps.keys.sorted() { _ = try c.send(ControlRequest(.launch, app: name, background: true)) }
    try awaitSuspended(f, count)
    // Idle: nothing happens for 10 s (the measurement window).
    let before = usage(d.pid)
    var ts = timespec(tv_sec: quick ? 3 : 10, tv_nsec: 0)
    let window = Double(ts.tv_sec)
    nanosleep(&ts, nil)
    let after = usage(d.pid)
    var status = Series(), ctl = Series()
    for _ in 0..<20 {
        let t0 = now()
        _ = try c.send(ControlRequest(.status))
        status.add(microseconds: Double(now() - t0) / 1000)
        let t1 = now()
        _ = try d.ctl(["status"])
        ctl.add(microseconds: Double(now() - t1) / 1000)
    }
    let rss = Double(usage(d.pid).rssKB) / 1024
    try d.stop(seconds: 120)
    let idle = Double(after.cpuTicks - before.cpuTicks) / Double(sysconf(Int32(_SC_CLK_TCK))) / window * 100
    return (rss, idle, after.switches - before.switches, status, ctl)
}

// MARK: - Restarts: how long apps go unsupervised

/// `count` library apps (C recorders: small processes), all suspended but
/// one active; the daemon is SIGKILLed and a new one started on its state.
/// Returns the milliseconds from the new daemon's spawn to READY=1 (every
/// app re-adopted), and to one event round trip (a suspended app thawed,
/// its channel resumed, willEnterForeground and didBecomeActive acknowledged).
func crashBlackout(_ count: Int) throws -> (ready: Double, roundTrip: Double, launches: Double) {
    var apps: [String: String] = [:]
    for i in 0..<count { apps[String(format: "app%04d", i)] = recorderCommand("c", "/dev/null") }
    let d = try DaemonUnderTest(apps: apps, daemon: "event_history = 0")
    let c = try d.client()
    let f = try d.follow()
    // A burst of launches, each answered before the next is sent: every
    // spawn is saved before its answer, so this is what saving costs.
    let launching = now()
    for name in apps.keys.sorted() { _ = try c.send(ControlRequest(.launch, app: name, background: true)) }
    try awaitSuspended(f, count)
    let launches = Double(now() - launching) / 1e6
    _ = try d.crash(with: SIGKILL)
    let profiler = try startProfiler()  // the restart
    let t0 = now()
    let d2 = try DaemonUnderTest(after: d)
    let ready = Double(now() - t0) / 1e6
    if let profiler {
        profiler.interrupt()
        profiler.waitUntilExit()
    }
    let f2 = try d2.follow(["app0000"])
    _ = try d2.client().send(ControlRequest(.activate, app: "app0000"))
    try f2.acknowledged("app0000", "didBecomeActive")
    let roundTrip = Double(now() - t0) / 1e6
    // The daemon's own account of where its start went.
    let phases = d2.daemonLog.split(separator: "\n").filter { $0.contains(": started ") || $0.contains("ready") }
    FileHandle.standardError.write("\(count) apps: \(phases)\n".data(using: .utf8)!)
    try d2.stop(seconds: 300)
    return (ready, roundTrip, launches)
}

/// daemon-reexec with `count` library apps, one active: from the request to
/// the new image answering, and to one event round trip (an interruption
/// makes the active app resign) done in it.
func reexecBlackout(_ count: Int, runs: Int) throws -> (answered: Series, roundTrip: Series) {
    var apps: [String: String] = [:]
    for i in 0..<count { apps[String(format: "app%04d", i)] = recorderCommand("c", "/dev/null") }
    let d = try DaemonUnderTest(apps: apps, daemon: "event_history = 0")
    let f = try d.follow()
    let c = try d.client()
    for name in apps.keys.sorted().dropFirst() { _ = try c.send(ControlRequest(.launch, app: name, background: true)) }
    _ = try c.send(ControlRequest(.activate, app: "app0000"))
    try f.acknowledged("app0000", "didBecomeActive")
    var answered = Series(), roundTrip = Series()
    for i in 0..<runs {
        let before = try d.command(ControlRequest(.status)).status!.daemon.started
        let t0 = now()
        _ = try d.client().send(ControlRequest(.daemonReexec))
        let deadline = now() + 30_000_000_000  // a failure bound, not the measure
        while true {  // the kept control socket answers once the new image runs
            if let r = try? d.client().send(ControlRequest(.status)), r.status?.daemon.started != before { break }
            guard now() < deadline else { throw TestFailure("the new image did not answer within 30 s") }
        }
        answered.add(microseconds: Double(now() - t0) / 1000)
        let follower = try d.follow(["app0000"])
        _ = try d.client().send(ControlRequest(i % 2 == 0 ? .interruptionBegin : .interruptionEnd))
        try follower.acknowledged("app0000", i % 2 == 0 ? "willResignActive" : "didBecomeActive")
        roundTrip.add(microseconds: Double(now() - t0) / 1000)
    }
    try d.stop(seconds: 300)
    return (answered, roundTrip)
}

// MARK: - Durable before it leaves (issue 27)

/// Commands that change state, against one active C-recorder app: each
/// interruption makes it resign or become active (an event, its
/// acknowledgement, a save). `sequential`: each answered before the next is
/// sent; `pipelined`: all written at once, then every answer read (one
/// save per turn of the loop is shared by what that turn handled).
func commandBurst(_ count: Int) throws -> (sequential: Series, pipelinedMs: Double) {
    let d = try DaemonUnderTest(apps: ["a": recorderCommand("c", "/dev/null")], daemon: "event_history = 0")
    let f = try d.follow(["a"])
    try d.command(ControlRequest(.activate, app: "a"))
    try f.acknowledged("a", "didBecomeActive")
    let c = try d.client()
    var sequential = Series()
    for i in 0..<count {
        let t0 = now()
        _ = try c.send(ControlRequest(i % 2 == 0 ? .interruptionBegin : .interruptionEnd))
        sequential.add(microseconds: Double(now() - t0) / 1000)
    }
    let t0 = now()
    for i in 0..<count { try c.write(ControlRequest(i % 2 == 0 ? .interruptionBegin : .interruptionEnd)) }
    for _ in 0..<count { _ = try c.readResponse() }
    let pipelined = Double(now() - t0) / 1e6
    try d.stop()
    return (sequential, pipelined)
}

/// `count` plain programs launched into the background by requests written
/// at once: until every answer is read, and until every app is suspended.
func launchBurst(_ count: Int) throws -> (answeredMs: Double, settledMs: Double) {
    let apps = sleepers(count)
    let d = try DaemonUnderTest(apps: apps, daemon: "event_history = 0")
    let f = try d.follow()
    let c = try d.client()
    let t0 = now()
    for name in apps.keys.sorted() { try c.write(ControlRequest(.launch, app: name, background: true)) }
    for _ in 0..<count { _ = try c.readResponse() }
    let answered = Double(now() - t0) / 1e6
    try awaitSuspended(f, count)
    let settled = Double(now() - t0) / 1e6
    try d.stop(seconds: 300)
    return (answered, settled)
}

if CommandLine.arguments.contains("--durable") {
    let n = quick ? 200 : 2000
    out("| durable before it leaves (issue 27) | |")
    out("|---|---|")
    let (sequential, pipelined) = try commandBurst(n)
    out("| \(n) interruption commands, each answered before the next | \(sequential.summary) |")
    out("| \(n) interruption commands written at once, to the last answer | \(String(format: "%.1f", pipelined)) ms |")
    for count in quick ? [100] : [100, 1000] {
        let (answered, settled) = try launchBurst(count)
        let times = "\(String(format: "%.1f", answered)) ms / \(String(format: "%.1f", settled)) ms"
        out("| \(count) launches written at once: to the last answer / to all suspended | \(times) |")
    }
    try? FileManager.default.createDirectory(atPath: "bench-results", withIntermediateDirectories: true)
    try? report.joined(separator: "\n").write(toFile: "bench-results/durable.md", atomically: true, encoding: .utf8)
    exit(0)
}

if CommandLine.arguments.contains("--wakeups") {
    out("| wake-ups (issue 14), side by side | |")
    out("|---|---|")
    let (push, event) = try pushToSuspended()
    out("| push to a suspended app, request to answer received | \(push.summary) |")
    out("| event round trip, request to answer received (interruption-begin) | \(event.summary) |")
    out("| p50 ratio | \(String(format: "%.2f", Double(push.p(50)) / Double(max(event.p(50), 1))))× |")
    let (pushLaunch, bareLaunch) = try pushToNotRunning()
    out("| push to a not-running app, request to answer received | \(pushLaunch.summary) |")
    out("| background launch, request to didEnterBackground acknowledged | \(bareLaunch.summary) |")
    out(
        "| p50 ratio | \(String(format: "%.2f", Double(pushLaunch.p(50)) / Double(max(bareLaunch.p(50), 1))))× |")
    let naive = fetchWakeups(window: .zero, hours: 48)
    let batched = fetchWakeups(window: .seconds(300), hours: 48)
    out(
        "| 100 apps fetching every 15 min, one timer per app (fetch_window = 0) | \(String(format: "%.0f", naive.wakeups)) wake-ups/h, \(String(format: "%.0f", naive.fetches)) fetches/h |"
    )
    out(
        "| the same, batched (fetch_window = 300) | \(String(format: "%.0f", batched.wakeups)) wake-ups/h, \(String(format: "%.0f", batched.fetches)) fetches/h |"
    )
    out("| wake-ups saved | \(String(format: "%.1f", naive.wakeups / max(batched.wakeups, 1)))× fewer |")
    let seconds = quick ? 60 : 180
    let realNaive = try realFetchWakeups(window: 0, seconds: seconds)
    let realBatched = try realFetchWakeups(window: 5, seconds: seconds)
    out(
        "| real daemon, 100 recorders, every 15 s, one timer per app (\(seconds) s, per scaled hour) | \(String(format: "%.0f", realNaive.wakeups)) wake-ups, \(String(format: "%.0f", realNaive.fetches)) fetches |"
    )
    out(
        "| real daemon, the same batched (fetch_window = 5) | \(String(format: "%.0f", realBatched.wakeups)) wake-ups, \(String(format: "%.0f", realBatched.fetches)) fetches |"
    )
    out(
        "| wake-ups saved, real daemon | \(String(format: "%.1f", realNaive.wakeups / max(realBatched.wakeups, 1)))× fewer |"
    )
    try? FileManager.default.createDirectory(atPath: "bench-results", withIntermediateDirectories: true)
    try? report.joined(separator: "\n").write(toFile: "bench-results/wakeups.md", atomically: true, encoding: .utf8)
    exit(0)
}

if CommandLine.arguments.contains("--scenes") {
    out("| activate (issue 15), side by side, request to the activation acknowledged | |")
    out("|---|---|")
    let (today, two, scenes) = try activateSideBySide()
    out("| today's activate: one display, two apps taking turns (didBecomeActive) | \(today.summary) |")
    out(
        "| two displays: two apps taking turns on one while a third stays active on the other (didBecomeActive) | \(two.summary) |"
    )
    out(
        "| a scene app switching two scenes on one display while its third stays active on the other (sceneDidBecomeActive) | \(scenes.summary) |"
    )
    func ratio(_ a: Series, _ b: Series, _ q: Double) -> String {
        String(format: "%.2f", Double(a.p(q)) / Double(max(b.p(q), 1)))
    }
    out("| two displays against today, p50 / p99 | \(ratio(two, today, 50))× / \(ratio(two, today, 99))× |")
    out("| scenes against today, p50 / p99 | \(ratio(scenes, today, 50))× / \(ratio(scenes, today, 99))× |")
    try? FileManager.default.createDirectory(atPath: "bench-results", withIntermediateDirectories: true)
    try? report.joined(separator: "\n").write(toFile: "bench-results/scenes.md", atomically: true, encoding: .utf8)
    exit(0)
}

if CommandLine.arguments.contains("--events") {
    // The event path alone (issue 31's target: within 2x the floor), for
    // --pin one and --pin two; run from a build's tree, it measures that
    // build's daemon and recorders.
    let floor = try rawFloor()
    let idle: UInt32 = 2000  // roundTripUnwatched's pace
    let floorPaced = try rawFloor(pause: idle)
    let bareSwift = try clientFloor(client: "swift")
    let bareC = try clientFloor(client: "c")
    let bareSwiftPaced = try clientFloor(client: "swift", pause: idle)
    let bareCPaced = try clientFloor(client: "c", pause: idle)
    let rt = try roundTrip()
    let rtC = try roundTrip(client: "c")
    func ratio(_ a: Series, _ b: Series = floor) -> String {
        String(format: "%.2f", Double(a.p(50)) / Double(max(b.p(50), 1)))
    }
    out("| pinned: \(pin ?? "no") | p50 / p99 µs | p50 over the floor's |")
    out("|---|---|---|")
    out("| raw SOCK_SEQPACKET round trip (floor) | \(floor.p(50)) / \(floor.p(99)) | 1.00× |")
    out(
        "| the floor, each after 2 ms idle (paced floor) | \(floorPaced.p(50)) / \(floorPaced.p(99)) | \(ratio(floorPaced))× |"
    )
    out(
        "| an event to the Swift recorder, no daemon | \(bareSwift.p(50)) / \(bareSwift.p(99)) | \(ratio(bareSwift))× |"
    )
    out("| an event to the C recorder, no daemon | \(bareC.p(50)) / \(bareC.p(99)) | \(ratio(bareC))× |")
    out(
        "| an event to the Swift recorder, no daemon, each after 2 ms idle | \(bareSwiftPaced.p(50)) / \(bareSwiftPaced.p(99)) | \(ratio(bareSwiftPaced))×; \(ratio(bareSwiftPaced, floorPaced))× the paced floor's |"
    )
    out(
        "| an event to the C recorder, no daemon, each after 2 ms idle | \(bareCPaced.p(50)) / \(bareCPaced.p(99)) | \(ratio(bareCPaced))×; \(ratio(bareCPaced, floorPaced))× the paced floor's |"
    )
    out("| event round trip, Swift client | \(rt.p(50)) / \(rt.p(99)) | \(ratio(rt))× |")
    out("| event round trip, C client | \(rtC.p(50)) / \(rtC.p(99)) | \(ratio(rtC))× |")
    if pin == "one" {
        let away = try roundTrip(driverAway: true)
        let awayC = try roundTrip(client: "c", driverAway: true)
        out(
            "| event round trip, Swift client, the bench's driver on CPU 1 | \(away.p(50)) / \(away.p(99)) | \(ratio(away))× |"
        )
        out(
            "| event round trip, C client, the bench's driver on CPU 1 | \(awayC.p(50)) / \(awayC.p(99)) | \(ratio(awayC))× |"
        )
    }
    // Nothing but the daemon and the app inside the window (roundTripUnwatched).
    let placement = pin == "one" ? ", the driver on CPU 1" : ""
    let quiet = try roundTripUnwatched(client: "swift", driverAway: pin == "one")
    let quietC = try roundTripUnwatched(client: "c", driverAway: pin == "one")
    out(
        "| event round trip, Swift client, paced by the clock\(placement) | \(quiet.p(50)) / \(quiet.p(99)) | \(ratio(quiet))×; \(ratio(quiet, floorPaced))× the paced floor's |"
    )
    out(
        "| event round trip, C client, paced by the clock\(placement) | \(quietC.p(50)) / \(quietC.p(99)) | \(ratio(quietC))×; \(ratio(quietC, floorPaced))× the paced floor's |"
    )
    exit(0)
}

if CommandLine.arguments.contains("--prewarm") {
    // A prewarmed app's activation against a cold launch (issue 31, part 3).
    let n = quick ? 20 : 100
    out(
        "| client | cold launch to didBecomeActive, p50 / p99 | prewarmed, p50 / p99 | prewarmed over cold (p50) | a suspended app's activation (a thaw), p50 / p99 | prewarmed over the thaw (p50) |"
    )
    out("|---|---|---|---|---|---|")
    // LIFECYCLED_BENCH_CLIENTS=c: those clients only (comma-separated).
    let chosen = ProcessInfo.processInfo.environment["LIFECYCLED_BENCH_CLIENTS"].map {
        $0.split(separator: ",").map(String.init)
    }
    for client in ["swift", "c", "python"] where chosen?.contains(client) ?? true {
        let (warm, cold, thaw) = try prewarmedAgainstCold(n: n, client: client)
        func ratio(_ a: Series, _ b: Series) -> String {
            String(format: "%.2f", Double(a.p(50)) / Double(max(b.p(50), 1)))
        }
        out(
            "| \(client) | \(cold.p(50)) / \(cold.p(99)) µs | \(warm.p(50)) / \(warm.p(99)) µs | \(ratio(warm, cold)) | \(thaw.p(50)) / \(thaw.p(99)) µs | \(ratio(warm, thaw)) |"
        )
    }
    // The floor: the same recorders with the bench as their daemon.
    out("")
    out(
        "| no daemon: the bench plays it | cold launch, p50 / p99 | prewarmed, events one at a time, p50 / p99 | over cold | prewarmed, the three events together, p50 / p99 | over cold |"
    )
    out("|---|---|---|---|---|---|")
    for client in ["swift", "c"] where chosen?.contains(client) ?? true {
        guard let (cold, oneByOne, together) = try prewarmFloor(client: client, n: n) else {
            out("| \(client) | no cgroup v2 freezer here: not measured | | | | |")
            continue
        }
        func ratio(_ a: Series) -> String { String(format: "%.2f", Double(a.p(50)) / Double(max(cold.p(50), 1))) }
        out(
            "| \(client) | \(cold.p(50)) / \(cold.p(99)) µs | \(oneByOne.p(50)) / \(oneByOne.p(99)) µs | \(ratio(oneByOne)) | \(together.p(50)) / \(together.p(99)) µs | \(ratio(together)) |"
        )
    }
    exit(0)
}

if CommandLine.arguments.contains("--launches") {
    // Launch cost against the number of running apps (issue 31, part 2).
    let n = quick ? 30 : 100
    out(
        "| running apps | launch to active, p50 / p99 | bare exec in turn with it, p50 | overhead (p50 difference) | the running apps launched one after another, to all suspended | the daemon's CPU time in it (of which in user space) |"
    )
    out("|---|---|---|---|---|---|")
    for running in quick ? [10, 1000] : [10, 100, 1000] {
        let (sup, bare, burst, cpu, user) = try launchAmong(running, n: n)
        out(
            "| \(running) | \(sup.p(50)) / \(sup.p(99)) µs | \(bare.p(50)) µs | \(Int64(sup.p(50)) - Int64(bare.p(50))) µs | \(String(format: "%.2f", burst)) s | \(String(format: "%.2f", cpu)) s (\(String(format: "%.2f", user)) s) |"
        )
    }
    exit(0)
}

if CommandLine.arguments.contains("--restarts") {
    out("Restarts, \(quick ? "quick run" : "full run"): release build, C recorder apps.")
    out("")
    out(
        "| apps | kill -9, new daemon: spawn to READY=1 (all re-adopted) | spawn to one event round trip done | before: the apps launched one after another, to all suspended |"
    )
    out("|---|---|---|---|")
    for n in quick ? [10, 100] : CommandLine.arguments.contains("--only-1000") ? [1000] : [10, 100, 1000] {
        let (ready, rt, launches) = try crashBlackout(n)
        out(
            "| \(n) | \(String(format: "%.1f", ready)) ms | \(String(format: "%.1f", rt)) ms | \(String(format: "%.2f", launches / 1000)) s |"
        )
    }
    let (answered, rt) = try reexecBlackout(100, runs: quick ? 5 : 20)
    out("")
    out("| daemon-reexec, 100 apps | |")
    out("|---|---|")
    out("| request to the new image answering | \(answered.summary) |")
    out("| request to one event round trip done | \(rt.summary) |")
    try? FileManager.default.createDirectory(atPath: "bench-results", withIntermediateDirectories: true)
    try? report.joined(separator: "\n").write(toFile: "bench-results/restarts.md", atomically: true, encoding: .utf8)
    exit(0)
}

// MARK: - Report

let kernel = { () -> String in
    var u = utsname(); uname(&u)
    return withUnsafeBytes(of: u.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
}()
let cpu =
    ((try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? "")
    .split(separator: "\n").first { $0.hasPrefix("model name") }.map {
        String($0.split(separator: ":")[1]).trimmingCharacters(in: .whitespaces)
    } ?? "?"
out(
    "Machine: \(cpu), \(sysconf(Int32(_SC_NPROCESSORS_ONLN))) cores, Linux \(kernel); \(quick ? "quick run" : "full run")."
)
out("")
let floor = try rawFloor()
out("| raw SOCK_SEQPACKET round trip (floor) | \(floor.summary) |")
let rt = try roundTrip()
out("| event round trip through lifecycled, Swift client | \(rt.summary) |")
let rtC = try roundTrip(client: "c")
out("| event round trip through lifecycled, C client (liblifecycle) | \(rtC.summary) |")
let rtPython = try roundTrip(client: "python")
out("| event round trip through lifecycled, Python on the C client (ctypes) | \(rtPython.summary) |")
out(
    "| p50 of each client over the raw floor's p50 | Swift \(String(format: "%.2f", Double(rt.p(50)) / Double(max(floor.p(50), 1))))×, C \(String(format: "%.2f", Double(rtC.p(50)) / Double(max(floor.p(50), 1))))×, Python \(String(format: "%.2f", Double(rtPython.p(50)) / Double(max(floor.p(50), 1))))× |"
)
let (frozen, thaw) = try freezeAndThaw()
out("| decision to frozen (idle app) | \(frozen.summary) |")
out("| thaw to active (acknowledged didBecomeActive) | \(thaw.summary) |")
let (sup, bare) = try launch()
out("| launch to active (activate sent to didBecomeActive acknowledged) | \(sup.summary) |")
out("| bare exec of the same binary to didBecomeActive, standalone | \(bare.summary) |")
out("| launch overhead (p50 difference) | \(Int64(sup.p(50)) - Int64(bare.p(50))) µs |")
for n in [100, 1000] {
    let s = try scale(n)
    out("| \(n) suspended apps: daemon RSS | \(String(format: "%.1f", s.rssMB)) MB |")
    out(
        "| \(n) suspended apps: daemon CPU while idle | \(String(format: "%.3f", s.idleCPU)) % over the window, \(s.wakeups) context switches |"
    )
    out("| \(n) apps: status request (socket round trip) | \(s.status.summary) |")
    out("| \(n) apps: `supervisorctl status` (whole process) | \(s.ctl.summary) |")
}
try? FileManager.default.createDirectory(atPath: "bench-results", withIntermediateDirectories: true)
try? report.joined(separator: "\n").write(toFile: "bench-results/latest.md", atomically: true, encoding: .utf8)
