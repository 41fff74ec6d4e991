#!/usr/bin/python3
"""The D-Bus interface, measured (issue 29, docs/dbus.md, docs/performance.md).

Runs the release daemon on a private dbus-daemon with APPS plain apps (not
running) and the C recorder, and measures side by side in one run:
  1. the whole state in one call: `status` over root's control socket (JSON,
     parsed) against GetManagedObjects (dbus-python, unmarshalled), in
     alternating batches;
  2. an activation to its outcome (the recorder acknowledged didBecomeActive)
     and back home: over the socket as supervisorctl waits (follow the
     app's events, send the command, read until the outcome) against
     Activate + Operation.Wait over D-Bus, alternating;
  3. the signals each D-Bus cycle sends: PropertiesChanged per app object,
     and how many properties each names;
  4. the daemon's CPU per cycle with and without a client that subscribed
     to every signal of the daemon and never reads its socket.
  5. the bus daemon stopped (SIGSTOP): the lifecycle over the socket, the
     daemon's memory, the bus catching up;
  6. with BEFORE=DIR (a lifecycled built before the interface), the socket's
     activation and status side by side with that build, alternating.
  7. the whole state from a C client (Benchmarks/dbus/gmo.c, sd-bus reading
     every value) against `status` read whole over the socket.
With CALLGRIND="DIR ..." it only counts, for each build, the daemon's
instructions per GetManagedObjects (callgrind, in lc_managed_objects).
Prints a Markdown table. Run as root: make bench-dbus (APPS=1000 CYCLES=100).
"""
import json, os, socket, statistics, subprocess, sys, tempfile, time

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from benchdaemon import BenchDaemon, C_RECORDER, RELEASE, cpu_seconds, pct, private_bus  # noqa: E402

NAME, ROOT = "io.lifecycled.Lifecycle1", "/io/lifecycled/Lifecycle1"
APPS = int(os.environ.get("APPS", "1000"))
CYCLES = int(os.environ.get("CYCLES", "100"))


def build_gmo():
    """Benchmarks/dbus/gmo.c, the C client, built beside the release build."""
    out = os.path.join(os.path.dirname(RELEASE), "bench-gmo")
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", out,
                    os.path.join(os.path.dirname(os.path.abspath(__file__)), "gmo.c"), "-lsystemd"], check=True)
    return out


def c_times(argv):
    """Seconds per call, as gmo prints them (µs first on each line)."""
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return [float(line.split()[0]) / 1e6 for line in out.splitlines()]


def instructions_per_call(bin_dir, address, apps, calls=10):
    """The daemon's instructions in lc_managed_objects per GetManagedObjects,
    counted by callgrind (debug info stripped: valgrind 3.19 cannot read
    the static binary's)."""
    d = tempfile.mkdtemp(prefix="lifecycled-bench-callgrind-")
    binary, out = os.path.join(d, "lifecycled.stripped"), os.path.join(d, "callgrind.out")
    subprocess.run(["objcopy", "--strip-debug", os.path.join(bin_dir, "lifecycled"), binary], check=True)
    with open(os.path.join(d, "lifecycled"), "w") as f:
        f.write(f"#!/bin/sh\nexec valgrind --tool=callgrind --toggle-collect=lc_managed_objects "
                f"--callgrind-out-file={out} {binary} \"$@\"\n")
    os.chmod(os.path.join(d, "lifecycled"), 0o755)
    daemon = BenchDaemon("dbus-callgrind", apps, settings='event_history = 0\n[memory]\nmonitor = false\n',
                         bin_dir=d, ready_tries=3000, bus=address)
    bus = dbus.bus.BusConnection(address)
    for _ in range(6000):
        if bus.name_has_owner(NAME):
            break
        time.sleep(0.01)
    subprocess.run([build_gmo(), address, str(calls)], check=True, stdout=subprocess.DEVNULL)
    bus.close()
    daemon.stop(timeout=300)
    with open(out) as f:
        total = next(int(line.split()[1]) for line in f if line.startswith("summary:"))
    return total / calls


def ms(xs):
    return f"{statistics.median(xs) * 1000:.2f} / {pct(xs, 90) * 1000:.2f}"


def main():
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    busd, address = private_bus()
    apps = {f"app{i:04d}": 'command = ["/bin/sleep", "100000"]\ndelivery = "signals"\n' for i in range(APPS)}
    if os.environ.get("CALLGRIND"):
        # CALLGRIND="DIR DIR ...": the daemon's instructions per GetManagedObjects, each build.
        print(f"| build ({APPS} apps) | instructions per GetManagedObjects in the daemon |")
        print("|---|---|")
        for bin_dir in os.environ["CALLGRIND"].split():
            print(f"| {bin_dir} | {instructions_per_call(bin_dir, address, apps) / 1e6:.1f} M |", flush=True)
        busd.kill()
        return
    apps["rec"] = f'command = ["{C_RECORDER}", "--log", "/dev/null"]\n'
    d = BenchDaemon("dbus", apps, settings='event_history = 0\n[memory]\nmonitor = false\n', follow=["rec"],
                    bus=address)
    bus = dbus.bus.BusConnection(address)
    for _ in range(500):
        if bus.name_has_owner(NAME):
            break
        time.sleep(0.01)
    manager = bus.get_object(NAME, ROOT)
    rec = bus.get_object(NAME, manager.GetApp("rec", dbus_interface=NAME + ".Manager"))
    rows = []

    # 1. The whole state in one call.
    status, objects = [], []
    status_bytes = 0
    for _ in range(10):
        for _ in range(3):
            t = time.perf_counter()
            s = d.connect(d.socket + ".private")
            s.sendall(b'{"command":"status"}\n')
            line = s.makefile("rb").readline()
            json.loads(line)
            s.close()
            status.append(time.perf_counter() - t)
            status_bytes = len(line)
        for _ in range(3):
            t = time.perf_counter()
            got = manager.GetManagedObjects(dbus_interface="org.freedesktop.DBus.ObjectManager")
            objects.append(time.perf_counter() - t)
    rows.append((f"whole state, {APPS + 1} apps: `status` (JSON, {status_bytes // 1024} KiB)", ms(status)))
    rows.append((f"whole state, {APPS + 1} apps: GetManagedObjects ({len(got)} objects)", ms(objects)))
    # The same from C: sd-bus reading every value, against the socket's
    # reply read whole (no JSON parse: a lower bound for the socket).
    gmo = build_gmo()
    c_status = c_times([gmo, "--status", d.socket + ".private", "30"])
    c_objects = c_times([gmo, address, "30"])
    rows.append(("whole state from C: `status` read whole (not parsed)", ms(c_status)))
    rows.append(("whole state from C: GetManagedObjects, sd-bus reading every value", ms(c_objects)))

    # 2 and 3. Activation to its outcome, and back home.
    signals = []

    def on_changed(iface, changed, invalidated, path=None):
        signals.append((str(path), len(changed)))

    bus.add_signal_receiver(on_changed, "PropertiesChanged", "org.freedesktop.DBus.Properties", NAME,
                            path_keyword="path")
    context = GLib.MainContext.default()

    def drain():
        manager.Get(NAME + ".Manager", "Version", dbus_interface="org.freedesktop.DBus.Properties")
        while context.pending():
            context.iteration(False)

    def acked(event):
        return lambda e: e.get("app") == "rec" and e.get("kind") == "acknowledged" and e.get("event") == event

    def wait(op):
        # No proxy: dbus-python's asks the bus for the name's owner when it
        # is made (and, unless told not to, introspects): a round trip or two
        # a C client or a kept proxy does not make.
        return bus.call_blocking(NAME, op, NAME + ".Operation", "Wait", "", ())

    def socket_cycle(daemon=d):
        t = time.perf_counter()
        daemon.request({"command": "activate", "app": "rec"}, private=True)
        daemon.wait_event(acked("didBecomeActive"))
        up = time.perf_counter() - t
        daemon.request({"command": "home"}, private=True)
        daemon.wait_event(acked("didEnterBackground"))
        return up

    def bus_cycle():
        t = time.perf_counter()
        op = rec.Activate(dbus.Dictionary({}, signature="sv"), dbus_interface=NAME + ".App")
        result = wait(op)
        up = time.perf_counter() - t
        assert str(result[0]) == "done", result
        op = manager.Home(dbus.Dictionary({}, signature="sv"), dbus_interface=NAME + ".Manager")
        wait(op)
        d.wait_event(acked("didEnterBackground"))  # both transports leave the follower at the same point
        return up

    finished = {}

    def on_finished(op, verb, app, result, reason):
        finished[str(op)] = str(result)

    bus.add_signal_receiver(on_finished, "OperationFinished", NAME + ".Manager", NAME)

    def signal_cycle():
        """Activate, then the OperationFinished the requester is sent: no Wait call."""
        t = time.perf_counter()
        op = str(rec.Activate(dbus.Dictionary({}, signature="sv"), dbus_interface=NAME + ".App"))
        while op not in finished:
            context.iteration(True)
        up = time.perf_counter() - t
        assert finished.pop(op) == "done"
        op = manager.Home(dbus.Dictionary({}, signature="sv"), dbus_interface=NAME + ".Manager")
        wait(op)
        d.wait_event(acked("didEnterBackground"))
        return up

    # The floor under both: one round trip that changes nothing, each way.
    socket_rtt, bus_rtt = [], []
    for _ in range(10):
        for _ in range(10):
            t = time.perf_counter()
            d.request({"command": "status", "apps": ["rec"]}, private=True)
            socket_rtt.append(time.perf_counter() - t)
        for _ in range(10):
            t = time.perf_counter()
            rec.Get(NAME + ".App", "State", dbus_interface="org.freedesktop.DBus.Properties")
            bus_rtt.append(time.perf_counter() - t)
    rows.append(("one round trip that changes nothing: socket `status` of one app (a new connection)", ms(socket_rtt)))
    rows.append(("one round trip that changes nothing: D-Bus Properties.Get of one app's State", ms(bus_rtt)))

    over_socket, over_bus, over_signal = [], [], []
    drain()
    signals.clear()
    for i in range(CYCLES):
        over_socket.append(socket_cycle())
        over_bus.append(bus_cycle())
    drain()
    for i in range(CYCLES):
        over_signal.append(signal_cycle())
    drain()
    finished.clear()
    rows.append(("activate to its outcome: JSON socket, as supervisorctl waits", ms(over_socket)))
    rows.append(("activate to its outcome: Activate + Operation.Wait", ms(over_bus)))
    rows.append(("activate to its outcome: Activate, then OperationFinished (no Wait call)", ms(over_signal)))
    rows.append(("ratio D-Bus / socket (medians): with Wait; with OperationFinished",
                 f"{statistics.median(over_bus) / statistics.median(over_socket):.2f}; "
                 f"{statistics.median(over_signal) / statistics.median(over_socket):.2f}"))
    app_signals = [n for p, n in signals if p.endswith("/app/rec")]
    scene = [n for p, n in signals if p.endswith("/app/rec/scene/main")]
    displays = [n for p, n in signals if "/display/" in p]
    other = {p for p, _ in signals if "/app/" in p and "/app/rec" not in p}
    # Every cycle, over any transport, changes the recorder's object: 3 x CYCLES cycles.
    rows.append(("PropertiesChanged per activate + home cycle (the recorder's object)",
                 f"{len(app_signals) / (3 * CYCLES):.1f}, naming {statistics.mean(app_signals):.1f} properties each; "
                 f"its scene's {len(scene) / (3 * CYCLES):.1f}; the display's {len(displays) / (3 * CYCLES):.1f}; "
                 f"the other 1,000 apps' objects: {len(other)}"))

    # 4. The daemon's CPU: per cycle over each transport; with a client
    # that subscribes to everything and never reads.
    def cpu_per_cycle(n, cycle=bus_cycle):
        c0 = cpu_seconds(d.proc.pid)
        for _ in range(n):
            cycle()
        drain()
        return (cpu_seconds(d.proc.pid) - c0) / n

    def cpu_per_call(n, call):
        c0 = cpu_seconds(d.proc.pid)
        for _ in range(n):
            call()
        return (cpu_seconds(d.proc.pid) - c0) / n

    def status_call():
        s = d.connect(d.socket + ".private")
        s.sendall(b'{"command":"status"}\n')
        s.makefile("rb").readline()
        s.close()

    rows.append(("daemon CPU per whole-state call: `status` / GetManagedObjects",
                 f"{cpu_per_call(30, status_call) * 1000:.2f} ms / "
                 f"{cpu_per_call(30, lambda: manager.GetManagedObjects(dbus_interface='org.freedesktop.DBus.ObjectManager')) * 1000:.2f} ms"))
    rows.append(("daemon CPU per activate + home cycle over the JSON socket", f"{cpu_per_cycle(CYCLES, socket_cycle) * 1000:.2f} ms"))
    quiet = cpu_per_cycle(CYCLES)
    stuck = subprocess.Popen([sys.executable, "-c", f"""
import dbus, sys, time
b = dbus.bus.BusConnection({address!r})
b.add_match_string("type='signal',sender='{NAME}'")
print("ready", flush=True)
time.sleep(100000)
"""], stdout=subprocess.PIPE)
    stuck.stdout.readline()
    stalled = cpu_per_cycle(CYCLES)
    rows.append(("daemon CPU per activate + home cycle over D-Bus", f"{quiet * 1000:.2f} ms"))
    rows.append(("... with a subscriber that never reads", f"{stalled * 1000:.2f} ms"))
    stuck.kill()

    # 5. The bus daemon stopped (SIGSTOP): the lifecycle over the socket,
    # the daemon's memory, and the bus catching up once it goes on.
    def rss_kib(pid):
        with open(f"/proc/{pid}/status") as f:
            return int(next(line for line in f if line.startswith("VmRSS:")).split()[1])

    monitor = manager.CreateMonitor(dbus.Dictionary({}, signature="sv"), dbus_interface=NAME + ".Manager")
    rss0 = rss_kib(d.proc.pid)
    busd.send_signal(19)  # SIGSTOP
    during = [socket_cycle() for _ in range(CYCLES * 4)]
    rss1 = rss_kib(d.proc.pid)
    busd.send_signal(18)  # SIGCONT
    t = time.perf_counter()
    state = rec.Get(NAME + ".App", "State", dbus_interface="org.freedesktop.DBus.Properties")
    caught_up = time.perf_counter() - t
    rows.append((f"activate to its outcome over the socket, the bus daemon stopped ({CYCLES * 4} cycles, a monitor open)",
                 ms(during)))
    rows.append(("daemon RSS growth while the bus daemon was stopped", f"{(rss1 - rss0) / 1024:.1f} MiB"))
    rows.append(("first answer over the bus once it goes on", f"{caught_up * 1000:.1f} ms (State {state})"))
    del monitor

    # 6. Side by side with the build before (BEFORE=dir with its lifecycled):
    # what serving the bus costs the socket's clients. Alternating batches.
    if os.environ.get("BEFORE"):
        b = BenchDaemon("dbus-before", apps, settings='event_history = 0\n[memory]\nmonitor = false\n', follow=["rec"],
                        bin_dir=os.environ["BEFORE"])
        watch = bus.get_object(NAME, ROOT)  # a shell that watches every signal meanwhile
        bus.add_signal_receiver(lambda *a, **k: None, bus_name=NAME)
        runs = {"before": ([], [], 0.0), "after": ([], [], 0.0)}
        for _ in range(5):
            for label, daemon in (("before", b), ("after", d)):
                cycles, statuses, cpu = runs[label]
                c0 = cpu_seconds(daemon.proc.pid)
                cycles += [socket_cycle(daemon) for _ in range(CYCLES // 5)]
                for _ in range(3):
                    t = time.perf_counter()
                    daemon.request({"command": "status"}, private=True)
                    statuses.append(time.perf_counter() - t)
                runs[label] = (cycles, statuses, cpu + cpu_seconds(daemon.proc.pid) - c0)
            drain()
        for label in ("before", "after"):
            cycles, statuses, cpu = runs[label]
            rows.append((f"{label} this change: activate to its outcome over the socket"
                         + (" (the bus served, a shell watching)" if label == "after" else " (no D-Bus)"), ms(cycles)))
            rows.append((f"{label} this change: `status` of {APPS + 1} apps over the socket", ms(statuses)))
            rows.append((f"{label} this change: daemon CPU per cycle (with its status calls)",
                         f"{cpu / len(cycles) * 1000:.2f} ms"))
        del watch
        b.stop()

    d.stop()
    busd.kill()
    print(f"| D-Bus, {APPS + 1} apps, {CYCLES} cycles | median / p90 (ms) or figure |")
    print("|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
