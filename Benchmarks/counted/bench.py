#!/usr/bin/python3
"""Counted, not only timed (issue 31, docs/performance.md): the daemon's
instructions per operation, counted by callgrind. This machine has no
hardware counters and its wall clock swings several-fold from one run to
the next; callgrind's counts repeat.

    BUILDS="DIR [DIR ...]" make bench-counted      (default: .build/release)
    N=100 to change the repetitions; KEEP=1 keeps each window's dump
    (callgrind_annotate --inclusive=yes DUMP shows where they go);
    FOLLOW=1 keeps one follower of every app's records connected (as a
    shell following events is), read and thrown away; BUS=1
    serves D-Bus on a private dbus-daemon (by default there is no bus,
    and the daemon publishes nothing), and with MONITOR=1 one monitor of
    every app's records is open on it (CreateMonitor; its signals are
    left to the bus daemon's queue); RUNNING=990 launches that many of
    the idle apps into the background (plain programs, frozen at once)
    before the rows, so that each row is counted beside them: an
    operation whose cost grows with the number of running apps shows.

For each build: its lifecycled (debug info stripped: valgrind 3.19 cannot
read the static binary's) under valgrind --tool=callgrind with one hash
seed (SWIFT_DETERMINISTIC_HASHING=1), 1,000
configured apps (C recorders, a plain program, the rest never launched),
no memory monitor. Each operation is repeated N times inside one window:
callgrind_control --zero before, --dump after; the dump's total over N.
Everything the daemon does in the window counts (all its threads, its
timers): nothing else runs.

  event        interruption-begin then -end on the active recorder, each one
               event (willResignActive, didBecomeActive) delivered and
               acknowledged, with its control request: per event
  freeze/thaw  home then activate of the plain program (signals, grace 1 ms):
               frozen (cgroup.events), then thawed and active: per pair
  launch       launch --background then stop of the plain program: per pair
  background   launch --background of a second C recorder to frozen (its
               three launch events, didEnterBackground, the freeze: what each
               app of lifecycled-bench --launches' burst costs), then stop
  status       status of the 1,000 apps: per request
  prewarmed    activate of a C recorder held prewarmed (prewarm = "always") to
               its didBecomeActive (thawed, its three launch events), kill, and
               its next prewarm to held (launch, frozen): per round. Measured
               last: prewarm_budget is off until then (a reload), so that the
               rows above see what they saw before this one existed. A build
               without prewarming has no such app, and n/a in the row

Waiting adds nothing to the counts: the benchmark reads the recorder's own
log and the cgroup's files, not the daemon.
"""
import glob, os, shutil, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from benchdaemon import BenchDaemon, RELEASE, own_directories, private_bus, wait_until  # noqa: E402

N = int(os.environ.get("N", "100"))
APPS = 1000
RUNNING = int(os.environ.get("RUNNING", "0"))


class Counted:
    """A build's daemon under callgrind, and its counting windows."""

    def __init__(self, bin_dir, bus=None):
        self.tmp = tempfile.mkdtemp(prefix="lifecycled-bench-counted-")
        binary = os.path.join(self.tmp, "lifecycled.stripped")
        subprocess.run(["objcopy", "--strip-debug", os.path.join(bin_dir, "lifecycled"), binary], check=True)
        # Each build with its own C recorder (the wire may differ): BUILD/../clib,
        # as `make clib` leaves it beside .build/release.
        recorder = os.path.join(os.path.dirname(os.path.abspath(bin_dir)), "clib", "c-recorder")
        if not os.access(recorder, os.X_OK):
            raise SystemExit(f"no {recorder}: run make clib in that build's tree")
        with open(binary, "rb") as f:
            image = f.read()
        # A build without prewarming (before issue 31) has no "warm" app, and no row for it.
        self.prewarming = b"LIFECYCLE_PREWARM" in image
        base = own_directories(binary)  # a build that predates a directory's key gets a file without it
        self.out = os.path.join(self.tmp, "callgrind.out")
        with open(os.path.join(self.tmp, "lifecycled"), "w") as f:
            # One hash seed for every run (Swift seeds its dictionaries at
            # random per process): lookups then collide the same way in each
            # build and each run, and the counts repeat more closely.
            f.write(f"#!/bin/sh\nSWIFT_DETERMINISTIC_HASHING=1 exec valgrind --tool=callgrind --callgrind-out-file={self.out} "
                    f"{binary} \"$@\"\n")
        os.chmod(os.path.join(self.tmp, "lifecycled"), 0o755)
        self.log = os.path.join(self.tmp, "rec.events")
        # With RUNNING, the idle apps are plain programs frozen at once in the background.
        idle = ('command = ["/bin/sleep", "100000"]\n' + ('delivery = "signals"\n[timeouts]\nbackground_grace = 0.001\n'
                                                          if RUNNING else ""))
        apps = {f"idle{i:04}": idle for i in range(APPS - 3)}
        apps["rec"] = f'command = ["{recorder}", "--log", "{self.log}"]\n'
        apps["bg"] = f'command = ["{recorder}", "--log", "/dev/null"]\n'
        self.warm_log = os.path.join(self.tmp, "warm.events")
        if self.prewarming:
            apps.pop("idle0000")
            apps["warm"] = f'command = ["{recorder}", "--log", "{self.warm_log}"]\nprewarm = "always"\n'
        apps["plain"] = ('command = ["/bin/sleep", "100000"]\ndelivery = "signals"\n'
                         '[timeouts]\nbackground_grace = 0.001\n')
        # The warm app is held only for its own row, the last: the budget is
        # off until then (a reload), so that the other rows see the same
        # daemon as before the row existed.
        budget = 'prewarm_budget = "off"\n' if self.prewarming else ""
        self.d = BenchDaemon("counted", apps, settings=budget + "event_history = 0\n[memory]\nmonitor = false\n",
                             bin_dir=self.tmp, ready_tries=6000, base=base, bus=bus)
        self.pid = self.valgrind_pid()
        if os.environ.get("FOLLOW"):
            # Every record of every app, read as it comes (so that the
            # socket never fills) and thrown away.
            follower = self.d.connect()
            follower.sendall(b'{"command":"events","follow":true}\n')
            threading.Thread(target=lambda: all(iter(lambda: follower.recv(65536), b"")), daemon=True).start()
        if bus:  # counting starts once the interface is served
            wait_until("the bus name", lambda: "serving io.lifecycled" in open(os.path.join(self.d.dir, "daemon.log")).read())
            if os.environ.get("MONITOR"):
                import dbus  # python3-dbus, as Benchmarks/dbus/bench.py
                self.bus = dbus.bus.BusConnection(bus)
                manager = self.bus.get_object("io.lifecycled.Lifecycle1", "/io/lifecycled/Lifecycle1")
                self.monitor = manager.CreateMonitor(dbus.Dictionary({}, signature="sv"),
                                                     dbus_interface="io.lifecycled.Lifecycle1.Manager")

    def valgrind_pid(self):
        # The wrapper execs valgrind: the daemon's pid is the wrapper's.
        return self.d.proc.pid

    def window(self, run):
        """The instructions the daemon executes while `run` runs."""
        subprocess.run(["callgrind_control", "--zero", str(self.pid)], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        before = set(glob.glob(self.out + "*"))
        run()
        subprocess.run(["callgrind_control", "--dump", str(self.pid)], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        wait_until("the dump", lambda: set(glob.glob(self.out + "*")) - before)
        dump = sorted(set(glob.glob(self.out + "*")) - before)[-1]
        wait_until("the dump written", lambda: any(line.startswith(("totals:", "summary:"))
                                                   for line in open(dump, errors="replace")))
        for line in open(dump, errors="replace"):
            if line.startswith(("totals:", "summary:")):
                return int(line.split()[1])

    def lines(self):
        try:
            with open(self.log) as f:
                return f.read().count("\n")
        except OSError:
            return 0

    def groups(self, app):
        """The app's cgroups now (one while it runs)."""
        return glob.glob(f"/sys/fs/cgroup/unified{self.d.cgroup}/apps/{app}.*")

    def events_file(self, app):
        wait_until(f"{app}'s cgroup", lambda: self.groups(app))
        return self.groups(app)[0] + "/cgroup.events"

    def launch_idle(self):
        """RUNNING idle apps launched into the background, until all are frozen."""
        running = [f"idle{i + 1:04}" for i in range(RUNNING)]  # idle0000 is the warm app's place
        for app in running:
            r = self.d.request({"command": "launch", "app": app, "background": True})
            assert r.get("ok"), r

        def frozen():
            for app in running:
                groups = self.groups(app)
                try:
                    if not groups or "frozen 1" not in open(groups[0] + "/cgroup.events").read():
                        return False
                except OSError:
                    return False
            return True
        end = time.monotonic() + 1200
        while not frozen():  # looked at every 2 s: a thousand files each time
            assert time.monotonic() < end, "the idle apps never all frozen"
            time.sleep(2)

    def measure(self):
        d = self.d
        rows = {}
        if RUNNING:
            self.launch_idle()
        # The recorder active: the events' app.
        d.request({"command": "activate", "app": "rec"})
        wait_until("rec active", lambda: "didBecomeActive" in open(self.log).read() if os.path.exists(self.log)
                   else False)

        def events():
            for _ in range(N):
                n = self.lines()
                d.request({"command": "interruption-begin"})
                wait_until("willResignActive", lambda: self.lines() > n)
                n = self.lines()
                d.request({"command": "interruption-end"})
                wait_until("didBecomeActive", lambda: self.lines() > n)
        rows["event (delivered and acknowledged, with its request)"] = self.window(events) / (2 * N)

        # The recorder home and frozen first: only the plain program moves in the window.
        d.request({"command": "home"})
        rec = self.events_file("rec")
        wait_until("rec frozen", lambda: "frozen 1" in open(rec).read())
        r = d.request({"command": "launch", "app": "plain", "background": True})
        assert r.get("ok"), r
        events_file = self.events_file("plain")
        wait_until("plain frozen", lambda: "frozen 1" in open(events_file).read())

        def freeze_thaw():
            for _ in range(N):
                d.request({"command": "activate", "app": "plain"})
                wait_until("thawed", lambda: "frozen 0" in open(events_file).read())
                d.request({"command": "home"})
                wait_until("frozen", lambda: "frozen 1" in open(events_file).read())
        rows["freeze and thaw (home, activate of a plain program)"] = self.window(freeze_thaw) / N

        d.request({"command": "stop", "app": "plain"})
        wait_until("plain stopped", lambda: not os.path.exists(events_file))

        def launches():
            for _ in range(N):
                r = d.request({"command": "launch", "app": "plain", "background": True})
                assert r.get("ok"), r
                wait_until("plain running", lambda: self.groups("plain"))
                d.request({"command": "stop", "app": "plain"})
                wait_until("plain's cgroup gone", lambda: not self.groups("plain"))
        rows["launch and stop (a plain program)"] = self.window(launches) / N

        def background_launches():
            for _ in range(N):
                r = d.request({"command": "launch", "app": "bg", "background": True})
                assert r.get("ok"), r
                bg = self.events_file("bg")
                wait_until("bg frozen", lambda: "frozen 1" in open(bg).read())
                d.request({"command": "stop", "app": "bg"})
                wait_until("bg's cgroup gone", lambda: not self.groups("bg"))
        rows["background launch to frozen, and stop (a C recorder: one of the burst's)"] = (
            self.window(background_launches) / N)

        def statuses():
            for _ in range(N):
                r = d.request({"command": "status"})
                assert len(r["status"]["apps"]) == APPS
        rows[f"status of {APPS} apps"] = self.window(statuses) / N

        def held():
            """The warm app's one group, frozen: prewarmed and held."""
            groups = self.groups("warm")
            if len(groups) != 1:
                return False
            try:
                return "frozen 1" in open(groups[0] + "/cgroup.events").read()
            except OSError:
                return False

        def prewarmed_activations():
            for _ in range(N):
                wait_until("warm held", held)
                n = warm_lines()
                d.request({"command": "activate", "app": "warm"})
                wait_until("warm active", lambda: warm_lines() >= n + 3)  # its three launch events
                d.request({"command": "kill", "app": "warm"})  # then prewarmed again: "always"
            wait_until("warm held", held)  # the last one's prewarm is in the window too

        def warm_lines():
            try:
                with open(self.warm_log) as f:
                    return f.read().count("\n")
            except OSError:
                return 0
        name = "prewarmed activation to active, kill, prewarmed and held again (a C recorder)"
        if self.prewarming:
            conf = os.path.join(d.dir, "lifecycled.toml")
            with open(conf) as f:
                text = f.read()
            with open(conf, "w") as f:
                f.write(text.replace('prewarm_budget = "off"', 'prewarm_budget = "256M"'))
            assert d.request({"command": "reload"}).get("ok"), "reload refused"
            wait_until("warm held", held)
            rows[name] = self.window(prewarmed_activations) / N
        else:
            rows[name] = None
        return rows

    def stop(self):
        self.d.stop(timeout=300)
        if not os.environ.get("KEEP"):  # KEEP=1: the dumps stay, for callgrind_annotate
            shutil.rmtree(self.tmp, ignore_errors=True)  # the daemon's own directory goes with its stop


def main():
    builds = os.environ.get("BUILDS", RELEASE).split()
    busd, address = private_bus() if os.environ.get("BUS") else (None, None)
    results = []
    try:
        for b in builds:
            c = Counted(b, bus=address)
            try:
                results.append(c.measure())
            finally:
                c.stop()
    finally:
        if busd:
            busd.terminate()
            busd.wait()
    names = list(results[0])
    print(f"| instructions in the daemon, {N} repetitions | " + " | ".join(builds) + " |")
    print("|---|" + "---|" * len(builds))
    for name in names:
        print(f"| {name} | " + " | ".join("n/a" if r.get(name) is None else f"{r[name] / 1e3:,.0f} k"
                                          for r in results) + " |")


if __name__ == "__main__":
    main()
