#!/usr/bin/python3
"""`status` of 1,000 apps, two builds side by side (issue 13, part 5).

  compare.py OLD_BIN_DIR [NEW_BIN_DIR] [--apps N]

Starts a daemon from each directory (lifecycled and supervisorctl), each
with N plain apps (default 1,000) launched into the background and
suspended, then alternates batches between them: the status request's
socket round trip (request out, whole answer in) and the whole
`supervisorctl status` process. Prints p50/p99 of each and the ratios.
NEW_BIN_DIR defaults to .build/release. Run as root: make bench-status
OLD=/path/to/old/bin builds nothing old for you (see docs/performance.md).
"""
import os, socket, subprocess, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from benchdaemon import RELEASE, BenchDaemon, pct  # noqa: E402
BATCHES, PER_BATCH = 8, 10


class Daemon(BenchDaemon):
    def __init__(self, bin_dir, apps):
        plain = 'command = ["/bin/sleep", "1000000"]\ndelivery = "signals"\n[timeouts]\nbackground_grace = 0.1\n'
        super().__init__("status", {f"app{i:04d}": plain for i in range(apps)}, settings="event_history = 0\n",
                         bin_dir=bin_dir, ready_tries=400)
        for i in range(apps):
            self.request({"command": "launch", "app": f"app{i:04d}", "background": True})
        while True:
            states = [a["state"] for a in self.request({"command": "status"})["status"]["apps"]]
            if all(s == "suspended" for s in states):
                break
            time.sleep(0.2)
        time.sleep(3)  # a memory sample or two, as on a machine left alone

    def status_round_trip(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.socket)
        try:
            t = time.perf_counter()
            s.sendall(b'{"command":"status"}\n')
            data = b""
            while not data.endswith(b"\n"):
                data += s.recv(1 << 20)
            return (time.perf_counter() - t) * 1e3
        finally:
            s.close()

    def ctl(self):
        t = time.perf_counter()
        subprocess.run([os.path.join(self.bin, "supervisorctl"), "status", "--socket", self.socket],
                       stdout=subprocess.DEVNULL, check=True)
        return (time.perf_counter() - t) * 1e3


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    apps = int(sys.argv[sys.argv.index("--apps") + 1]) if "--apps" in sys.argv else 1000
    if "--apps" in sys.argv:
        args.remove(str(apps))
    old_dir = args[0]
    new_dir = args[1] if len(args) > 1 else RELEASE
    daemons = {"old": Daemon(old_dir, apps), "new": Daemon(new_dir, apps)}
    rt = {k: [] for k in daemons}
    ctl = {k: [] for k in daemons}
    try:
        for _ in range(BATCHES):
            for k, d in daemons.items():
                for _ in range(PER_BATCH):
                    rt[k].append(d.status_round_trip())
                ctl[k].append(d.ctl())
    finally:
        for d in daemons.values():
            d.stop(timeout=300)
    print(f"{apps} suspended apps; old: {old_dir}, new: {new_dir}\n")
    print("| build | status round trip p50 / p99 (ms) | `supervisorctl status` p50 / p99 (ms) |")
    print("|---|---|---|")
    for k in daemons:
        print(f"| {k} | {pct(rt[k], 50):.2f} / {pct(rt[k], 99):.2f} | {pct(ctl[k], 50):.1f} / {pct(ctl[k], 99):.1f} |")
    print(f"\nround trip p50, old / new: {pct(rt['old'], 50) / pct(rt['new'], 50):.1f}x; "
          f"supervisorctl status p50, old / new: {pct(ctl['old'], 50) / pct(ctl['new'], 50):.1f}x")


if __name__ == "__main__":
    sys.exit(main())
