#!/usr/bin/python3
"""A shell's event history over D-Bus (Monitor), for DBusTests.

    monitor.py ADDRESS APP COMMAND...

Creates a monitor of APP, runs COMMAND (supervisorctl, say), and collects
the monitor's Record signals until the record of APP acknowledging
didEnterBackground; then opens eight more monitors on the same connection
(the ninth must be refused), closes one, and prints one JSON object: the
records with their sequence numbers, the refusal, and the monitor paths.
"""
import json, subprocess, sys

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

NAME, ROOT = "io.lifecycled.Lifecycle1", "/io/lifecycled/Lifecycle1"
address, app, command = sys.argv[1], sys.argv[2], sys.argv[3:]
dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.bus.BusConnection(address)
records = []


def on_record(sequence, record, path=None):
    records.append([int(sequence), str(record), str(path)])


bus.add_signal_receiver(on_record, "Record", NAME + ".Monitor", NAME, path_keyword="path")
manager = bus.get_object(NAME, ROOT)
options = dbus.Dictionary({"apps": dbus.Array([app], signature="s")}, signature="sv")
first = manager.CreateMonitor(options, dbus_interface=NAME + ".Manager")
subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
context = GLib.MainContext.default()
def home(r):
    record = json.loads(r[1])
    return record.get("kind") == "acknowledged" and record.get("event") == "didEnterBackground"


while not any(home(r) for r in records):
    context.iteration(True)
more = [str(manager.CreateMonitor(dbus.Dictionary({}, signature="sv"), dbus_interface=NAME + ".Manager"))
        for _ in range(7)]
refused = ""
try:
    manager.CreateMonitor(dbus.Dictionary({}, signature="sv"), dbus_interface=NAME + ".Manager")
except dbus.DBusException as e:
    refused = e.get_dbus_name()
bus.get_object(NAME, first).Close(dbus_interface=NAME + ".Monitor")
again = str(manager.CreateMonitor(dbus.Dictionary({}, signature="sv"), dbus_interface=NAME + ".Manager"))
print(json.dumps({"records": records, "first": str(first), "more": more, "refused": refused, "again": again}))
