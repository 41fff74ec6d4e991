@preconcurrency import Glibc
import LifecycleWire

/// The app's side of lifecycled: like UIApplication. Create none yourself:
/// `Application.main(delegate:)` runs the app and passes it to every callback.
@MainActor
public final class Application {
    public private(set) var state: ApplicationState = .inactive
    /// True when started by lifecycled; false when run standalone.
    public let isSupervised: Bool
    public private(set) var launchOptions: LaunchOptions?
    /// A prewarmed app's rehearsal of its launch (Channel.waitingForEvents).
    private var rehearsal: LaunchOptions?
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
        channel.waitingForEvents { options in
            // What dispatch does with a launch's options, on a property of
            // the same type: the metadata it needs is made here.
            rehearsal = options
            rehearsal = nil
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
