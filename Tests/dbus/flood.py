#!/usr/bin/python3
"""A caller flooding the daemon with calls polkit must decide, while
polkitd is stopped (SIGSTOP), for DBusTests.aFloodOfCallsWaitingForPolkitIsBoundedAndBlocksNoOne.

    flood.py ADDRESS POLKITD_PID APP_PATH CALLS

As root: stops polkitd; a child, as nobody, sends CALLS Activate calls on
one connection without waiting for each; the parent waits until the calls
over the daemon's bound were refused, makes root's own call (Home, which
polkit is not asked about) and times it, lets polkitd go on, and waits
for every answer. Prints one JSON object.
"""
import json, os, pwd, signal, sys, time

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

NAME = "io.lifecycled.Lifecycle1"
address, polkitd, path, calls = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
os.kill(polkitd, signal.SIGSTOP)
report, done = os.pipe()
go_read, go_write = os.pipe()
child = os.fork()
if child == 0:
    nobody = pwd.getpwnam("nobody")
    os.setgroups([])
    os.setgid(nobody.pw_gid)
    os.setuid(nobody.pw_uid)
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.bus.BusConnection(address)
    app = bus.get_object(NAME, path)
    answers = []

    def answered(kind):
        def handler(*args):
            answers.append(args[0].get_dbus_name() if kind == "error" else "ok")
        return handler

    for _ in range(calls):
        app.Activate(dbus.Dictionary({}, signature="sv"), dbus_interface=NAME + ".App",
                     reply_handler=answered("ok"), error_handler=answered("error"), timeout=120)
    context = GLib.MainContext.default()
    while sum(a.endswith("LimitsExceeded") for a in answers) < calls - 16:
        context.iteration(True)
    os.write(done, json.dumps({"early": list(answers)}).encode() + b"\n")
    os.read(go_read, 1)
    while len(answers) < calls:
        context.iteration(True)
    os.write(done, json.dumps({"all": answers}).encode() + b"\n")
    os._exit(0)

lines = os.fdopen(report)
early = json.loads(lines.readline())["early"]
bus = dbus.bus.BusConnection(address)
manager = bus.get_object(NAME, "/io/lifecycled/Lifecycle1")
t = time.perf_counter()
# Answered while polkitd is stopped, or this raises (NoReply) after 10 s.
manager.Home(dbus.Dictionary({}, signature="sv"), dbus_interface=NAME + ".Manager", timeout=10)
root_ms = (time.perf_counter() - t) * 1000
os.kill(polkitd, signal.SIGCONT)
os.write(go_write, b"g")
final = json.loads(lines.readline())["all"]
os.waitpid(child, 0)
print(json.dumps({"early": early, "root_ms": root_ms, "all": final}))
