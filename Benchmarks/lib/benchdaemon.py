"""A release lifecycled of its own for the Python benchmarks (hostile/,
output/, status/): a temporary directory with its config and apps, its own
control socket and cgroup root, requests over the socket, events followed,
and a clean stop. Imported by the scripts; not run alone."""
import atexit, json, os, shutil, signal, socket, subprocess, tempfile, time, uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RELEASE = os.path.join(ROOT, ".build", "release")
C_RECORDER = os.path.join(ROOT, ".build", "clib", "c-recorder")


def own_directories(binary, given=""):
    """The daemon file's first lines: its directories in its own temporary
    one, never the system's (/run, /var/lib and /var/log/lifecycled), for
    the keys this build knows (the first release had neither of the last
    two). Asked of the build itself: `--check-config` names an unknown key
    (every build has it), and a key shorter than 16 bytes is not in the
    binary as text for a search to find. A key `given` (the caller's own
    lines) already names is left to it."""
    lines = 'apps_dir = "apps"\nstate_directory = "state"\n'
    probe = tempfile.mkdtemp(prefix="lifecycled-keys-")
    try:
        os.mkdir(os.path.join(probe, "apps"))
        for key, value in (("runtime_directory", "run"), ("log_directory", "logs")):
            if key in given:
                continue
            with open(os.path.join(probe, "lifecycled.toml"), "w") as f:
                f.write(lines + f'{key} = "{value}"\n')
            r = subprocess.run([binary, "--config", os.path.join(probe, "lifecycled.toml"), "--check-config"],
                               capture_output=True, text=True)
            if "unknown key" not in r.stdout + r.stderr:
                lines += f'{key} = "{value}"\n'
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    return lines


class BenchDaemon:
    def __init__(self, name, apps, settings="", bin_dir=RELEASE, follow=None, ready_tries=200, bus=None,
                 base=None):
        """`apps`: name -> manifest text ({dir} is this daemon's directory);
        `settings`: daemon file lines after the defaults (tables last);
        `follow`: start following events (a list of apps, or [] for all);
        `bus`: the address of the system bus it serves D-Bus on (default:
        none, never the machine's own); `base`: the daemon file's first
        lines (an older build knows fewer keys)."""
        self.bin = bin_dir
        self.dir = tempfile.mkdtemp(prefix=f"lifecycled-{name}-")
        os.chmod(self.dir, 0o755)
        os.mkdir(os.path.join(self.dir, "apps"))
        for app, text in apps.items():
            with open(os.path.join(self.dir, "apps", f"{app}.toml"), "w") as f:
                f.write(text.replace("{dir}", self.dir))
        with open(os.path.join(self.dir, "lifecycled.toml"), "w") as f:
            f.write((base or own_directories(os.path.join(bin_dir, "lifecycled"), settings)) + settings)
        self.socket = os.path.join(self.dir, "control.sock")
        self.cgroup = f"/lifecycled-{name}-" + uuid.uuid4().hex[:8]
        self.proc = subprocess.Popen(
            [os.path.join(bin_dir, "lifecycled"), "--config", os.path.join(self.dir, "lifecycled.toml"),
             "--control-socket", self.socket, "--cgroup-root", self.cgroup],
            stdout=open(os.path.join(self.dir, "daemon.log"), "w"), stderr=subprocess.STDOUT,
            env=dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=bus or f"unix:path={self.dir}/no-bus.sock"))
        for _ in range(ready_tries):
            try:
                self.request({"command": "status"})
                break
            except OSError:
                time.sleep(0.05)
        if follow is not None:
            self.events = self.connect()
            r = {"command": "events", "follow": True}
            if follow:
                r["apps"] = follow
            self.events.sendall(json.dumps(r).encode() + b"\n")
            self.events_file = self.events.makefile("rb")
            self.events_file.readline()

    def connect(self, path=None):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path or self.socket)
        return s

    def request(self, r, private=False):
        """Over the shared socket, or root's private one beside it (as supervisorctl does)."""
        s = self.connect(self.socket + ".private" if private else None)
        try:
            s.sendall(json.dumps(r).encode() + b"\n")
            return json.loads(s.makefile("rb").readline())
        finally:
            s.close()

    def wait_event(self, match):
        while True:
            e = json.loads(self.events_file.readline()).get("event", {})
            if match(e):
                return e

    def stop(self, timeout=60):
        """Stops the daemon and removes its cgroup root and its directory
        (KEEP=1 keeps the directory: its daemon.log, its state)."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=timeout)
        subprocess.run(["rmdir", f"/sys/fs/cgroup/unified{self.cgroup}"], stderr=subprocess.DEVNULL)
        if not os.environ.get("KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)


def wait_until(what, cond, seconds=120):
    """Until `cond()` holds, looked at every 2 ms; gives up after `seconds`."""
    end = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > end:
            raise SystemExit(f"never: {what}")
        time.sleep(0.002)


def cpu_seconds(pid):
    """User and system CPU of a process so far, at /proc's tick resolution."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(xs, p):
    """The p-th percentile, nearest rank."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))]


def private_bus():
    """A dbus-daemon of its own that lets anyone own and call anything: (its
    process, its address)."""
    d = tempfile.mkdtemp(prefix="lifecycled-bench-bus-")
    atexit.register(shutil.rmtree, d, True)  # its config and socket, once the bench is done
    os.chmod(d, 0o755)
    with open(f"{d}/bus.conf", "w") as f:
        f.write(f"""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>system</type><listen>unix:path={d}/bus.sock</listen><auth>EXTERNAL</auth>
<policy context="default"><allow user="*"/><allow own="*"/><allow send_destination="*" eavesdrop="true"/>
<allow eavesdrop="true"/></policy></busconfig>""")
    proc = subprocess.Popen(["dbus-daemon", f"--config-file={d}/bus.conf", "--nofork", "--print-address=1"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    proc.stdout.readline()  # printed once it listens
    return proc, f"unix:path={d}/bus.sock"
