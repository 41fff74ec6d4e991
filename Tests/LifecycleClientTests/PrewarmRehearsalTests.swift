@preconcurrency import Glibc
import LifecycleWire
import Testing

@testable import LifecycleClient

// A prewarmed app rehearses its launch before it says it is held
// (Channel.rehearseLaunch): the library's part of a launch event, once, on
// an event of its own making. The rehearsal must leave no trace: nothing
// sent but `prewarmed`, no callback, and the launch options of the real
// willFinishLaunching alone.

@MainActor final class LaunchRecorder: ApplicationDelegate {
    var log: [String] = []
    var options: [LaunchOptions] = []
    func willFinishLaunching(_ application: Application, options: LaunchOptions) {
        log.append("willFinishLaunching")
        self.options.append(options)
    }
    func didFinishLaunching(_ application: Application, options: LaunchOptions) {
        log.append("didFinishLaunching")
        self.options.append(options)
    }
}

@MainActor @Suite struct PrewarmRehearsalTests {
    @Test func theRehearsalSendsOnlyPrewarmedAndRunsNoCallback() throws {
        let d = try FakeDaemon()
        let delegate = LaunchRecorder()
        let app = Application(
            delegate: delegate, channel: Channel(fd: d.app, resumePath: nil, appName: "a", prewarm: true))
        let event = { (sequence: UInt32, name: LifecycleEvent) in
            DaemonMessage.event(
                EventMessage(
                    sequence: sequence, event: name, deadline: 0, budgetEnd: nil,
                    options: [KeyValue(LaunchOptionKey.reason.rawValue, LaunchReason.url.rawValue)]))
        }
        d.send(event(1, .willFinishLaunching))
        d.send(event(2, .didFinishLaunching))
        d.stopSending()
        #expect(app.run() == .closed)
        #expect(d.take() == .prewarmed, "said once, before anything else")
        #expect(d.take() == .acknowledge(sequence: 1))
        #expect(d.take() == .acknowledge(sequence: 2))
        #expect(d.quiet)
        #expect(delegate.log == ["willFinishLaunching", "didFinishLaunching"])
        // The real event's options, not the rehearsal's (which has a
        // previous.time and the reason "user").
        #expect(delegate.options.map(\.reason) == ["url", "url"])
        #expect(delegate.options.allSatisfy { $0.previousTerminationTime == nil })
        #expect(app.launchOptions?.reason == "url")
    }

    @Test func anAppNotPrewarmedDoesNotRehearse() throws {
        let d = try FakeDaemon()
        let app = Application(delegate: LaunchRecorder(), channel: d.channel)
        d.stopSending()
        #expect(app.run() == .closed)
        #expect(d.quiet, "no prewarmed message")
    }

    @Test func theRehearsalGoesThroughTheWholeDecoder() {
        // The event it rehearses with is a valid launch event, so that the
        // decoder's whole path runs (a refused one would stop at the first
        // check, and leave the rest to the activation).
        let options = Channel.rehearseLaunch()
        #expect(options?.reason == "user")
        #expect(options?.previousTerminationTime == 0.5)
    }
}
