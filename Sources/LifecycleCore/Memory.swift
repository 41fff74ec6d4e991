// Memory pressure, the data: the per-app memory policy, the thresholds,
// and what the shell measured for the core (the reading and the kill
// record themselves are LifecycleModel's, Records.swift). The rules that use them
// are in MemoryPolicy.swift.

/// What an app's manifest says about memory.
public struct MemoryPolicy: Sendable, Equatable, Codable {
    /// Kill order within a state: low first. Default `normal`; an app with a
    /// continuous background mode defaults to `high` (someone is listening).
    public var band: MemoryBand = .normal
    /// Killed whatever the level once its footprint exceeds this (bytes).
    public var limit: UInt64?
    /// Thawed and told `willBeKilledForMemory` before a pressure kill.
    public var lastNotice = false
    /// How long the last notice may take before the kill.
    public var lastNoticeTimeout: Duration = .milliseconds(250)

    public init() {}
}

/// The thresholds of each level, all in percent. A level is entered when
/// any signal crosses its threshold, and left only once every signal is back
/// past its threshold by `hysteresis` percentage points, so it does not flap.
public struct MemoryThresholds: Sendable, Equatable, Codable {
    /// The available memory below this share of MemTotal.
    public var availableWarning: Double? = 20
    public var availableCritical: Double? = 10
    /// Memory stall (PSI some) at or above this share of time.
    public var stallWarning: Double? = 10
    public var stallCritical: Double? = 40
    /// The apps' total at or above this share of the budget (when one is set).
    public var budgetWarning: Double? = 90
    public var budgetCritical: Double? = 100
    public var hysteresis: Double = 2

    public init() {}
}

/// What the shell measured, for the core: every footprint it read and the
/// measurements the level is computed from.
public struct MemoryReport: Sendable, Equatable {
    /// Bytes per running app, in memory and on the swap device together
    /// (what a kill would give back); apps not listed keep their last
    /// known value.
    public var footprints: [AppID: UInt64]
    /// The part of each footprint above that is on the swap device (not in
    /// memory, compressed or not); an app listed above and not here has none.
    public var swapped: [AppID: UInt64]
    public var measurements: MemoryReading

    public init(
        footprints: [AppID: UInt64] = [:], swapped: [AppID: UInt64] = [:],
        measurements: MemoryReading = MemoryReading()
    ) {
        self.footprints = footprints
        self.swapped = swapped
        self.measurements = measurements
    }
}

/// A measurement with the level the core gave it: what kill records cite.
public struct MemorySample: Sendable, Equatable, Codable {
    public var level: MemoryLevel
    /// Injected with `supervisorctl pressure`, not measured.
    public var simulated: Bool
    /// Bytes per running app; apps not listed keep their last known value.
    public var footprints: [AppID: UInt64]
    public var measurements: MemoryReading

    public init(
        level: MemoryLevel, simulated: Bool = false, footprints: [AppID: UInt64] = [:],
        measurements: MemoryReading = MemoryReading()
    ) {
        self.level = level
        self.simulated = simulated
        self.footprints = footprints
        self.measurements = measurements
    }
}
