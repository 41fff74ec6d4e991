// What survives the daemon: the whole state of the core as one value, saved
// by the shell after every step and restored by the next daemon, so that a
// crash loses nothing an app or an operator can observe. Deadlines are
// absolute monotonic instants: they are restored as they were, never
// re-derived from configured durations. (The shell moves one kind on at a
// start after a crash: an event owed to an app that must resume its channel
// is judged from the start, LifecycleDaemon/State/Adoption.swift.)
//
// The seeded simulation restores a saved core at a random step and requires
// it to behave exactly as the original on every remaining input: state added
// later and forgotten here fails that test.

/// The core's state: everything but the step in progress. Saved as one
/// JSON object (the shared fields and the apps side by side), or in parts
/// (`shared` and one `App` per app) by a store that writes only what changed.
public struct CoreState: Codable, Sendable {
    public internal(set) var shared: Shared
    var apps: [AppID: AppRecord]
    var footprints: [AppID: UInt64]
    var swapped: [AppID: UInt64]?

    private enum CodingKeys: String, CodingKey { case apps, footprints, swapped }

    init(shared: Shared, apps: [AppID: AppRecord], footprints: [AppID: UInt64], swapped: [AppID: UInt64]?) {
        self.shared = shared
        self.apps = apps
        self.footprints = footprints
        self.swapped = swapped
    }

    public init(from decoder: any Decoder) throws {
        shared = try Shared(from: decoder)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        apps = try c.decode([AppID: AppRecord].self, forKey: .apps)
        footprints = try c.decode([AppID: UInt64].self, forKey: .footprints)
        swapped = try c.decodeIfPresent([AppID: UInt64].self, forKey: .swapped)
    }

    public func encode(to encoder: any Encoder) throws {
        try shared.encode(to: encoder)
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(apps, forKey: .apps)
        try c.encode(footprints, forKey: .footprints)
        try c.encode(ifPresent: swapped, forKey: .swapped)
    }

    /// The apps the state knows, with the generation of their current (or
    /// last) run and whether a process is running: what the shell must
    /// find alive, or report ended.
    public var runs: [(app: AppID, generation: UInt64, running: Bool)] {
        apps.keys.sorted().map { ($0, apps[$0]!.generation, apps[$0]!.phase != .notRunning) }
    }
}

extension CoreState {
    /// What is saved of one app: written again only when it changed, so
    /// that a step costs the records it touched, not all of them.
    public struct App: Codable, JSONWritable, Equatable, Sendable {
        var record: AppRecord
        var footprint: UInt64?
        /// The part of the footprint on swap.
        var swapped: UInt64?

        /// The record as saved: without its policy (a restored core takes
        /// it from the configuration), so that a part read back compares
        /// equal to the live one when what is saved is the same.
        init(_ record: AppRecord, footprint: UInt64?, swapped: UInt64?) {
            var saved = record
            saved.policy = AppPolicy()
            saved.pending = nil
            saved.removing = false
            self.record = saved
            self.footprint = footprint
            self.swapped = swapped
        }

        /// What the synthesized encoder writes, by hand (LifecycleModel/
        /// JSONWriting.swift): part of every save of the app.
        public func write(json w: inout JSONWriter) throws {
            w.openObject()
            try w.field("record", record)
            try w.field("footprint", ifPresent: footprint)
            try w.field("swapped", ifPresent: swapped)
            w.closeObject()
        }

        /// The part as a core restored after `crashes` crashes carries it
        /// on: each crash opens a gap in its numbering (see
        /// `Supervisor.numberingGapAfterCrash`), for a running app only.
        public func afterCrashes(_ crashes: UInt32) -> App {
            var app = self
            app.record.skipNumbers(crashes: crashes)
            return app
        }
    }

    /// Everything that is not one app's: small (timers only for apps with
    /// a deadline, the front), written with every change. The Supervisor
    /// holds it as it is (Supervisor.swift): a field added here is saved.
    public struct Shared: Codable, Sendable {
        var now: Instant = .zero
        var displays: Displays
        var shuttingDown = false
        var timers = TimerTable()
        var gauge: MemoryGauge
        var memoryLevel: MemoryLevel = .normal
        var memorySimulated = false
        var pressureVictim: AppID?
        var reclaiming: AppID?
        var lastSample = MemorySample(level: .normal)
        /// Apps that wanted a prewarm the budget had no room for, planned
        /// again when room is made (Prewarm.swift); nil: none.
        var prewarmWaiting: Set<AppID>?

        init(displays: Displays, gauge: MemoryGauge) {
            self.displays = displays
            self.gauge = gauge
        }

        fileprivate enum CodingKeys: String, CodingKey {
            case now, displays = "front", shuttingDown, timers, gauge, memoryLevel, memorySimulated, pressureVictim
            case reclaiming, lastSample, prewarmWaiting
        }

        /// Its three parts, one after the other: one object, as ever.
        public func encode(to encoder: any Encoder) throws {
            try front.encode(to: encoder)
            try memory.encode(to: encoder)
            try clock.encode(to: encoder)
        }

        /// What changes with nearly every step: the clock of the last step
        /// and the deadlines.
        public var clock: Clock { Clock(now: now, timers: timers) }

        /// The displays (what is in front, interruptions, locks) and
        /// shutting down: changes when the front does. A store that keeps
        /// its last encoding encodes it again only when it is not equal.
        public var front: Front { Front(displays: displays, shuttingDown: shuttingDown) }

        /// The memory policy's part: changes with memory samples. Kept as
        /// `front` is.
        public var memory: Memory { Memory(shared: self) }

        public struct Clock: Encodable, JSONWritable, Sendable {
            let now: Instant
            let timers: TimerTable

            public func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(now, forKey: .now)
                try c.encode(timers, forKey: .timers)
            }

            /// The same, by hand (LifecycleModel/JSONWriting.swift).
            public func write(json w: inout JSONWriter) throws {
                w.openObject()
                try w.field("now", now)
                try w.field("timers", timers)
                w.closeObject()
            }
        }

        public struct Front: Encodable, JSONWritable, Equatable, Sendable {
            let displays: Displays
            let shuttingDown: Bool

            public func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(displays, forKey: .displays)
                try c.encode(shuttingDown, forKey: .shuttingDown)
            }

            /// The same, by hand (LifecycleModel/JSONWriting.swift).
            public func write(json w: inout JSONWriter) throws {
                w.openObject()
                try w.field("front", displays)
                try w.field("shuttingDown", shuttingDown)
                w.closeObject()
            }
        }

        /// A field added to Shared belongs in one of the three parts: one
        /// left out is not saved (`everySharedFieldIsSaved` fails).
        public struct Memory: Encodable, Equatable, Sendable {
            let gauge: MemoryGauge
            let memoryLevel: MemoryLevel
            let memorySimulated: Bool
            let pressureVictim: AppID?
            let reclaiming: AppID?
            let lastSample: MemorySample
            let prewarmWaiting: Set<AppID>?

            init(shared s: Shared) {
                gauge = s.gauge
                memoryLevel = s.memoryLevel
                memorySimulated = s.memorySimulated
                pressureVictim = s.pressureVictim
                reclaiming = s.reclaiming
                lastSample = s.lastSample
                prewarmWaiting = s.prewarmWaiting
            }

            public func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(gauge, forKey: .gauge)
                try c.encode(memoryLevel, forKey: .memoryLevel)
                try c.encode(memorySimulated, forKey: .memorySimulated)
                try c.encode(ifPresent: pressureVictim, forKey: .pressureVictim)
                try c.encode(ifPresent: reclaiming, forKey: .reclaiming)
                try c.encode(lastSample, forKey: .lastSample)
                try c.encode(ifPresent: prewarmWaiting, forKey: .prewarmWaiting)
            }
        }
    }

    /// One app's part, if the state knows the app.
    public func app(_ id: AppID) -> App? {
        apps[id].map { App($0, footprint: footprints[id], swapped: swapped?[id]) }
    }

    /// Every app the state knows.
    public var appIDs: some Collection<AppID> { apps.keys }

    /// Each app's part, by app.
    public var perApp: [AppID: App] {
        var parts: [AppID: App] = [:]
        parts.reserveCapacity(apps.count)
        for (id, record) in apps { parts[id] = App(record, footprint: footprints[id], swapped: swapped?[id]) }
        return parts
    }

    /// The state put together again from its parts.
    public init(shared: Shared, apps parts: [AppID: App]) {
        self.init(
            shared: shared, apps: parts.mapValues(\.record), footprints: parts.compactMapValues(\.footprint),
            swapped: parts.compactMapValues(\.swapped))
    }
}

extension Supervisor {
    /// The state to save after a step.
    public var saved: CoreState {
        CoreState(shared: shared, apps: apps.records, footprints: footprints, swapped: swapped)
    }

    /// The apps whose saved part changed since the last call: what the
    /// shell writes after a step.
    public mutating func takeChanged() -> Set<AppID> { apps.takeChanged() }

    /// How far sequence numbers and task ids jump after a crash. The shell
    /// sends nothing before the state that numbered it is saved, but when
    /// a save fails (a full disk) it sends all the same, so an app may hold
    /// numbers the saved state never recorded; fresh ones must not collide
    /// with them (an app ignores a repeated sequence number).
    public static let numberingGapAfterCrash: UInt32 = 1 << 16

    /// How far the next run's generation jumps after a crash. A spawn is
    /// saved before the step that made it returns, so one run at most is
    /// lost; the rest covers saves that failed (a full disk) before it.
    /// The shell's cleanup checks a group's identity besides (a run's
    /// group is never touched through a path another run took).
    public static let generationGapAfterCrash: UInt64 = 16

    /// A core that carries on from `state`, under the configuration given now:
    /// each app's policy, the number of slots and the thresholds are today's.
    /// Apps the state knows that are not configured any more are left out
    /// (the shell ends what runs of them); configured apps it does not know
    /// start not running. `afterCrash`: the state may lag what apps saw
    /// (not after a daemon-reexec, which saves before it execs), and a
    /// shutdown in progress is not carried on: the new daemon was started
    /// to run. Without it the restored core is the saved one exactly.
    /// `crashesMissed`: for an app whose saved part was written before
    /// earlier crashes (a store that writes only what changed keeps a part
    /// as it was, and each of those restores opened a gap in memory only),
    /// how many: their gaps are opened again, so that numbers only grow.
    public init(
        restoring state: CoreState, foregroundSlots: Int, apps policies: [AppID: AppPolicy],
        memory: MemoryThresholds = MemoryThresholds(), afterCrash: Bool = false,
        crashesMissed: [AppID: UInt32] = [:]
    ) {
        self.init(
            restoring: state, displays: DisplaySpec.single(slots: foregroundSlots), apps: policies, memory: memory,
            afterCrash: afterCrash, crashesMissed: crashesMissed)
    }

    /// The same, with the displays configured now: a display kept keeps its
    /// front (resized), one gone sends its scenes to the first display, in
    /// the background.
    public init(
        restoring state: CoreState, displays specs: [DisplaySpec], apps policies: [AppID: AppPolicy],
        memory: MemoryThresholds = MemoryThresholds(), afterCrash: Bool = false,
        crashesMissed: [AppID: UInt32] = [:]
    ) {
        self.init(displays: specs, apps: policies, memory: memory)
        now = state.shared.now
        for (id, policy) in policies {
            guard var record = state.apps[id] else { continue }
            record.policy = policy
            record.skipNumbers(crashes: (crashesMissed[id] ?? 0) &+ (afterCrash ? 1 : 0))
            // A scene of a display that is gone moves to the first display,
            // leaving the old one through the background as any move does
            // (so it never counts against the first display's slots).
            for (name, scene) in record.scenes where displays[scene.display] == nil {
                let shown =
                    record.policy.scenes
                    ? scene.told > .background : record.state == .active || record.state == .inactive
                if scene.leaving == nil, shown, record.phase != .notRunning {
                    record.scenes[name]!.leaving = scene.display
                }
                record.scenes[name]!.display = displays.first
            }
            apps[id] = record
        }
        displays = state.shared.displays.reconfigured(to: specs)
        var before: [SceneRef] = []
        for d in state.shared.displays.all { before += d.scenes }
        for ref in before where apps[ref.app] == nil { displays.remove(app: ref.app) }
        let held = Set(displays.all.flatMap(\.scenes))
        var lost: [AppID] = []
        for ref in before where apps[ref.app] != nil && !held.contains(ref) && !lost.contains(ref.app) {
            lost.append(ref.app)
        }
        replan = lost
        // After a crash only: a daemon-reexec saves, lets out what the save
        // held (its kills among it), and only then execs.
        // A prewarm not yet held when the daemon died may have said so to
        // the daemon that died: given up (a reexec keeps the channel, and
        // what it said waits in it).
        if afterCrash {
            for (id, record) in self.apps where record.phase == .prewarming && record.killing == nil {
                self.apps[id]!.killing = .prewarmDropped(why: "lifecycled restarted before it was held")
            }
        }
        rekill =
            afterCrash
            ? self.apps.keys.sorted().filter { self.apps[$0]!.killing != nil && self.apps[$0]!.phase != .notRunning }
            : []
        unplanned = Set(self.apps.keys)
        prewarmWaiting = state.shared.prewarmWaiting.flatMap { w in
            let kept = w.filter { self.apps[$0] != nil }
            return kept.isEmpty ? nil : kept
        }
        unscheduled = Set(self.apps.keys.filter { !fetchScheduleHolds($0) })
        shuttingDown = afterCrash ? false : state.shared.shuttingDown
        timers = state.shared.timers
        for id in state.apps.keys where apps[id] == nil { timers.cancelAll(id, includingWakeups: true) }
        gauge = state.shared.gauge
        gauge.thresholds = memory
        memoryLevel = state.shared.memoryLevel
        memorySimulated = state.shared.memorySimulated
        footprints = state.footprints.filter { apps[$0.key] != nil }
        swapped = (state.swapped ?? [:]).filter { apps[$0.key] != nil }
        pressureVictim = state.shared.pressureVictim.flatMap { apps[$0] != nil ? $0 : nil }
        reclaiming = state.shared.reclaiming.flatMap { apps[$0] != nil ? $0 : nil }
        lastSample = state.shared.lastSample
    }
}

extension AppRecord {
    /// Sequence numbers and task ids jump past what a running app may hold
    /// from before `crashes` crashes (nothing for an app not running: its
    /// next run starts its numbering again); the next run's generation
    /// jumps past any a run started after the last save may have taken,
    /// running or not (that run's group may still be there).
    mutating func skipNumbers(crashes: UInt32) {
        guard crashes > 0 else { return }
        generationFloor = max(generationFloor, generation) &+ Supervisor.generationGapAfterCrash &* UInt64(crashes)
        guard phase != .notRunning else { return }
        sequence &+= Supervisor.numberingGapAfterCrash &* crashes
        // Events behind the one awaited are numbered on from it: none join
        // them after the gap (the rest of the launch goes one at a time).
        together = false
        nextTask &+= Supervisor.numberingGapAfterCrash &* crashes
    }
}
