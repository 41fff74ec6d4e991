#!/usr/bin/python3
"""A compositor that reports what it shows over D-Bus (Manager.ReportShown),
as a compositor's own plugin would, for DBusTests.aCompositorReportsOverTheBus.

    reporter.py ADDRESS PID_A PID_B

Two windows, "wa" of the process PID_A and "wb" of PID_B, on output OUT-1:
a focused and shown, b hidden. It reports that, activates b (App.Activate),
waits for the daemon's CompositorRequest (the raise of wb, sent to this
connection alone), carries it out (reports b focused, a shown, with the
request's sequence as carriedOut), and waits for the activation's
operation. Then a report that is not JSON, for its error. Prints one JSON
object: the request, the operation's (result, reason), the error's name.
"""
import json
import sys

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

NAME = "io.lifecycled.Lifecycle1"
ROOT = "/io/lifecycled/Lifecycle1"


def report(a_focused, carried_out=None):
    windows = [
        {"id": "wa", "pid": PID_A, "output": "OUT-1", "focused": a_focused, "visible": True, "rank": 1 - a_focused},
        {"id": "wb", "pid": PID_B, "output": "OUT-1" if not a_focused else None, "focused": not a_focused,
         "visible": not a_focused, "rank": 0 if not a_focused else 1},
    ]
    r = {"source": "test-plugin", "outputs": ["OUT-1"], "windows": windows, "interval": 30}
    if carried_out is not None:
        r["carriedOut"] = carried_out
    return json.dumps(r)


def main():
    global PID_A, PID_B
    address, PID_A, PID_B = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.bus.BusConnection(address)
    manager = bus.get_object(NAME, ROOT, introspect=False)
    requests = []
    loop = GLib.MainLoop()

    def on_request(request):
        requests.append(json.loads(str(request)))
        loop.quit()

    bus.add_signal_receiver(on_request, signal_name="CompositorRequest", dbus_interface=NAME + ".Manager",
                            bus_name=NAME, path=ROOT)
    manager.ReportShown(report(a_focused=True), dbus_interface=NAME + ".Manager")
    b = bus.get_object(NAME, manager.GetApp("b", dbus_interface=NAME + ".Manager"), introspect=False)
    op = b.Activate(dbus.Dictionary({}, signature="sv"), dbus_interface=NAME + ".App")
    GLib.timeout_add_seconds(20, loop.quit)
    loop.run()
    if not requests:
        print(json.dumps({"error": "no CompositorRequest within 20 s"}))
        return
    raise_ = requests[0].get("raise", {})
    manager.ReportShown(report(a_focused=False, carried_out=raise_.get("sequence")), dbus_interface=NAME + ".Manager")
    result = bus.get_object(NAME, op, introspect=False).Wait(dbus_interface=NAME + ".Operation", timeout=30)
    try:
        manager.ReportShown("not a report", dbus_interface=NAME + ".Manager")
        bad = None
    except dbus.DBusException as e:
        bad = e.get_dbus_name()
    print(json.dumps({"request": requests[0], "result": [str(result[0]), str(result[1])], "bad": bad}))


if __name__ == "__main__":
    main()
