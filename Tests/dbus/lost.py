#!/usr/bin/python3
"""A monitor that falls behind is told what it lost (Monitor.Lost), for DBusTests.

    lost.py ADDRESS BUS_PID CONTROL_SOCKET APP CYCLES

Opens eight monitors of APP on one connection, stops the bus daemon
(SIGSTOP), drives APP through CYCLES activate + home cycles over the
daemon's control socket (each waiting for didEnterBackground to be
acknowledged, as supervisorctl waits), so that the daemon's queue to the
bus passes its bound; then lets the bus go on, makes one more cycle, and
collects every monitor's signals until the last cycle's record. Prints
one JSON object: per monitor, its signals in order as ["Record", n] or
["Lost", first, last].
"""
import json, os, signal, socket, sys, time

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

NAME, ROOT = "io.lifecycled.Lifecycle1", "/io/lifecycled/Lifecycle1"
address, bus_pid, control, app, cycles = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.bus.BusConnection(address)
seen = {}  # monitor path -> signals
last_home = {}  # monitor path -> the last didEnterBackground acknowledgement's sequence


def on_record(sequence, record, path=None):
    seen.setdefault(str(path), []).append(["Record", int(sequence)])
    r = json.loads(str(record))
    if r.get("kind") == "acknowledged" and r.get("event") == "didEnterBackground":
        last_home[str(path)] = int(sequence)


def on_lost(first, last, path=None):
    seen.setdefault(str(path), []).append(["Lost", int(first), int(last)])


bus.add_signal_receiver(on_record, "Record", NAME + ".Monitor", NAME, path_keyword="path")
bus.add_signal_receiver(on_lost, "Lost", NAME + ".Monitor", NAME, path_keyword="path")
manager = bus.get_object(NAME, ROOT)
options = dbus.Dictionary({"apps": dbus.Array([app], signature="s")}, signature="sv")
monitors = [str(manager.CreateMonitor(options, dbus_interface=NAME + ".Manager")) for _ in range(8)]

events = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
events.connect(control)
events.sendall(json.dumps({"command": "events", "follow": True, "apps": [app]}).encode() + b"\n")
stream = events.makefile("rb")
stream.readline()


def request(r):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(control)
    s.sendall(json.dumps(r).encode() + b"\n")
    answer = json.loads(s.makefile("rb").readline())
    s.close()
    if not answer.get("ok", True) and answer.get("error"):
        raise SystemExit(f"{r}: {answer}")


def acknowledged(event):
    while True:
        line = stream.readline()
        if not line:
            raise SystemExit("the event stream ended")
        r = json.loads(line).get("event", {})
        if r.get("kind") == "acknowledged" and r.get("event") == event:
            return


def cycle():
    request({"command": "activate", "app": app})
    acknowledged("didBecomeActive")
    request({"command": "home"})
    acknowledged("didEnterBackground")


os.kill(bus_pid, signal.SIGSTOP)
try:
    for _ in range(cycles):
        cycle()
finally:
    os.kill(bus_pid, signal.SIGCONT)
context = GLib.MainContext.default()
# What was queued reaches us; then one more cycle, which the monitors get
# after a Lost naming what fell out.
manager.Get(NAME + ".Manager", "Version", dbus_interface="org.freedesktop.DBus.Properties")
while context.pending():
    context.iteration(False)
before = dict(last_home)
cycle()
GLib.timeout_add(200, lambda: True)  # the loop wakes to look at the clock
deadline = time.monotonic() + 60
while time.monotonic() < deadline and not all(last_home.get(m, 0) > before.get(m, 0) and any(s[0] == "Lost" for s in seen.get(m, [])) for m in monitors):
    context.iteration(True)
print(json.dumps({m: seen.get(m, []) for m in monitors}))
