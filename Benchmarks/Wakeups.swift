// Wake-ups (issue 14): pushes to a suspended and to a not-running app against
// an event round trip and a bare launch, measured side by side through a real
// daemon; and the daemon's timer wake-ups per hour for 100 apps fetching every
// 15 minutes, batched against one timer per app, on the core with a manual clock.
import Foundation
@preconcurrency import Glibc
import LifecycleControl
import LifecycleCore
import LifecycleTestKit

/// Control request to the daemon's receipt of the app's answer, for a push to
/// a suspended app (thawed, didReceiveRemoteNotification, answered) against
/// an event round trip (interruption-begin to willResignActive acknowledged).
func pushToSuspended() throws -> (push: Series, event: Series) {
    let d = try DaemonUnderTest(
        apps: [
            "a": recorderApp("background_modes = [\"remote-notification\"]\n[push]\nbudget = 3600"),
            "b": recorderApp(),
        ], daemon: "foreground_slots = 2")
    let f = try d.follow()
    let c = try d.client()
    _ = try c.send(ControlRequest(.activate, app: "b"))
    try f.acknowledged("b", "didBecomeActive")
    _ = try c.send(ControlRequest(.launch, app: "a", background: true))
    try f.state("a", "suspended")
    var push = Series(), event = Series()
    var request = ControlRequest(.push, app: "a")
    request.payload = #"{"aps":{"content-available":1}}"#
    for _ in 0..<(iterations / 10) {
        var t0 = now()
        _ = try c.send(request)
        let answered = try f.wait("answered") {
            $0.app == "a" && $0.kind == .wake && $0.reason == "answered" && $0.monotonic >= t0
        }
        push.add(microseconds: Double(answered.monotonic - t0) / 1000)
        try f.state("a", "suspended")
        t0 = now()
        _ = try c.send(ControlRequest(.interruptionBegin))
        let resigned = try f.wait("b resigned") {
            $0.app == "b" && $0.kind == .acknowledged && $0.event == .willResignActive && $0.monotonic >= t0
        }
        event.add(microseconds: Double(resigned.monotonic - t0) / 1000)
        _ = try c.send(ControlRequest(.interruptionEnd))
        try f.acknowledged("b", "didBecomeActive")
    }
    try d.stop()
    return (push, event)
}

/// A push to a not-running app (launched into the background, answered)
/// against a bare background launch (launch sent to didEnterBackground
/// acknowledged). Each run is ended with SIGKILL: a crash, not a user quit,
/// which would hold the next push.
func pushToNotRunning() throws -> (push: Series, launch: Series) {
    let d = try DaemonUnderTest(
        apps: ["a": recorderApp("background_modes = [\"remote-notification\"]\n[push]\nbudget = 3600")])
    let f = try d.follow(["a"])
    let c = try d.client()
    var push = Series(), launch = Series()
    var request = ControlRequest(.push, app: "a")
    request.payload = #"{"aps":{"content-available":1}}"#
    var kill = ControlRequest(.signal, app: "a")
    kill.signal = "KILL"
    for _ in 0..<(quick ? 30 : 200) {
        var t0 = now()
        _ = try c.send(request)
        let answered = try f.wait("answered") {
            $0.app == "a" && $0.kind == .wake && $0.reason == "answered" && $0.monotonic >= t0
        }
        push.add(microseconds: Double(answered.monotonic - t0) / 1000)
        _ = try c.send(kill)
        try f.terminated("a")
        t0 = now()
        _ = try c.send(ControlRequest(.launch, app: "a", background: true))
        let background = try f.wait("in the background") {
            $0.app == "a" && $0.kind == .acknowledged && $0.event == .didEnterBackground && $0.monotonic >= t0
        }
        launch.add(microseconds: Double(background.monotonic - t0) / 1000)
        _ = try c.send(kill)
        try f.terminated("a")
    }
    try d.stop()
    return (push, launch)
}

/// The core alone, its clock driven by hand: `apps` apps fetching every 15
/// minutes, each used once a day at its own time of day, answering at once.
/// Counts the distinct moments the daemon's one timer would fire (its
/// wake-ups) and the fetches, over `hours`.
func fetchWakeups(window: Duration, apps n: Int = 100, hours: Int = 24, seed: UInt64 = 14) -> (
    wakeups: Double, fetches: Double
) {
    var rng = seed
    func random(_ below: Int64) -> Int64 {  // SplitMix64
        rng &+= 0x9E37_79B9_7F4A_7C15
        var z = rng
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return Int64((z ^ (z >> 31)) % UInt64(below))
    }
    var policy = AppPolicy()
    policy.backgroundModes = [.fetch]
    let ids = (0..<n).map { "app\($0)" }
    var sup = Supervisor(foregroundSlots: 1, apps: Dictionary(uniqueKeysWithValues: ids.map { ($0, policy) }))
    sup.fetchWindow = window
    let day: Int64 = 86_400_000_000_000
    var clock = Instant(nanoseconds: day)
    var useAt = Dictionary(uniqueKeysWithValues: ids.map { ($0, Instant(nanoseconds: day + random(day))) })
    var wakeups = 0, fetches = 0
    func step(_ input: Input) {
        var queue = [input]
        while !queue.isEmpty {
            for effect in sup.handle(queue.removeFirst(), now: clock) {
                switch effect {
                case .deliver(let id, let d) where d.deadline != nil:
                    let gen = sup.snapshot(id)!.generation
                    queue.append(
                        d.event.isWake
                            ? .completed(id, generation: gen, sequence: d.sequence, result: .newData)
                            : .acknowledged(id, generation: gen, sequence: d.sequence))
                case .wake(_, .fetchStarted): fetches += 1
                default: break
                }
            }
        }
    }
    let end = Instant(nanoseconds: day + Int64(hours) * 3_600_000_000_000)
    // A day of use first, so every app has been used (its fetches are not stretched for disuse).
    let measureFrom = Instant(nanoseconds: 2 * day)
    while clock < end {
        let (user, nextUse) = useAt.min { $0.value < $1.value }!
        let timer = sup.nextDeadline()
        if let timer, timer <= nextUse {
            clock = max(clock, timer)
            if clock >= measureFrom { wakeups += 1 } else { fetches = 0 }
            step(.tick)
        } else {
            clock = nextUse
            step(.activate(user))
            step(.home)
            useAt[user] = nextUse + .nanoseconds(day)
        }
    }
    let measured = Double(hours) - 24
    return (Double(wakeups) / measured, Double(fetches) / measured)
}

/// The same with the real daemon and real apps, its clock 60 times faster
/// than the model's: 100 Swift recorders fetching every 15 s with a window
/// of 0 or 5 s (15 min and 5 min scaled), each used once, 150 ms apart over
/// the first interval, observed for `seconds` after that. The fetches that start at one moment were
/// decided in one turn of the daemon's loop, woken by one timer: distinct
/// moments are wake-ups. Returned per scaled hour (60 s of this clock).
func realFetchWakeups(window: Int, seconds: Int) throws -> (wakeups: Double, fetches: Double) {
    var apps: [String: String] = [:]
    for i in 0..<100 { apps["app\(i)"] = recorderApp("background_modes = [\"fetch\"]\n[fetch]\ninterval = 15") }
    let d = try DaemonUnderTest(apps: apps, daemon: "event_history = 200000\nfetch_window = \(window)")
    let f = try d.follow()
    let c = try d.client()
    // Used one after another over one interval, as users spread over a
    // day would be: their fetches start out evenly spread, not together.
    let spread = now()
    for i in 0..<100 {
        let wait = max(0, spread + Int64(i) * 150_000_000 - now())
        var pause = timespec(tv_sec: Int(wait / 1_000_000_000), tv_nsec: Int(wait % 1_000_000_000))
        nanosleep(&pause, nil)
        _ = try c.send(ControlRequest(.activate, app: "app\(i)"))
        try f.acknowledged("app\(i)", "didBecomeActive")
    }
    _ = try c.send(ControlRequest(.home))
    let start = now()
    var ts = timespec(tv_sec: seconds, tv_nsec: 0)
    nanosleep(&ts, nil)  // the measurement window: the daemon runs on its own
    let records = try c.send(ControlRequest(.events)).events ?? []
    try d.stop()
    let fetches = records.filter { $0.kind == .wake && $0.reason == "fetch" && $0.monotonic >= start }
    let moments = Set(fetches.map(\.monotonic)).count
    let hours = Double(seconds) / 60
    return (Double(moments) / hours, Double(fetches.count) / hours)
}
