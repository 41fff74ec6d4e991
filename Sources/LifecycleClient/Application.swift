@preconcurrency import Glibc
import LifecycleWire

/// The state of the app, as docs/lifecycle.md names it (the app only ever sees
/// itself running: inactive, active or background).
public enum ApplicationState: String, Sendable {
    case inactive, active, background
}

/// The launch options of the current run: why it was launched, and why
/// the previous run ended (so the app can restore its state).
public struct LaunchOptions: Sendable, Equatable {
    public var launchedInBackground: Bool
    /// A stable code: exited, launch-watchdog, stopped-by-user, ...; nil on a first run.
    public var previousTerminationReason: String?
    public var previousTerminationDescription: String?
    /// Seconds since the epoch.
    public var previousTerminationTime: Double?
    /// Why this run was launched: user, relaunch, fetch, remote-notification, url.
    public var reason: String?
    /// Launched to open this URL.
    public var url: String?
    /// A remote notification's JSON payload: the one it was launched for,
    /// or one held for it while it could not be woken.
    public var pushPayload: String?
    /// What the app saved with `saveRestorationData` in an earlier run
    /// (discarded when the user quit it, or it crashed while launching).
    public var restorationData: [UInt8]?
    /// Every option as sent, for forward compatibility.
    public var all: [String: String]

    init(_ event: EventMessage, restoration: [UInt8]? = nil) {
        var all: [String: String] = [:]
        for kv in event.options { all[kv.key] = kv.value }
        self.all = all
        launchedInBackground = event.launchedInBackground
        previousTerminationReason = all[LaunchOptionKey.previousReason.rawValue]
        previousTerminationDescription = all[LaunchOptionKey.previousDescription.rawValue]
        previousTerminationTime = all[LaunchOptionKey.previousTime.rawValue].flatMap(Double.init)
        reason = all[LaunchOptionKey.reason.rawValue]
        url = all[LaunchOptionKey.url.rawValue]
        pushPayload = all[LaunchOptionKey.pushPayload.rawValue]
        restorationData = all[LaunchOptionKey.restorationSize.rawValue] != nil ? restoration : nil
    }

    init(standalone: Void) {
        launchedInBackground = false
        all = [LaunchOptionKey.launchMode.rawValue: LaunchMode.foreground.rawValue]
    }
}

/// What a background fetch or a remote notification found
/// (UIBackgroundFetchResult): the daemon schedules the app's next fetches by
/// it. The vocabulary's own type, under the name apps know.
public typealias FetchResult = WakeResult

/// Receives the app's lifecycle callbacks, on the main thread, one at a
/// time. Each callback's return is its acknowledgement: return before the
/// deadline (5 s by default) or be killed. Every method has a default that
/// does nothing.
@MainActor
public protocol ApplicationDelegate: AnyObject {
    func willFinishLaunching(_ application: Application, options: LaunchOptions)
    func didFinishLaunching(_ application: Application, options: LaunchOptions)
    func didBecomeActive(_ application: Application)
    func willResignActive(_ application: Application)
    func didEnterBackground(_ application: Application)
    func willEnterForeground(_ application: Application)
    func willTerminate(_ application: Application)
    /// Memory runs short: free what can be rebuilt (caches, images).
    func didReceiveMemoryWarning(_ application: Application)
    /// The app is about to be killed to free memory (only when its manifest
    /// sets `memory.last_notice`): save what must survive, quickly (250 ms
    /// by default). The kill follows the return, or the deadline.
    func willBeKilledForMemory(_ application: Application)
    /// A background fetch (fetch mode): get new content within the deadline
    /// (30 s by default) and say what came of it. The app is suspended again
    /// after the return.
    func performFetch(_ application: Application) -> FetchResult
    /// A remote notification (remote-notification mode), its JSON payload;
    /// answered like a fetch, within the same kind of deadline.
    func didReceiveRemoteNotification(_ application: Application, payload: String) -> FetchResult
    /// Open a URL of a scheme the manifest lists; the app is on its way to the front.
    func openURL(_ application: Application, url: String)
    /// A scene app's: the URL opens in this scene (by default, `openURL(_:url:)`).
    func openURL(_ application: Application, url: String, in scene: Scene)
    /// Scenes (manifest `scenes = true`): the delegate of a scene being
    /// connected, kept for as long as it is (nil: its events only update
    /// `Application.scenes`).
    func sceneDelegate(_ application: Application, for scene: Scene) -> (any SceneDelegate)?
    /// The user discarded these scene sessions (the app switcher's swipe):
    /// forget what was kept for them. Right away, or after the next launch.
    func didDiscardSceneSessions(_ application: Application, scenes: [String])
}

/// The callbacks of one scene (UIWindowSceneDelegate's): on the main thread,
/// one at a time, each return its acknowledgement. The app-level callbacks
/// come too, ordered so that the app is never less active than any scene.
@MainActor
public protocol SceneDelegate: AnyObject {
    func sceneWillConnect(_ scene: Scene)
    func sceneWillEnterForeground(_ scene: Scene)
    func sceneDidBecomeActive(_ scene: Scene)
    func sceneWillResignActive(_ scene: Scene)
    func sceneDidEnterBackground(_ scene: Scene)
    /// The scene is gone (its session stays unless it is discarded).
    func sceneDidDisconnect(_ scene: Scene)
}

extension SceneDelegate {
    public func sceneWillConnect(_ scene: Scene) {}
    public func sceneWillEnterForeground(_ scene: Scene) {}
    public func sceneDidBecomeActive(_ scene: Scene) {}
    public func sceneWillResignActive(_ scene: Scene) {}
    public func sceneDidEnterBackground(_ scene: Scene) {}
    public func sceneDidDisconnect(_ scene: Scene) {}
}

/// One connected scene (UIScene): its name, the display it is on, and its
/// state, already updated when its callback runs.
@MainActor
public final class Scene {
    public let name: String
    public internal(set) var display: String
    public internal(set) var state: SceneState
    /// Connected before (after a relaunch, or a disconnection for memory):
    /// restore what it showed.
    public internal(set) var restored: Bool
    /// Connected to open this URL (the app was launched for it): a connection option.
    public internal(set) var url: String?
    public internal(set) var delegate: (any SceneDelegate)?

    init(name: String, display: String, state: SceneState, restored: Bool) {
        self.name = name
        self.display = display
        self.state = state
        self.restored = restored
    }
}

extension ApplicationDelegate {
    public func willFinishLaunching(_ application: Application, options: LaunchOptions) {}
    public func didFinishLaunching(_ application: Application, options: LaunchOptions) {}
    public func didBecomeActive(_ application: Application) {}
    public func willResignActive(_ application: Application) {}
    public func didEnterBackground(_ application: Application) {}
    public func willEnterForeground(_ application: Application) {}
    public func willTerminate(_ application: Application) {}
    public func didReceiveMemoryWarning(_ application: Application) {}
    public func willBeKilledForMemory(_ application: Application) {}
    public func performFetch(_ application: Application) -> FetchResult { .noData }
    public func didReceiveRemoteNotification(_ application: Application, payload: String) -> FetchResult { .noData }
    public func openURL(_ application: Application, url: String) {}
    public func openURL(_ application: Application, url: String, in scene: Scene) {
        openURL(application, url: url)
    }
    public func sceneDelegate(_ application: Application, for scene: Scene) -> (any SceneDelegate)? { nil }
    public func didDiscardSceneSessions(_ application: Application, scenes: [String]) {}
}

/// Identifies a background task; `.invalid` when none could be begun.
public struct BackgroundTaskIdentifier: Hashable, Sendable {
    public let rawValue: UInt32
    public static let invalid = BackgroundTaskIdentifier(rawValue: 0)
}

/// The app's side of lifecycled: like UIApplication. Create none yourself:
/// `Application.main(delegate:)` runs the app and passes it to every callback.
@MainActor
public final class Application {
    public private(set) var state: ApplicationState = .inactive
    /// True when started by lifecycled; false when run standalone.
    public let isSupervised: Bool
    public private(set) var launchOptions: LaunchOptions?
    /// The name lifecycled knows the app by.
    public let name: String?
    /// Its connected scenes, by name (apps whose manifest sets `scenes = true`).
    public private(set) var scenes: [String: Scene] = [:]

    let channel: Channel?
    let delegate: any ApplicationDelegate
    var budgetEnd: Int64?
    var nextRequest: UInt32 = 1
    var expirationHandlers: [UInt32: () -> Void] = [:]
    var pending: [DaemonMessage] = []
    var timers: [(at: Int64, id: Int, body: () -> Void)] = []
    var nextTimer = 0
    var finished = false
    /// How long beginBackgroundTask waits for the daemon's reply, in ms
    /// (LIFECYCLE_TASK_REPLY_TIMEOUT_MS in C; the daemon answers at once).
    var taskReplyTimeoutMilliseconds: Int64 = 5000
    /// Restoration data received just before willFinishLaunching.
    var restoration: [UInt8]?
    /// The channel error, once there was one: final. Nothing is sent after
    /// it, and the loop ends with it (`main` then exits with status 1).
    var channelError: ChannelError?

    init(delegate: any ApplicationDelegate, channel: Channel?) {
        self.delegate = delegate
        self.channel = channel
        isSupervised = channel != nil
        name = getenv(Wire.appNameEnvironmentKey).map { String(cString: $0) }
    }

    /// Runs the app until lifecycled terminates it (like UIApplicationMain).
    /// Outside lifecycled it says so on stderr, delivers the launch events
    /// and didBecomeActive itself, and runs until SIGINT or SIGTERM.
    public static func main(delegate: any ApplicationDelegate) -> Never {
        let app = Application(delegate: delegate, channel: Channel.inherited())
        if let error = app.run() {
            fputs(error.notice(app: app.name) + "; exiting\n", stderr)
            exit(1)
        }
        exit(0)
    }

    // MARK: Background tasks

    /// Asks for time to finish work in the background. Returns `.invalid`
    /// when no time is left, when the daemon does not answer within 5 s (a
    /// reply that comes later has its task ended), or on a channel error
    /// (the app then exits when its callback returns). Call
    /// `endBackgroundTask` when done: when the last task ends in the
    /// background, the app is suspended. The handler
    /// runs shortly (5 s by default) before the time runs out; tasks still
    /// open when it does are killed with the app.
    public func beginBackgroundTask(name: String? = nil, expirationHandler: (() -> Void)? = nil)
        -> BackgroundTaskIdentifier
    {
        guard let channel else { return BackgroundTaskIdentifier(rawValue: nextRequestID()) }
        let request = nextRequestID()
        guard channelError == nil else { return .invalid }
        channel.send(.beginBackgroundTask(request: request, name: name ?? "task-\(request)"))
        // The daemon answers at once. Other messages meanwhile are kept in
        // order, at most Wire.maxQueuedWhileWaiting of them, as in the C library.
        let giveUp = monotonicNanoseconds() + taskReplyTimeoutMilliseconds * 1_000_000
        while true {
            let left = giveUp - monotonicNanoseconds()
            // Given up: should the reply still come, `handle` ends its task.
            guard left > 0 else { return .invalid }
            switch channel.receive(timeoutMilliseconds: Int32(clamping: (left + 999_999) / 1_000_000)) {
            case .message(.backgroundTaskReply(let r, let task, let end)) where r == request:
                if end != nil { budgetEnd = end }
                guard let task else { return .invalid }
                channel.taskBegan(task)
                if let expirationHandler { expirationHandlers[task] = expirationHandler }
                return BackgroundTaskIdentifier(rawValue: task)
            case .message(.backgroundTaskReply(_, let task, _)):
                endStaleTask(task)  // the reply to an earlier request that gave up
            case .message(let other):
                guard pending.count < Wire.maxQueuedWhileWaiting else {
                    fail(.tooManyQueued)
                    return .invalid
                }
                pending.append(other)
            case .timeout: continue
            // The daemon restarted: whether it granted the task is not known
            // here, and a task it holds that the resume did not name is ended.
            case .resumed: return .invalid
            case .closed: fail(.closed); return .invalid
            case .violation(let why): fail(.protocolViolation(why)); return .invalid
            }
        }
    }

    // MARK: State restoration

    /// Asks the daemon to keep `data` (at most 64 KiB) and hand it back in
    /// the launch options of the next launch, so that an app killed while
    /// suspended comes back where it was. Typically called in
    /// didEnterBackground; each call replaces the last, and empty data
    /// forgets it. False when it is too large (nothing is sent), or when
    /// not supervised.
    @discardableResult
    public func saveRestorationData(_ data: [UInt8]) -> Bool {
        guard channel != nil, data.count <= Wire.maxRestorationSize, channelError == nil else { return false }
        send(.saveRestoration(data))
        return true
    }

    public func endBackgroundTask(_ id: BackgroundTaskIdentifier) {
        guard id != .invalid else { return }
        expirationHandlers[id.rawValue] = nil
        send(.endBackgroundTask(task: id.rawValue))
    }

    /// A reply nobody waits for any more (its request gave up waiting): the
    /// daemon holds its task all the same, and would keep the app in the
    /// background on it and kill it when it expires. End it at once.
    func endStaleTask(_ task: UInt32?) {
        if let task { send(.endBackgroundTask(task: task)) }
    }

    /// Background time left for background tasks; nil in the foreground or
    /// with a continuous background mode (no budget applies).
    public var backgroundTimeRemaining: Duration? {
        guard state == .background, let end = budgetEnd else { return nil }
        return .nanoseconds(max(0, end - monotonicNanoseconds()))
    }

    private func nextRequestID() -> UInt32 {
        defer { nextRequest &+= 1 }
        return nextRequest
    }

    // MARK: Work on the main loop

    /// Runs `body` on the main loop after `delay`, between callbacks. While
    /// the app is suspended nothing runs; the timer fires after thawing.
    @discardableResult
    public func schedule(after delay: Duration, _ body: @escaping () -> Void) -> Int {
        nextTimer += 1
        timers.append((monotonicNanoseconds() + delay.nanosecondsValue, nextTimer, body))
        return nextTimer
    }

    public func cancelScheduled(_ id: Int) { timers.removeAll { $0.id == id } }

    /// Ends the app after the current callback (like exit(0), but clean).
    public func finish() { finished = true }

    // MARK: The loop

    /// Runs until the app finishes; returns the channel error that ended
    /// the loop, if one did.
    func run() -> ChannelError? {
        guard let channel else {
            runStandalone()
            return nil
        }
        while !finished, channelError == nil {
            let message: DaemonMessage
            if !pending.isEmpty {
                message = pending.removeFirst()
            } else {
                switch channel.receive(timeoutMilliseconds: runDueTimers()) {
                case .timeout, .resumed: continue
                case .closed: fail(.closed); continue
                case .violation(let why): fail(.protocolViolation(why)); continue
                case .message(let m): message = m
                }
            }
            handle(message)
        }
        return channelError
    }

    /// Records a channel error; the first one stays.
    func fail(_ error: ChannelError) {
        if channelError == nil { channelError = error }
    }

    /// Sends, unless the channel failed.
    func send(_ message: AppMessage) {
        guard channelError == nil else { return }
        channel?.send(message)
    }

    func handle(_ message: DaemonMessage) {
        switch message {
        case .event(let e):
            if let end = e.budgetEnd { budgetEnd = end }
            if let result = dispatch(e) {
                send(.complete(sequence: e.sequence, result: result))
            } else {
                send(.acknowledge(sequence: e.sequence))
            }
            if e.event == .willTerminate { exit(0) }
        case .restoration(let data): restoration = data
        case .backgroundTasksExpiring(let tasks):
            for t in tasks { expirationHandlers.removeValue(forKey: t)?() }
        case .backgroundTaskReply(_, let task, _):
            endStaleTask(task)  // an answer nobody waits for any more
        case .resumed: break  // only ever the answer to a resume, which the channel reads
        }
    }

    /// Runs the event's callback; for a wake-up, returns its answer.
    func dispatch(_ e: EventMessage) -> FetchResult? {
        if let problem = e.sceneProblem() {
            fail(.protocolViolation(problem))
            return nil
        }
        switch e.event {
        case .willFinishLaunching:
            launchOptions = LaunchOptions(e, restoration: restoration)
            restoration = nil
            state = e.launchedInBackground ? .background : .inactive
            delegate.willFinishLaunching(self, options: launchOptions!)
        case .didFinishLaunching: delegate.didFinishLaunching(self, options: launchOptions ?? LaunchOptions(e))
        case .didBecomeActive: state = .active; delegate.didBecomeActive(self)
        case .willResignActive: state = .inactive; delegate.willResignActive(self)
        case .didEnterBackground: state = .background; delegate.didEnterBackground(self)
        case .willEnterForeground: state = .inactive; budgetEnd = nil; delegate.willEnterForeground(self)
        case .willTerminate: delegate.willTerminate(self)
        case .didReceiveMemoryWarning: delegate.didReceiveMemoryWarning(self)
        case .willBeKilledForMemory: delegate.willBeKilledForMemory(self)
        case .performFetch: return delegate.performFetch(self)
        case .didReceiveRemoteNotification:
            let payload = e.option(LaunchOptionKey.pushPayload.rawValue) ?? "{}"
            return delegate.didReceiveRemoteNotification(self, payload: payload)
        case .openURL:
            let url = e.option(LaunchOptionKey.eventURL) ?? ""
            if let scene = e.option(SceneOptionKey.scene).flatMap({ scenes[$0] }) {
                delegate.openURL(self, url: url, in: scene)
            } else {
                delegate.openURL(self, url: url)
            }
        case .didDiscardSceneSessions: delegate.didDiscardSceneSessions(self, scenes: e.discardedScenes)
        case .sceneWillConnect, .sceneWillEnterForeground, .sceneDidBecomeActive, .sceneWillResignActive,
            .sceneDidEnterBackground, .sceneDidDisconnect:
            dispatchScene(e)
        }
        return nil
    }

    /// A scene event: the scene (added when new) moves, then its delegate hears.
    func dispatchScene(_ e: EventMessage) {
        let name = e.option(SceneOptionKey.scene)!
        let scene: Scene
        if let known = scenes[name] {
            scene = known
        } else {
            guard scenes.count < EventMessage.maxScenes else {
                return fail(
                    .protocolViolation(
                        "\(e.event.rawValue): \(scenes.count + 1) scenes connected, more than \(EventMessage.maxScenes)"
                    ))
            }
            scene = Scene(name: name, display: "", state: .unattached, restored: false)
            scenes[name] = scene
        }
        if let display = e.option(SceneOptionKey.display) { scene.display = display }
        scene.state = e.event.sceneState!
        if e.event == .sceneWillConnect {
            scene.restored = e.option(SceneOptionKey.session) == "restored"
            scene.url = e.option(LaunchOptionKey.eventURL)
            scene.delegate = delegate.sceneDelegate(self, for: scene)
        }
        switch e.event.sceneEvent! {
        case .willConnect: scene.delegate?.sceneWillConnect(scene)
        case .willEnterForeground: scene.delegate?.sceneWillEnterForeground(scene)
        case .didBecomeActive: scene.delegate?.sceneDidBecomeActive(scene)
        case .willResignActive: scene.delegate?.sceneWillResignActive(scene)
        case .didEnterBackground: scene.delegate?.sceneDidEnterBackground(scene)
        case .didDisconnect:
            scene.delegate?.sceneDidDisconnect(scene)
            scenes[name] = nil
        }
    }

    /// Runs every due timer; returns how long to wait for the next (ms, -1 none).
    func runDueTimers() -> Int32 {
        while let i = timers.indices.min(by: { timers[$0].at < timers[$1].at }), timers[i].at <= monotonicNanoseconds()
        {
            timers.remove(at: i).body()
        }
        guard let next = timers.map(\.at).min() else { return -1 }
        return Int32(clamping: max(1, (next - monotonicNanoseconds() + 999_999) / 1_000_000))
    }

    func runStandalone() {
        fputs(
            """
            \(CommandLine.arguments.first ?? "app"): not started by lifecycled \
            ($\(Wire.socketEnvironmentKey) is not set): \
            running standalone. Launch events and didBecomeActive are simulated; SIGINT or SIGTERM ends the app \
            with willResignActive, didEnterBackground and willTerminate.\n
            """, stderr)
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &set, nil)
        let options = LaunchOptions(standalone: ())
        launchOptions = options
        delegate.willFinishLaunching(self, options: options)
        delegate.didFinishLaunching(self, options: options)
        state = .active
        delegate.didBecomeActive(self)
        while !finished {
            let wait = runDueTimers()
            var ts = timespec(
                tv_sec: Int(wait < 0 ? 3600 : wait / 1000), tv_nsec: Int(wait < 0 ? 0 : (wait % 1000) * 1_000_000))
            if sigtimedwait(&set, nil, &ts) > 0 { break }
        }
        state = .inactive
        delegate.willResignActive(self)
        state = .background
        delegate.didEnterBackground(self)
        delegate.willTerminate(self)
    }
}

extension Duration {
    var nanosecondsValue: Int64 {
        let (s, a) = components
        return s * 1_000_000_000 + a / 1_000_000_000
    }
}
