import CLifecycleHeader
import Foundation
import LifecycleWire
import Testing

/// The protocol is written twice: in Swift (LifecycleModel, LifecycleWire)
/// and in C for the C client (clib/include/lifecycle.h). No generator keeps
/// the two in step; this suite does. It imports the header itself (the
/// CLifecycleHeader target), so it compares what a C app compiles against.
@Suite struct HeaderAgreementTests {
    /// The header's constant for each event. The switch is exhaustive: an
    /// event added to LifecycleEvent does not compile here until the header
    /// has its constant.
    static func header(_ event: LifecycleEvent) -> lifecycle_event {
        switch event {
        case .willFinishLaunching: LIFECYCLE_EVENT_WILL_FINISH_LAUNCHING
        case .didFinishLaunching: LIFECYCLE_EVENT_DID_FINISH_LAUNCHING
        case .didBecomeActive: LIFECYCLE_EVENT_DID_BECOME_ACTIVE
        case .willResignActive: LIFECYCLE_EVENT_WILL_RESIGN_ACTIVE
        case .didEnterBackground: LIFECYCLE_EVENT_DID_ENTER_BACKGROUND
        case .willEnterForeground: LIFECYCLE_EVENT_WILL_ENTER_FOREGROUND
        case .willTerminate: LIFECYCLE_EVENT_WILL_TERMINATE
        case .didReceiveMemoryWarning: LIFECYCLE_EVENT_DID_RECEIVE_MEMORY_WARNING
        case .willBeKilledForMemory: LIFECYCLE_EVENT_WILL_BE_KILLED_FOR_MEMORY
        case .performFetch: LIFECYCLE_EVENT_PERFORM_FETCH
        case .didReceiveRemoteNotification: LIFECYCLE_EVENT_DID_RECEIVE_REMOTE_NOTIFICATION
        case .openURL: LIFECYCLE_EVENT_OPEN_URL
        case .sceneWillConnect: LIFECYCLE_EVENT_SCENE_WILL_CONNECT
        case .sceneWillEnterForeground: LIFECYCLE_EVENT_SCENE_WILL_ENTER_FOREGROUND
        case .sceneDidBecomeActive: LIFECYCLE_EVENT_SCENE_DID_BECOME_ACTIVE
        case .sceneWillResignActive: LIFECYCLE_EVENT_SCENE_WILL_RESIGN_ACTIVE
        case .sceneDidEnterBackground: LIFECYCLE_EVENT_SCENE_DID_ENTER_BACKGROUND
        case .sceneDidDisconnect: LIFECYCLE_EVENT_SCENE_DID_DISCONNECT
        case .didDiscardSceneSessions: LIFECYCLE_EVENT_DID_DISCARD_SCENE_SESSIONS
        }
    }

    /// "didEnterBackground" -> "DID_ENTER_BACKGROUND", "openURL" -> "OPEN_URL",
    /// as the header spells them (a run of capitals is one word).
    static func upperSnake(_ name: String) -> String {
        var out = ""
        var previousUpper = false
        for c in name {
            if c.isUppercase, !out.isEmpty, !previousUpper { out += "_" }
            previousUpper = c.isUppercase
            out += c.uppercased()
        }
        return out
    }

    static let headerText: String = {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("clib/include/lifecycle.h").path
        return (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }()

    /// Every `LIFECYCLE_EVENT_NAME = N` of the header's enum, by NAME.
    static func headerEvents() -> [String: Int] {
        var events: [String: Int] = [:]
        for match in headerText.matches(of: #/LIFECYCLE_EVENT_([A-Z0-9_]+)\s*=\s*([0-9]+)/#) {
            events[String(match.output.1)] = Int(match.output.2)
        }
        return events
    }

    @Test func everyEventHasTheHeadersCode() {
        for event in LifecycleEvent.allCases {
            #expect(UInt32(event.wireCode) == Self.header(event).rawValue, "\(event)")
        }
        #expect(LIFECYCLE_EVENT_NONE.rawValue == 0)
        #expect(LifecycleEvent(wireCode: 0) == nil, "0 is the header's LIFECYCLE_EVENT_NONE, never an event")
    }

    /// The same from the other side, by name: the header has exactly the
    /// events Swift has, each named after its Swift case, none more (a code
    /// the header has and Swift lacks would be rejected by the daemon's
    /// peers but handled by C apps, or the other way round).
    @Test func theHeaderHasExactlyTheseEvents() {
        var inHeader = Self.headerEvents()
        #expect(inHeader.removeValue(forKey: "NONE") == 0)
        let inSwift = Dictionary(
            uniqueKeysWithValues: LifecycleEvent.allCases.map {
                (Self.upperSnake($0.rawValue), Int($0.wireCode))
            })
        #expect(inHeader.count == LifecycleEvent.allCases.count)
        #expect(inHeader == inSwift)
        #expect(inHeader.values.max() == LifecycleEvent.allCases.map { Int($0.wireCode) }.max())
    }

    /// lifecycle_callbacks has one callback per event, named after it.
    /// The C library's lifecycle_event_name() spells every event as Swift
    /// does, and names nothing else (read from its source, which this
    /// target does not link).
    @Test func theCLibraryNamesEveryEventAsSwiftDoes() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("clib/src/lifecycle.c").path
        let source = try String(contentsOfFile: path, encoding: .utf8)
        let start = try #require(source.range(of: "lifecycle_event_name(lifecycle_event event) {"))
        let body = source[start.upperBound...].prefix { $0 != "}" }
        var names: [String: String] = [:]
        for match in body.matches(of: #/case LIFECYCLE_EVENT_([A-Z0-9_]+): return "([A-Za-z]+)";/#) {
            names[String(match.output.1)] = String(match.output.2)
        }
        var expected: [String: String] = [:]
        for event in LifecycleEvent.allCases { expected[Self.upperSnake(event.rawValue)] = event.rawValue }
        #expect(names == expected)
    }

    @Test func everyEventHasACallback() throws {
        let start = try #require(Self.headerText.range(of: "typedef struct lifecycle_callbacks {"))
        let end = try #require(
            Self.headerText.range(of: "} lifecycle_callbacks;", range: start.upperBound..<Self.headerText.endIndex))
        let body = Self.headerText[start.upperBound..<end.lowerBound]
        let callbacks = Set(
            body.matches(of: #/lifecycle_(?:event|scene|discard)_fn\s+([a-z_]+);/#).map { String($0.output.1) })
        #expect(callbacks == Set(LifecycleEvent.allCases.map { Self.upperSnake($0.rawValue).lowercased() }))
    }

    @Test func limitsAndVersionAgree() {
        #expect(Int(LIFECYCLE_PROTOCOL_VERSION) == Int(Wire.version))
        #expect(Int(LIFECYCLE_MAX_MESSAGE) == Wire.maxMessageSize)
        #expect(Int(LIFECYCLE_MAX_TASK_NAME) == Wire.maxTaskName)
        #expect(Int(LIFECYCLE_RESUME_WAIT_MS) == Wire.resumeWaitMilliseconds)
    }

    @Test func environmentNamesAgree() {
        #expect(LIFECYCLE_FD_ENV == Wire.socketEnvironmentKey)
        #expect(LIFECYCLE_APP_ENV == Wire.appNameEnvironmentKey)
        #expect(LIFECYCLE_PROTOCOL_ENV == Wire.protocolEnvironmentKey)
        #expect(LIFECYCLE_RESUME_SOCKET_ENV == Wire.resumeSocketEnvironmentKey)
    }
}
