// The vocabulary of the project, defined once. No logic lives here: only the
// names every other module speaks (the core, the wire codec, the control
// protocol, the clients, supervisorctl and the config loader), with their
// stable spellings and codes. Adding an event is one case here, the compiler
// then names every switch that must handle it (docs/architecture.md).

/// The name of an app, as given by its manifest's file name.
public typealias AppID = String

/// The name of a display, as the daemon file declares it (`[[display]]`).
public typealias DisplayID = String

/// The name of one scene of an app (its scene session), unique within the
/// app: 1 to 64 of A-Z a-z 0-9 . _ - (SceneNames.valid).
public typealias SceneID = String

public enum SceneNames {
    /// The scene of an app that does not opt in to scenes, and the one an
    /// opted-in app gets when no scene is named.
    public static let main: SceneID = "main"
    /// The name of the display of a daemon file that declares none.
    public static let defaultDisplay: DisplayID = "main"
    public static let maxLength = 64
    /// The rule, as errors state it.
    public static let rule = "1 to \(maxLength) of A-Z a-z 0-9 . _ -"

    /// A scene or display name: 1 to 64 of A-Z a-z 0-9 . _ - (so a list of
    /// them can be written with commas, and shown in a column).
    public static func valid(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= maxLength
            && name.utf8.allSatisfy { c in
                (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2E
                    || c == 0x5F || c == 0x2D
            }
    }
}

/// Where one scene has been told it is (docs/lifecycle.md, "Scenes"):
/// ordered from least to most active.
public enum SceneState: String, Sendable, CaseIterable, Codable, Comparable, DeclarationOrdered {
    /// A session with no scene connected (never connected, disconnected,
    /// or its app not running).
    case unattached
    case background
    /// Foreground-inactive.
    case inactive
    /// Foreground-active.
    case active
}

/// The five states of docs/lifecycle.md, and `prewarmed`: a process
/// started ahead of use and held (frozen) before its launch events. To
/// the app it is not running yet: it has been told nothing.
public enum LifecycleState: String, Sendable, CaseIterable, Codable {
    case notRunning = "not-running"
    case inactive
    case active
    case background
    case suspended
    case prewarmed
}

/// Which apps the daemon starts ahead of use (the manifest's `prewarm`,
/// docs/lifecycle.md "Prewarming").
public enum PrewarmPolicy: String, Sendable, CaseIterable, Codable {
    /// Never prewarmed (the default of a plain program).
    case never
    /// Prewarmed shortly before the usage history predicts a use (the
    /// default of a library app).
    case predicted
    /// Kept prewarmed whenever it does not run (the memory budget allowing).
    case always
}

/// A lifecycle event. `rawValue` is its name everywhere text is used (logs,
/// JSON, config keys); `wireCode` is its byte on the app channel.
/// The scene events (LifecycleEvent.sceneEvent), each once: what a scene
/// delegate is called with, and where it leaves the scene.
public enum SceneEvent: Sendable, CaseIterable {
    case willConnect, willEnterForeground, didBecomeActive, willResignActive, didEnterBackground, didDisconnect

    public var state: SceneState {
        switch self {
        case .willConnect, .didEnterBackground: .background
        case .willEnterForeground, .willResignActive: .inactive
        case .didBecomeActive: .active
        case .didDisconnect: .unattached
        }
    }
}

/// The wake-up events (LifecycleEvent.wake): answered with a WakeResult.
public enum Wake: Sendable, CaseIterable {
    case fetch, push
}

/// What the daemon waits for after an event (LifecycleEvent.awaited).
public enum Awaited: Sendable {
    /// The app's acknowledgement, under the event's deadline.
    case acknowledgement
    /// The app's exit, under the terminate deadline (willTerminate).
    case exit
    /// Nothing stops it: the kill comes at the last notice's deadline.
    case notice
}

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
    /// A background fetch: get new content, then answer with a WakeResult
    /// (fetch background mode). Not a transition.
    case performFetch
    /// A remote notification (push) with its JSON payload; answered like a
    /// fetch. Not a transition.
    case didReceiveRemoteNotification
    /// Open a URL of a scheme the manifest lists (the app is coming to the
    /// front). Not a transition.
    case openURL
    /// Scene events (apps whose manifest sets `scenes = true`): each names
    /// its scene and display in the options `scene` and `display`.
    /// A scene session is connected (connection options: `session`).
    case sceneWillConnect
    case sceneWillEnterForeground
    case sceneDidBecomeActive
    case sceneWillResignActive
    case sceneDidEnterBackground
    /// The scene is gone; its session stays unless it was discarded.
    case sceneDidDisconnect
    /// Sessions the user discarded (option `scenes`, comma-separated):
    /// at once when the app runs, else after its next launch.
    case didDiscardSceneSessions

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
        case .performFetch: 10
        case .didReceiveRemoteNotification: 11
        case .openURL: 12
        case .sceneWillConnect: 13
        case .sceneWillEnterForeground: 14
        case .sceneDidBecomeActive: 15
        case .sceneWillResignActive: 16
        case .sceneDidEnterBackground: 17
        case .sceneDidDisconnect: 18
        case .didDiscardSceneSessions: 19
        }
    }

    public init?(wireCode: UInt8) {
        guard let e = Self.allCases.first(where: { $0.wireCode == wireCode }) else { return nil }
        self = e
    }

    /// Events that move an app between states (the rest only inform it).
    public var isTransition: Bool {
        switch self {
        case .didReceiveMemoryWarning, .willBeKilledForMemory, .performFetch, .didReceiveRemoteNotification, .openURL,
            .didDiscardSceneSessions:
            false
        case .willFinishLaunching, .didFinishLaunching, .didBecomeActive, .willResignActive, .didEnterBackground,
            .willEnterForeground, .willTerminate, .sceneWillConnect, .sceneWillEnterForeground, .sceneDidBecomeActive,
            .sceneWillResignActive, .sceneDidEnterBackground, .sceneDidDisconnect:
            true
        }
    }

    /// Events that wake the app for work in the background, answered with
    /// a WakeResult (an acknowledgement alone counts as no data).
    public var isWake: Bool { wake != nil }

    /// The wake-up this event is, if it is one (answered with a WakeResult).
    public var wake: Wake? {
        switch self {
        case .performFetch: .fetch
        case .didReceiveRemoteNotification: .push
        case .willFinishLaunching, .didFinishLaunching, .didBecomeActive, .willResignActive, .didEnterBackground,
            .willEnterForeground, .willTerminate, .didReceiveMemoryWarning, .willBeKilledForMemory, .openURL,
            .sceneWillConnect, .sceneWillEnterForeground, .sceneDidBecomeActive, .sceneWillResignActive,
            .sceneDidEnterBackground, .sceneDidDisconnect, .didDiscardSceneSessions:
            nil
        }
    }

    /// Events about one scene (they carry the options `scene` and `display`).
    public var isSceneEvent: Bool { sceneState != nil }

    /// Where a scene event leaves its scene.
    public var sceneState: SceneState? { sceneEvent?.state }

    /// The scene event this is, if it is one: the one place that sorts the
    /// vocabulary into scene events and the rest (every case named, so a
    /// new event does not compile until it is sorted here).
    public var sceneEvent: SceneEvent? {
        switch self {
        case .sceneWillConnect: .willConnect
        case .sceneWillEnterForeground: .willEnterForeground
        case .sceneDidBecomeActive: .didBecomeActive
        case .sceneWillResignActive: .willResignActive
        case .sceneDidEnterBackground: .didEnterBackground
        case .sceneDidDisconnect: .didDisconnect
        case .willFinishLaunching, .didFinishLaunching, .didBecomeActive, .willResignActive, .didEnterBackground,
            .willEnterForeground, .willTerminate, .didReceiveMemoryWarning, .willBeKilledForMemory, .performFetch,
            .didReceiveRemoteNotification, .openURL, .didDiscardSceneSessions:
            nil
        }
    }

    /// What the app answers the event with, and what waits for that: an
    /// acknowledgement under its deadline, the exit (willTerminate), or
    /// the kill at the last notice's deadline (willBeKilledForMemory).
    public var awaited: Awaited {
        switch self {
        case .willTerminate: .exit
        case .willBeKilledForMemory: .notice
        case .willFinishLaunching, .didFinishLaunching, .didBecomeActive, .willResignActive, .didEnterBackground,
            .willEnterForeground, .didReceiveMemoryWarning, .performFetch, .didReceiveRemoteNotification, .openURL,
            .sceneWillConnect, .sceneWillEnterForeground, .sceneDidBecomeActive, .sceneWillResignActive,
            .sceneDidEnterBackground, .sceneDidDisconnect, .didDiscardSceneSessions:
            .acknowledgement
        }
    }

    /// Events sent as part of launching (they carry launch options).
    public var isLaunchEvent: Bool {
        switch self {
        case .willFinishLaunching, .didFinishLaunching: true
        case .didBecomeActive, .willResignActive, .didEnterBackground, .willEnterForeground, .willTerminate,
            .didReceiveMemoryWarning, .willBeKilledForMemory, .performFetch, .didReceiveRemoteNotification, .openURL,
            .sceneWillConnect, .sceneWillEnterForeground, .sceneDidBecomeActive, .sceneWillResignActive,
            .sceneDidEnterBackground, .sceneDidDisconnect, .didDiscardSceneSessions:
            false
        }
    }
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
/// set. audio, location and voip are continuous: they keep the app running
/// in the background instead of suspending it. fetch and remote-notification
/// are not: they let the daemon wake a suspended app (or launch it) for a
/// moment of work.
public struct BackgroundModes: OptionSet, Sendable, Hashable, Codable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let audio = BackgroundModes(rawValue: 1 << 0)
    public static let location = BackgroundModes(rawValue: 1 << 1)
    public static let voip = BackgroundModes(rawValue: 1 << 2)
    /// Woken now and then to fetch content (performFetch); suspended between.
    public static let fetch = BackgroundModes(rawValue: 1 << 3)
    /// Woken, or launched, for remote notifications (didReceiveRemoteNotification).
    public static let remoteNotification = BackgroundModes(rawValue: 1 << 4)

    /// Every mode with its manifest spelling, in documentation order.
    public static let named: [(name: String, mode: BackgroundModes)] = [
        ("audio", .audio), ("location", .location), ("voip", .voip), ("fetch", .fetch),
        ("remote-notification", .remoteNotification),
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
    case kernelOOM = "kernel-oom"
    case systemdOOMD = "systemd-oomd"
    /// A prewarmed process given up: memory ran short, it was not used in
    /// time, it did not reach its first event, or the daemon restarted
    /// while it got there (never a launch the user made, never relaunched).
    case prewarmDropped = "prewarm-dropped"
}

/// What the kernel said of an OOM kill of a run: counted in its group's
/// memory.events since the group was made (`oom_group_kill`, with
/// memory.oom.group set, or `oom_kill`), and whether the group had reached
/// its own memory.max first (`oom`).
/// Another OOM killer ended it: the kernel's, or systemd-oomd (which
/// marks the group it kills, `user.oomd_ooms`).
public struct OutOfMemory: Sendable, Equatable {
    /// The group's own limit, when the kernel's kill was at it; nil when it
    /// was not: the whole machine, or a group above the app's, ran out.
    public var limit: UInt64?
    /// The most the group used during the run (memory.peak), if known.
    public var peak: UInt64?
    public var killer: OOMKiller

    public init(limit: UInt64?, peak: UInt64?, killer: OOMKiller = .kernel) {
        self.limit = limit
        self.peak = peak
        self.killer = killer
    }
}

/// Who killed an app for memory when lifecycled did not.
public enum OOMKiller: String, Sendable, Codable {
    /// The kernel's OOM killer.
    case kernel
    /// systemd-oomd, where a distribution runs it (Fedora, Ubuntu).
    case systemdOOMD = "systemd-oomd"
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
    /// Why this run was launched: a LaunchReason.
    case reason = "launch.reason"
    /// Launched to open this URL (`launch.reason` is "url").
    case url = "launch.url"
    /// A remote notification's JSON payload: the one the app was launched
    /// for, or one held for it while it could not be woken.
    case pushPayload = "push.payload"
    /// Restoration data the app saved follows (its size in bytes); the
    /// bytes come in a restoration message just before this event.
    case restorationSize = "restoration.size"

    /// Not a launch option: the option of an openURL event that holds its URL.
    public static let eventURL = "url"
}

/// The options of the scene events (and of openURL to a scene app).
public enum SceneOptionKey {
    /// The scene's name.
    public static let scene = "scene"
    /// The display it is on.
    public static let display = "display"
    /// sceneWillConnect: "new" for a session never connected before,
    /// "restored" for one connected again (after a relaunch or a
    /// disconnection for memory).
    public static let session = "session"
    /// didDiscardSceneSessions: the discarded scenes, comma-separated.
    public static let scenes = "scenes"
}

/// Why a run was launched (`launch.reason`).
public enum LaunchReason: String, Sendable, Codable, CaseIterable {
    /// launch, activate, restart: someone asked for it.
    case user
    /// Its crash policy brought it back.
    case relaunch
    /// A background fetch was due (fetch mode).
    case fetch
    /// A remote notification came (remote-notification mode).
    case remoteNotification = "remote-notification"
    /// A URL of one of its schemes was opened.
    case url
    /// Started ahead of use (prewarmed); a use then takes it over with its
    /// own reason.
    case prewarm
}

/// What an app answers to performFetch or didReceiveRemoteNotification
/// (UIBackgroundFetchResult). The wire code is the byte of the answer.
public enum WakeResult: String, Sendable, Codable, CaseIterable {
    case newData = "new-data"
    case noData = "no-data"
    case failed

    public var wireCode: UInt8 {
        switch self {
        case .newData: 0
        case .noData: 1
        case .failed: 2
        }
    }

    public init?(wireCode: UInt8) {
        guard let r = Self.allCases.first(where: { $0.wireCode == wireCode }) else { return nil }
        self = r
    }
}

/// The project's version, as the D-Bus interface's `Version` shows it
/// (the Makefile's VERSION, which a test holds to this).
public enum LifecycleVersion {
    public static let string = "0.16.0"
}
