#!/usr/bin/python3
"""An app that writes as fast as it can (issue 13, part 2; docs/performance.md).

Runs the release daemon with output to files (log_max_size 16M, 2 backups)
and two apps: `rec`, the C recorder, and `flood`, `yes` printing a 60-byte
line as fast as it can. In alternating batches, side by side in one run:
another app's event round trip (activate rec until it acknowledged
didBecomeActive, then home until didEnterBackground) and a status round
trip, with `flood` stopped and with it running. Prints p50/p99 of each,
the daemon's CPU (its loop and its output thread apart) in each phase,
with a third phase as the floor: an app that burns the same CPU (`yes`
into /dev/null) and writes nothing;
the flood's rate into its files, and the files' total size at the end
(bounded by 16M x 3). Run as root: make bench-output.
"""
import os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from benchdaemon import BenchDaemon, C_RECORDER, pct  # noqa: E402
TICK = os.sysconf("SC_CLK_TCK")
BATCHES, PER_BATCH = 6, 40
# --log-rate off: as fast as the output thread can write (the default is 1M a second).
RATE = sys.argv[sys.argv.index("--log-rate") + 1] if "--log-rate" in sys.argv else "1M"


def thread_cpu(pid):
    """CPU seconds of the daemon's output thread, and of the rest of it."""
    out = rest = 0.0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        s = (int(fields[11]) + int(fields[12])) / TICK
        if comm.startswith("lifecycled-out"):
            out += s
        else:
            rest += s
    return out, rest


class Daemon(BenchDaemon):
    def __init__(self):
        background = 'delivery = "signals"\n[timeouts]\nbackground_grace = 3600\n'
        super().__init__("output", {
            "rec": f'command = ["{C_RECORDER}", "--log", "/dev/null"]\n',
            "flood": 'command = ["yes", "0123456789 the quick brown fox jumps over the lazy dog 0123"]\n' + background,
            # The same CPU, no output: the floor.
            "spin": 'command = ["sh", "-c", "exec yes > /dev/null"]\n' + background,
        }, settings='output = "files"\nlog_directory = "logs"\nlog_max_size = "16M"\nlog_backups = 2\n'
                    f'log_rate = "{RATE}"\nevent_history = 0\n[memory]\nmonitor = false\n', follow=["rec"])

    def acknowledged(self, event):
        self.wait_event(lambda e: e.get("kind") == "acknowledged" and e.get("event") == event)

    def logs(self):
        d, total = os.path.join(self.dir, "logs"), 0
        for n in os.listdir(d) if os.path.isdir(d) else []:
            try:
                total += os.path.getsize(os.path.join(d, n))
            except FileNotFoundError:
                pass  # rotated away meanwhile
        return total


def batch(d, trips, status):
    for _ in range(PER_BATCH):
        t = time.perf_counter()
        d.request({"command": "activate", "app": "rec"})
        d.acknowledged("didBecomeActive")
        d.request({"command": "home"})
        d.acknowledged("didEnterBackground")
        trips.append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter()
        d.request({"command": "status"})
        status.append((time.perf_counter() - t) * 1e3)


def main():
    d = Daemon()
    phases = {name: ([], [], 0.0, 0.0, 0.0) for name in ("quiet", "spinning", "flooding")}
    app = {"spinning": "spin", "flooding": "flood"}
    written = 0.0
    flood_time = 0.0
    try:
        for i in range(BATCHES * 3):
            name = ("quiet", "spinning", "flooding")[i % 3]
            if name in app:
                d.request({"command": "launch", "app": app[name], "background": True})
                time.sleep(0.5)  # let it reach full speed before measuring
            trips, status, cpu_out, cpu_rest, secs = phases[name]
            out0, rest0 = thread_cpu(d.proc.pid)
            logs0, t0 = d.logs(), time.perf_counter()
            batch(d, trips, status)
            out1, rest1 = thread_cpu(d.proc.pid)
            elapsed = time.perf_counter() - t0
            if name == "flooding":
                written += max(0, d.logs() - logs0)  # rotation makes this an underestimate
                flood_time += elapsed
            if name in app:
                d.request({"command": "stop", "app": app[name]})
                while d.request({"command": "status", "apps": [app[name]]})["status"]["apps"][0]["state"] != "not-running":
                    time.sleep(0.05)
            phases[name] = (trips, status, cpu_out + out1 - out0, cpu_rest + rest1 - rest0, secs + elapsed)
        total = d.logs()
    finally:
        d.stop()
    print("| phase | event round trip p50 / p99 (ms) | status p50 / p99 (ms) | daemon loop CPU | output thread CPU |")
    print("|---|---|---|---|---|")
    for name, (trips, status, cpu_out, cpu_rest, secs) in phases.items():
        print(f"| {name} | {pct(trips, 50):.2f} / {pct(trips, 99):.2f} | {pct(status, 50):.2f} / {pct(status, 99):.2f} "
              f"| {cpu_rest / secs * 100:.0f} % | {cpu_out / secs * 100:.0f} % |")
    q, sp, fl = phases["quiet"], phases["spinning"], phases["flooding"]
    print(f"\nevent round trip p50, flooding / spinning (the cost of capturing output): "
          f"{pct(fl[0], 50) / pct(sp[0], 50):.2f}x; flooding / quiet: {pct(fl[0], 50) / pct(q[0], 50):.2f}x")
    print(f"status p50, flooding / spinning: {pct(fl[1], 50) / pct(sp[1], 50):.2f}x; "
          f"flooding / quiet: {pct(fl[1], 50) / pct(q[1], 50):.2f}x")
    print(f"log_rate = {RATE}; flood into its files: at least {written / flood_time / 1e6:.1f} MB/s; "
          f"files at the end: {total / 1e6:.1f} MB (bound: 16 MiB x 3 = 50.3 MB)")


if __name__ == "__main__":
    sys.exit(main())
