import Dispatch
@preconcurrency import Glibc
import LifecycleWire

/// One lifecycle event from the async API.
public struct LifecycleEventInfo: Sendable, Equatable {
    /// As docs/lifecycle.md spells it: willResignActive, didEnterBackground, ...
    public var name: String
    public var sequence: UInt32
    /// CLOCK_MONOTONIC nanoseconds by which it must be acknowledged.
    public var deadline: Int64?
    /// In the background: when the background budget ends.
    public var budgetEnd: Int64?
    /// For launch events.
    public var launchOptions: LaunchOptions?
    /// didReceiveRemoteNotification: the JSON payload.
    public var payload: String?
    /// openURL: the URL.
    public var url: String?
    /// Scene events (and openURL to a scene app): the scene, its display,
    /// and for sceneWillConnect whether its session is restored.
    public var scene: String?
    public var display: String?
    public var restored: Bool?
    /// didDiscardSceneSessions: the scenes discarded.
    public var discardedScenes: [String]?
}

/// The lifecycle as an async sequence, for apps that prefer `for await` to
/// a delegate:
///
///     guard let events = LifecycleEvents.connect() else { ... standalone ... }
///     for await event in events {
///         switch event.name { case "didEnterBackground": await save(); default: break }
///     }   // each event is acknowledged when the loop asks for the next one
///
/// The previous event is acknowledged when `next()` is called again, so the
/// body of the loop is the callback; `acknowledge(_:)` does it earlier.
/// After willTerminate the sequence ends: exit promptly. It also ends on a
/// channel error (the daemon closed the channel, or sent a message that does
/// not decode), which is written on stderr in the words `Application` uses.
/// Background tasks are part of the delegate API (`Application`).
public final class LifecycleEvents: AsyncSequence, Sendable {
    public typealias Element = LifecycleEventInfo
    let channel: Channel

    init(channel: Channel) { self.channel = channel }

    /// The inherited channel, or nil when not started by lifecycled.
    public static func connect() -> LifecycleEvents? { Channel.inherited().map(LifecycleEvents.init) }

    public func acknowledge(_ event: LifecycleEventInfo) {
        channel.send(.acknowledge(sequence: event.sequence))
    }

    /// Answers performFetch or didReceiveRemoteNotification with what the
    /// work found (left unanswered, the next `next()` says no data).
    public func complete(_ event: LifecycleEventInfo, _ result: FetchResult) {
        channel.send(.complete(sequence: event.sequence, result: result))
    }

    /// As Application.saveRestorationData: kept by the daemon, handed back
    /// at the next launch. False when larger than 64 KiB (nothing is sent).
    @discardableResult
    public func saveRestorationData(_ data: [UInt8]) -> Bool {
        guard data.count <= Wire.maxRestorationSize else { return false }
        channel.send(.saveRestoration(data))
        return true
    }

    public func makeAsyncIterator() -> Iterator { Iterator(channel: channel) }

    public struct Iterator: AsyncIteratorProtocol {
        let channel: Channel
        var unacknowledged: UInt32?
        var ended = false
        var restoration: [UInt8]?

        public mutating func next() async -> LifecycleEventInfo? {
            channel.waitingForEvents()
            if let s = unacknowledged { channel.send(.acknowledge(sequence: s)) }
            unacknowledged = nil
            if ended { return nil }
            while true {
                let channel = self.channel
                // The blocking wait runs off the cooperative pool.
                let received: Channel.Received = await withCheckedContinuation { c in
                    DispatchQueue.global().async { c.resume(returning: channel.receive(timeoutMilliseconds: -1)) }
                }
                let e: EventMessage
                switch received {
                case .message(.event(let event)): e = event
                case .message(.restoration(let data)):
                    restoration = data
                    continue
                case .message(.backgroundTaskReply(_, let task?, _)):
                    // Nobody here asked for it; end the task it carries, as Application does.
                    channel.send(.endBackgroundTask(task: task))
                    continue
                case .message, .timeout, .resumed: continue
                case .closed: return end(.closed)
                case .violation(let why): return end(.protocolViolation(why))
                }
                if let problem = e.sceneProblem() { return end(.protocolViolation(problem)) }
                unacknowledged = e.sequence
                if e.event == .willTerminate { ended = true }
                let launch = e.event == .willFinishLaunching || e.event == .didFinishLaunching
                let options = launch ? LaunchOptions(e, restoration: restoration) : nil
                if e.event == .didFinishLaunching { restoration = nil }
                return LifecycleEventInfo(
                    name: e.event.rawValue, sequence: e.sequence, deadline: e.deadline,
                    budgetEnd: e.budgetEnd, launchOptions: options,
                    payload: e.event == .didReceiveRemoteNotification
                        ? e.option(LaunchOptionKey.pushPayload.rawValue) : nil,
                    url: e.event == .openURL || e.event == .sceneWillConnect ? e.option(LaunchOptionKey.eventURL) : nil,
                    scene: e.option(SceneOptionKey.scene), display: e.option(SceneOptionKey.display),
                    restored: e.event == .sceneWillConnect ? e.option(SceneOptionKey.session) == "restored" : nil,
                    discardedScenes: e.event == .didDiscardSceneSessions ? e.discardedScenes : nil)
            }
        }

        /// A channel error ends the sequence, said on stderr.
        mutating func end(_ error: ChannelError) -> LifecycleEventInfo? {
            fputs(error.notice(app: getenv(Wire.appNameEnvironmentKey).map { String(cString: $0) }) + "\n", stderr)
            ended = true
            return nil
        }
    }
}
