import ArgumentParser
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import LifecycleControl

// Scenes and displays: discard (the app switcher's swipe) and the scenes
// view. activate --display/--scene, home, interruption, lock and unlock
// --display are in LifeCommands.swift.

struct Discard: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "discard",
        abstract: "Discard one scene of an app, as the app switcher's swipe does.",
        discussion: """
            The scene is disconnected (through the background when it is in front), its session \
            forgotten, and the app told with didDiscardSceneSessions: at once when it runs, after \
            its next launch when it does not (a suspended app is told when it next runs). Only \
            for apps whose manifest sets scenes = true: quit the others with stop.
            """)
    @OptionGroup var connection: Connection
    @OptionGroup var waiting: Waiting
    @Argument(completion: .custom(appNames)) var app: String
    @Argument(help: "The scene.") var scene: String
    func run() throws {
        var request = ControlRequest(.discard, app: app)
        request.scene = scene
        try connection.requestAndWait(request, waiting)  // a suspended app: nothing to wait for (Goal.of)
    }
}

struct Scenes: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scenes",
        abstract: "Show each display's front, and every scene of every app (or of the ones named).")
    @OptionGroup var connection: Connection
    @Flag(help: "The status JSON's displays and each app's scenes.") var json = false
    @Argument(help: "Apps to show (default: all).", completion: .custom(appNames)) var apps: [String] = []

    func run() throws {
        let report = try connection.request(ControlRequest(.status, apps: apps.isEmpty ? nil : apps)).status!
        if json {
            struct View: Encodable {
                var displays: [DisplayStatus]
                var scenes: [String: [SceneStatus]]
            }
            let e = JSONEncoder()
            e.outputFormatting = [.sortedKeys]
            let view = View(
                displays: report.daemon.displays ?? [],
                scenes: Dictionary(uniqueKeysWithValues: report.apps.map { ($0.name, $0.scenes ?? []) }))
            print(String(decoding: try e.encode(view), as: UTF8.self))
        } else {
            print(Self.render(report))
        }
    }

    static func render(_ report: StatusReport) -> String {
        var displays = [["DISPLAY", "SLOTS", "FRONT", ""]]
        for d in report.daemon.displays ?? [] {
            var notes: [String] = []
            if d.locked { notes.append(d.sessionLocked == true ? "locked (session)" : "locked") }
            if d.interruptions > 0 { notes.append("interrupted") }
            if d.overlay == true { notes.append("overlay") }
            displays.append([
                d.name, "\(d.slots)", d.front.isEmpty ? "-" : d.front.joined(separator: ", "),
                notes.joined(separator: ", "),
            ])
        }
        var rows = [["APP", "SCENE", "DISPLAY", "STATE", ""]]
        for a in report.apps {
            for s in a.scenes ?? [] {
                var notes: [String] = []
                if s.inFront { notes.append("in front") }
                if s.discarding == true { notes.append("discarding") }
                if s.shed == true { notes.append("disconnected for memory") }
                rows.append([a.name, s.name, s.display, s.state.rawValue, notes.joined(separator: ", ")])
            }
        }
        return Table.render(displays) + "\n\n" + (rows.count > 1 ? Table.render(rows) : "no scenes")
    }
}
