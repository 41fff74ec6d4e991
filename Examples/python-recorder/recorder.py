#!/usr/bin/env python3
"""python-recorder: the Python twin of example-recorder, on liblifecycle
(the C client library) through ctypes, with the poll-based API:
lifecycle_fd() in select(), then lifecycle_dispatch().

It records every lifecycle event it receives, one line per event name as
docs/protocol.md spells it, to the file given with --log, before the event
is acknowledged (the acknowledgement is sent when the callback returns);
after willFinishLaunching also "# previous: REASON" when the previous run's
termination reason is known, then "# KEY: VALUE" for the launch options
launch.reason (unless it is "user", the usual case), launch.url,
push.payload and restoration.size when present, in that order, and
"# restoration: TEXT" with the restoration data handed over, if any. After
didReceiveRemoteNotification it writes "# push.payload: JSON", after openURL
"# url: URL" and, when the URL opens in a scene, "# scene: NAME". Line
breaks in a value are written as spaces, so that every record is one line.
Scene events (manifest `scenes = true`) are one line each, read through
lifecycle_event_scene(): "EVENT SCENE DISPLAY" for a scene transition
("sceneWillEnterForeground nav centre"), with "new" or "restored" after
sceneWillConnect ("sceneWillConnect nav centre new"), and
"didDiscardSceneSessions NAME,NAME" with the discarded sessions. It answers
performFetch and didReceiveRemoteNotification with new data
(lifecycle_set_fetch_result: a complete message). With
$RECORDER_SAVE_STATE set it saves its value as restoration data
(lifecycle_save_restoration) in didEnterBackground, after writing the line;
an empty value forgets what was saved. With --hang EVENT it never returns
from that callback (to test the watchdogs; EVENT is an event's name, or a
whole line). With --allocate-mb N it holds N
MiB of touched memory from its start and logs "# allocated N MiB" first.
With $RECORDER_SCENE_WINDOW set (a command line, split on spaces) it runs
that command for each scene it is connected to, from sceneWillConnect to
sceneDidDisconnect: one window per scene, as a scene app on a compositor
shows them (docs/focus.md), a child in its own cgroup.

    [RECORDER_SAVE_STATE=TEXT] recorder.py --log FILE [--hang EVENT] [--allocate-mb N]

The library: $LIFECYCLE_LIB if set (a path to liblifecycle.so); else the
build output of this repository (../../.build/clib/liblifecycle.so from
this script, made by `make clib`); else the installed liblifecycle.so.1
(`make install`). In a manifest:

    command = ["/usr/bin/env", "python3", "/path/to/recorder.py", "--log", "/tmp/p.events"]
    environment = { LIFECYCLE_LIB = "/path/to/.build/clib/liblifecycle.so" }

Outside lifecycled it runs standalone with lifecycle_run(), as the others do.
"""
import ctypes
import ctypes.util
import errno
import os
import select
import signal
import subprocess
import sys

LIFECYCLE_OK = 0
LIFECYCLE_TERMINATED = 1
WILL_FINISH_LAUNCHING = 1
DID_BECOME_ACTIVE = 3
DID_ENTER_BACKGROUND = 5
PERFORM_FETCH = 10
DID_RECEIVE_REMOTE_NOTIFICATION = 11
OPEN_URL = 12
SCENE_WILL_CONNECT = 13
SCENE_DID_DISCONNECT = 18          # 13...18: the scene transitions
DID_DISCARD_SCENE_SESSIONS = 19
FETCH_NEW_DATA = 0   # lifecycle_fetch_result

EVENT_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
ANY_EVENT_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)
SCENE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
DISCARD_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t,
                              ctypes.c_void_p)


class Callbacks(ctypes.Structure):
    """struct lifecycle_callbacks of lifecycle.h, member for member (the
    members added in 1.1 come after any_event, those of 1.2 after them).
    This recorder sets only any_event: the scene events reach it too."""
    _fields_ = [(name, EVENT_FN) for name in (
        "will_finish_launching", "did_finish_launching", "did_become_active", "will_resign_active",
        "did_enter_background", "will_enter_foreground", "will_terminate",
        "did_receive_memory_warning", "will_be_killed_for_memory")] + [("any_event", ANY_EVENT_FN)] + [
        (name, EVENT_FN) for name in ("perform_fetch", "did_receive_remote_notification", "open_url")] + [
        (name, SCENE_FN) for name in (
            "scene_will_connect", "scene_will_enter_foreground", "scene_did_become_active",
            "scene_will_resign_active", "scene_did_enter_background", "scene_did_disconnect")] + [
        ("did_discard_scene_sessions", DISCARD_FN)]


def load_library():
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.environ.get("LIFECYCLE_LIB"),
                  os.path.join(here, "..", "..", ".build", "clib", "liblifecycle.so"),
                  ctypes.util.find_library("lifecycle"), "liblifecycle.so.1"]
    errors, lib = [], None
    for path in candidates:
        if not path:
            continue
        try:
            lib = ctypes.CDLL(path, use_errno=True)
            break
        except OSError as e:
            errors.append(str(e))
            if path == os.environ.get("LIFECYCLE_LIB"):
                break   # an explicit choice that does not load is an error
    if lib is None:
        sys.exit("python-recorder: cannot load liblifecycle (set LIFECYCLE_LIB): " + "; ".join(errors))
    app_p, c_int, c_size_t, c_char_p, c_void_p = (ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t,
                                                  ctypes.c_char_p, ctypes.c_void_p)
    signatures = {
        "lifecycle_connect": (app_p, [ctypes.POINTER(Callbacks), c_size_t, c_void_p]),
        "lifecycle_standalone": (app_p, [ctypes.POINTER(Callbacks), c_size_t, c_void_p]),
        "lifecycle_close": (c_int, [app_p]),
        "lifecycle_fd": (c_int, [app_p]),
        "lifecycle_dispatch": (c_int, [app_p]),
        "lifecycle_run": (c_int, [app_p]),
        "lifecycle_pending": (c_size_t, [app_p]),
        "lifecycle_is_supervised": (c_int, [app_p]),
        "lifecycle_app_name": (c_char_p, [app_p]),
        "lifecycle_event_name": (c_char_p, [c_int]),
        "lifecycle_previous_termination_reason": (c_char_p, [app_p]),
        "lifecycle_launch_reason": (c_char_p, [app_p]),
        "lifecycle_event_option": (c_char_p, [app_p, c_char_p]),
        "lifecycle_set_fetch_result": (c_int, [app_p, c_int]),
        "lifecycle_restoration_data": (c_void_p, [app_p, ctypes.POINTER(c_size_t)]),
        "lifecycle_save_restoration": (c_int, [app_p, c_char_p, c_size_t]),
        "lifecycle_strerror": (c_char_p, [c_int]),
        "lifecycle_last_error": (c_char_p, [app_p]),
        "lifecycle_current_event": (c_int, [app_p]),
        "lifecycle_event_scene": (c_void_p, [app_p]),
        "lifecycle_scene_name": (c_char_p, [c_void_p]),
        "lifecycle_scene_display": (c_char_p, [c_void_p]),
        "lifecycle_scene_restored": (c_int, [c_void_p]),
    }
    for name, (restype, argtypes) in signatures.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = restype, argtypes
    return lib


def option(name):
    args = sys.argv[1:]
    if name in args:
        i = args.index(name)
        if i + 1 < len(args):
            return args[i + 1]
    return None


class Recorder:
    def __init__(self, lib, log, hang, exit_when_active):
        self.lib = lib
        self.hang = hang
        self.exit_when_active = exit_when_active
        try:
            self.fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        except OSError:
            sys.stderr.write("python-recorder: cannot open %s\n" % log)
            sys.exit(2)
        # Kept alive as long as the library may call them.
        self.callbacks = Callbacks(any_event=ANY_EVENT_FN(self.on_event))
        # $RECORDER_SCENE_WINDOW: a window (a child) per connected scene.
        self.scene_window = os.environ.get("RECORDER_SCENE_WINDOW", "").split()
        self.windows = {}

    def note(self, line):
        os.write(self.fd, (line + "\n").encode())
        if self.hang is not None and (line == self.hang or line.split(" ")[0] == self.hang):
            while True:
                signal.pause()

    def note_value(self, key, value):
        """Appends "# KEY: VALUE" (value: bytes), its line breaks as spaces."""
        value = value.replace(b"\n", b" ").replace(b"\r", b" ")
        os.write(self.fd, b"# " + key.encode() + b": " + value + b"\n")

    def note_option(self, app, key):
        """ "# KEY: VALUE" for an option of the current event, when it has one."""
        value = self.lib.lifecycle_event_option(app, key.encode())
        if value is not None:
            self.note_value(key, value)

    def on_event(self, app, event, userdata):
        name = self.lib.lifecycle_event_name(event).decode()
        if SCENE_WILL_CONNECT <= event <= SCENE_DID_DISCONNECT:
            # "EVENT SCENE DISPLAY", and "new" or "restored" after sceneWillConnect.
            scene = self.lib.lifecycle_event_scene(app)
            words = [name, self.lib.lifecycle_scene_name(scene).decode(),
                     self.lib.lifecycle_scene_display(scene).decode()]
            if event == SCENE_WILL_CONNECT:
                words.append("restored" if self.lib.lifecycle_scene_restored(scene) else "new")
            self.note(" ".join(words))
            if self.scene_window and event == SCENE_WILL_CONNECT and words[1] not in self.windows:
                self.windows[words[1]] = subprocess.Popen(self.scene_window, stdin=subprocess.DEVNULL)
            if event == SCENE_DID_DISCONNECT and words[1] in self.windows:
                child = self.windows.pop(words[1])
                child.terminate()
                child.wait()
            return
        if event == DID_DISCARD_SCENE_SESSIONS:
            self.note(name + " " + self.lib.lifecycle_event_option(app, b"scenes").decode())
            return
        self.note(name)
        if event == WILL_FINISH_LAUNCHING:
            reason = self.lib.lifecycle_previous_termination_reason(app)
            if reason is not None:
                self.note("# previous: " + reason.decode())
            why = self.lib.lifecycle_launch_reason(app)
            if why is not None and why != b"user":
                self.note_option(app, "launch.reason")
            for key in ("launch.url", "push.payload", "restoration.size"):
                self.note_option(app, key)
            size = ctypes.c_size_t(0)
            data = self.lib.lifecycle_restoration_data(app, ctypes.byref(size))
            if data is not None:
                self.note_value("restoration", ctypes.string_at(data, size.value))
        if event == DID_RECEIVE_REMOTE_NOTIFICATION:
            self.note_option(app, "push.payload")
        if event == OPEN_URL:
            self.note_option(app, "url")
            self.note_option(app, "scene")
        if event in (PERFORM_FETCH, DID_RECEIVE_REMOTE_NOTIFICATION):
            self.lib.lifecycle_set_fetch_result(app, FETCH_NEW_DATA)   # sent as complete on return
        state = os.environb.get(b"RECORDER_SAVE_STATE")
        if event == DID_ENTER_BACKGROUND and state is not None:
            if self.lib.lifecycle_save_restoration(app, state, len(state)) != 0:
                err = ctypes.get_errno()
                detail = self.lib.lifecycle_last_error(app).decode() or self.lib.lifecycle_strerror(err).decode()
                sys.stderr.write("python-recorder: cannot save the restoration data: %s\n" % detail)
        if event == DID_BECOME_ACTIVE and self.exit_when_active and not self.lib.lifecycle_is_supervised(app):
            os._exit(0)


def main():
    log = option("--log")
    if log is None:
        sys.stderr.write("usage: recorder.py --log FILE [--hang EVENT] [--allocate-mb N]\n")
        return 2
    lib = load_library()
    recorder = Recorder(lib, log, option("--hang"), "--exit-when-active" in sys.argv[1:])
    try:
        mb = int(option("--allocate-mb") or 0)
    except ValueError:
        mb = 0
    if mb > 0:
        # Resident, not just reserved: every byte is written.
        recorder.block = bytearray(b"\x5a") * (mb << 20)
        recorder.note("# allocated %d MiB" % mb)

    cb = ctypes.byref(recorder.callbacks)
    size = ctypes.sizeof(Callbacks)
    app = lib.lifecycle_connect(cb, size, None)
    if not app:
        err = ctypes.get_errno()
        # Outside lifecycled (ENOENT) run standalone; any other failure is an error.
        app = lib.lifecycle_standalone(cb, size, None) if err == errno.ENOENT else None
        if not app:
            sys.stderr.write("python-recorder: %s\n" % lib.lifecycle_strerror(err).decode())
            return 1
        sys.stderr.write("%s: %s: running standalone. Launch events and didBecomeActive are simulated; SIGINT or "
                         "SIGTERM ends the app with willResignActive, didEnterBackground and willTerminate.\n"
                         % (sys.argv[0], lib.lifecycle_strerror(err).decode()))
        return 0 if lib.lifecycle_run(app) == LIFECYCLE_TERMINATED else 1

    # The app's own loop: wait for the channel, then handle what is pending.
    fd = lib.lifecycle_fd(app)
    while True:
        r = lib.lifecycle_dispatch(app)
        if r == LIFECYCLE_TERMINATED:
            lib.lifecycle_close(app)
            return 0   # exit promptly after willTerminate
        if r < 0:
            err = ctypes.get_errno()
            detail = lib.lifecycle_last_error(app).decode() or lib.lifecycle_strerror(err).decode()
            name = lib.lifecycle_app_name(app)
            sys.stderr.write("python-recorder: %s (%s); exiting\n" % (detail, name.decode() if name else "this app"))
            return 1
        if lib.lifecycle_pending(app) == 0:
            select.select([fd], [], [])


if __name__ == "__main__":
    sys.exit(main())
