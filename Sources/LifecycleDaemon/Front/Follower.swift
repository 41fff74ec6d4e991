#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleControl
import LifecycleCore
import LifecycleOS
import Logging

// A compositor's follower (lifecycled-follow, docs/focus.md) reports what
// is shown, as whole snapshots over the control socket. Here each window
// gets its app (the app whose cgroup holds its process; for a source that
// cannot tell the process, the app whose app_id it carries) and each
// output its display; the core's rules (LifecycleCore/Follow.swift) make
// the fronts. A follower that falls silent is shown `lost` and changes
// nothing more: the fronts stay as it last reported them.

final class FollowerState {
    var source: String
    /// The last report: windows, unmanaged windows, when (wall clock).
    var windows = 0
    var unmanaged = 0
    var lastReport = 0.0
    /// What each display was last told (only a change goes to the core).
    var fronts: [DisplayID: ShownFront] = [:]
    /// The last report's windows of each app, and its outputs.
    var windowsOf: [AppID: [ShownWindow]] = [:]
    var outputs: [String] = []
    var lost = false
    /// The daemon's requests to it (raises, home commands), counted: a
    /// report that has not carried out the latest changes no front.
    var asked: UInt64 = 0
    /// Fires when the next report is overdue.
    var timer: EventLoop.Source?
    /// An activation's raise asked while the follower was lost: sent when it is back.
    var pendingRaise: (app: AppID, display: DisplayID?, scene: SceneID?)?
    /// Back from lost: the apps held while it was away are let go at the
    /// first report that counts.
    var backFromLost = false
    /// The processes that play through the session's sound server, as last reported.
    var playing: [Int32] = []
    /// Windows of apps with scenes, each bound to the scene it shows (by
    /// the window's key in the reports): one window, one scene.
    var sceneOf: [String: (app: AppID, scene: SceneID)] = [:]
    /// The bus name of a follower that reports over D-Bus (ReportShown):
    /// what the daemon asks goes to it as signals. Nil: the control socket.
    var reporter: String?

    init(source: String) { self.source = source }

    /// How long a follower may be silent: its promised interval (2 s by
    /// default), and as long again.
    static func silence(_ interval: Double?) -> Int64 {
        Int64(min(max(interval ?? 2, 0.5), 30) * 2 * 1e9)
    }

    var status: FollowerStatus {
        var s = FollowerStatus(
            state: lost ? "lost" : "following", source: source, windows: windows, unmanaged: unmanaged,
            lastReport: lastReport)
        s.playing = playing.isEmpty ? nil : playing
        return s
    }
}

extension Daemon {
    /// A report from the follower: the fronts it shows, to the core.
    func shown(_ report: ShownReport, fresh: Bool, reporter: String? = nil) -> [Effect] {
        let windowsBefore = windowSummaries()
        defer { recordWindows(since: windowsBefore) }
        let state = follower ?? FollowerState(source: report.source)
        state.reporter = reporter
        if follower == nil {
            logger.notice("a compositor follower reports what is shown (\(report.source))")
            follower = state
            state.timer = try? loop.timer { [unowned self] in self.followerSilent() }
        }
        let wasLost = state.lost
        if wasLost { logger.notice("the compositor follower is back (\(report.source))") }
        state.source = report.source
        state.lost = false
        state.lastReport = wallTime(now())
        state.timer?.arm(at: loop.now + FollowerState.silence(report.interval))

        var facts = windowFacts(report)
        bindScenes(report, &facts, state)
        state.windows = facts.count
        state.unmanaged = facts.filter { $0.app == nil }.count
        state.outputs = report.outputs
        let played = state.playing
        state.playing = report.playing ?? []
        if state.playing != played && !self.playing.isEmpty { audioTimer?.arm(at: loop.now) }  // look at once
        state.windowsOf = [:]
        for (w, fact) in zip(report.windows, facts) {
            if let app = fact.app { state.windowsOf[app, default: []].append(w) }
        }
        let followed = followedDisplays(report.outputs)
        var effects: [Effect] = []
        // A follower new on its connection counts from where it is: what an
        // earlier one was asked is not its to carry out.
        if fresh { state.asked = report.carriedOut ?? 0 }
        if wasLost {
            state.backFromLost = true
            // An activation while it was away: its window shown now (this
            // report, taken before, then changes no front).
            if let p = state.pendingRaise {
                state.pendingRaise = nil
                raise(p.app, display: p.display, scene: p.scene)
            }
        }
        // Taken before the compositor carried out what the daemon last asked:
        // it would undo it. The next one says.
        if let done = report.carriedOut, done < state.asked { return effects }
        let overlaid = Set((report.overlaid ?? []).map(display(ofOutput:)))
        let fronts = Follow.fronts(facts, policies: followed, overlaid: overlaid, locked: report.locked == true)
        for (display, front) in fronts.sorted(by: { $0.key < $1.key }) {
            guard state.fronts[display] != front else { continue }
            state.fronts[display] = front
            effects += submit(.shown(display, front))
        }
        if state.backFromLost {
            state.backFromLost = false
            // What it shows decides again: the apps held while it was away are let go.
            for id in unseen.sorted() {
                if let run = runs[id] { effects += submit(.hold(id, generation: run.generation, .followerLost, false)) }
            }
            unseen = []
        }
        return effects
    }

    /// Every window with its app and display.
    func windowFacts(_ report: ShownReport) -> [WindowFact] {
        let mount = cgroupMount
        // The apps by their group's directory, and by app_id.
        var byGroup: [String: AppID] = [:]
        for (id, group) in runs.groups { byGroup[group.name] = id }
        var byAppID: [String: [AppID]] = [:]
        for (id, m) in manifests where runs[id] != nil { byAppID[m.appID ?? id, default: []].append(id) }
        return report.windows.map { w in
            var app: AppID?
            if let pid = w.pid {
                if let mount, let dir = Cgroups.directory(of: pid, mount: mount) {
                    app = byGroup[dir]
                } else {
                    app = runs.groups.first { $0.value.contains(pid) }?.key  // process groups
                }
            } else if let id = w.appID, let apps = byAppID[id], apps.count == 1 {
                app = apps[0]  // an app_id two running apps claim names neither
            }
            // On no output (sway's scratchpad): hidden where its app is.
            let display = w.output.map { self.display(ofOutput: $0) } ?? app.map(frontDisplay)
            return WindowFact(
                app: app, display: display, focused: w.focused, visible: w.visible && w.output != nil, rank: w.rank)
        }
    }

    /// One window, one scene, for apps with scenes: a window keeps the scene
    /// it was bound to while both last; a new window (the oldest first:
    /// the compositors' keys grow) is bound to its app's most recently
    /// activated scene that no window shows, which is the scene the app
    /// opened it for when it opens one window per scene as each connects.
    /// A window with no scene left to take shows the app's most recent
    /// scene on its display, as an app without scenes does.
    func bindScenes(_ report: ShownReport, _ facts: inout [WindowFact], _ state: FollowerState) {
        let present = Set(report.windows.map(\.id))
        state.sceneOf = state.sceneOf.filter { key, bound in
            present.contains(key) && supervisor.scenesByRecency(bound.app).contains(bound.scene)
        }
        let order = report.windows.indices.sorted {
            (Int(report.windows[$0].id) ?? Int.max, $0) < (Int(report.windows[$1].id) ?? Int.max, $1)
        }
        for i in order {
            guard let app = facts[i].app, manifests[app]?.policy.scenes == true else { continue }
            let key = report.windows[i].id
            if let bound = state.sceneOf[key], bound.app == app {
                facts[i].scene = bound.scene
                continue
            }
            let taken = Set(state.sceneOf.values.filter { $0.app == app }.map(\.scene))
            if let free = supervisor.scenesByRecency(app).first(where: { !taken.contains($0) }) {
                state.sceneOf[key] = (app, free)
                facts[i].scene = free
                logger.info("\(app)'s window \(key) shows its scene \(free)")
            }
        }
    }

    /// What `status` says of the app's windows: focused, shown or hidden;
    /// nil when it has none, or no follower (or a lost one) to say.
    func windowSummary(_ id: AppID) -> String? {
        guard let f = follower, !f.lost, let w = f.windowsOf[id] else { return nil }
        return w.contains { $0.focused } ? "focused" : w.contains { $0.visible } ? "shown" : "hidden"
    }

    /// Every app's summary, where there is one.
    func windowSummaries() -> [AppID: String] {
        guard let f = follower, !f.lost else { return [:] }
        var all: [AppID: String] = [:]
        for id in f.windowsOf.keys { all[id] = windowSummary(id) }
        return all
    }

    /// A `window` record for each app whose summary changed: what a client
    /// waiting for an app to be shown (supervisorctl's activate) looks
    /// again on, when no transition comes with it (the app was made active
    /// before the compositor showed its window).
    func recordWindows(since before: [AppID: String]) {
        let after = windowSummaries()
        let gone = follower?.lost == true ? "unknown" : "none"
        for id in Set(before.keys).union(after.keys).sorted() where before[id] != after[id] {
            record(id, .window, from: before[id] ?? "none", to: after[id] ?? gone)
        }
    }

    /// The displays a report covers: each with an output in it (an output
    /// no display lists is the first display's), with its focus policy.
    func followedDisplays(_ outputs: [String]) -> [DisplayID: FocusPolicy] {
        var followed: [DisplayID: FocusPolicy] = [:]
        for d in outputs.map(display(ofOutput:)) { followed[d] = settings.config.follow.policies[d] ?? .seat }
        return followed
    }

    /// A process of the app that plays through the session's sound server,
    /// as the follower last said.
    func playsThroughServer(_ run: Run) -> Int32? {
        guard let state = follower, !state.playing.isEmpty else { return nil }
        return state.playing.first { run.group.contains($0) }
    }

    /// The display an output belongs to.
    func display(ofOutput output: String) -> DisplayID {
        settings.config.follow.outputs[output] ?? supervisor.displays.first
    }

    /// The display whose front holds the app, else the first.
    func frontDisplay(_ id: AppID) -> DisplayID {
        supervisor.displays.all.first { $0.apps.contains(id) }?.name ?? supervisor.displays.first
    }

    /// After an activation: the follower shows the app's window, focused,
    /// on the display the app is now in front of (its most recently
    /// focused window there; else its most recently focused one, moved).
    /// Nothing when no follower is there or the app has no window yet (sway
    /// focuses a new window itself).
    func raise(_ id: AppID, display: DisplayID?, scene: SceneID? = nil) {
        guard let state = follower, var windows = state.windowsOf[id], !windows.isEmpty else { return }
        // A scene named: its own window; none yet, none raised (a scene
        // app opens it as the scene connects, and the compositor focuses it).
        if let scene, manifests[id]?.policy.scenes == true {
            windows = windows.filter { state.sceneOf[$0.id]?.scene == scene }
            if windows.isEmpty { return }
        }
        if state.lost {
            state.pendingRaise = (id, display, scene)
            logger.info("the compositor follower is silent: \(id)'s window is shown when it is back")
            return
        }
        let target = display ?? frontDisplay(id)
        let byRank = windows.sorted { $0.rank < $1.rank }
        let here = byRank.first { $0.output.map { self.display(ofOutput: $0) } == target }
        let window = here ?? byRank[0]
        if window.focused && here != nil { return }  // already so
        let output = here == nil ? state.outputs.first { self.display(ofOutput: $0) == target } : nil
        var ask = ControlResponse(ok: true)
        ask.raise = RaiseRequest(
            window: window.id, output: output, sequence: state.asked + 1, offscreen: window.output == nil ? true : nil)
        if toFollower(ask) {
            state.asked += 1
            logger.info("asking the compositor to show \(id)'s window \(window.id)\(output.map { " on \($0)" } ?? "")")
        }
    }

    /// After an accepted `home`: each followed display concerned with a
    /// `home_command` has its follower run it (the compositor shows home;
    /// its next snapshot says what is still shown).
    func home(_ display: DisplayID?) {
        guard let state = follower, !state.lost else { return }
        let followed = Set(state.outputs.map { self.display(ofOutput: $0) })
        for (d, command) in settings.config.follow.homeCommands.sorted(by: { $0.key < $1.key })
        where (display == nil || display == d) && followed.contains(d) {
            var ask = ControlResponse(ok: true)
            ask.run = CompositorCommand(command: command, display: d, sequence: state.asked + 1)
            if toFollower(ask) {
                state.asked += 1
                logger.info("asking the compositor to show \(d)'s home: \(command)")
            }
        }
    }

    /// A request to the follower, on its transport: its connection to the
    /// control socket, or a CompositorRequest signal to its bus name.
    func toFollower(_ ask: ControlResponse) -> Bool {
        guard let reporter = follower?.reporter else { return control?.toFollower(ask) == true }
        guard let bus, let data = try? JSONEncoder().encode(ask) else { return false }
        return bus.front.toReporter(reporter, String(decoding: data, as: UTF8.self))
    }

    /// No report in time: shown `lost` in status, and nothing changes on
    /// window grounds until the follower is back: the fronts stay, and an
    /// app it last saw hidden is not frozen (Apps/Freezer.swift holds it).
    func followerSilent() {
        guard let state = follower, !state.lost else { return }
        let windowsBefore = windowSummaries()
        state.lost = true
        recordWindows(since: windowsBefore)
        logger.warning(
            "the compositor follower (\(state.source)) is silent: the fronts stay as it last reported them")
    }
}
