#!/usr/bin/env python3
"""Inside the guest of scripts/vm.sh: every run of one arm in one memory
configuration (Benchmarks/memory-vm). Started by run.py, which says how to
run the whole benchmark and what each number means; this file only
measures and writes raw data, run.py analyses it.

    guest.py --arm K|E|O|O+|L|L0|L-before --config M0 --out DIR --bin DIR [--runs N]
             [--workloads leak,burst] [--seed S] [--lifecycled-before DIR] [sizes, see --help]
    guest.py --arm cpu --out DIR --bin DIR [--runs N] [--cpu-arms L,L-noweights,L-before]
             [--cpu-seconds 60]

The O arms need systemd as PID 1 (run.py boots their guest with
scripts/vm.sh --systemd --oomd; the others with plain scripts/vm.sh).

Output, under --out (shared with the host):
    meta.json               the guest, the arm, the options, versions
    progress.jsonl          one line per finished step (the host reads it
                            even when the guest was killed)
    idle.json               the killer's CPU time over --idle-seconds with the
                            suspended apps and fg in place, no hog
    WORKLOAD-I/run.json     marks (times), deaths, kill claims, hog target ...
    WORKLOAD-I/samples.jsonl, pings.txt, killer.log ...
  cpu workload (--arm cpu):
    calibration.json        the fg's loop, timed once in this guest
    ARM-I/run.json          marks, app states, cpu.weight and cpu.stat usage of each app
    ARM-I/pings.txt, killer.log (the daemon's log)

Every time is CLOCK_MONOTONIC seconds (Python's time.monotonic), the clock
of the sampler and the pinger too.

Safety: this runs only in the guest (it refuses without LIFECYCLED_VM=1);
every process it starts gets PR_SET_PDEATHSIG and is killed at the end of
each run; each run and each wait is bounded.
"""

import argparse
import ctypes
import json
import os
import random
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time

CG = "/sys/fs/cgroup"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LIBC = ctypes.CDLL("libc.so.6", use_errno=True)
PR_SET_PDEATHSIG = 1
MCL_CURRENT, MCL_FUTURE, MCL_ONFAULT = 1, 2, 4


class NotRun(Exception):
    """The arm cannot run here; the message says why (reported, not a crash)."""


def log(*a):
    print(f"[{time.monotonic():10.3f}] guest:", *a, flush=True)


def write(path, value):
    with open(path, "w") as f:
        f.write(str(value))


def read(path, default=None):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        if default is not None:
            return default
        raise


def kv(text):
    out = {}
    for line in text.splitlines():
        p = line.split()
        if len(p) >= 2:
            try:
                out[p[0].rstrip(":")] = int(p[1])
            except ValueError:
                pass
    return out


def meminfo():
    return kv(read("/proc/meminfo"))


def psi_some_avg10():
    m = re.search(r"some avg10=([\d.]+)", read("/proc/pressure/memory", ""))
    return float(m.group(1)) if m else 0.0


def wait_until(pred, timeout, step=0.02, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def child_setup(cgroup=None, adj=None):
    """preexec_fn: die with the harness, join CGROUP, set oom_score_adj."""

    def pre():
        LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if cgroup:
            with open(f"{CG}{cgroup}/cgroup.procs", "w") as f:
                f.write("0")
        if adj is not None:
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write(str(adj))

    return pre


def cg_mkdir(path, **files):
    full = CG + path
    os.makedirs(full, exist_ok=True)
    for k, v in files.items():
        write(f"{full}/{k.replace('__', '.')}", v)
    return full


def cg_kill_rmdir(path, timeout=20):
    """cgroup.kill the subtree at PATH (relative to the mount), wait until it is
    empty, remove it bottom up. Quiet when it is not there."""
    full = CG + path
    if not os.path.isdir(full):
        return
    try:
        write(full + "/cgroup.kill", 1)
    except OSError:
        for pid in read(full + "/cgroup.procs", "").split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
    try:
        wait_until(lambda: "populated 0" in read(full + "/cgroup.events", "populated 0"), timeout, what=path + " empty")
    except TimeoutError as e:
        log("warning:", e)
    for d, subdirs, _ in sorted(os.walk(full), key=lambda w: -w[0].count("/")):
        try:
            os.rmdir(d)
        except OSError as e:
            log(f"warning: rmdir {d}: {e}")


def task_cpu_by_thread(pid):
    """{"TID comm": CPU ns} of every thread of PID."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in tids:
        try:
            out[f"{t} {read(f'/proc/{pid}/task/{t}/comm').strip()}"] = int(
                read(f"/proc/{pid}/task/{t}/schedstat").split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return out


def task_cpu_ns(pid):
    """CPU time of every thread of PID so far, ns (schedstat: precise)."""
    total = 0
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            try:
                total += int(read(f"/proc/{pid}/task/{t}/schedstat").split()[0])
            except (OSError, ValueError, IndexError):
                pass
    except OSError:
        return None
    return total


# ----------------------------------------------------------------------------
# Watchers: deaths (pidfds), the kernel's log (/dev/kmsg), a killer's output.


class DeathWatcher(threading.Thread):
    """Timestamps the end of every process registered with watch(), from its
    pidfd (readable once the process has exited, child or not). Only this
    thread touches the poll set: watch() and forget_all() hand it requests."""

    def __init__(self):
        super().__init__(daemon=True, name="deaths")
        self.poll = select.poll()
        self.r, self.w = os.pipe()
        self.poll.register(self.r, select.POLLIN)
        self.fds = {}
        self.requests = []
        self.deaths = []
        self.lock = threading.Lock()
        self.forgotten = threading.Event()

    def watch(self, app, pid, popen=None):
        try:
            fd = os.pidfd_open(pid)
        except OSError as e:
            with self.lock:
                self.deaths.append({"app": app, "pid": pid, "t": time.monotonic(), "note": f"pidfd_open: {e}"})
            return
        with self.lock:
            self.requests.append(("watch", fd, (app, pid, popen)))
        os.write(self.w, b"x")

    def forget_all(self):
        """Stop watching everything registered so far, and drop what was seen."""
        self.forgotten.clear()
        with self.lock:
            self.requests.append(("forget", None, None))
        os.write(self.w, b"x")
        self.forgotten.wait(30)
        with self.lock:
            self.deaths = []

    def run(self):
        while True:
            ready = self.poll.poll()
            t = time.monotonic()
            for fd, _ in ready:
                if fd == self.r:
                    continue
                entry = self.fds.pop(fd, None)
                if entry is None:
                    continue
                self.poll.unregister(fd)
                app, pid, popen = entry
                d = {"app": app, "pid": pid, "t": t}
                if popen is not None:
                    try:
                        rc = popen.wait(timeout=5)
                        d["signal" if rc < 0 else "exit"] = -rc if rc < 0 else rc
                    except subprocess.TimeoutExpired:
                        pass
                os.close(fd)
                with self.lock:
                    self.deaths.append(d)
            if any(fd == self.r for fd, _ in ready):
                os.read(self.r, 4096)
                with self.lock:
                    requests, self.requests = self.requests, []
                for kind, fd, info in requests:
                    if kind == "watch":
                        self.fds[fd] = info
                        self.poll.register(fd, select.POLLIN)
                    else:
                        for old in list(self.fds):
                            self.poll.unregister(old)
                            os.close(old)
                        self.fds.clear()
                        self.forgotten.set()

    def dead(self, app):
        with self.lock:
            return any(d["app"] == app for d in self.deaths)

    def take(self):
        with self.lock:
            out, self.deaths = self.deaths, []
            return out


class KmsgWatcher(threading.Thread):
    """Kernel log lines about OOM kills, each with the time it was read."""

    PAT = re.compile(r"(Killed process|oom-kill:|invoked oom-killer|Out of memory|out of memory|memory\.oom\.group)")

    def __init__(self):
        super().__init__(daemon=True, name="kmsg")
        self.fd = os.open("/dev/kmsg", os.O_RDWR)
        os.lseek(self.fd, 0, os.SEEK_END)
        self.lines = []
        self.lock = threading.Lock()
        self.offset = None  # CLOCK_MONOTONIC minus the kernel log's clock, s

    def sync(self):
        """Writes a marker with the monotonic time into the kernel log: its
        stamp gives the offset between the two clocks, so a kernel kill is
        timed by the kernel's own stamp, not by when this thread read it."""
        os.write(self.fd, f"memvm-sync mono={time.monotonic():.6f}\n".encode())

    def run(self):
        while True:
            try:
                rec = os.read(self.fd, 8192).decode(errors="replace")
            except OSError:  # EPIPE: overwritten while we read; go on
                continue
            t = time.monotonic()
            head, _, msg = rec.partition(";")
            msg = msg.split("\n")[0]
            ts = head.split(",")
            kts = int(ts[2]) / 1e6 if len(ts) > 2 and ts[2].isdigit() else None
            m = re.search(r"memvm-sync mono=([\d.]+)", msg)
            if m and kts is not None:
                self.offset = float(m.group(1)) - kts
                continue
            if self.PAT.search(msg):
                d = {"t": t, "kts": kts, "msg": msg}
                if kts is not None and self.offset is not None:
                    d["t_kernel"] = kts + self.offset
                m = re.search(r"Killed process (\d+) \(([^)]*)\)", msg)
                if m:
                    d["pid"], d["comm"] = int(m.group(1)), m.group(2)
                with self.lock:
                    self.lines.append(d)

    def take(self):
        with self.lock:
            out, self.lines = self.lines, []
            return out


class LineReader(threading.Thread):
    """Reads a killer's output line by line, each with the time it came."""

    def __init__(self, stream, name):
        super().__init__(daemon=True, name=name)
        self.stream = stream
        self.lines = []
        self.lock = threading.Lock()

    def run(self):
        for raw in iter(self.stream.readline, b""):
            with self.lock:
                self.lines.append((time.monotonic(), raw.decode(errors="replace").rstrip("\n")))

    def take(self):
        with self.lock:
            out, self.lines = self.lines, []
            return out


# ----------------------------------------------------------------------------
# Arms. Each one starts its killer, launches the apps its way, and says who
# it killed. The apps are the same programs in every arm.


class Arm:
    name = "?"
    not_run_reason = None  # a string: the arm is reported as not run, nothing boots
    apps_dir = CG + "/bench"

    def __init__(self, h):
        self.h = h
        self.killer_pid = None

    def start_killer(self, rd):
        pass

    def stop_killer(self):
        pass

    def kill_claims(self):
        """[{t, pid, app?, signal, killer, ...}] of the killer itself."""
        return []

    def killer_log(self):
        return ""

    def setup_layout(self):
        pass

    def teardown(self):
        pass


class PlainArm(Arm):
    """K and E (and O): the harness's own cgroups /bench/NAME with
    memory.oom.group=1, oom_score_adj by band then LRU, freezing by hand."""

    ADJ = {"fg": 0, "hog": 500}

    def reap(self):
        """Waits (10 s at most each) for the apps it started, killed by now."""
        for p in self.procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.procs = {}

    def __init__(self, h):
        super().__init__(h)
        self.procs = {}

    def setup_layout(self):
        cg_kill_rmdir("/bench")
        cg_mkdir("/bench")
        for c in read(CG + "/cgroup.subtree_control").split():
            write(CG + "/bench/cgroup.subtree_control", "+" + c)
        for app in self.h.app_names():
            cg_mkdir(f"/bench/{app}", memory__oom__group=1)

    def cgpath(self, app):
        return f"{CG}/bench/{app}"

    def adj(self, app):
        if app.startswith("susp-"):
            return 900 - 20 * (int(app.split("-")[1]) - 1)
        return self.ADJ[app]

    def spawn(self, app, argv, rd):
        out = open(f"{rd}/{app}.out", "ab")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                             preexec_fn=child_setup(f"/bench/{app}", self.adj(app)), close_fds=True)
        out.close()
        self.procs[app] = p
        self.h.deaths.watch(app, p.pid, p)
        return p.pid

    def launch_susp(self, app, argv, rd, ready_file):
        self.spawn(app, argv, rd)
        wait_until(lambda: os.path.exists(ready_file), 120, what=f"{app} ready")
        time.sleep(0.2)  # lifecycled's background_grace in the L arms
        write(self.cgpath(app) + "/cgroup.freeze", 1)
        wait_until(lambda: "frozen 1" in read(self.cgpath(app) + "/cgroup.events"), 10, what=f"{app} frozen")

    def launch_fg(self, argv, rd):
        self.spawn("fg", argv, rd)

    def launch_hog(self, argv, rd):
        self.spawn("hog", argv, rd)

    def teardown(self):
        cg_kill_rmdir("/bench")
        self.reap()


class KernelArm(PlainArm):
    name = "K"


class EarlyoomArm(PlainArm):
    name = "E"

    def start_killer(self, rd):
        cg_mkdir("/bench-killer")
        self.proc = subprocess.Popen(["earlyoom", "-r", "3600"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, preexec_fn=child_setup("/bench-killer", 0))
        self.reader = LineReader(self.proc.stdout, "earlyoom")
        self.reader.start()
        self.killer_pid = self.proc.pid
        self.lines = []
        wait_until(lambda: self.reader.lines, 30, what="earlyoom's first line")

    def stop_killer(self):
        if getattr(self, "proc", None):
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.reader.join(timeout=5)
            self.lines += self.reader.take()
            self.proc = None

    def kill_claims(self):
        self.lines += self.reader.take() if getattr(self, "reader", None) else []
        out = []
        for t, line in self.lines:
            m = re.search(r'sending (SIG\w+) to process (\d+) uid \d+ "([^"]*)"', line)
            if m:
                out.append({"t": t, "pid": int(m.group(2)), "comm": m.group(3), "signal": m.group(1),
                            "killer": "earlyoom", "line": line})
            m = re.search(r"escalating to SIGKILL", line)
            if m:
                out.append({"t": t, "pid": None, "signal": "SIGKILL", "killer": "earlyoom", "line": line,
                            "escalation": True})
        return out

    def killer_log(self):
        return "\n".join(f"{t:.6f} {l}" for t, l in self.lines) + "\n"


class OomdArm(PlainArm):
    """O: systemd-oomd as distributions ship it (Fedora, Ubuntu; Debian's
    systemd-oomd package the same): ManagedOOMSwap=kill on -.slice (with
    oomd's default SwapUsedLimit=90 %), and on the slice holding the apps
    ManagedOOMMemoryPressure=kill with ManagedOOMMemoryPressureLimit=50 %,
    DefaultMemoryPressureDurationSec=20s. Needs systemd as PID 1: run.py
    boots these arms with scripts/vm.sh --systemd --oomd. The apps are the programs of K/E,
    each in a systemd scope bench.slice/NAME.scope (systemd-run --scope),
    memory.oom.group=1 and the same oom_score_adj as K/E, fg with
    ManagedOOMPreference=avoid, the suspended ones frozen by the harness
    (cgroup.freeze). A fresh systemd-oomd per run (systemctl restart).
    Kills: oomd's journal lines "Killed /bench.slice/NAME.scope due to ..."
    (journald's CLOCK_MONOTONIC receive stamp), and the user.oomd_ooms mark
    oomd sets on a group just before it kills it (polled every 50 ms): the
    kill's time is the mark's when it was seen, else the journal's."""

    name = "O"
    pressure_limit = "50%"
    pressure_duration = "20s"
    apps_dir = CG + "/bench.slice"
    SLICE = "bench.slice"

    def __init__(self, h):
        super().__init__(h)
        self.configured = False
        self.t_start = None
        self.marks = []  # (t, app, xattr, value)
        self.poller = None

    def cgpath(self, app):
        return f"{self.apps_dir}/{app}.scope"

    def systemctl(self, *args, timeout=60, check=False):
        r = subprocess.run(["systemctl", *args], stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
        if check and r.returncode:
            raise RuntimeError(f"systemctl {' '.join(args)}: exit {r.returncode}: "
                               f"{(r.stderr or r.stdout).decode(errors='replace').strip()[:300]}")
        return r

    def configure(self):
        """The units and oomd's configuration, once per guest."""
        if self.configured:
            return
        if os.environ.get("LIFECYCLED_VM_SYSTEMD") != "1" or "systemd" not in read("/proc/1/comm", "").strip():
            raise NotRun("systemd-oomd needs systemd as PID 1 (run.py boots the O arms with "
                         "scripts/vm.sh --systemd --oomd; this guest has "
                         f"{read('/proc/1/comm', '?').strip()} as PID 1)")
        if not os.path.exists("/lib/systemd/systemd-oomd"):
            raise NotRun("no /lib/systemd/systemd-oomd in this root (apt-get install systemd-oomd)")
        os.makedirs("/etc/systemd/system/-.slice.d", exist_ok=True)
        write("/etc/systemd/system/-.slice.d/50-memvm.conf", "[Slice]\nManagedOOMSwap=kill\n")
        write(f"/etc/systemd/system/{self.SLICE}",
              f"[Slice]\nManagedOOMMemoryPressure=kill\nManagedOOMMemoryPressureLimit={self.pressure_limit}\n")
        os.makedirs("/etc/systemd/oomd.conf.d", exist_ok=True)
        write("/etc/systemd/oomd.conf.d/50-memvm.conf",
              f"[OOM]\nDefaultMemoryPressureDurationSec={self.pressure_duration}\n")
        # The journal in memory and small: it lives in the guest's RAM either way.
        os.makedirs("/etc/systemd/journald.conf.d", exist_ok=True)
        write("/etc/systemd/journald.conf.d/50-memvm.conf",
              "[Journal]\nStorage=volatile\nRuntimeMaxUse=16M\nRateLimitBurst=0\n")
        self.systemctl("daemon-reload", check=True, timeout=120)
        self.systemctl("restart", "systemd-journald", check=True, timeout=120)
        # What a booted system runs (D-Bus, logind), as the other services see it.
        self.systemctl("start", "multi-user.target", timeout=180)
        self.configured = True

    def setup_layout(self):
        self.configure()
        self.systemctl("kill", "--signal=SIGKILL", self.SLICE)
        self.systemctl("stop", self.SLICE, timeout=120)
        self.systemctl("reset-failed")
        if os.path.isdir(self.apps_dir):  # left over (a failed stop): the hard way
            cg_kill_rmdir("/" + self.SLICE)
        self.marks = []

    def spawn(self, app, argv, rd):
        out = open(f"{rd}/{app}.out", "ab")
        props = ["-p", "MemoryAccounting=yes"] + (["-p", "ManagedOOMPreference=avoid"] if app == "fg" else [])
        # systemd-run --scope puts itself in the new scope, then execs the
        # program: the pid is the app's.
        p = subprocess.Popen(["systemd-run", "--scope", "--quiet", f"--unit={app}", f"--slice={self.SLICE}",
                              "--collect", *props, *argv], stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT, preexec_fn=child_setup(None, self.adj(app)), close_fds=True)
        out.close()
        self.procs[app] = p
        self.h.deaths.watch(app, p.pid, p)
        wait_until(lambda: os.path.isdir(self.cgpath(app)) and str(p.pid) in read(self.cgpath(app) + "/cgroup.procs", ""),
                   60, what=f"{app}.scope")
        write(self.cgpath(app) + "/memory.oom.group", 1)
        return p.pid

    def start_killer(self, rd):
        self.configure()
        self.systemctl("restart", "systemd-oomd", check=True, timeout=120)
        pid = wait_until(lambda: int(self.systemctl("show", "-p", "MainPID", "--value", "systemd-oomd")
                                     .stdout.decode().strip() or 0), 60, step=0.2, what="systemd-oomd's pid")
        self.killer_pid = pid
        self.t_start = time.monotonic()
        with open(f"{rd}/oomctl.txt", "w") as f:
            f.write(subprocess.run(["oomctl"], capture_output=True, text=True, timeout=60).stdout)
        if self.poller is None:
            self.poller = threading.Thread(target=self.poll_marks, daemon=True, name="oomd-marks")
            self.poller.start()

    def poll_marks(self):
        seen = {}
        while True:
            try:
                names = [d for d in os.listdir(self.apps_dir) if d.endswith(".scope")]
            except OSError:
                names = []
            for d in names:
                for x in ("user.oomd_ooms", "user.oomd_kill"):
                    try:
                        v = os.getxattr(f"{self.apps_dir}/{d}", x).decode(errors="replace").strip("\0 ")
                    except OSError:
                        continue
                    key = (d, x)
                    if seen.get(key) != v:
                        seen[key] = v
                        self.marks.append((time.monotonic(), d[:-len(".scope")], x, v))
            if not names:
                seen = {}
            time.sleep(0.05)

    def journal(self, *match):
        """oomd's journal entries since this run's killer started: [(t, message)]."""
        r = subprocess.run(["journalctl", "-b", "-o", "json", "--no-pager", *match], capture_output=True,
                           timeout=120)
        out = []
        for line in r.stdout.decode(errors="replace").splitlines():
            try:
                e = json.loads(line)
                t = int(e["__MONOTONIC_TIMESTAMP"]) / 1e6
                msg = e.get("MESSAGE")
            except (ValueError, KeyError, TypeError):
                continue
            if isinstance(msg, list):
                msg = bytes(msg).decode(errors="replace")
            if self.t_start is not None and t >= self.t_start and isinstance(msg, str):
                out.append((t, msg))
        return out

    def kill_claims(self):
        subprocess.run(["journalctl", "--sync"], capture_output=True, timeout=60)
        self.oomd_lines = self.journal("SYSLOG_IDENTIFIER=systemd-oomd")
        self.pid1_lines = [(t, m) for t, m in self.journal("_PID=1") if "systemd-oomd" in m]
        out = []
        for t, msg in self.oomd_lines:
            m = re.search(r"Killed (\S+) due to (.*)", msg)
            if not m:
                continue
            path = m.group(1)
            leaf = path.rstrip("/").rsplit("/", 1)[-1]
            app = leaf[:-len(".scope")] if path.startswith(f"/{self.SLICE}/") and leaf.endswith(".scope") else None
            mark = min((mt for mt, ma, x, _ in self.marks if ma == app and x == "user.oomd_ooms"
                        and abs(mt - t) < 5), default=None) if app else None
            # The mark is set just before the kill; the journal's stamp is when
            # journald received the line, after it (late under pressure).
            out.append({"t": mark if mark is not None else t, "t_journal": t, "t_mark": mark, "pid": None, "app": app,
                        "comm": None if app else path, "signal": "SIGKILL", "killer": "systemd-oomd",
                        "reason": m.group(2)[:200], "line": msg})
        return out

    def killer_log(self):
        lines = [f"{t:.6f} {m}" for t, m in getattr(self, "oomd_lines", [])]
        lines += [f"{t:.6f} [pid 1] {m}" for t, m in getattr(self, "pid1_lines", [])]
        lines += [f"{t:.6f} [mark] {a} {x}={v}" for t, a, x, v in self.marks]
        return "\n".join(sorted(lines)) + "\n"

    def stop_killer(self):
        pass  # systemd-oomd stays: it is restarted at the next run's start

    def teardown(self):
        self.systemctl("kill", "--signal=SIGKILL", self.SLICE)
        self.systemctl("stop", self.SLICE, timeout=120)
        self.systemctl("reset-failed")
        self.reap()
        if os.path.isdir(self.apps_dir):
            cg_kill_rmdir("/" + self.SLICE)


class OomdTunedArm(OomdArm):
    """O+: systemd-oomd tuned as systemd's own tests run it (TEST-55-OOMD):
    the slice's pressure limit 20 %, DefaultMemoryPressureDurationSec=2s;
    the rest as O."""

    name = "O+"
    pressure_limit = "20%"
    pressure_duration = "2s"


class LifecycledArm(Arm):
    """L, L0, L-before (and the cpu workload's arms): the same programs as
    lifecycled apps, a fresh daemon per run."""

    name = "L"
    extra_config = ""
    apps_dir = CG + "/lifecycled/apps"

    @property
    def bin(self):
        """The directory of the lifecycled and supervisorctl under test."""
        return self.h.a.lifecycled_bin

    def setup_layout(self):
        cg_kill_rmdir("/lifecycled")

    def manifests(self):
        h = self.h
        if h.workload == "cpu":
            return h.cpu_manifests()
        m = {}
        for i in range(1, h.a.susp_count + 1):
            app = f"susp-{i}"
            m[app] = (f'command = {json.dumps(h.argv_susp(app))}\ndelivery = "signals"\nreadiness = "notify"\n'
                      '\n[timeouts]\nbackground_grace = 0.2\nlaunch = 60\n')
        m["fg"] = f'command = {json.dumps(h.argv_fg())}\ndelivery = "signals"\n'
        m["hog"] = (f'command = {json.dumps(h.argv_hog())}\ndelivery = "signals"\nbackground_modes = ["audio"]\n'
                    '\n[memory]\nband = "normal"\n')
        return m

    def start_killer(self, rd):
        for b in ("lifecycled", "supervisorctl"):
            if not os.access(f"{self.bin}/{b}", os.X_OK):
                raise NotRun(f"no build at {self.bin} (no {b} there)")
        self.dir = f"{self.h.tmp}/lc"
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir + "/apps")
        for app, text in self.manifests().items():
            write(f"{self.dir}/apps/{app}.toml", text)
        conf = ('apps_dir = "apps"\nruntime_directory = "run"\nstate_directory = "state"\n'
                'log_directory = "log"\noutput = "files"\n' + self.extra_config)
        write(f"{self.dir}/lifecycled.toml", conf)
        self.sock = f"{self.dir}/control.sock"
        cg_mkdir("/bench-killer")
        self.log_path = f"{self.dir}/daemon.log"
        logf = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [f"{self.bin}/lifecycled", "--config", f"{self.dir}/lifecycled.toml",
             "--control-socket", self.sock, "--cgroup-root", "/lifecycled"],
            stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
            preexec_fn=child_setup("/bench-killer", 0))
        logf.close()
        self.killer_pid = self.proc.pid
        end = time.monotonic() + 60
        while True:
            rc = self.proc.poll()
            if rc is not None:
                text = read(self.log_path, "").strip()
                lines = [l for l in text.splitlines() if l.strip()]
                why = next((l for l in lines if "unknown key" in l or "memory." in l), lines[-1] if lines else "")
                raise NotRun(f"lifecycled exited with status {rc} at start: {why.strip()[:300]}")
            if os.path.exists(self.sock) and self.ctl("status", "--json", check=False).returncode == 0:
                break
            if time.monotonic() > end:
                tail = " | ".join(read(self.log_path, "").strip().splitlines()[-3:])
                raise NotRun(f"lifecycled did not answer on its control socket within 60 s (its log: {tail[:300]})")
            time.sleep(0.1)

    def ctl(self, *args, check=True, timeout=90):
        # --socket is an option of each subcommand: after the subcommand's name.
        r = subprocess.run([f"{self.bin}/supervisorctl", args[0], "--socket", self.sock, *args[1:]],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout,
                           preexec_fn=child_setup(None, None))
        if check and r.returncode != 0:
            raise RuntimeError(f"supervisorctl {' '.join(args)}: exit {r.returncode}: "
                               f"{(r.stderr or r.stdout).decode(errors='replace').strip()[:300]}")
        return r

    def status(self):
        return {a["name"]: a for a in json.loads(self.ctl("status", "--json").stdout)["apps"]}

    def watch(self, app):
        pid = self.status()[app].get("pid")
        if pid:
            self.h.deaths.watch(app, pid)
        return pid

    def group(self, app):
        """The app's cgroup (apps/NAME.GEN, the highest GEN), or None."""
        try:
            gens = [d for d in os.listdir(self.apps_dir) if re.fullmatch(re.escape(app) + r"\.\d+", d)]
        except OSError:
            return None
        return f"{self.apps_dir}/{max(gens, key=lambda d: int(d.rsplit('.', 1)[1]))}" if gens else None

    def launch_susp(self, app, argv, rd, ready_file):
        self.ctl("launch", "--background", app)  # returns at READY=1 (readiness = "notify")
        self.watch(app)
        # Frozen by lifecycled after its 0.2 s of grace: the cgroup says so
        # (cheap); then the daemon's own view, once.
        wait_until(lambda: "frozen 1" in read((self.group(app) or "/nonexistent") + "/cgroup.events", ""), 60,
                   what=f"{app} frozen by lifecycled")
        wait_until(lambda: (lambda s: s["state"] == "suspended" and s.get("frozen"))(self.status()[app]), 60,
                   step=0.2, what=f"{app} suspended (lifecycled's status)")

    def launch_fg(self, argv, rd):
        self.ctl("activate", "fg")
        self.watch("fg")

    def launch_hog(self, argv, rd):
        self.ctl("launch", "--background", "--no-block", "hog")
        wait_until(lambda: os.path.exists(f"{self.h.tmp}/hog.status"), 60, step=0.01, what="the hog started")
        wait_until(lambda: self.status()["hog"].get("pid"), 30, step=0.05, what="the hog's pid")
        self.watch("hog")

    def kill_claims(self):
        try:
            r = self.ctl("jetsam", "--json", timeout=60)
            recs = json.loads(r.stdout)
        except Exception as e:  # noqa: BLE001 - reported, not fatal
            log("warning: jetsam --json:", e)
            self.jetsam_error = str(e)
            return []
        off = time.time() - time.monotonic()
        self.jetsam = recs
        return [{"t": rec["time"] - off, "pid": rec.get("pid"), "app": rec.get("app"), "signal": "SIGKILL",
                 "killer": "lifecycled", "reason": rec.get("reason"), "footprint": rec.get("footprint"),
                 "level": rec.get("level"), "reading": rec.get("reading")} for rec in recs]

    def final_status(self):
        try:
            return self.status()
        except Exception as e:  # noqa: BLE001
            return {"error": str(e)}

    def stop_killer(self):
        if getattr(self, "proc", None) is None:
            return
        # The apps first, all at once (a daemon stopping them one by one,
        # politely, under emulation, takes long and measures nothing).
        apps = CG + "/lifecycled/apps"
        if os.path.isdir(apps):
            for d in os.listdir(apps):
                if os.path.isdir(f"{apps}/{d}"):
                    try:
                        write(f"{apps}/{d}/cgroup.kill", 1)
                    except OSError:
                        pass
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            log("warning: lifecycled did not stop within 30 s of SIGTERM: SIGKILL")
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def killer_log(self):
        return read(self.log_path, "") if getattr(self, "log_path", None) else ""

    def teardown(self):
        self.stop_killer()
        cg_kill_rmdir("/lifecycled")


class LifecycledReclaimOffArm(LifecycledArm):
    name = "L0"
    extra_config = '\n[memory]\nreclaim = false\n'


class LifecycledBeforeArm(LifecycledArm):
    """L-before: lifecycled as it was before this work (the build given by
    --lifecycled-before; it knows neither [memory] reclaim nor [cpu], and is
    given no key it does not know: the same configuration as L, which sets
    neither)."""

    name = "L-before"

    @property
    def bin(self):
        return self.h.a.lifecycled_before


class LifecycledNoWeightsArm(LifecycledArm):
    """L-noweights (cpu workload): the current build with [cpu] weights = false."""

    name = "L-noweights"
    extra_config = '\n[cpu]\nweights = false\n'


ARMS = {a.name: a for a in (KernelArm, EarlyoomArm, OomdArm, OomdTunedArm, LifecycledArm, LifecycledReclaimOffArm,
                            LifecycledBeforeArm)}
CPU_ARMS = {a.name: a for a in (LifecycledArm, LifecycledNoWeightsArm, LifecycledBeforeArm)}


# ----------------------------------------------------------------------------


class Harness:
    def __init__(self, a):
        self.a = a
        self.tmp = "/tmp/memvm"

    def app_names(self):
        return ["fg"] + [f"susp-{i}" for i in range(1, self.a.susp_count + 1)] + ["hog"]

    # The programs, the same in every arm (paths in the guest's /tmp).
    def argv_susp(self, app):
        return [f"{self.a.bin}/susp", "--mb", str(self.a.susp_mb), "--ready-file", f"{self.tmp}/{app}.ready"]

    def argv_fg(self):
        return [f"{self.a.bin}/fg", "--sock", f"{self.tmp}/fg.sock", "--mb", str(self.a.fg_mb),
                "--ready-file", f"{self.tmp}/fg.ready"]

    def argv_hog(self):
        return [f"{self.a.bin}/hog", "--mode", self.workload, "--target-file", f"{self.tmp}/hog.target",
                "--slow-mbps", str(self.a.slow_mbps), "--slow-seconds", str(self.a.slow_seconds),
                "--fast-mbps", str(self.a.fast_mbps), "--deadline-s", str(self.a.deadline),
                "--status", f"{self.tmp}/hog.status"]

    # The cpu workload's programs.
    def spinner_names(self):
        return [f"spin-{i}" for i in range(1, self.a.spinners + 1)]

    def cpu_manifests(self):
        fg = [f"{self.a.bin}/cpu", "--fg", "--sock", f"{self.tmp}/fg.sock", "--iters", str(self.cpu_iters),
              "--ready-file", f"{self.tmp}/fg.ready"]
        m = {"fg": f'command = {json.dumps(fg)}\ndelivery = "signals"\n'}
        for app in self.spinner_names():
            argv = [f"{self.a.bin}/cpu", "--spin", "--ready-file", f"{self.tmp}/{app}.ready"]
            m[app] = f'command = {json.dumps(argv)}\ndelivery = "signals"\nbackground_modes = ["audio"]\n'
        return m

    def calibrate_cpu(self):
        """The fg's loop, timed once per guest with nothing else running."""
        r = subprocess.run([f"{self.a.bin}/cpu", "--calibrate", "--ms", str(self.a.cpu_work_ms)], capture_output=True,
                           text=True, timeout=120, check=True)
        cal = json.loads(r.stdout)
        self.cpu_iters = int(cal["iters"])
        with open(f"{self.a.out}/calibration.json", "w") as f:
            json.dump(cal, f, indent=1)
        log("cpu calibration:", cal)
        return cal

    def cpu_stat(self, arm, apps):
        out = {}
        for app in apps:
            g = arm.group(app)
            st = kv(read(g + "/cpu.stat", "")) if g else {}
            out[app] = st.get("usage_usec")
        return out

    def run_cpu_once(self, arm, index):
        """fg answers pings (each ~cpu_work_ms of CPU) while the spinners spin."""
        self.workload = "cpu"
        rd = f"{self.a.out}/{arm.name}-{index}"
        os.makedirs(rd, exist_ok=True)
        res = {"workload": "cpu", "index": index, "arm": arm.name, "iters": self.cpu_iters,
               "work_ms": self.a.cpu_work_ms, "spinners": self.a.spinners, "marks": {}}
        marks = res["marks"]
        apps = ["fg"] + self.spinner_names()
        self.clean_tmp()
        arm.setup_layout()
        self.deaths.take()
        try:
            marks["start"] = time.monotonic()
            arm.start_killer(rd)
            marks["killer_started"] = time.monotonic()
            res["settle"] = self.settle()
            for app in self.spinner_names():
                arm.ctl("launch", "--background", app)
                wait_until(lambda: os.path.exists(f"{self.tmp}/{app}.ready"), 60, what=f"{app} ready")
                arm.watch(app)
            arm.ctl("activate", "fg")
            wait_until(lambda: os.path.exists(f"{self.tmp}/fg.ready"), 60, what="fg ready")
            arm.watch("fg")
            marks["apps_ready"] = time.monotonic()
            time.sleep(self.a.cpu_warmup)
            st = arm.status()
            res["states"] = {a: {k: st.get(a, {}).get(k) for k in ("state", "pid", "frozen")} for a in apps}
            res["groups"] = {a: arm.group(a) for a in apps}
            res["cpu_weight"] = {a: (read(g + "/cpu.weight", "").strip() or None) if g else None
                                 for a, g in res["groups"].items()}
            res["daemon_cpu_weight"] = read(CG + "/lifecycled/daemon/cpu.weight", "").strip() or None
            res["subtree_control"] = {"root": read(CG + "/cgroup.subtree_control", "").strip(),
                                      "lifecycled": read(CG + "/lifecycled/cgroup.subtree_control", "").strip(),
                                      "apps": read(CG + "/lifecycled/apps/cgroup.subtree_control", "").strip()}
            u0, d0, t0 = self.cpu_stat(arm, apps), task_cpu_ns(arm.killer_pid), time.monotonic()
            self.pinger = subprocess.Popen(
                [f"{self.a.bin}/pinger", "--to", f"{self.tmp}/fg.sock", "--self", f"{self.tmp}/pinger.sock",
                 "--out", f"{rd}/pings.txt", "--max-seconds", str(int(self.a.cpu_seconds + 60))],
                stdin=subprocess.DEVNULL, preexec_fn=child_setup("/bench-pinger", None))
            marks["pinger_start"] = time.monotonic()
            time.sleep(self.a.cpu_seconds)
            marks["end"] = time.monotonic()
            self.stop_pinger()
            u1, d1, t1 = self.cpu_stat(arm, apps), task_cpu_ns(arm.killer_pid), time.monotonic()
            res["window_s"] = t1 - t0
            res["cpu_usec"] = {a: (u1[a] - u0[a]) if u0.get(a) is not None and u1.get(a) is not None else None
                               for a in apps}
            res["daemon_cpu_ms"] = (d1 - d0) / 1e6 if d0 is not None and d1 is not None else None
            res["ncpu"] = os.cpu_count()
            res["deaths"] = self.deaths.take()
            res["ok"] = True
        except NotRun:
            raise
        except Exception as e:  # noqa: BLE001 - recorded, the next run runs
            log(f"cpu run {arm.name}-{index} FAILED: {type(e).__name__}: {e}")
            res["ok"] = False
            res["error"] = f"{type(e).__name__}: {e}"
        finally:
            self.stop_pinger()
            arm.stop_killer()
            with open(f"{rd}/killer.log", "w") as f:
                f.write(arm.killer_log())
            for app in apps:
                src = f"{self.tmp}/lc/log/{app}.log"
                if os.path.exists(src):
                    shutil.copy(src, f"{rd}/{app}.out")
            arm.teardown()
            self.deaths.forget_all()
        with open(f"{rd}/run.json", "w") as f:
            json.dump(res, f, indent=1)
        return res

    def progress(self, **kw):
        kw["t"] = time.monotonic()
        with open(f"{self.a.out}/progress.jsonl", "a") as f:
            f.write(json.dumps(kw) + "\n")

    def setup(self):
        if os.environ.get("LIFECYCLED_VM") != "1":
            sys.exit("guest.py: runs only inside scripts/vm.sh's guest (LIFECYCLED_VM=1)")
        os.makedirs(self.a.out, exist_ok=True)
        # Controllers at the root (the guest boots with none enabled below it).
        have = read(CG + "/cgroup.controllers").split()
        want = [c for c in ("memory", "cpu", "io") if c in have]
        for c in want:  # one by one: a controller the kernel refuses leaves the others
            try:
                write(CG + "/cgroup.subtree_control", "+" + c)
            except OSError as e:
                log(f"warning: +{c} at the root: {e}")
        want = read(CG + "/cgroup.subtree_control").split()
        cg_mkdir("/bench-tools", memory__min=32 << 20)
        write(CG + "/bench-tools/cgroup.procs", os.getpid())
        cg_mkdir("/bench-pinger", memory__min=16 << 20)
        cg_mkdir("/bench-killer")
        for g in ("/bench-tools", "/bench-pinger", "/bench-killer"):
            try:  # systemd-oomd (O arms) passes over a root-owned group marked so
                os.setxattr(CG + g, "user.oomd_omit", b"1")
            except OSError:
                pass
        write("/proc/self/oom_score_adj", -1000)  # inherited by the pinger and the sampler
        # A datagram socket queues max_dgram_qlen messages (10 by default):
        # fg stalled for 100 ms would make the pinger's sends fail (EAGAIN)
        # rather than wait in its queue. Room for the pinger's 1 s of pings.
        write("/proc/sys/net/unix/max_dgram_qlen", 512)
        threading.stack_size(512 << 10)
        locked = LIBC.mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) == 0
        self.deaths = DeathWatcher()
        self.deaths.start()
        self.kmsg = KmsgWatcher()
        self.kmsg.start()
        shutil.rmtree(self.tmp, ignore_errors=True)
        os.makedirs(self.tmp)

        def version(cmd):
            try:
                r = subprocess.run(cmd, capture_output=True, timeout=30)
                return (r.stdout + r.stderr).decode(errors="replace").strip().splitlines()[0]
            except Exception as e:  # noqa: BLE001
                return f"? ({e})"

        lc = f"{self.a.lifecycled_before if self.a.arm == 'L-before' else self.a.lifecycled_bin}/lifecycled"
        self.meta = {
            "arm": self.a.arm, "config": self.a.config, "uname": os.uname().release,
            "cpus": os.cpu_count(), "meminfo_kb": {k: v for k, v in meminfo().items()
                                                   if k in ("MemTotal", "MemAvailable", "SwapTotal")},
            "zswap": read("/sys/module/zswap/parameters/enabled", "?").strip(),
            "zswap_compressor": read("/sys/module/zswap/parameters/compressor", "?").strip(),
            "swap_device": os.environ.get("LIFECYCLED_VM_SWAP", ""),
            "cgroup_controllers": " ".join(want), "harness_mlocked": locked,
            "max_dgram_qlen": read("/proc/sys/net/unix/max_dgram_qlen", "?").strip(),
            "earlyoom": version(["earlyoom", "-v"]) if self.a.arm == "E" else None,
            "systemd_oomd": (version(["/lib/systemd/systemd-oomd", "--version"]) if self.a.arm.startswith("O")
                             else None),
            "pid1": read("/proc/1/comm", "?").strip(),
            "lifecycled": ({"path": lc, "mtime": os.path.getmtime(lc), "size": os.path.getsize(lc)}
                           if os.path.exists(lc) else None),
            "lifecycled_before": (lambda b: {"path": b, "mtime": os.path.getmtime(b), "size": os.path.getsize(b)}
                                  if os.path.exists(b) else None)(f"{self.a.lifecycled_before}/lifecycled"),
            "options": vars(self.a),
        }
        with open(f"{self.a.out}/meta.json", "w") as f:
            json.dump(self.meta, f, indent=1)
        log("guest:", json.dumps({k: self.meta[k] for k in ("arm", "config", "uname", "meminfo_kb", "zswap")}))

    def settle(self):
        t0 = time.monotonic()
        while psi_some_avg10() >= 1.0 and time.monotonic() - t0 < self.a.settle_max:
            time.sleep(0.2)
        return {"settle_s": round(time.monotonic() - t0, 2), "some_avg10": psi_some_avg10()}

    def between_runs(self):
        subprocess.run(["sync"], timeout=60)
        write("/proc/sys/vm/drop_caches", 3)
        dev = os.environ.get("LIFECYCLED_VM_SWAP", "")
        if dev:
            r = subprocess.run(["swapoff", dev], capture_output=True, timeout=300)
            r2 = subprocess.run(["swapon", dev], capture_output=True, timeout=60)
            if r.returncode or r2.returncode:
                log("warning: swapoff/swapon:", r.stderr, r2.stderr)

    def start_apps(self, arm, rd, marks):
        """The suspended apps, oldest first, each frozen before the next, then fg
        and the pinger."""
        for i in range(1, self.a.susp_count + 1):
            app = f"susp-{i}"
            arm.launch_susp(app, self.argv_susp(app), rd, f"{self.tmp}/{app}.ready")
            marks[f"{app}_frozen"] = time.monotonic()
        marks["susp_frozen"] = time.monotonic()
        arm.launch_fg(self.argv_fg(), rd)
        wait_until(lambda: os.path.exists(f"{self.tmp}/fg.ready"), 120, what="fg ready")
        marks["fg_ready"] = time.monotonic()
        self.pinger = subprocess.Popen(
            [f"{self.a.bin}/pinger", "--to", f"{self.tmp}/fg.sock", "--self", f"{self.tmp}/pinger.sock",
             "--out", f"{rd}/pings.txt", "--max-seconds", str(self.a.max_run_seconds)],
            stdin=subprocess.DEVNULL, preexec_fn=child_setup("/bench-pinger", None))
        marks["pinger_start"] = time.monotonic()

    def stop_pinger(self):
        p = getattr(self, "pinger", None)
        if p is not None:
            p.terminate()
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
            self.pinger = None

    def clean_tmp(self):
        for f in os.listdir(self.tmp):
            p = f"{self.tmp}/{f}"
            if os.path.isdir(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                try:
                    os.unlink(p)
                except OSError:
                    pass

    def idle(self, arm):
        """The killer's CPU over idle_seconds, the suspended apps and fg in place."""
        out = {"arm": arm.name, "seconds": self.a.idle_seconds}
        if arm.name == "K":
            out["cpu_ms"] = None
            out["note"] = "no killer process (the kernel's OOM killer costs nothing until it runs)"
            return out
        rd = f"{self.a.out}/idle"
        os.makedirs(rd, exist_ok=True)
        self.workload = "burst"
        arm.setup_layout()
        try:
            arm.start_killer(rd)
            marks = {}
            self.start_apps(arm, rd, marks)
            time.sleep(2)
            pid = arm.killer_pid
            c0, th0, t0 = task_cpu_ns(pid), task_cpu_by_thread(pid), time.monotonic()
            time.sleep(self.a.idle_seconds)
            c1, th1, t1 = task_cpu_ns(pid), task_cpu_by_thread(pid), time.monotonic()
            out["threads_cpu_ms"] = {k: (v - th0.get(k, 0)) / 1e6 for k, v in th1.items() if v - th0.get(k, 0) > 0}
            if isinstance(arm, LifecycledArm):
                try:
                    out["daemon_memory_status"] = json.loads(arm.ctl("status", "--json").stdout)["daemon"].get("memory")
                except Exception as e:  # noqa: BLE001
                    out["daemon_memory_status"] = f"? ({e})"
            out.update(cpu_ms=(c1 - c0) / 1e6 if c0 is not None and c1 is not None else None,
                       wall_s=round(t1 - t0, 3), killer_pid=pid,
                       killer_rss_kb=kv(read(f"/proc/{pid}/status", "")).get("VmRSS"))
            if out["cpu_ms"] is not None:
                out["cpu_percent"] = out["cpu_ms"] / 10 / (t1 - t0)
        finally:
            self.stop_pinger()
            arm.stop_killer()
            with open(f"{rd}/killer.log", "w") as f:
                f.write(arm.killer_log())
            arm.teardown()
            self.deaths.forget_all()
            self.kmsg.take()
            self.clean_tmp()
        return out

    def run_once(self, arm, workload, index):
        self.workload = workload
        rd = f"{self.a.out}/{workload}-{index}"
        os.makedirs(rd, exist_ok=True)
        res = {"workload": workload, "index": index, "arm": arm.name, "config": self.a.config, "marks": {}}
        marks = res["marks"]
        self.clean_tmp()
        arm.setup_layout()
        self.deaths.take()
        self.kmsg.take()
        self.kmsg.sync()
        try:
            marks["start"] = time.monotonic()
            arm.start_killer(rd)
            marks["killer_started"] = time.monotonic()
            res["settle"] = self.settle()
            sampler = subprocess.Popen(
                [f"{self.a.bin}/sampler", "--out", f"{rd}/samples.jsonl", "--apps-dir", arm.apps_dir,
                 "--fg", "fg", "--max-seconds", str(self.a.max_run_seconds),
                 "--interval-ms", str(self.a.sample_ms), "--stat-every", str(self.a.stat_every)]
                + sum((["--app", n] for n in self.app_names()), []),
                stdin=subprocess.DEVNULL, preexec_fn=child_setup(None, None))
            marks["sampler_start"] = time.monotonic()
            self.start_apps(arm, rd, marks)
            time.sleep(self.a.baseline)
            mi = meminfo()
            res["before_hog_kb"] = {k: mi.get(k) for k in ("MemAvailable", "MemFree", "SwapFree", "SwapTotal", "MemTotal")}
            if workload == "burst":
                target = mi["MemAvailable"] // 1024 + int(self.a.burst_apps * self.a.susp_mb)
                res["hog_target_mb"] = target
                res["deficit_mb"] = target - mi["MemAvailable"] // 1024
            else:
                res["hog_target_mb"] = (mi["MemTotal"] + mi["SwapTotal"]) // 1024
            write(f"{self.tmp}/hog.target", f"{res['hog_target_mb']}\n")
            marks["hog_launch"] = time.monotonic()
            arm.launch_hog(self.argv_hog(), rd)
            # The hog's own start time, from its status file.
            status_path = f"{self.tmp}/hog.status"

            def hog_status():
                try:
                    p = read(status_path).split()
                    return p[0], int(p[1]), float(p[3])
                except (OSError, IndexError, ValueError):
                    return None

            st = wait_until(hog_status, 30, step=0.01, what="the hog's status file")
            marks["hog_start"] = st[2]
            hard = marks["hog_start"] + self.a.deadline
            stop_at = None
            hog_mb = 0
            while True:
                now = time.monotonic()
                st = hog_status() or st
                hog_mb = max(hog_mb, st[1])
                dead = self.deaths.dead("hog")
                if stop_at is None and (dead or st[0] in ("held", "deadline")):
                    why = "hog died" if dead else f"hog {st[0]}"
                    marks["hog_stop"] = now
                    marks["hog_stop_why"] = why
                    stop_at = now + self.a.after_hog
                if now >= hard or (stop_at is not None and now >= stop_at):
                    break
                time.sleep(0.05)
            marks["end"] = time.monotonic()
            res["hog_mb_reached"] = hog_mb
            res["hog_final_status"] = st[0]
            # What the killers say, before anything is stopped.
            res["claims"] = arm.kill_claims()
            if isinstance(arm, LifecycledArm):
                res["lifecycled_status"] = arm.final_status()
            res["deaths"] = [d for d in self.deaths.take()]
            res["kmsg"] = self.kmsg.take()
            res["claims"] += [{"t": k.get("t_kernel", k["t"]), "t_read": k["t"], "kts": k["kts"], "pid": k["pid"],
                               "comm": k.get("comm"), "signal": "SIGKILL", "killer": "kernel", "line": k["msg"]}
                              for k in res["kmsg"] if "pid" in k]
            res["kmsg_offset"] = self.kmsg.offset
            self.stop_pinger()
            sampler.terminate()
            try:
                sampler.wait(timeout=120)
            except subprocess.TimeoutExpired:
                sampler.kill()
            res["ok"] = True
        except NotRun:
            raise
        except Exception as e:  # noqa: BLE001 - a run that breaks is recorded, the next one runs
            log(f"run {workload}-{index} FAILED: {type(e).__name__}: {e}")
            res["ok"] = False
            res["error"] = f"{type(e).__name__}: {e}"
            res.setdefault("deaths", self.deaths.take())
        finally:
            self.stop_pinger()
            if "sampler" in locals() and sampler.poll() is None:
                sampler.terminate()
                try:
                    sampler.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    sampler.kill()
            arm.stop_killer()
            with open(f"{rd}/killer.log", "w") as f:
                f.write(arm.killer_log())
            for app in self.app_names():
                src = f"{self.tmp}/lc/log/{app}.log"
                if os.path.exists(src):
                    shutil.copy(src, f"{rd}/{app}.out")
            arm.teardown()
            self.deaths.forget_all()
            self.between_runs()
        with open(f"{rd}/run.json", "w") as f:
            json.dump(res, f, indent=1)
        return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arm", required=True, choices=sorted(ARMS) + ["cpu"],
                    help="a memory arm, or cpu: the cpu workload, its arms (--cpu-arms) in turn")
    ap.add_argument("--cpu-arms", default=",".join(CPU_ARMS))
    ap.add_argument("--cpu-seconds", type=float, default=60, help="cpu workload: s of pings per run")
    ap.add_argument("--cpu-warmup", type=float, default=2)
    ap.add_argument("--cpu-work-ms", type=int, default=6, help="cpu workload: fg's CPU work per ping")
    ap.add_argument("--spinners", type=int, default=4)
    ap.add_argument("--config", default="M0")
    ap.add_argument("--out", required=True)
    ap.add_argument("--bin", required=True, help="the compiled workload programs")
    ap.add_argument("--lifecycled-bin", default=os.path.join(ROOT, ".build", "release"))
    ap.add_argument("--lifecycled-before", default="/work/before/.build/release",
                    help="the earlier build (arm L-before)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workloads", default="leak,burst")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fg-mb", type=int, default=96)
    ap.add_argument("--susp-mb", type=int, default=96)
    ap.add_argument("--susp-count", type=int, default=5)
    ap.add_argument("--burst-apps", type=float, default=2.5, help="burst deficit, in suspended apps")
    ap.add_argument("--slow-mbps", type=int, default=50)
    ap.add_argument("--slow-seconds", type=int, default=4)
    ap.add_argument("--fast-mbps", type=int, default=400)
    ap.add_argument("--deadline", type=int, default=60, help="s after the hog starts: the run ends")
    ap.add_argument("--after-hog", type=float, default=10, help="s the run goes on after the hog died or stopped")
    ap.add_argument("--baseline", type=float, default=3)
    ap.add_argument("--idle-seconds", type=float, default=30)
    ap.add_argument("--settle-max", type=float, default=10)
    ap.add_argument("--sample-ms", type=int, default=10)
    ap.add_argument("--stat-every", type=int, default=10)
    a = ap.parse_args()
    a.max_run_seconds = int(a.deadline + 240)
    h = Harness(a)
    h.setup()
    if a.arm == "cpu":
        return cpu_main(h, a)
    arm = ARMS[a.arm](h)
    if arm.not_run_reason:
        h.progress(step="not-run", why=arm.not_run_reason)
        log("not run:", arm.not_run_reason)
        return 0
    rng = random.Random(a.seed)
    plan = []
    workloads = a.workloads.split(",")
    for i in range(1, a.runs + 1):
        order = workloads[:]
        rng.shuffle(order)
        plan += [(w, i) for w in order]
    try:
        if a.idle_seconds > 0:
            log("idle cost of", arm.name)
            try:
                idle = h.idle(arm)
            except NotRun:
                raise
            except Exception as e:  # noqa: BLE001 - the runs still run
                log(f"idle FAILED: {type(e).__name__}: {e}")
                idle = {"arm": arm.name, "cpu_ms": None, "note": f"failed: {type(e).__name__}: {e}"}
            with open(f"{a.out}/idle.json", "w") as f:
                json.dump(idle, f, indent=1)
            h.progress(step="idle", **{k: v for k, v in idle.items() if k in ("cpu_ms", "note")})
            h.between_runs()
        for w, i in plan:
            log(f"run {w}-{i} of {arm.name} on {a.config}")
            r = h.run_once(arm, w, i)
            h.progress(step="run", workload=w, index=i, ok=r.get("ok"), error=r.get("error"))
            log(f"run {w}-{i}: ok={r.get('ok')} deaths={[d['app'] for d in r.get('deaths', [])]}")
    except NotRun as e:
        log("not run:", e)
        h.progress(step="not-run", why=str(e))
    return 0


def cpu_main(h, a):
    """The cpu workload: one guest, its arms alternated (shuffled in each
    round), --runs rounds."""
    h.workload = "cpu"
    h.calibrate_cpu()
    arms = {n: CPU_ARMS[n](h) for n in a.cpu_arms.split(",")}
    rng = random.Random(a.seed)
    skipped = {}
    for i in range(1, a.runs + 1):
        order = list(arms)
        rng.shuffle(order)
        for name in order:
            if name in skipped:
                continue
            log(f"cpu run {name}-{i}")
            try:
                r = h.run_cpu_once(arms[name], i)
            except NotRun as e:
                log(f"cpu {name}: not run: {e}")
                skipped[name] = str(e)
                h.progress(step="not-run", arm=name, why=str(e))
                continue
            h.progress(step="run", workload="cpu", arm=name, index=i, ok=r.get("ok"), error=r.get("error"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
