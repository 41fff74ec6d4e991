// The vocabulary of the project, defined once. No logic lives here: only the
// names every other module speaks (the core, the wire codec, the control
// protocol, the clients, supervisorctl and the config loader), with their
// stable spellings and codes. Adding an event is one case here, the compiler
// then names every switch that must handle it (docs/architecture.md).

/// The name of an app, as given by its manifest's file name.
public typealias AppID = String

/// The five states of docs/lifecycle.md.
public enum LifecycleState: String, Sendable, CaseIterable, Codable {
    case notRunning = "not-running"
    case inactive
    case active
    case background
    case suspended
}

/// A lifecycle event. `rawValue` is its name everywhere text is used (logs,
/// JSON, config keys); `wireCode` is its byte on the app channel.
public enum LifecycleEvent: String, Sendable, CaseIterable, Codable {
    case willFinishLaunching
    case didFinishLaunching
    case didBecomeActive
    case willResignActive
    case didEnterBackground
    case willEnterForeground
    case willTerminate
    /// Memory runs short (running apps only). Not a transition.
    case didReceiveMemoryWarning
    /// The app is about to be killed for memory (only apps whose manifest
    /// asks for a last notice). Not a transition.
    case willBeKilledForMemory

    /// The event's code on the app channel (docs/protocol.md). Codes are
    /// never reused; the C header's LIFECYCLE_EVENT_* constants must equal
    /// them (a test reads the header and compares).
    public var wireCode: UInt8 {
        switch self {
        case .willFinishLaunching: 1
        case .didFinishLaunching: 2
        case .didBecomeActive: 3
        case .willResignActive: 4
        case .didEnterBackground: 5
        case .willEnterForeground: 6
        case .willTerminate: 7
        case .didReceiveMemoryWarning: 8
        case .willBeKilledForMemory: 9
        }
    }

    public init?(wireCode: UInt8) {
        guard let e = Self.allCases.first(where: { $0.wireCode == wireCode }) else { return nil }
        self = e
    }

    /// Events that move an app between states (the rest only inform it).
    public var isTransition: Bool { self != .didReceiveMemoryWarning && self != .willBeKilledForMemory }

    /// Events sent as part of launching (they carry launch options).
    public var isLaunchEvent: Bool { self == .willFinishLaunching || self == .didFinishLaunching }
}

/// Whether an app was launched for the user (into the foreground) or not.
public enum LaunchMode: String, Sendable, Codable, CaseIterable {
    case foreground
    case background
}

/// How an app hears of its transitions.
public enum Delivery: String, Sendable, Codable, CaseIterable {
    /// It links the client library: events as messages, each acknowledged.
    case library
    /// It knows nothing of us: signals from its manifest, no acknowledgements.
    case signals
}

/// The background modes a manifest may declare (`background_modes`), as a
/// set. Today's modes are all continuous: they keep the app running in the
/// background instead of suspending it.
public struct BackgroundModes: OptionSet, Sendable, Hashable, Codable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let audio = BackgroundModes(rawValue: 1 << 0)
    public static let location = BackgroundModes(rawValue: 1 << 1)
    public static let voip = BackgroundModes(rawValue: 1 << 2)

    /// Every mode with its manifest spelling, in documentation order.
    public static let named: [(name: String, mode: BackgroundModes)] = [
        ("audio", .audio), ("location", .location), ("voip", .voip),
    ]
    /// Modes that keep the app running in the background.
    public static let continuous: BackgroundModes = [.audio, .location, .voip]

    public init?(name: String) {
        guard let m = Self.named.first(where: { $0.name == name }) else { return nil }
        self = m.mode
    }

    /// The manifest spellings of the modes in this set.
    public var names: [String] { Self.named.filter { contains($0.mode) }.map(\.name) }
    public var isContinuous: Bool { !isDisjoint(with: .continuous) }
}

/// Why a run of an app ended, as a stable code: in logs, journal fields,
/// JSON, kill records and the launch options of the next run. Never renamed.
public enum TerminationCode: String, Sendable, Codable, CaseIterable {
    case exited
    case signaled
    case launchFailed = "launch-failed"
    case launchWatchdog = "launch-watchdog"
    case eventWatchdog = "event-watchdog"
    case backgroundWatchdog = "background-watchdog"
    case backgroundTaskExpired = "background-task-expired"
    case stoppedByUser = "stopped-by-user"
    case killedByUser = "killed-by-user"
    case exitsOnSuspend = "exits-on-suspend"
    case shutdown
    case protocolViolation = "protocol-violation"
    case memoryPressure = "memory-pressure"
    case perAppLimit = "per-app-limit"
    case exitUnknown = "exit-unknown"
    case notAdopted = "not-adopted"
    case freezeFailed = "freeze-failed"
}

/// How short memory is. Ordered: normal < warning < critical.
public enum MemoryLevel: String, Sendable, CaseIterable, Codable, Comparable, DeclarationOrdered {
    case normal, warning, critical
}

/// An app's priority band under memory pressure: lower bands are killed first.
public enum MemoryBand: String, Sendable, CaseIterable, Codable, Comparable, DeclarationOrdered {
    case low, normal, high
}

/// Enums ordered as their cases are declared.
public protocol DeclarationOrdered: CaseIterable, Comparable {}

extension DeclarationOrdered {
    public var rank: Int {
        Self.allCases.firstIndex(of: self).map { Self.allCases.distance(from: Self.allCases.startIndex, to: $0) } ?? 0
    }
    public static func < (a: Self, b: Self) -> Bool { a.rank < b.rank }
}

/// The keys of the launch options sent with the launch events.
public enum LaunchOptionKey: String, Sendable, CaseIterable {
    /// "foreground" or "background".
    case launchMode = "launch.mode"
    /// The previous run's TerminationCode, its description, and when it
    /// ended (seconds since the epoch).
    case previousReason = "previous.reason"
    case previousDescription = "previous.description"
    case previousTime = "previous.time"
}
