#!/usr/bin/python3
"""Hostile neighbours, measured (issue 12, docs/security.md).

Runs the release daemon with two apps and, side by side in one run:
  1. a root command's round trip (activate an app, then home) while idle,
     and while user `nobody` floods the control socket from FLOODERS
     processes (1 by default; newlines and refused commands, reconnecting
     when closed), over the shared socket and over root's private one
     (what supervisorctl uses when run as root), in alternating batches;
  2. the daemon's CPU while `nobody` opens 1,000 connections at once;
  3. a freeze (home -> frozen) while `nobody` holds every connection it may,
     and one with the daemon's descriptor table full (prlimit);
  4. 10,000 notifications from a stranger (same user, not the app's) and
     from `nobody` (refused by the kernel), the daemon's CPU and log lines.
Prints a Markdown table. Run as root: make bench-hostile.
"""
import json, os, pwd, signal, socket, statistics, subprocess, sys, tempfile, time, uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from benchdaemon import BenchDaemon, C_RECORDER, cpu_seconds, pct  # noqa: E402
NOBODY = pwd.getpwnam("nobody")


def Daemon():
    """The daemon with the C recorder and a plain program that writes down its NOTIFY_SOCKET."""
    return BenchDaemon("hostile", {
        "rec": f'command = ["{C_RECORDER}", "--log", "/dev/null"]\n',
        "svc": 'command = ["/bin/sh", "-c", "echo $NOTIFY_SOCKET > {dir}/notify; exec sleep 100000"]\n'
               'delivery = "signals"\n[timeouts]\nbackground_grace = 3600\n',
    }, settings='event_history = 0\n[memory]\nmonitor = false\n', follow=[], ready_tries=200)


def as_nobody():
    os.setgroups([])
    os.setgid(NOBODY.pw_gid)
    os.setuid(NOBODY.pw_uid)


def spinner():
    """A child as nobody that only burns a core: the flood's CPU without the flood."""
    pid = os.fork()
    if pid == 0:
        as_nobody()
        while True:
            pass
    return pid


def flooder(path):
    """A child as nobody: newlines and refused commands, as fast as it can."""
    pid = os.fork()
    if pid == 0:
        try:
            as_nobody()
            junk = b"\n" * 4096 + b'{"command":"home"}\n' * 64
            while True:
                try:
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    s.connect(path)
                    s.setblocking(False)
                    while True:
                        try:
                            s.send(junk)
                        except BlockingIOError:
                            pass
                        try:
                            if s.recv(65536) == b"":
                                break
                        except BlockingIOError:
                            pass
                except OSError:
                    pass
                finally:
                    s.close()
        finally:
            os._exit(0)
    return pid


def round_trips(d, n, private=False):
    """activate rec (waits for didBecomeActive), then home: one sample each."""
    out = []
    for _ in range(n):
        t = time.perf_counter()
        d.request({"command": "activate", "app": "rec"}, private)
        d.wait_event(lambda e: e.get("app") == "rec" and e.get("kind") == "acknowledged"
                     and e.get("event") == "didBecomeActive")
        out.append((time.perf_counter() - t) * 1e3)
        d.request({"command": "home"}, private)
        d.wait_event(lambda e: e.get("app") == "rec" and e.get("kind") == "frozen")
    return out


def main():
    if os.getuid() != 0:
        sys.exit("load.py: run as root (it switches to nobody for the attacks)")
    d = Daemon()
    rows = []
    n = int(os.environ.get("SAMPLES", "100"))
    d.request({"command": "launch", "app": "svc", "background": True})
    # Alternated in small batches, so that both ways see the same machine.
    idle, idle_private, flooded, flooded_private = [], [], [], []
    for _ in range(0, n, 10):
        idle += round_trips(d, 10)
        idle_private += round_trips(d, 10, private=True)
    count = int(os.environ.get("FLOODERS", "1"))
    flooders = [flooder(d.socket) for _ in range(count)]
    time.sleep(1)  # the flood under way
    cpu0, t0 = cpu_seconds(d.proc.pid), time.perf_counter()
    time.sleep(3)  # nothing asked but the flood
    flood_cpu = (cpu_seconds(d.proc.pid) - cpu0) / (time.perf_counter() - t0) * 100
    for _ in range(0, n, 10):
        flooded += round_trips(d, 10)
        flooded_private += round_trips(d, 10, private=True)
    for p in flooders:
        os.kill(p, signal.SIGKILL)
        os.waitpid(p, 0)
    # The same number of processes as busy, without touching the daemon:
    # what the attacker's CPU alone costs a round trip (the client and the
    # app compete with it as equals), the floor for the flood's figure.
    spinners = [spinner() for _ in range(count)]
    spun = []
    for _ in range(0, n, 10):
        spun += round_trips(d, 10, private=True)
    for p in spinners:
        os.kill(p, signal.SIGKILL)
        os.waitpid(p, 0)
    time.sleep(1.5)  # the flooder's penalty (1 s without answers) runs out
    floods = f"{count} process{'es' if count > 1 else ''}"
    for way, calm, busy in (("the shared socket", idle, flooded), ("root's private socket", idle_private, flooded_private)):
        rows.append((f"root over {way}: activate to didBecomeActive, idle",
                     f"p50 {pct(calm, 50):.2f} ms, p99 {pct(calm, 99):.2f} ms"))
        rows.append((f"the same while nobody floods the shared socket ({floods})",
                     f"p50 {pct(busy, 50):.2f} ms, p99 {pct(busy, 99):.2f} ms; "
                     f"**p50 {pct(busy, 50) / pct(calm, 50):.1f}x idle** (target within 2x)"))
    rows.append((f"root's private socket while nobody only burns CPU ({floods}, no socket)",
                 f"p50 {pct(spun, 50):.2f} ms, p99 {pct(spun, 99):.2f} ms; "
                 f"p50 {pct(spun, 50) / pct(idle_private, 50):.1f}x idle: the attacker's CPU alone"))
    rows.append(("daemon CPU during the flood, nothing else asked", f"{flood_cpu:.1f} % of a core"))

    # 1,000 connections from nobody at once.
    r, w = os.pipe()  # the child's answer
    go_r, go_w = os.pipe()  # the parent's word that it may end
    cpu0 = cpu_seconds(d.proc.pid)
    pid = os.fork()
    if pid == 0:
        as_nobody()
        conns, refused = [], 0
        for _ in range(1000):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(d.socket)
            conns.append(s)
        for s in conns[32:]:
            s.settimeout(10)
            try:
                if b"too-many-connections" in s.makefile("rb").readline():
                    refused += 1
            except OSError:
                pass
        os.write(w, str(refused).encode())
        os.read(go_r, 1)  # held until told
        os._exit(0)
    refused = int(os.read(r, 16))
    spent = (cpu_seconds(d.proc.pid) - cpu0) * 1e3
    rows.append(("1,000 connections from nobody at once",
                 f"{refused} refused with the reason, 32 kept; daemon CPU {spent:.0f} ms in all"))
    # A freeze while nobody holds its connections.
    d.request({"command": "activate", "app": "rec"})
    d.wait_event(lambda e: e.get("app") == "rec" and e.get("event") == "didBecomeActive"
                 and e.get("kind") == "acknowledged")
    t = time.perf_counter()
    d.request({"command": "home"})
    e = d.wait_event(lambda e: e.get("app") == "rec" and e.get("kind") == "frozen")
    rows.append(("home to frozen while nobody holds its connections",
                 f"{(time.perf_counter() - t) * 1e3:.1f} ms (decision to frozen {e.get('latencyMicroseconds', 0):.0f} µs)"))
    os.write(go_w, b"x")
    os.waitpid(pid, 0)

    # A freeze with the descriptor table full (its soft limit lowered to the lowest free number).
    d.request({"command": "activate", "app": "rec"})
    d.wait_event(lambda e: e.get("app") == "rec" and e.get("event") == "didBecomeActive"
                 and e.get("kind") == "acknowledged")
    control = d.connect()  # opened before the table is full
    fds = {int(n) for n in os.listdir(f"/proc/{d.proc.pid}/fd")}
    lowest = next(n for n in range(len(fds) + 1) if n not in fds)
    limit = open(f"/proc/{d.proc.pid}/limits").read().split("Max open files")[1].split()[0]
    subprocess.run(["prlimit", "--pid", str(d.proc.pid), f"--nofile={lowest}:"], check=True)
    t = time.perf_counter()
    control.sendall(b'{"command":"home"}\n')
    e = d.wait_event(lambda e: e.get("app") == "rec" and e.get("kind") in ("frozen", "killed"))
    full = (time.perf_counter() - t) * 1e3
    subprocess.run(["prlimit", "--pid", str(d.proc.pid), f"--nofile={limit}:"], check=True)
    control.close()
    rows.append(("home to frozen with the descriptor table full",
                 f"{full:.1f} ms ({e.get('kind')}; decision to frozen {e.get('latencyMicroseconds', 0):.0f} µs)"))

    # 10,000 stranger notifications.
    notify = open(os.path.join(d.dir, "notify")).read().strip()
    lines_before = open(os.path.join(d.dir, "daemon.log")).read().count("not one of its processes")
    cpu0, t0 = cpu_seconds(d.proc.pid), time.perf_counter()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    for _ in range(10000):
        s.sendto(b"STATUS=spam", notify)
    d.request({"command": "status"})  # after the last one is read (one loop)
    wall = time.perf_counter() - t0
    spent = cpu_seconds(d.proc.pid) - cpu0
    time.sleep(0.2)
    said = open(os.path.join(d.dir, "daemon.log")).read().count("not one of its processes") - lines_before
    rows.append(("10,000 notifications from a stranger of the same user",
                 f"daemon CPU {spent * 1e3:.0f} ms over {wall * 1e3:.0f} ms of sending; "
                 f"over the 10 s interval of its log line: {spent / 10 * 100:.2f} % of a core; {said} log line(s)"))
    pid = os.fork()
    if pid == 0:
        as_nobody()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            s.sendto(b"READY=1", notify)
            os._exit(1)
        except PermissionError:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    rows.append(("a notification from nobody", "refused by the kernel (EACCES)" if status == 0 else "**accepted**"))
    d.stop()

    print("| attack | result |\n|---|---|")
    for a, b in rows:
        print(f"| {a} | {b} |")


if __name__ == "__main__":
    main()
