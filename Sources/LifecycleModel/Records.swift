// The values that the core decides, the daemon records and the control
// protocol carries, each one type from the core to `supervisorctl`: a
// memory reading, a kill for memory, a background task.

/// One background task's id, as `beginBackgroundTask` returned it.
public typealias TaskID = UInt32

/// One background task: its id and the name the app gave it.
public struct BackgroundTask: Sendable, Equatable, Codable {
    public var id: TaskID
    public var name: String
    public init(id: TaskID, name: String) { self.id = id; self.name = name }
}

/// One memory measurement. Every field may be missing on a given machine
/// (no PSI, no memory controller, no budget, no swap).
public struct MemoryReading: Sendable, Equatable, Codable {
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
    /// The machine's swap (SwapTotal and SwapFree), bytes; absent: none.
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

/// Why an app was killed for memory, and what led to it: decided by the
/// core (or, for another killer's kill, recorded by it), completed by the
/// daemon with the time, the pid and what the kill gave back, and read out
/// by `supervisorctl jetsam`, the kill log under the state directory, and
/// `events`.
public struct KillRecord: Sendable, Equatable, Codable {
    public struct Candidate: Sendable, Equatable, Codable {
        public var app: AppID
        public var state: LifecycleState
        public var band: MemoryBand
        public var footprint: UInt64?
        /// The part of the footprint on the swap device.
        public var swap: UInt64?
        public init(app: AppID, state: LifecycleState, band: MemoryBand, footprint: UInt64?, swap: UInt64? = nil) {
            self.app = app
            self.state = state
            self.band = band
            self.footprint = footprint
            self.swap = swap
        }
    }

    /// Wall-clock time, seconds since the epoch (the daemon's, when it records it).
    public var time: Double
    public var app: AppID
    public var pid: Int32?
    /// memory-pressure, per-app-limit, kernel-oom or systemd-oomd.
    public var reason: TerminationCode
    /// In memory and on swap together (for the kernel's kill at the app's
    /// limit: the run's peak).
    public var footprint: UInt64?
    /// The part of the footprint on the swap device.
    public var swap: UInt64?
    public var limit: UInt64?
    /// Who killed it when lifecycled did not (absent: lifecycled).
    public var killer: OOMKiller?
    /// The most the run used (memory.peak), for a kill by another killer.
    public var peak: UInt64?
    /// What the kill gave back, memory and swap (lifecycled's kills, where
    /// the memory controller measures it).
    public var freed: UInt64?
    /// The app's state and band when it was chosen.
    public var state: LifecycleState
    public var band: MemoryBand
    /// The memory level, whether it was simulated, and the measurements behind it.
    public var level: MemoryLevel
    public var simulated: Bool
    public var reading: MemoryReading
    /// Every app that could have been chosen, in kill order (the victim first).
    public var candidates: [Candidate]
    /// Thawed and told willBeKilledForMemory first.
    public var lastNotice: Bool

    public init(
        time: Double = 0, app: AppID, pid: Int32? = nil, reason: TerminationCode, footprint: UInt64?,
        swap: UInt64? = nil, limit: UInt64?, killer: OOMKiller? = nil, peak: UInt64? = nil,
        state: LifecycleState, band: MemoryBand, level: MemoryLevel, simulated: Bool, reading: MemoryReading,
        candidates: [Candidate], lastNotice: Bool
    ) {
        self.time = time
        self.app = app
        self.pid = pid
        self.reason = reason
        self.footprint = footprint
        self.swap = swap
        self.limit = limit
        self.killer = killer
        self.peak = peak
        self.state = state
        self.band = band
        self.level = level
        self.simulated = simulated
        self.reading = reading
        self.candidates = candidates
        self.lastNotice = lastNotice
    }
}
