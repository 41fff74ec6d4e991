import Foundation
@testable import LifecycleDaemon
import LifecycleControl
@testable import LifecycleCore
import LifecycleOS
import Testing

/// The daemon's half of the D-Bus interface that needs no bus: a call as
/// the JSON request it stands for, and the error names.
@Suite struct BusServiceTests {
    static func call(
        _ verb: String, app: String? = "a", scene: String? = nil, display: String? = nil,
        background: Bool? = nil, argument: String? = nil
    ) -> BusFront.Request {
        BusFront.Request(
            verb: verb, app: app, scene: scene, display: display, background: background, argument: argument,
            sender: ":1.1", uid: 0, pid: nil, groups: [])
    }

    @Test func aCallIsTheJSONRequestItStandsFor() throws {
        let activate = try Daemon.controlRequest(Self.call("Activate", scene: "s", display: "d")).get()
        #expect(
            activate.command == .activate && activate.app == "a" && activate.scene == "s" && activate.display == "d")
        let launch = try Daemon.controlRequest(Self.call("Launch", background: true)).get()
        #expect(launch.command == .launch && launch.background == true)
        #expect(try Daemon.controlRequest(Self.call("Push", argument: "{}")).get().payload == "{}")
        #expect(try Daemon.controlRequest(Self.call("Signal", argument: "TERM")).get().signal == "TERM")
        #expect(try Daemon.controlRequest(Self.call("OpenURL", app: nil, argument: "x:y")).get().url == "x:y")
        #expect(try Daemon.controlRequest(Self.call("Home", app: nil, display: "d")).get().display == "d")
    }

    @Test func optionsThatDoNotApplyAreNamed() {
        #expect(
            Daemon.controlRequest(Self.call("Stop", scene: "s"))
                == .failure(BadCall(message: "option 'scene' does not apply to Stop")))
        #expect(
            Daemon.controlRequest(Self.call("Activate", background: false))
                == .failure(BadCall(message: "option 'background' does not apply to Activate")))
        #expect(
            Daemon.controlRequest(Self.call("Home", app: nil, scene: "s"))
                == .failure(BadCall(message: "option 'scene' does not apply to Home")))
        #expect(
            Daemon.controlRequest(Self.call("Frobnicate")) == .failure(BadCall(message: "unknown method Frobnicate")))
    }

    /// Every refusal code is a valid D-Bus error name, CamelCase, and the
    /// message still starts with the code for scripts that match text.
    @Test func refusalsAreErrorNamesAndTheirMessagesStartWithTheCode() {
        let codes = [
            "already-running", "not-running", "stopping", "screen-locked", "already-locked", "not-locked",
            "session-locked",
            "no-interruption", "shutting-down", "mode-not-declared", "quit-by-user", "in-front", "fetch-in-progress",
            "bad-url", "unknown-scheme", "unknown-display", "no-scenes", "unknown-scene", "too-many-scenes",
            "bad-scene-name", "scene-needed", "cannot-reexec", "bad-config",
        ]
        let element = /^[A-Z][A-Za-z0-9]*$/
        for code in codes {
            let name = BusErrors.refused(code)
            let last = String(name.split(separator: ".").last ?? "")
            #expect(
                name.hasPrefix("io.lifecycled.Lifecycle1.Refused.") && last.wholeMatch(of: element) != nil, "\(name)")
            #expect(last.lowercased() == code.replacingOccurrences(of: "-", with: ""))
        }
        #expect(BusErrors.refused("screen-locked") == "io.lifecycled.Lifecycle1.Refused.ScreenLocked")
        let answer = BusErrors.answer(
            CommandFailure(code: .refused, message: "the screen is locked", refusal: "screen-locked"))
        #expect(
            answer
                == .error(
                    name: "io.lifecycled.Lifecycle1.Refused.ScreenLocked",
                    message: "screen-locked: the screen is locked"))
    }

    /// The interface's Version is the Makefile's.
    @Test func theVersionIsTheMakefiles() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
        let makefile = try String(contentsOfFile: root + "/Makefile", encoding: .utf8)
        let line = makefile.split(separator: "\n").first { $0.hasPrefix("VERSION ?= ") }
        #expect(line.map { String($0.dropFirst("VERSION ?= ".count)) } == LifecycleVersion.string)
    }

    /// A monitor's record (the Record signal), written by hand
    /// (EventRecord.sortedJSON): what JSONEncoder with sorted keys writes,
    /// for every kind of record and for one with every field (its kill
    /// record through JSONEncoder itself).
    @Test func aMonitorsRecordIsWhatJSONEncoderWithSortedKeysWrites() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let kill = KillRecord(
            time: 1, app: "a", pid: 7, reason: .memoryPressure, footprint: 1, swap: 2, limit: 3, killer: .kernel,
            peak: 4, state: .suspended, band: .high, level: .critical, simulated: true,
            reading: MemoryReading(available: 1, total: 2), candidates: [], lastNotice: true)
        var records = EventRecord.Kind.allCases.map { EventRecord(time: 0.5, monotonic: -1, app: "*", kind: $0) }
        records.append(
            EventRecord(
                time: 1_764_288_000.123456, monotonic: 2, app: "a \"quoted\"", kind: .jetsam, pid: 7,
                from: "suspended", to: "not-running", event: .willTerminate, sequence: 4, latencyMicroseconds: 5.5,
                reason: "memory-pressure", detail: "line\nbreak", kill: kill))
        for record in records {
            #expect(try record.sortedJSON() == String(decoding: try encoder.encode(record), as: UTF8.self))
        }
        // JSONEncoder writes a slash as \/, the writer as it is: the same JSON.
        let path = EventRecord(time: 1, monotonic: 1, app: "a", kind: .adopted, detail: "group /apps/a.1")
        let ours = try JSONSerialization.jsonObject(with: Data(path.sortedJSON().utf8)) as? NSDictionary
        let theirs = try JSONSerialization.jsonObject(with: encoder.encode(path)) as? NSDictionary
        #expect(ours != nil && ours == theirs)
    }
}
