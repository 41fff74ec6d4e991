#!/usr/bin/python3
"""A shell driving lifecycled over D-Bus, as a Python shell author would
(dbus-python with GLib), for the end-to-end tests (Tests/EndToEndTests/DBusTests.swift).

    shell.py ADDRESS STEP...

Each STEP is `VERB:APP` (Launch, Activate, Stop, Kill, Restart, Fetch), a
manager VERB (Home, Lock, Unlock), or `exec:COMMAND ARGS` (split on spaces),
run as a step of its own (a reload through supervisorctl, say). The client subscribes to every signal of
the daemon's name *before* it takes the snapshot (GetManagedObjects), then
for each step calls the method and waits for its operation (Operation.Wait).
It prints one JSON object: each step's (result, reason), every
PropertiesChanged and InterfacesAdded/Removed in order (with what they add
and remove), the snapshot before,
and the snapshot after (taken after the last step; the signals emitted
before it reach the client before its reply, per-sender order).
"""
import json
import subprocess
import sys

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

NAME = "io.lifecycled.Lifecycle1"
ROOT = "/io/lifecycled/Lifecycle1"


def plain(value):
    """dbus-python's types as JSON values."""
    if isinstance(value, (dbus.Array, list)):
        return [plain(v) for v in value]
    if isinstance(value, (dbus.Struct, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (dbus.Dictionary, dict)):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, dbus.Boolean):
        return bool(value)
    if isinstance(value, (dbus.String, dbus.ObjectPath)):
        return str(value)
    if isinstance(value, (int, float)):
        return int(value) if isinstance(value, int) else value
    return value


def main():
    address, steps = sys.argv[1], sys.argv[2:]
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.bus.BusConnection(address)
    signals = []

    def on_signal(*args, **kw):
        member, path = kw["member"], kw["path"]
        if member == "PropertiesChanged":
            signals.append({"signal": member, "path": path, "interface": str(args[0]), "changed": plain(args[1])})
        elif member == "InterfacesAdded":
            signals.append({"signal": member, "path": str(args[0]), "interfaces": plain(args[1])})
        elif member == "InterfacesRemoved":
            signals.append({"signal": member, "path": str(args[0]), "removed": plain(args[1])})
        else:
            signals.append({"signal": member, "path": path, "args": plain(list(args))})

    bus.add_signal_receiver(on_signal, sender_keyword=None, member_keyword="member", path_keyword="path",
                            bus_name=NAME)
    manager = bus.get_object(NAME, ROOT)
    before = plain(manager.GetManagedObjects(dbus_interface="org.freedesktop.DBus.ObjectManager"))
    results = []
    for step in steps:
        verb, _, app = step.partition(":")
        if verb == "exec":
            results.append(["ran", str(subprocess.run(app.split(" "), stdout=subprocess.DEVNULL).returncode)])
            continue
        try:
            if app:
                path = manager.GetApp(app, dbus_interface=NAME + ".Manager")
                target, iface = bus.get_object(NAME, path), NAME + ".App"
            else:
                target, iface = manager, NAME + ".Manager"
            op = getattr(target, verb)(dbus.Dictionary({}, signature="sv"), dbus_interface=iface)
            result = bus.get_object(NAME, op, introspect=False).Wait(dbus_interface=NAME + ".Operation", timeout=60)
            results.append([str(result[0]), str(result[1])])
        except dbus.DBusException as e:
            results.append(["error", e.get_dbus_name(), e.get_dbus_message()])
    after = plain(manager.GetManagedObjects(dbus_interface="org.freedesktop.DBus.ObjectManager"))
    # Each object's interfaces read one by one: what GetManagedObjects says must be what they say.
    each = {path: {iface: plain(bus.get_object(NAME, path).GetAll(iface, dbus_interface="org.freedesktop.DBus.Properties"))
                   for iface in ifaces if iface.startswith(NAME)}
            for path, ifaces in after.items()}
    context = GLib.MainContext.default()
    while context.pending():
        context.iteration(False)
    print(json.dumps({"results": results, "signals": signals, "before": before, "after": after, "each": each}))


if __name__ == "__main__":
    main()
