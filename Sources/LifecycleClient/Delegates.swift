@preconcurrency import Glibc
import LifecycleWire

// What an app sees of lifecycled besides `Application` itself: its state,
// its launch options, the delegate protocols whose callbacks it implements
// (UIApplicationDelegate's and UIWindowSceneDelegate's), a scene, and a
// background task's identifier.

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
