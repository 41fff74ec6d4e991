#!/usr/bin/python3
"""The release daemon holds its memory while apps write (part of `make test`).

Optimised code can leak where debug code does not: Swift 6.3's optimiser
never released an array slice iterated in a loop that never ends, and the
output thread's loop leaked its poll array on every turn (8 bytes an app;
325 kB/s with 300 apps and one writing 100 lines a second). The test suite
runs a debug build, so this runs the release one: 300 idle apps and one
that writes a line every 5 ms, the daemon's resident memory taken once the
writer has written 400 lines, then after 2,000 more. It fails if the
daemon grew by more than 1 MiB (the leak above grows by about 5 MiB).

    scripts/check-leaks.py [BUILD_DIR]      (default: .build/release)
"""
import os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "Benchmarks", "lib"))
from benchdaemon import BenchDaemon, RELEASE, wait_until  # noqa: E402

IDLE = 300
LINES = 2000
LIMIT_KB = 1024


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise SystemExit(f"no VmRSS for {pid}")


def lines(path):
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


def main():
    bin_dir = sys.argv[1] if len(sys.argv) > 1 else RELEASE
    apps = {f"idle{i}": 'command = ["sleep", "100000"]\ndelivery = "signals"\n' for i in range(IDLE)}
    apps["writer"] = 'command = ["bash", "-c", "while :; do echo line; sleep 0.005; done"]\ndelivery = "signals"\n'
    d = BenchDaemon("leaks", apps, bin_dir=bin_dir, settings='event_history = 0\nlog_directory = "logs"\n')
    try:
        for i in range(IDLE):
            r = d.request({"command": "launch", "app": f"idle{i}", "background": True})
            if not r.get("ok"):
                raise SystemExit(f"check-leaks: launch idle{i}: {r}")
        r = d.request({"command": "activate", "app": "writer"})
        if not r.get("ok"):
            raise SystemExit(f"check-leaks: activate writer: {r}")
        log = os.path.join(d.dir, "logs", "writer.log")
        # Its first 400 lines first: the daemon's buffers at their size.
        wait_until("400 lines from the writer", lambda: lines(log) >= 400)
        start, before = lines(log), rss_kb(d.proc.pid)
        wait_until(f"{LINES} more lines", lambda: lines(log) >= start + LINES)
        after = rss_kb(d.proc.pid)
    finally:
        d.stop()
    grew = after - before
    print(f"check-leaks: {IDLE} idle apps and one writer, {LINES} lines: {before} kB -> {after} kB ({grew:+d} kB)")
    if grew > LIMIT_KB:
        print(f"check-leaks: the daemon grew by {grew} kB, more than {LIMIT_KB} kB: a leak on the output path?",
              file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
