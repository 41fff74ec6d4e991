// Memory pressure, the data: the per-app memory policy, what the shell
// measured, the thresholds, and the kill records. The rules that use them
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

/// What the shell measured. Every field is optional: each source may be
/// missing on a given machine (no PSI, no memory controller, no budget).
public struct MemoryMeasurements: Sendable, Equatable, Codable {
    /// The available memory (MemAvailable plus the free pages in per-CPU
    /// lists, which MemAvailable leaves out) and MemTotal, bytes.
    public var available: UInt64?
    public var total: UInt64?
    /// Share of wall time some task stalled on memory since the previous
    /// sample (PSI "some"), percent.
    public var stallPercent: Double?
    /// The managed apps' footprint together, and the configured budget, bytes.
    public var appsTotal: UInt64?
    public var budget: UInt64?
    /// The machine's swap (SwapTotal and SwapFree), bytes; zero or nil: none.
    public var swapTotal: UInt64?
    public var swapFree: UInt64?

    public init(
        available: UInt64? = nil, total: UInt64? = nil, stallPercent: Double? = nil,
        appsTotal: UInt64? = nil, budget: UInt64? = nil, swapTotal: UInt64? = nil, swapFree: UInt64? = nil
    ) {
        self.available = available
        self.total = total
        self.stallPercent = stallPercent
        self.appsTotal = appsTotal
        self.budget = budget
        self.swapTotal = swapTotal
        self.swapFree = swapFree
    }

    /// Swap has room: at least a tenth of it free (earlyoom's and
    /// systemd-oomd's line between swap that helps and swap that is full).
    public var swapHasRoom: Bool {
        guard let t = swapTotal, t > 0, let f = swapFree else { return false }
        return f >= t / 10
    }

    /// The available memory as a percentage of MemTotal.
    public var availablePercent: Double? {
        guard let available, let total, total > 0 else { return nil }
        return Double(available) * 100 / Double(total)
    }

    /// The apps' total as a percentage of the budget.
    public var budgetPercent: Double? {
        guard let appsTotal, let budget, budget > 0 else { return nil }
        return Double(appsTotal) * 100 / Double(budget)
    }
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
    public var measurements: MemoryMeasurements

    public init(
        footprints: [AppID: UInt64] = [:], swapped: [AppID: UInt64] = [:],
        measurements: MemoryMeasurements = MemoryMeasurements()
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
    public var measurements: MemoryMeasurements

    public init(
        level: MemoryLevel, simulated: Bool = false, footprints: [AppID: UInt64] = [:],
        measurements: MemoryMeasurements = MemoryMeasurements()
    ) {
        self.level = level
        self.simulated = simulated
        self.footprints = footprints
        self.measurements = measurements
    }
}

/// Why the core killed an app for memory, and everything that led to it.
public struct MemoryKill: Sendable, Equatable, Codable {
    public enum Cause: String, Sendable, Codable {
        case memoryPressure = "memory-pressure"
        case perAppLimit = "per-app-limit"
        /// The kernel's OOM killer, not at the app's own limit.
        case kernelOOM = "kernel-oom"
        /// systemd-oomd.
        case systemdOOMD = "systemd-oomd"

        /// The termination code this cause gives.
        public var code: TerminationCode {
            switch self {
            case .memoryPressure: .memoryPressure
            case .perAppLimit: .perAppLimit
            case .kernelOOM: .kernelOOM
            case .systemdOOMD: .systemdOOMD
            }
        }
    }

    public struct Candidate: Sendable, Equatable, Codable {
        public var app: AppID
        public var state: LifecycleState
        public var band: MemoryBand
        public var footprint: UInt64?
        /// The part of the footprint on the swap device.
        public var swap: UInt64?
    }

    public var app: AppID
    public var cause: Cause
    /// In memory and on swap together; for a kill by the kernel at the
    /// app's limit, the most the run used (memory.peak).
    public var footprint: UInt64?
    /// The part of the footprint on the swap device.
    public var swap: UInt64?
    public var limit: UInt64?
    /// Another OOM killer killed it (the daemon only records it); nil: lifecycled.
    public var killer: OOMKiller?
    /// The most the run used (memory.peak), for a kill by another killer.
    public var peak: UInt64?
    public var state: LifecycleState
    public var band: MemoryBand
    public var level: MemoryLevel
    public var simulated: Bool
    public var measurements: MemoryMeasurements
    /// Every app that could have been chosen, in kill order (the victim first).
    public var candidates: [Candidate]
    /// The app was thawed and told before the kill (its manifest asked).
    public var lastNotice: Bool
}
