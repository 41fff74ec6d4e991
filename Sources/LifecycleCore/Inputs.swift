/// What can happen to a display.
public enum DisplayCommand: String, Sendable, Equatable, CaseIterable {
    case home, interruptionBegan, interruptionEnded, lock, unlock

    /// The command's name as users type it (`supervisorctl`, the control protocol).
    public var name: String {
        switch self {
        case .home: "home"
        case .lock: "lock"
        case .unlock: "unlock"
        case .interruptionBegan: "interruption-begin"
        case .interruptionEnded: "interruption-end"
        }
    }
}

/// Everything that can happen to the supervisor. Commands come from the user
/// (supervisorctl); the rest is reported by the daemon shell from the kernel
/// and the app channels. `generation` names one run of an app, so that a late
/// report about an earlier run can never touch the current one.
public enum Input: Sendable, Equatable {
    // Commands.
    case launch(AppID, LaunchMode)
    case activate(AppID)
    /// Activate one scene of the app (created when `scene` is new, moved
    /// when `display` is not its own); nil: its most recent (Scenes.swift).
    case activateScene(AppID, scene: SceneID?, display: DisplayID?)
    /// home, interruptions or the lock on one display; nil: on every
    /// display (Commands.swift says what each does then).
    case display(DisplayID?, DisplayCommand)
    /// What a display shows, from the compositor's follower (Follow.swift).
    case shown(DisplayID, ShownFront)
    /// The app switcher's swipe: the scene goes, and its session with it.
    case discard(AppID, SceneID)
    case stop(AppID)
    case kill(AppID)
    /// Stop it as the user would, then launch it again into the place it
    /// had (a not-running app is launched into the foreground).
    case restart(AppID)
    case shutdown
    /// `supervisorctl fetch`: a background fetch now (Wakeups.swift).
    case fetch(AppID)
    /// A remote notification for the app, its JSON payload.
    case push(AppID, payload: String)
    /// Open a URL: the app listing its scheme comes to the front.
    case openURL(String)
    /// The configuration read again: every app it declares, with its
    /// policy (Configuration.swift).
    case reconfigure([AppID: AppPolicy])

    // Reports about processes and channels.
    case launchFailed(AppID, generation: UInt64, message: String)
    /// How the process ended, as the kernel reports it; `.outOfMemory`
    /// whenever another OOM killer killed it in its cgroup (the kernel's,
    /// with whether that was at the group's own limit, or systemd-oomd).
    case exited(AppID, generation: UInt64, ExitStatus)
    case acknowledged(AppID, generation: UInt64, sequence: UInt32)
    /// The event with this sequence number left the daemon at `at`, well
    /// after it was decided (the daemon stalled between the decision and
    /// the save before it may leave), or was sent again on a channel the app
    /// took back after a restart: the app has its whole time from then.
    case left(AppID, generation: UInt64, sequence: UInt32, at: Instant)
    /// The answer to performFetch or didReceiveRemoteNotification.
    case completed(AppID, generation: UInt64, sequence: UInt32, result: WakeResult)
    case beginBackgroundTask(AppID, generation: UInt64, request: UInt32, name: String)
    case endBackgroundTask(AppID, generation: UInt64, task: TaskID)
    case protocolViolation(AppID, generation: UInt64, message: String)
    /// A plain program said READY=1 on its notification socket.
    case ready(AppID, generation: UInt64)
    /// A prewarmed library app is at its first event (Prewarm.swift).
    case prewarmed(AppID, generation: UInt64)
    /// The app's footprint, measured outside a memory sample: a prewarm
    /// once held (its cost against the budget, Prewarm.swift).
    case measured(AppID, generation: UInt64, footprint: UInt64)
    /// The kernel confirmed the freeze of a suspended app (cgroup.events):
    /// its freeze deadline is over.
    case frozen(AppID, generation: UInt64)
    /// The shell holds the app from freezing (true) for a reason, or no
    /// longer (false): kept running in the background while held
    /// (docs/focus.md, "Holds").
    case hold(AppID, generation: UInt64, Hold, Bool)
    /// The kernel refused to freeze it (the shell retries meanwhile): the
    /// reason a kill at the freeze deadline gives.
    case freezeRefused(AppID, generation: UInt64, why: String)

    /// The reclaim asked for by `.reclaim` is over (done, cut short, or
    /// lost with a daemon that died meanwhile).
    case reclaimed(AppID, generation: UInt64)

    /// What the shell measured of memory: the core turns it into a level
    /// (with hysteresis), warns, enforces per-app limits and, at critical,
    /// kills one app.
    case memory(MemoryReport)
    /// A level injected by `supervisorctl pressure`, with the latest
    /// measurements for the record; the next `.memory` report takes over.
    case simulateMemoryLevel(MemoryLevel, MemoryReport)

    /// Time has passed: fire every timer that is due.
    case tick
}

extension Input {
    /// The display commands on every display, by the names users know.
    public static var home: Input { .display(nil, .home) }
    public static var interruptionBegan: Input { .display(nil, .interruptionBegan) }
    public static var interruptionEnded: Input { .display(nil, .interruptionEnded) }
    public static var lock: Input { .display(nil, .lock) }
    public static var unlock: Input { .display(nil, .unlock) }
}
