// example-recorder: records every lifecycle event it receives, one line per
// event name as docs/lifecycle.md spells it, to the file given with --log. The
// tests read that file to check event orders. With --hang EVENT it never
// returns from that callback (to test the watchdogs). With --async it uses
// the async API (`for await event in LifecycleEvents`) instead of a delegate.
// With --allocate-mb N it holds N MiB of touched memory from its start (the
// memory-pressure tests). Wake-ups: performFetch and didReceiveRemoteNotification
// are answered new-data; after willFinishLaunching the launch options
// launch.reason (unless "user"), launch.url, push.payload and restoration.size
// follow as "# KEY: VALUE" lines, then "# restoration: TEXT"; after
// didReceiveRemoteNotification "# push.payload: JSON", after openURL "# url: URL"
// (as the C and Python recorders write them). With $RECORDER_SAVE_STATE set it
// saves that text as restoration data on entering the background. Scene
// events are written "EVENT SCENE DISPLAY" ("sceneWillConnect nav centre new"
// or "... restored"), didDiscardSceneSessions as "didDiscardSceneSessions a,b",
// and an openURL to a scene is followed by "# scene: NAME". --hang matches a
// whole line or its first word. With --after-ack (the delegate API only) the
// lines of each event but willTerminate are written after its acknowledgement
// has gone, on the main loop, not in the callback: the event benchmark waits
// on those lines, and written first they would wake it inside the round trip
// it measures.
@preconcurrency import Glibc
import LifecycleClient

final class Recorder: ApplicationDelegate, SceneDelegate {
    let fd: Int32
    let hang: String?
    /// --after-ack: the app whose loop writes the lines once the event is acknowledged.
    var afterAck: Application?

    init(log: String, hang: String?) {
        fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        if fd < 0 { fputs("example-recorder: cannot open \(log)\n", stderr); exit(2) }
        self.hang = hang
    }

    func note(_ line: String) {
        // willTerminate's lines cannot wait: the app exits after its acknowledgement.
        if let app = afterAck, line != "willTerminate" {
            app.schedule(after: .zero) { [unowned self] in self.write(line) }
        } else {
            write(line)
        }
        guard let hang else { return }
        if line == hang || line.split(separator: " ").first.map(String.init) == hang { while true { pause() } }
    }

    func write(_ line: String) {
        let text = line + "\n"
        _ = text.withCString { Glibc.write(fd, $0, strlen($0)) }
    }

    func willFinishLaunching(_ app: Application, options: LaunchOptions) {
        if CommandLine.arguments.contains("--after-ack") { afterAck = app }
        note("willFinishLaunching")
        noteLaunch(options)
    }

    func noteLaunch(_ options: LaunchOptions) {
        if let reason = options.previousTerminationReason { note("# previous: \(reason)") }
        if let why = options.reason, why != "user" { option("launch.reason", why) }
        if let url = options.url { option("launch.url", url) }
        if let payload = options.pushPayload { option("push.payload", payload) }
        if let data = options.restorationData {
            option("restoration.size", String(data.count))
            option("restoration", String(decoding: data, as: UTF8.self))
        }
    }

    /// "# KEY: VALUE", line breaks in the value written as spaces.
    func option(_ key: String, _ value: String) {
        note("# \(key): " + String(value.map { $0.isNewline ? " " : $0 }))
    }

    func performFetch(_ app: Application) -> FetchResult {
        note("performFetch")
        return .newData
    }
    func didReceiveRemoteNotification(_ app: Application, payload: String) -> FetchResult {
        note("didReceiveRemoteNotification")
        option("push.payload", payload)
        return .newData
    }
    func openURL(_ app: Application, url: String) {
        note("openURL")
        option("url", url)
    }
    func openURL(_ app: Application, url: String, in scene: Scene) {
        openURL(app, url: url)
        option("scene", scene.name)
    }
    func sceneDelegate(_ application: Application, for scene: Scene) -> (any SceneDelegate)? { self }
    func didDiscardSceneSessions(_ application: Application, scenes: [String]) {
        note("didDiscardSceneSessions " + scenes.joined(separator: ","))
    }
    func noteScene(_ event: String, _ scene: Scene) {
        note("\(event) \(scene.name) \(scene.display)")
    }
    func sceneWillConnect(_ scene: Scene) {
        note("sceneWillConnect \(scene.name) \(scene.display) \(scene.restored ? "restored" : "new")")
    }
    func sceneWillEnterForeground(_ scene: Scene) { noteScene("sceneWillEnterForeground", scene) }
    func sceneDidBecomeActive(_ scene: Scene) { noteScene("sceneDidBecomeActive", scene) }
    func sceneWillResignActive(_ scene: Scene) { noteScene("sceneWillResignActive", scene) }
    func sceneDidEnterBackground(_ scene: Scene) { noteScene("sceneDidEnterBackground", scene) }
    func sceneDidDisconnect(_ scene: Scene) { noteScene("sceneDidDisconnect", scene) }
    func didFinishLaunching(_ app: Application, options: LaunchOptions) { note("didFinishLaunching") }
    func didBecomeActive(_ app: Application) {
        note("didBecomeActive")
        // For the launch benchmark's bare-exec baseline (standalone only).
        if !app.isSupervised && CommandLine.arguments.contains("--exit-when-active") { exit(0) }
    }
    func willResignActive(_ app: Application) { note("willResignActive") }
    func didEnterBackground(_ app: Application) {
        note("didEnterBackground")
        if let state = getenv("RECORDER_SAVE_STATE") { app.saveRestorationData(Array(String(cString: state).utf8)) }
    }
    func willEnterForeground(_ app: Application) { note("willEnterForeground") }
    func willTerminate(_ app: Application) { note("willTerminate") }
    func didReceiveMemoryWarning(_ app: Application) { note("didReceiveMemoryWarning") }
    func willBeKilledForMemory(_ app: Application) { note("willBeKilledForMemory") }
}

func option(_ name: String) -> String? {
    let args = CommandLine.arguments
    guard let i = args.firstIndex(of: name), i + 1 < args.count else { return nil }
    return args[i + 1]
}

guard let log = option("--log") else {
    fputs("usage: example-recorder --log FILE [--hang EVENT] [--async] [--allocate-mb N] [--after-ack]\n", stderr)
    exit(2)
}
let recorder = Recorder(log: log, hang: option("--hang"))

/// `mb` MiB, resident, not just reserved: one byte of every page is written.
/// mmap, not malloc and memset: a release build dropped a malloc'ed block
/// that nothing read, memset and all (9 MiB resident for 300 MiB asked).
/// The optimiser cannot see what becomes of memory mmap returns, so it
/// keeps every write to it, and the block stays mapped until the app exits.
func allocate(megabytes mb: Int) -> UnsafeMutableRawPointer {
    let bytes = mb << 20
    guard let block = mmap(nil, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
        block != MAP_FAILED
    else {
        fputs("example-recorder: cannot allocate \(mb) MiB\n", stderr)
        exit(2)
    }
    let page = max(4096, sysconf(Int32(_SC_PAGESIZE)))
    for offset in stride(from: 0, to: bytes, by: page) {
        block.storeBytes(of: 0x5A, toByteOffset: offset, as: UInt8.self)
    }
    return block
}

/// The memory held for --allocate-mb, for the whole run.
let allocateMegabytes = option("--allocate-mb").flatMap(Int.init) ?? 0
let heldMemory: UnsafeMutableRawPointer? = allocateMegabytes > 0 ? allocate(megabytes: allocateMegabytes) : nil
if heldMemory != nil { recorder.note("# allocated \(allocateMegabytes) MiB") }
if CommandLine.arguments.contains("--async") {
    guard let events = LifecycleEvents.connect() else {
        fputs("example-recorder --async: not started by lifecycled\n", stderr)
        exit(2)
    }
    for await event in events {
        // Acknowledged when the loop asks for the next.
        if let scenes = event.discardedScenes {
            recorder.note("\(event.name) \(scenes.joined(separator: ","))")
        } else if event.name.hasPrefix("scene"), let scene = event.scene, let display = event.display {
            let session = event.restored.map { $0 ? " restored" : " new" } ?? ""
            recorder.note("\(event.name) \(scene) \(display)\(session)")
        } else {
            recorder.note(event.name)
        }
        if event.name == "willFinishLaunching", let options = event.launchOptions { recorder.noteLaunch(options) }
        if let payload = event.payload { recorder.option("push.payload", payload) }
        if let url = event.url {
            recorder.option("url", url)
            if let scene = event.scene { recorder.option("scene", scene) }
        }
        if event.name == "performFetch" || event.name == "didReceiveRemoteNotification" {
            events.complete(event, .newData)
        }
        if event.name == "didEnterBackground", let state = getenv("RECORDER_SAVE_STATE") {
            events.saveRestorationData(Array(String(cString: state).utf8))
        }
    }
    exit(0)  // after willTerminate the sequence ends
}
Application.main(delegate: recorder)
