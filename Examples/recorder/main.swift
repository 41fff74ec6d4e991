// example-recorder: records every lifecycle event it receives, one line per
// event name as docs/lifecycle.md spells it, to the file given with --log. The
// tests read that file to check event orders. With --hang EVENT it never
// returns from that callback (to test the watchdogs). With --async it uses
// the async API (`for await event in LifecycleEvents`) instead of a delegate.
// With --allocate-mb N it holds N MiB of touched memory from its start (the
// memory-pressure tests).
@preconcurrency import Glibc
import LifecycleClient

final class Recorder: ApplicationDelegate {
    let fd: Int32
    let hang: String?

    init(log: String, hang: String?) {
        fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        if fd < 0 { fputs("example-recorder: cannot open \(log)\n", stderr); exit(2) }
        self.hang = hang
    }

    func note(_ line: String) {
        let text = line + "\n"
        _ = text.withCString { write(fd, $0, strlen($0)) }
        if line == hang { while true { pause() } }
    }

    func willFinishLaunching(_ app: Application, options: LaunchOptions) {
        note("willFinishLaunching")
        if let reason = options.previousTerminationReason { note("# previous: \(reason)") }
    }
    func didFinishLaunching(_ app: Application, options: LaunchOptions) { note("didFinishLaunching") }
    func didBecomeActive(_ app: Application) {
        note("didBecomeActive")
        // For the launch benchmark's bare-exec baseline (standalone only).
        if !app.isSupervised && CommandLine.arguments.contains("--exit-when-active") { exit(0) }
    }
    func willResignActive(_ app: Application) { note("willResignActive") }
    func didEnterBackground(_ app: Application) { note("didEnterBackground") }
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
    fputs("usage: example-recorder --log FILE [--hang EVENT] [--async] [--allocate-mb N]\n", stderr)
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
        recorder.note(event.name)  // acknowledged when the loop asks for the next
        if event.name == "willFinishLaunching", let reason = event.launchOptions?.previousTerminationReason {
            recorder.note("# previous: \(reason)")
        }
    }
    exit(0)  // after willTerminate the sequence ends
}
Application.main(delegate: recorder)
