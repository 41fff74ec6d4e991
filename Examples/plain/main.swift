// example-plain: a program that knows nothing of lifecycled. It logs the
// signals it gets (one line each: SIGTERM, SIGUSR1, ...) to --log, and
// exits 0 on SIGTERM. With --busy it spins the CPU (to show that
// a frozen app costs none). Usage: example-plain --log FILE [--busy]
@preconcurrency import Glibc

let args = CommandLine.arguments
guard let i = args.firstIndex(of: "--log"), i + 1 < args.count else {
    fputs("usage: example-plain --log FILE [--busy]\n", stderr)
    exit(2)
}
let fd = open(args[i + 1], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
func note(_ line: String) {
    let text = line + "\n"
    _ = text.withCString { write(fd, $0, strlen($0)) }
}

var set = sigset_t()
sigemptyset(&set)
for s in [SIGTERM, SIGINT, SIGUSR1, SIGUSR2, SIGHUP, SIGCONT] { sigaddset(&set, s) }
sigprocmask(SIG_BLOCK, &set, nil)
note("started")

if args.contains("--busy") {
    // Spin on one thread; take signals between slices.
    var zero = timespec(tv_sec: 0, tv_nsec: 0)
    var x: UInt64 = 0
    while true {
        for _ in 0..<1_000_000 { x = x &* 6364136223846793005 &+ 1 }
        let s = sigtimedwait(&set, nil, &zero)
        if s == SIGTERM || s == SIGINT { note("\(s == SIGTERM ? "SIGTERM" : "SIGINT") \(x & 1)"); exit(0) }
    }
}

let names: [Int32: String] = [
    SIGTERM: "SIGTERM", SIGINT: "SIGINT", SIGUSR1: "SIGUSR1",
    SIGUSR2: "SIGUSR2", SIGHUP: "SIGHUP", SIGCONT: "SIGCONT",
]
while true {
    var info = siginfo_t()
    var second = timespec(tv_sec: 1, tv_nsec: 0)
    let s = sigtimedwait(&set, &info, &second)
    if s < 0 { continue }  // a quiet second
    note(names[s] ?? "signal \(s)")
    if s == SIGTERM || s == SIGINT { exit(0) }
}
