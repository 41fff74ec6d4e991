/// What the shell must do. Effects are data: the core decides, the shell acts.
public enum Effect: Sendable, Equatable {
    /// Start a new process for the app (in a fresh cgroup). Report `.exited`
    /// or `.launchFailed` with this generation.
    case spawn(AppID, generation: UInt64, mode: LaunchMode)
    /// Start a process for the app ahead of use (Prewarm.swift): as
    /// `.spawn` into the background, told that it is prewarmed
    /// (`LIFECYCLE_PREWARM=1`), so that it says when it is at its first
    /// event; a plain program is held at READY=1.
    case prewarm(AppID, generation: UInt64)
    /// Tell the app of an event: a message for library apps (with its
    /// absolute deadline and, in the background, the end of the background
    /// budget), the manifest's signal for plain programs.
    case deliver(AppID, Delivered)
    /// Answer a beginBackgroundTask request; `task == nil` is the invalid id.
    case backgroundTaskReply(AppID, request: UInt32, task: TaskID?, budgetEnd: Instant?)
    /// Run the expiration handlers of these tasks.
    case expireBackgroundTasks(AppID, [TaskID])
    case freeze(AppID)
    case thaw(AppID)
    /// SIGKILL every process of the app (its whole cgroup).
    case kill(AppID, TerminationReason)
    /// The public state changed.
    case transition(AppID, from: LifecycleState, to: LifecycleState)
    /// A run ended; the record says why.
    case terminated(AppID, TerminationRecord)
    /// An app no longer configured has no process left and is gone from
    /// the core: the shell forgets it too.
    case forgotten(AppID)
    /// The app ended on its own and its manifest's `restart` says it comes
    /// back: relaunched at `at` (the `attempt`th time within the window).
    case relaunchScheduled(AppID, at: Instant, attempt: Int)
    /// It ended too often within the window: left down until a user launches it.
    case failed(AppID, AppFailure)
    /// A wake-up (fetch, push, URL) moved on: for the record.
    case wake(AppID, WakeNote)
    /// Forget the app's restoration data (a user quit, a crash during launch).
    case discardRestoration(AppID, why: String)
    /// A command was refused; nothing else happened.
    case refused(Refusal)
    /// The app is killed for memory: the record of why, emitted right after its
    /// `.kill` (the shell signals and frees first), or with the last notice.
    case memoryKill(KillRecord)
    /// Push this much of the (suspended) app's memory to swap, off the
    /// loop (memory.reclaim); report `.reclaimed` when done, whatever came of it.
    case reclaim(AppID, bytes: UInt64)
    /// The victim of a pressure kill is gone: measure again now, and report
    /// with `.memory`, so the next kill (if any) is decided on fresh numbers.
    case remeasure
    /// A background scene was disconnected to free memory, before any app
    /// is killed (its session stays: it connects again when shown).
    case sceneShed(AppID, SceneID)
}

/// Why a command was refused: a stable code for scripts and transports,
/// and a sentence for people.
public enum Refusal: Sendable, Equatable, Error, CustomStringConvertible {
    case unknownApp(AppID)
    case alreadyRunning(AppID, LifecycleState)
    case notRunning(AppID)
    case stopping(AppID)
    case screenLocked
    case alreadyLocked
    case notLocked
    /// `unlock` of a display only the user's session locks: its locker unlocks it.
    case sessionLocked
    case noInterruption
    case shuttingDown
    case modeNotDeclared(AppID, String)
    case quitByUser(AppID)
    case inFront(AppID)
    case fetchInProgress(AppID)
    case badURL(String)
    case unknownScheme(String)
    case unknownDisplay(DisplayID)
    case noScenes(AppID)
    case unknownScene(AppID, SceneID)
    case tooManyScenes(AppID, Int)
    case badSceneName(String)
    /// No scene named, and the app has none on that display to show.
    case sceneNeeded(AppID, DisplayID)

    /// Stable, like TerminationCode: never renamed.
    public var code: String {
        switch self {
        case .unknownApp: "unknown-app"
        case .alreadyRunning: "already-running"
        case .notRunning: "not-running"
        case .stopping: "stopping"
        case .screenLocked: "screen-locked"
        case .alreadyLocked: "already-locked"
        case .notLocked: "not-locked"
        case .sessionLocked: "session-locked"
        case .noInterruption: "no-interruption"
        case .shuttingDown: "shutting-down"
        case .modeNotDeclared: "mode-not-declared"
        case .quitByUser: "quit-by-user"
        case .inFront: "in-front"
        case .fetchInProgress: "fetch-in-progress"
        case .badURL: "bad-url"
        case .unknownScheme: "unknown-scheme"
        case .unknownDisplay: "unknown-display"
        case .noScenes: "no-scenes"
        case .unknownScene: "unknown-scene"
        case .tooManyScenes: "too-many-scenes"
        case .badSceneName: "bad-scene-name"
        case .sceneNeeded: "scene-needed"
        }
    }

    public var description: String {
        switch self {
        case .unknownApp(let id): "unknown app '\(id)'"
        case .alreadyRunning(let id, let state): "'\(id)' is already running (\(state.rawValue))"
        case .notRunning(let id): "'\(id)' is not running"
        case .stopping(let id): "'\(id)' is stopping"
        case .screenLocked: "the screen is locked"
        case .alreadyLocked: "already locked"
        case .notLocked: "not locked"
        case .sessionLocked: "the session is locked: its screen locker unlocks it"
        case .noInterruption: "no interruption is in progress"
        case .shuttingDown: "the daemon is shutting down"
        case .modeNotDeclared(let id, let mode): "'\(id)' does not declare the \(mode) background mode"
        case .quitByUser(let id): "'\(id)' was quit by the user: no wake-ups until it is launched again"
        case .inFront(let id): "'\(id)' is in front"
        case .fetchInProgress(let id): "'\(id)' is already fetching"
        case .badURL(let url): "'\(url)' is not a URL (scheme:rest)"
        case .unknownScheme(let scheme): "no app opens '\(scheme):' URLs"
        case .unknownDisplay(let d): "unknown display '\(d)'"
        case .noScenes(let id): "'\(id)' does not use scenes (its manifest does not set scenes = true)"
        case .unknownScene(let id, let s): "'\(id)' has no scene '\(s)'"
        case .tooManyScenes(let id, let max): "'\(id)' has \(max) scenes already (its max_scenes)"
        case .badSceneName(let s):
            "'\(s)' is not a scene name (\(SceneNames.rule))"
        case .sceneNeeded(let id, let d): "'\(id)' has no scene on '\(d)' to show: name one with --scene"
        }
    }
}

/// One event on its way to an app.
public struct Delivered: Sendable, Equatable {
    public var event: LifecycleEvent
    public var sequence: UInt32
    /// When the app must have acknowledged it (`nil` for plain programs,
    /// which do not acknowledge).
    public var deadline: Instant?
    /// In the background: when the background budget ends.
    public var budgetEnd: Instant?
    public var mode: LaunchMode
    public var previous: TerminationRecord?
    /// Launch events: why this run was launched, and what for.
    public var launch: LaunchContext?
    /// didReceiveRemoteNotification: the payload.
    public var payload: String?
    /// openURL: the URL.
    public var url: String?
    /// Scene events (and openURL to a scene app): the scene, its display,
    /// and for sceneWillConnect whether its session is restored.
    public var scene: SceneContext?
    /// didDiscardSceneSessions: the scenes discarded.
    public var discarded: [SceneID]?
    /// Sent while an earlier event still awaits its acknowledgement (launch
    /// events that go together): owed with it, sent again with it on resume.
    public var behind = false
}

/// Which scene an event is about.
public struct SceneContext: Sendable, Equatable {
    public var scene: SceneID
    public var display: DisplayID
    /// sceneWillConnect only: a session connected before (nil otherwise).
    public var restored: Bool?
}

/// Why a run was launched, with what it was launched for.
public struct LaunchContext: Sendable, Equatable {
    public var reason: LaunchReason
    public var url: String?
    /// A push's payload: the one it was launched for, or one held for it.
    public var pushPayload: String?
}

/// How and when one run of an app ended.
public struct TerminationRecord: Sendable, Equatable, Codable, JSONWritable {
    public var reason: TerminationReason
    public var generation: UInt64
    public var at: Instant

    /// As synthesized, by hand (LifecycleModel/JSONWriting.swift): part
    /// of every save of an app that ended once.
    public func write(json w: inout JSONWriter) throws {
        w.openObject()
        try w.field("reason", reason)
        try w.field("generation", generation)
        try w.field("at", at)
        w.closeObject()
    }

    public init(reason: TerminationReason, generation: UInt64, at: Instant) {
        self.reason = reason
        self.generation = generation
        self.at = at
    }
}
