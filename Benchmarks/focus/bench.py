#!/usr/bin/python3
"""The compositor drives the lifecycle, measured (issue 30, docs/focus.md,
docs/performance.md).

A real headless sway (two 640x480 outputs, pixman, as nobody), the release
daemon and lifecycled-follow, weston-flower windows as apps. Measures:
  1. a focus change to the app being active: from sway's window focus
     event (subscribed on sway's own IPC) to the daemon's transition record;
  2. a workspace switch that shows a frozen app (weston-smoke, which
     draws a frame on every frame callback): from sway's workspace event
     to its cgroup thawed (cgroup.events "frozen 0", polled every 0.2 ms),
     to it being active, and to its first frame (its first wl_surface
     commit after the event, from libwayland's WAYLAND_DEBUG=client log,
     whose stamps are the wall clock's microseconds modulo 2^32);
  3. the CPU an app costs when shown and when hidden (a window and a busy
     loop in one app: cpu.stat usage over 2 s, inactive beside the focused
     app, then hidden and frozen).
Prints a Markdown table. Run as root: make bench-focus (CYCLES=20).
"""
import glob, json, os, pwd, select, shutil, socket, struct, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from benchdaemon import BenchDaemon, RELEASE, pct  # noqa: E402

CYCLES = int(os.environ.get("CYCLES", "20"))
MAGIC = b"i3-ipc"


class Sway:
    """sway as nobody, headless; its IPC spoken directly (no swaymsg process in the timings)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="lifecycled-bench-sway-")
        nobody = pwd.getpwnam("nobody")
        os.chown(self.dir, nobody.pw_uid, nobody.pw_gid)
        os.chmod(self.dir, 0o700)
        with open(f"{self.dir}/sway.conf", "w") as f:
            f.write("output HEADLESS-1 resolution 640x480 position 0,0\n"
                    "output HEADLESS-2 resolution 640x480 position 640,0\ndefault_border none\nxwayland disable\n")
        env = {"XDG_RUNTIME_DIR": self.dir, "HOME": self.dir, "PATH": "/usr/bin:/bin", "WLR_BACKENDS": "headless",
               "WLR_HEADLESS_OUTPUTS": "2", "WLR_LIBINPUT_NO_DEVICES": "1", "WLR_RENDERER": "pixman"}
        self.proc = subprocess.Popen(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                                      "/usr/bin/sway", "-c", f"{self.dir}/sway.conf"], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.socket = f"{self.dir}/sway-ipc.{nobody.pw_uid}.{self.proc.pid}.sock"
        for _ in range(2000):
            if os.path.exists(self.socket) and os.path.exists(f"{self.dir}/wayland-1"):
                break
            time.sleep(0.01)
        self.commands = self.connect()

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.socket)
        return s

    @staticmethod
    def send(s, kind, payload=b""):
        s.sendall(MAGIC + struct.pack("=II", len(payload), kind) + payload)

    @staticmethod
    def receive(s):
        header = b""
        while len(header) < 14:
            header += s.recv(14 - len(header))
        length, kind = struct.unpack("=II", header[6:])
        body = b""
        while len(body) < length:
            body += s.recv(length - len(body))
        return kind, json.loads(body)

    def run(self, command):
        self.send(self.commands, 0, command.encode())
        return self.receive(self.commands)[1]

    def tree(self):
        self.send(self.commands, 4)
        return self.receive(self.commands)[1]

    def windows(self):
        found = []

        def walk(n):
            if n.get("pid"):
                found.append(n)
            for c in n.get("nodes", []) + n.get("floating_nodes", []):
                walk(c)
        walk(self.tree())
        return found

    def close(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def flower(sway, command=None):
    argv = command or ["/usr/bin/weston-flower"]
    return (f'command = {json.dumps(argv)}\nuser = "nobody"\ndelivery = "signals"\n'
            f'[environment]\nWAYLAND_DISPLAY = "wayland-1"\nXDG_RUNTIME_DIR = "{sway.dir}"\n'
            '[timeouts]\nbackground_grace = 1\n')


def ms(xs):
    return f"{sorted(xs)[len(xs) // 2] * 1000:.1f} / {pct(xs, 90) * 1000:.1f}"


def main():
    sway = Sway()
    try:
        run(sway)
    finally:
        sway.close()


def run(sway):
    busy = ["/bin/sh", "-c", "/usr/bin/weston-flower & while :; do :; done"]
    smoke = ["/bin/sh", "-c", f"WAYLAND_DEBUG=client exec /usr/bin/weston-smoke 2>>{sway.dir}/smoke.log"]
    d = BenchDaemon("focus", {"a": flower(sway), "b": flower(sway), "c": flower(sway, busy), "s": flower(sway, smoke)},
                    settings="[memory]\nmonitor = false\n", follow=[])
    follower = subprocess.Popen([os.path.join(RELEASE, "lifecycled-follow"), "--socket", d.socket,
                                 "--sway-socket", sway.socket, "--interval", "2"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        rows = measure(sway, d)
    finally:
        follower.kill()
        d.stop()
    print(f"| compositor, {CYCLES} cycles | median / p90 (ms) or figure |")
    print("|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


def measure(sway, d):
    events = sway.connect()
    Sway.send(events, 2, b'["window","workspace"]')
    Sway.receive(events)
    rows = []

    def status(app):
        return next(a for a in d.request({"command": "status", "apps": [app]})["status"]["apps"])

    def wait_until(what, cond, seconds=20):
        end = time.monotonic() + seconds
        while not cond():
            if time.monotonic() > end:
                apps = d.request({"command": "status"})["status"]["apps"]
                raise SystemExit(f"never: {what} ({', '.join(a['name'] + ' ' + a['state'] for a in apps)})")
            time.sleep(0.005)

    def group_of(pid):
        try:
            return open(f"/proc/{pid}/cgroup").read().split("0::", 1)[1].strip()
        except OSError:
            return None

    def pid_window(app):
        """The app's window: the one whose process is in the app's cgroup."""
        group = group_of(status(app)["pid"])

        def found():
            return [w["id"] for w in sway.windows() if group_of(w["pid"]) == group]
        wait_until(f"{app}'s window", lambda: found())
        return found()[0]

    wall = {}

    def sway_event(kind, match):
        """The time sway's event came (read as it comes); its wall-clock time in wall["event"]."""
        while True:
            select.select([events], [], [])
            t = time.perf_counter()
            wall["event"] = time.time()
            k, body = Sway.receive(events)
            if k == kind and match(body):
                return t

    def became(app, state):
        return d.wait_event(lambda e: e.get("app") == app and e.get("kind") == "transition" and e.get("to") == state)

    for app in ("a", "b"):
        d.request({"command": "launch", "app": app, "background": True})
    wa, wb = pid_window("a"), pid_window("b")
    sway.run(f"[con_id={wb}] focus")
    wait_until("a inactive and b active", lambda: status("b")["state"] == "active" and status("a")["state"] == "inactive")

    # 1. Focus change to active.
    focus = []
    target = "a"
    for _ in range(CYCLES):
        con = wa if target == "a" else wb
        sway.run(f"[con_id={con}] focus")
        t_event = sway_event(0x80000003, lambda b: b.get("change") == "focus" and b["container"]["id"] == con)
        became(target, "active")
        focus.append(time.perf_counter() - t_event)
        target = "b" if target == "a" else "a"
    rows.append(("focus change (sway's window event) to the app active (the daemon's transition record)", ms(focus)))

    # 2. Workspace switch that shows a frozen app: thawed, active, its first frame.
    d.request({"command": "launch", "app": "s", "background": True})
    ws = pid_window("s")
    log = f"{sway.dir}/smoke.log"

    def first_commit(offset, after_us):
        """Microseconds from after_us to the first commit logged past offset (None: none yet)."""
        with open(log, errors="replace") as f:
            f.seek(offset)
            for line in f:
                if line.startswith("[") and "-> wl_surface@" in line and ".commit()" in line:
                    ms_, us_ = line[1:line.index("]")].strip().split(".")
                    stamp = int(ms_) * 1000 + int(us_)
                    return ((stamp - after_us) % 2**32) / 1e6
        return None

    thawed, active, frame = [], [], []
    for _ in range(CYCLES):
        sway.run(f"[con_id={ws}] move to workspace 3")
        sway.run(f"[con_id={wa}] focus")
        wait_until("s frozen", lambda: status("s").get("frozen") is True)
        offset = os.path.getsize(log)
        pid = status("s")["pid"]
        events_file = "/sys/fs/cgroup/unified" + open(f"/proc/{pid}/cgroup").read().split("0::", 1)[1].strip() + "/cgroup.events"
        sway.run("workspace 3")
        t_event = sway_event(0x80000000, lambda b: b.get("change") == "focus" and b["current"]["name"] == "3")
        while "frozen 1" in open(events_file).read():
            time.sleep(0.0002)
        thawed.append(time.perf_counter() - t_event)
        event_us = int(wall["event"] * 1e6) % 2**32
        became("s", "active")
        active.append(time.perf_counter() - t_event)
        wait_until("s draws", lambda: first_commit(offset, event_us) is not None)
        frame.append(first_commit(offset, event_us))
        sway.run("workspace 1")
        sway.run(f"[con_id={wa}] focus")
        wait_until("a active", lambda: status("a")["state"] == "active")
    d.request({"command": "stop", "app": "s"})
    rows.append(("workspace switch (sway's workspace event) to the shown app thawed (cgroup.events)", ms(thawed)))
    rows.append(("... to the shown app active", ms(active)))
    rows.append(("... to the shown app's first frame (its first wl_surface.commit)", ms(frame)))

    # 3. What a shown and a hidden app cost: a window and a busy loop.
    d.request({"command": "launch", "app": "c", "background": True})
    wc = pid_window("c")
    wait_until("c shown", lambda: status("c")["state"] in ("active", "inactive"))
    sway.run(f"[con_id={wa}] focus")
    wait_until("c inactive", lambda: status("c")["state"] == "inactive")
    group = "/sys/fs/cgroup/unified" + open(f"/proc/{status('c')['pid']}/cgroup").read().split("0::", 1)[1].strip()

    def usage(seconds=2.0):
        def read():
            with open(group + "/cpu.stat") as f:
                return int(next(line for line in f if line.startswith("usage_usec")).split()[1])
        u0, t0 = read(), time.monotonic()
        time.sleep(seconds)  # the span measured, not a synchronisation
        return (read() - u0) / 1e6 / (time.monotonic() - t0)

    shown = usage()
    sway.run(f"[con_id={wc}] move to workspace 4")
    wait_until("c frozen", lambda: status("c").get("frozen") is True)
    hidden = usage()
    rows.append(("CPU of an app with a window and a busy loop: shown (inactive) / hidden (frozen)",
                 f"{shown * 100:.0f} % / {hidden * 100:.1f} % of a core"))

    return rows


if __name__ == "__main__":
    main()
