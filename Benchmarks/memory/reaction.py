#!/usr/bin/env python3
"""Memory-pressure reaction time: lifecycled vs earlyoom.

Run as root from anywhere (python3, standard library only):

    sudo python3 Benchmarks/memory/reaction.py                 # both tools and the floor, 20 runs each
    sudo python3 Benchmarks/memory/reaction.py --quick         # 5 runs, 10 s idle window
    sudo python3 Benchmarks/memory/reaction.py --only earlyoom
    sudo python3 Benchmarks/memory/reaction.py --victim-mb 256 --overshoot-mb 64   # a small victim
    sudo python3 Benchmarks/memory/reaction.py --write-config /tmp/cfg   # lifecycled config only

The workload, identical for both tools:

  * a *victim* (hog --mb VICTIM) holds VICTIM MiB; for earlyoom it is a plain
    child with oom_score_adj 1000, for lifecycled it is the app "victim",
    launched in the background and frozen (state "suspended");
  * "available" is MemAvailable plus the free pages in per-CPU lists, which
    MemAvailable leaves out (see MemInfo); lifecycled measures the same;
  * A0 = available before the victim starts,
    T = A0 - (VICTIM + HOG - OVERSHOOT) MiB: once the victim is resident, a
    second hog (--mb HOG, not managed by either tool, oom_score_adj 0) crosses
    T after allocating about HOG - OVERSHOOT MiB, then allocates OVERSHOOT MiB
    more (default 512, at most VICTIM / 2: after the kill the available
    memory settles at T + VICTIM - OVERSHOOT);
  * earlyoom runs as `earlyoom -M T,T -r 0` (SIGKILL at MemAvailable <= T,
    default adaptive polling, no memory report); lifecycled runs with
    [memory] available_critical = T, available_warning = T + 256 MiB;
  * a monitor here reads /proc/meminfo and /proc/zoneinfo every ~0.5 ms
    (pread on one fd each):
    t_cross   = first sample below T by the tool's own measure (MemAvailable
                for earlyoom, available for lifecycled and the floor),
    t_release = first later sample with available >= (lowest since t_cross)
                + VICTIM/2, i.e. the victim's memory came back;
    reaction  = t_release - t_cross. The victim must have exited and the hog
    must still be alive, else the run is invalid;
  * the hog starts after a random delay (0-1 s, one seeded stream: --seed)
    once the tool is ready. Without it the hog started right
    after earlyoom, whose polling times are set by the memory it sees: its
    poll fell at the same point of the hog's climb run after run, and the
    runs alternated between ~7 ms and ~60-100 ms (phase-locked, not a sample
    of when a crossing happens).

The floor: the same workload with no tool. A thread of the harness sends
SIGKILL to the (plain) victim and calls process_mrelease the moment the
monitor sees the crossing. No monitoring tool can react sooner; what is left
is the kernel freeing the victim's memory while the hog keeps allocating, a
lower bound for both tools (no idle cost: there is no daemon).

Idle cost: with the victim in place (frozen for lifecycled) and nothing else
happening, CPU time (utime+stime of /proc/PID/stat, and the precise
/proc/PID/task/*/schedstat) and context switches (voluntary + nonvoluntary of
/proc/PID/task/*/status) of the daemon over a 30 s window (10 s with --quick).

Safety: earlyoom kills the process with the highest oom_score on the whole
machine. The harness checks that the victim has the highest oom_score before
it starts earlyoom, keeps T far above real trouble (at least max(4 GiB, 20 %
of MemTotal)), uses at most VICTIM + HOG <= 4096 MiB, SIGKILLs earlyoom the
moment the victim exits (earlyoom waits >= 100 ms after a kill before it could
pick another process), waits while a Swift build runs or memory is moving, and
kills every process it started on exit, Ctrl-C or an exception (children also
get PR_SET_PDEATHSIG, so even a SIGKILLed harness leaves none behind).

Exit status: 0 all runs valid, 1 some run invalid, 2 setup error or interrupted.
"""

import argparse
import ctypes
import json
import math
import os
import random
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
MIB = 1024  # KiB per MiB: /proc/meminfo is in KiB

CGROUP_ROOT = "/lifecycled-bench-memory"
# Processes whose presence means a Swift build or test run perturbs memory.
BUILD_COMMS = {"swift-build", "swift-frontend", "swift-test", "swift-driver"}
MONITOR_INTERVAL_S = 0.0005
CROSS_TIMEOUT_S = 60.0     # hog start -> below T
RELEASE_TIMEOUT_S = 15.0   # t_cross -> victim's memory back
PHASE_S = 1.0              # the hog starts after a random delay in [0, PHASE_S)
PANIC_BELOW_T_MIB = 768    # this far below T: something else eats memory, abort
STABLE_SPREAD_MIB = 64     # available memory must move less than this over 1 s before a run
RECOVERED_MIB = 32         # after a run, available memory must come back this close to its A0
QUIET_WAIT_S = 600.0       # wait at most this long for builds to end / memory to settle
RAM_BUDGET_MIB = 4096

T0 = time.monotonic()


def log(msg):
    sys.stderr.write("[%7.1fs] %s\n" % (time.monotonic() - T0, msg))
    sys.stderr.flush()


class BenchError(Exception):
    """A setup problem: the benchmark cannot go on."""


# --------------------------------------------------------------------------
# Processes: every child is registered, in its own session, and dies with us.

_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


def _child_setup(deathsig):
    def fn():
        # Die with the harness even if it is SIGKILLed; the harness itself runs
        # with oom_score_adj -1000, children start from 0.
        _libc.prctl(PR_SET_PDEATHSIG, int(deathsig), 0, 0, 0)
        try:
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("0")
        except OSError:
            pass
    return fn


class Procs:
    def __init__(self):
        self.items = []  # [name, Popen, graceful signal or None]

    def spawn(self, name, argv, log_path=None, deathsig=signal.SIGKILL, graceful=None, env=None):
        out = open(log_path, "ab") if log_path else subprocess.DEVNULL
        try:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                 start_new_session=True, preexec_fn=_child_setup(deathsig), close_fds=True)
        finally:
            if log_path:
                out.close()
        self.items.append([name, p, graceful])
        return p

    def kill(self, p, timeout=5.0):
        """SIGKILL p's process group while p is not reaped, and reap it."""
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            p.wait(timeout=5)
        return p.returncode

    def stop_all(self):
        for name, p, graceful in reversed(self.items):
            if p.poll() is not None:
                continue
            if graceful is not None:
                log("cleanup: %s (pid %d): signal %d" % (name, p.pid, graceful))
                try:
                    os.kill(p.pid, graceful)
                    p.wait(timeout=15)
                    continue
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    pass
            log("cleanup: SIGKILL %s (pid %d)" % (name, p.pid))
            try:
                self.kill(p, signal.SIGKILL)
            except Exception as e:  # keep cleaning the others
                log("cleanup: %s: %s" % (name, e))
        self.items = [it for it in self.items if it[1].poll() is None]


PROCS = Procs()


def _raise_exit(signum, _frame):
    raise SystemExit(128 + signum)


# --------------------------------------------------------------------------
# /proc helpers

PERCPU_COUNT = re.compile(rb"count:\s*(\d+)")


class MemInfo:
    """Available memory in KiB, read with pread on one fd a file: cheap
    enough for ~0.5 ms polling.

    available() is MemAvailable plus the free pages in per-CPU lists
    (/proc/zoneinfo's pageset "count:" lines), which MemAvailable leaves out:
    since Linux 6.7 those lists grow with the freeing rate, and right after
    a process's memory is freed they can hold hundreds of MiB that
    MemAvailable does not show for tens of seconds (they drain at ~8 MiB/s a
    CPU). Measured with MemAvailable alone, a 256 MiB victim's release was
    often not seen at all, and after a run ~300 MiB seemed missing for a
    minute. memavailable() is MemAvailable alone: what earlyoom reads."""

    def __init__(self):
        self.fd = os.open("/proc/meminfo", os.O_RDONLY | os.O_CLOEXEC)
        self.zfd = os.open("/proc/zoneinfo", os.O_RDONLY | os.O_CLOEXEC)
        self.page_kib = os.sysconf("SC_PAGE_SIZE") // 1024

    def field(self, name):
        b = os.pread(self.fd, 8192, 0)
        key = name.encode() + b":"
        i = b.find(key)
        if i < 0:
            raise BenchError("/proc/meminfo has no %s" % name)
        j = b.find(b"\n", i)
        return int(b[i + len(key):j].split()[0])

    def memavailable(self):
        return self.field("MemAvailable")

    def percpu(self):
        parts, off = [], 0
        while True:
            b = os.pread(self.zfd, 65536, off)
            if not b:
                break
            parts.append(b)
            off += len(b)
        return sum(int(x) for x in PERCPU_COUNT.findall(b"".join(parts))) * self.page_kib

    def both(self):
        """(MemAvailable, available), KiB."""
        m = self.memavailable()
        return m, m + self.percpu()

    def available(self):
        return self.both()[1]


def swift_build():
    """The Swift build or test run under way ("swift-build 123, ..."), or None."""
    builds = comm_pids(BUILD_COMMS)
    return ", ".join("%s %d" % (c, p) for p, c in builds[:3]) if builds else None


def read_text(path, default=None):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def comm_pids(names):
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        c = read_text("/proc/%s/comm" % d)
        if c is not None and c.strip() in names:
            found.append((int(d), c.strip()))
    return found


def oom_scores():
    scores = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        s = read_text("/proc/%s/oom_score" % d)
        c = read_text("/proc/%s/comm" % d)
        if s and c:
            try:
                scores.append((int(s), int(d), c.strip()))
            except ValueError:
                pass
    return sorted(scores, reverse=True)


CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_sample(pid):
    """(utime+stime ticks of the process, schedstat ns summed over its threads,
    voluntary+nonvoluntary context switches summed over its threads)."""
    stat = read_text("/proc/%d/stat" % pid)
    if stat is None:
        raise BenchError("process %d is gone" % pid)
    fields = stat[stat.rindex(")") + 2:].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    ns, ctx = 0, 0
    have_schedstat = True
    for tid in os.listdir("/proc/%d/task" % pid):
        ss = read_text("/proc/%d/task/%s/schedstat" % (pid, tid))
        if ss:
            ns += int(ss.split()[0])
        else:
            have_schedstat = False
        st = read_text("/proc/%d/task/%s/status" % (pid, tid)) or ""
        for line in st.splitlines():
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                ctx += int(line.split()[1])
    return ticks, (ns if have_schedstat else None), ctx


def measure_idle(pid, window_s, mem):
    t0 = time.monotonic()
    m0 = mem.available()
    a = cpu_sample(pid)
    time.sleep(window_s)
    b = cpu_sample(pid)
    dt = time.monotonic() - t0
    moved = abs(mem.available() - m0)
    res = {
        "window_s": dt,
        "tick_cpu_s": (b[0] - a[0]) / CLK_TCK,
        "cpu_s": (b[1] - a[1]) / 1e9 if a[1] is not None and b[1] is not None else None,
        "ctx": b[2] - a[2],
    }
    res["cpu_pct"] = 100.0 * (res["cpu_s"] if res["cpu_s"] is not None else res["tick_cpu_s"]) / dt
    res["wakeups_per_s"] = res["ctx"] / dt
    build = swift_build()
    if build:
        res["perturbed"] = "a Swift build started during the window (%s)" % build
    elif moved > 2 * STABLE_SPREAD_MIB * MIB:
        res["perturbed"] = "available memory moved %d MiB during the window" % (moved // MIB)
    return res


def cgroup2_mount():
    for line in (read_text("/proc/self/mountinfo") or "").splitlines():
        left, _, right = line.partition(" - ")
        if right.split(" ")[0] == "cgroup2":
            return left.split(" ")[4]
    return None


def remove_cgroup_tree(path):
    """Kill everything in a leftover cgroup subtree and remove it (deepest first)."""
    if not os.path.isdir(path):
        return True
    dirs = [root for root, _, _ in os.walk(path)]
    for d in dirs:
        for f, v in (("cgroup.freeze", "0"), ("cgroup.kill", "1")):
            try:
                with open(os.path.join(d, f), "w") as fh:
                    fh.write(v)
            except OSError:
                pass
        for pid in (read_text(os.path.join(d, "cgroup.procs")) or "").split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
    ok = True
    for d in sorted(dirs, key=len, reverse=True):
        deadline = time.monotonic() + 5
        while True:
            try:
                os.rmdir(d)
                break
            except FileNotFoundError:
                break
            except OSError as e:
                if time.monotonic() > deadline:
                    log("could not remove cgroup %s: %s" % (d, e))
                    ok = False
                    break
                time.sleep(0.05)
    return ok


# --------------------------------------------------------------------------
# Waiting

def wait_for(cond, timeout, what, poll=0.01, proc=None):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if proc is not None and proc.poll() is not None:
            raise BenchError("%s: the process exited (status %s) first" % (what, proc.returncode))
        if time.monotonic() > deadline:
            raise BenchError("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(poll)


def wait_quiet(mem):
    """No Swift build running, available memory steady over 1 s."""
    deadline = time.monotonic() + QUIET_WAIT_S
    said = None
    while True:
        build = swift_build()
        if not build:
            samples = []
            for _ in range(21):
                samples.append(mem.available())
                time.sleep(0.05)
            spread = max(samples) - min(samples)
            if spread < STABLE_SPREAD_MIB * MIB:
                if said:
                    log("quiet again")
                return
            why = "available memory moved %d MiB within 1 s" % (spread // MIB)
        else:
            why = "a Swift build is running (%s)" % build
        if time.monotonic() > deadline:
            raise BenchError("gave up after %.0f s: %s" % (QUIET_WAIT_S, why))
        if why != said:
            log("waiting: %s (checking every 5 s, up to %.0f s)" % (why, QUIET_WAIT_S))
            said = why
        time.sleep(5)


def wait_recovered(mem, a0, timeout=90.0):
    """Waits until the available memory is back within RECOVERED_MIB of a0."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if mem.available() >= a0 - RECOVERED_MIB * MIB:
            return True
        time.sleep(0.1)
    log("warning: available memory %d MiB did not come back to %d MiB within %.0f s"
        % (mem.available() // MIB, a0 // MIB, timeout))
    return False


# --------------------------------------------------------------------------
# The measurement

PHASE_RNG = random.Random(1)   # reseeded from --seed in main


def measure(mem, T, victim_pid, victim_kib, hog_argv, on_event, tag, r, on_cross=None, cross_on_memavailable=False):
    """Start the hog and time T-crossing -> victim memory released; results go into r.

    The crossing is on the tool's own measure: the available memory
    (MemAvailable + per-CPU free pages) for lifecycled and the floor,
    MemAvailable alone for earlyoom (cross_on_memavailable), which therefore
    crosses T up to the per-CPU lists' content earlier. The release is on the
    available memory for all: otherwise a freed victim can stay invisible.

    r["hog"] is set as soon as the hog is spawned, so the caller can always kill it.
    on_event() is called once, as soon as anything happens that ends the
    tool's job (release, victim exit, hog exit, timeout, error): the earlyoom
    side kills earlyoom there. on_cross(), if given, is called at the
    crossing (the floor's killer)."""
    r.update({"valid": False, "note": "", "reaction_ms": None, "victim_exit_ms": None})
    time.sleep(PHASE_RNG.uniform(0, PHASE_S))
    victim_fd = os.pidfd_open(victim_pid)
    hog = None
    hog_fd = None
    fired = False

    def fire():
        nonlocal fired
        if not fired:
            fired = True
            on_event()

    try:
        hog = PROCS.spawn("hog " + tag, hog_argv)
        r["hog"] = hog
        hog_fd = os.pidfd_open(hog.pid)
        poller = select.poll()
        poller.register(victim_fd, select.POLLIN)
        poller.register(hog_fd, select.POLLIN)
        half = victim_kib // 2
        panic = T - PANIC_BELOW_T_MIB * MIB
        t_start = time.monotonic_ns()
        t_cross = t_release = t_victim_exit = t_hog_exit = None
        low = low_avail = None
        prev = t_start
        gaps = []
        while True:
            memavail, avail = mem.both()
            a = memavail if cross_on_memavailable else avail
            t = time.monotonic_ns()
            if t_cross is None:
                if a < T:
                    t_cross, low, low_avail = t, a, avail
                    r["percpu_at_cross_mib"] = (avail - memavail) / MIB
                    if on_cross is not None:
                        on_cross()
                elif t - t_start > CROSS_TIMEOUT_S * 1e9:
                    r["note"] = "never went below T within %.0f s" % CROSS_TIMEOUT_S
                    break
            else:
                gaps.append(t - prev)
                low = min(low, a)
                low_avail = min(low_avail, avail)
                if avail >= low_avail + half:
                    t_release = t
                    break
                if a < panic:
                    r["note"] = "fell %d MiB below T: something else is using memory; aborted" % ((T - a) // MIB)
                    break
                if t - t_cross > RELEASE_TIMEOUT_S * 1e9:
                    r["note"] = "victim's memory not released within %.0f s of the crossing" % RELEASE_TIMEOUT_S
                    break
            prev = t
            for fd, _ev in poller.poll(0):
                if fd == victim_fd and t_victim_exit is None:
                    t_victim_exit = t
                    poller.unregister(victim_fd)
                    fire()  # earlyoom must not get a second pick
                elif fd == hog_fd and t_hog_exit is None:
                    t_hog_exit = t
                    poller.unregister(hog_fd)
                    fire()
            if t_cross is None and t_hog_exit is not None:
                r["note"] = "the hog exited (status %s) before the crossing" % hog.poll()
                break
            if t_cross is None and t_victim_exit is not None:
                r["note"] = "the victim exited before the crossing"
                break
            time.sleep(MONITOR_INTERVAL_S)
        fire()
        # Settle: did the victim really exit, is the hog alive?
        if t_victim_exit is None:
            if select.select([victim_fd], [], [], 2.0)[0]:
                t_victim_exit = time.monotonic_ns()
        hog_alive = hog.poll() is None
        r["low_minus_T_mib"] = (low - T) / MIB if low is not None else None
        r["low_avail_minus_T_mib"] = (low_avail - T) / MIB if low_avail is not None else None
        r["gaps_ns"] = gaps
        r["victim_exited"] = t_victim_exit is not None
        r["hog_alive"] = hog_alive
        r["t_cross"], r["t_release"] = t_cross, t_release
        if t_cross is not None and t_release is not None:
            r["reaction_ms"] = (t_release - t_cross) / 1e6
        if t_cross is not None and t_victim_exit is not None:
            r["victim_exit_ms"] = (t_victim_exit - t_cross) / 1e6
        if not r["note"]:
            if not hog_alive:
                r["note"] = "INVALID: the hog was killed (status %s)" % hog.returncode
            elif not r["victim_exited"]:
                r["note"] = "memory came back but the victim did not exit"
            elif t_release is None:
                r["note"] = "no release seen"
            else:
                r["valid"] = True
        return r
    finally:
        fire()
        os.close(victim_fd)
        if hog_fd is not None:
            os.close(hog_fd)


def perturbation(r, overshoot_mb):
    """Why a finished run cannot be trusted although the tool did its job, or None.

    The check before a run makes sure no build runs and memory is steady; this
    catches what started during it. Alone, the hog takes the available
    memory at most overshoot MiB below T (it crosses T after hog - overshoot
    of its hog MiB). Checked on the available memory for every tool: on
    MemAvailable, which earlyoom's crossing uses, the per-CPU lists' content
    at the start of a run would add to it."""
    build = swift_build()
    if build:
        return "a Swift build started during the run (%s)" % build
    low = r.get("low_avail_minus_T_mib")
    if low is not None and low < -(overshoot_mb + STABLE_SPREAD_MIB):
        return "fell %d MiB below T, more than the hog alone can (%d)" % (-low, overshoot_mb)
    return None


def percentile(sorted_values, p):
    """Nearest rank: the smallest value with at least p % of the values <= it."""
    if not sorted_values:
        return None
    k = max(1, math.ceil(p / 100.0 * len(sorted_values)))
    return sorted_values[k - 1]


# --------------------------------------------------------------------------
# Bench context

class Bench:
    def __init__(self, args):
        self.args = args
        self.mem = MemInfo()
        self.mem_total = self.mem.field("MemTotal")
        self.tmp = tempfile.mkdtemp(prefix="lifecycled-bench-memory-")
        self.hog = os.path.join(self.tmp, "hog")
        self.victim_kib = args.victim_mb * MIB
        self.results = {}   # tool -> {"runs": [...], "idle": {...}}
        self.Ts = []
        self.notes = []
        self.eo_version = None
        self.lc_root = None

    # --- shared -----------------------------------------------------------

    def compile_hog(self):
        src = os.path.join(HERE, "hog.c")
        cmd = ["gcc", "-O2", "-Wall", "-Wextra", "-Werror", src, "-o", self.hog]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise BenchError("compiling hog.c failed:\n%s%s" % (p.stdout, p.stderr))

    def threshold(self, a0):
        T = a0 - (self.args.victim_mb + self.args.hog_mb - self.args.overshoot_mb) * MIB
        floor = max(4 * 1024 * MIB, self.mem_total // 5)
        if T < floor:
            raise BenchError("T = %d MiB would be too close to real memory trouble (floor %d MiB); "
                             "free memory or lower --victim-mb/--hog-mb" % (T // MIB, floor // MIB))
        return T

    def victim_argv(self, ready):
        return [self.hog, "--mb", str(self.args.victim_mb), "--ready-file", ready]

    def hog_argv(self, ready):
        return [self.hog, "--mb", str(self.args.hog_mb), "--ready-file", ready]

    def begin_run(self, i):
        """Waits for a quiet machine; returns the available memory now, the run's T and its result dict."""
        wait_quiet(self.mem)
        a0 = self.mem.available()
        T = self.threshold(a0)
        self.Ts.append(T)
        return a0, T, {"run": i, "T_mib": T / MIB}

    def idle_window(self, tool, pid, T):
        """Idle cost of the running tool `pid`, 2 s after it started."""
        time.sleep(2)
        log("%s idle: measuring %.0f s" % (tool, self.args.idle_s))
        res = measure_idle(pid, self.args.idle_s, self.mem)
        res["headroom_mib"] = (self.mem.available() - T) / MIB
        log("%s idle: %.4f %% CPU, %.2f wake-ups/s" % (tool, res["cpu_pct"], res["wakeups_per_s"]))
        return res

    def after_run(self, a0, victim, hog):
        if hog is not None:
            PROCS.kill(hog)
        if victim is not None:
            PROCS.kill(victim)
        wait_recovered(self.mem, a0)

    # --- earlyoom ---------------------------------------------------------

    def ensure_earlyoom(self):
        path = shutil.which("earlyoom")
        if not path:
            before = {p for p, _ in comm_pids({"earlyoom"})}
            env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
            log("earlyoom not on PATH: apt-get install -y earlyoom")
            p = subprocess.run(["apt-get", "install", "-y", "earlyoom"], env=env,
                               capture_output=True, text=True)
            if p.returncode != 0:
                log("install failed; apt-get update, then again")
                subprocess.run(["apt-get", "update"], env=env, capture_output=True, text=True)
                p = subprocess.run(["apt-get", "install", "-y", "earlyoom"], env=env,
                                   capture_output=True, text=True)
                if p.returncode != 0:
                    raise BenchError("apt-get install -y earlyoom failed:\n" + p.stdout[-2000:] + p.stderr[-2000:])
            # The package may start its service (here PID 1 is not systemd):
            # stop any earlyoom that the install started.
            for pid, _ in comm_pids({"earlyoom"}):
                if pid not in before:
                    log("killing earlyoom %d started by the package install" % pid)
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            path = shutil.which("earlyoom")
            if not path:
                raise BenchError("earlyoom still not on PATH after installing it")
        self.earlyoom = path
        v = subprocess.run([path, "-v"], capture_output=True, text=True)
        self.eo_version = (v.stdout + v.stderr).strip().splitlines()[0] if (v.stdout + v.stderr).strip() else "?"
        self.eo_version = self.eo_version.replace("earlyoom ", "")
        dpkg = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "earlyoom"], capture_output=True, text=True)
        if dpkg.returncode == 0 and dpkg.stdout:
            self.eo_version += " (Debian %s)" % dpkg.stdout.strip()
        others = comm_pids({"earlyoom"})
        if others:
            self.notes.append("another earlyoom was running (pids %s); its own thresholds are far below T"
                              % ", ".join(str(p) for p, _ in others))
            log("warning: earlyoom already running: %s" % others)

    def earlyoom_argv(self, T):
        # -M SIZE,KILL_SIZE in KiB: equal values = SIGKILL as soon as
        # MemAvailable <= T. No -S: with SwapTotal = 0, earlyoom 1.7 refuses
        # any -S value ("exceeds limit 0") and counts free swap as 0 %, which
        # is always below its default swap minimum, so memory alone decides.
        # -r 0: no periodic memory report.
        return [self.earlyoom, "-M", "%d,%d" % (T, T), "-r", "0"]

    def start_victim_plain(self, ready):
        victim = PROCS.spawn("victim", self.victim_argv(ready))
        with open("/proc/%d/oom_score_adj" % victim.pid, "w") as f:
            f.write("1000")
        wait_for(lambda: os.path.exists(ready), 30, "the victim to be resident", proc=victim)
        return victim

    def check_victim_is_top(self, victim_pid):
        scores = oom_scores()
        top = scores[0]
        if top[1] != victim_pid:
            raise BenchError("the victim (pid %d) is not the process with the highest oom_score: %s; "
                             "earlyoom would kill that one" % (victim_pid, scores[:3]))
        if len(scores) > 1 and scores[1][0] >= top[0] - 100:
            raise BenchError("runner-up oom_score too close to the victim's: %s" % scores[:3])

    def start_earlyoom(self, T, log_path):
        eo = PROCS.spawn("earlyoom", self.earlyoom_argv(T), log_path=log_path)
        wait_for(lambda: "SIGKILL when" in (read_text(log_path) or ""), 5, "earlyoom's startup lines", proc=eo)
        time.sleep(0.05)  # past its dry-run self test and mlockall, into its poll loop
        return eo

    def earlyoom_idle(self):
        a0 = self.mem.available()
        T = self.threshold(a0)
        victim = eo = None
        try:
            victim = self.start_victim_plain(os.path.join(self.tmp, "eo-idle-victim.ready"))
            self.check_victim_is_top(victim.pid)
            eo = self.start_earlyoom(T, os.path.join(self.tmp, "earlyoom-idle.log"))
            return self.idle_window("earlyoom", eo.pid, T)
        finally:
            if eo is not None:
                PROCS.kill(eo)
            if victim is not None:
                PROCS.kill(victim)
            wait_recovered(self.mem, a0)

    def earlyoom_run(self, i):
        a0, T, r = self.begin_run(i)
        victim = eo = None
        eo_log = os.path.join(self.tmp, "earlyoom-%d.log" % i)
        try:
            victim = self.start_victim_plain(os.path.join(self.tmp, "eo-victim-%d.ready" % i))
            self.check_victim_is_top(victim.pid)
            eo = self.start_earlyoom(T, eo_log)
            measure(self.mem, T, victim.pid, self.victim_kib,
                    self.hog_argv(os.path.join(self.tmp, "eo-hog-%d.ready" % i)),
                    on_event=lambda: PROCS.kill(eo), tag="earlyoom-%d" % i, r=r,
                    cross_on_memavailable=True)
            r["perturbed"] = perturbation(r, self.args.overshoot_mb)
            PROCS.kill(eo)
            text = read_text(eo_log) or ""
            killed = re.findall(r'sending (SIG\w+) to process (\d+)', text)
            if r["valid"]:
                if [k for k in killed if int(k[1]) != victim.pid]:
                    r["valid"] = False
                    r["note"] = "INVALID: earlyoom also signalled %s" % killed
                elif not killed:
                    r["valid"] = False
                    r["note"] = "INVALID: the victim exited but earlyoom's log shows no kill"
            return r
        finally:
            if eo is not None:
                PROCS.kill(eo)
            self.after_run(a0, victim, r.get("hog"))

    # --- the floor: no tool, the harness kills at the crossing -------------

    def floor_run(self, i):
        """The victim as for earlyoom; a thread of the harness SIGKILLs it and
        calls process_mrelease the moment the monitor sees the crossing. No
        monitoring tool can do better: what is left is the kernel's freeing."""
        a0, T, r = self.begin_run(i)
        victim = None
        pidfd = None
        crossed, ended = threading.Event(), threading.Event()
        done = {}

        def killer():
            ended.wait()
            if not crossed.is_set():
                return  # ended without a crossing
            done["kill_ns"] = time.monotonic_ns()
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            done["mrelease"] = _libc.syscall(448, pidfd, 0) == 0  # process_mrelease(2)

        def cross():
            crossed.set()
            ended.set()

        try:
            victim = self.start_victim_plain(os.path.join(self.tmp, "floor-victim-%d.ready" % i))
            pidfd = os.pidfd_open(victim.pid)
            th = threading.Thread(target=killer, daemon=True)
            th.start()
            measure(self.mem, T, victim.pid, self.victim_kib,
                    self.hog_argv(os.path.join(self.tmp, "floor-hog-%d.ready" % i)),
                    on_event=ended.set, tag="floor-%d" % i, r=r, on_cross=cross)
            ended.set()
            th.join(10)
            r["perturbed"] = perturbation(r, self.args.overshoot_mb)
            if r.get("t_cross") is not None and done.get("kill_ns") is not None:
                r["decide_ms"] = (done["kill_ns"] - r["t_cross"]) / 1e6
                if r.get("t_release") is not None:
                    r["free_ms"] = (r["t_release"] - done["kill_ns"]) / 1e6
            if not done.get("mrelease", True):
                r["note"] = "; ".join(x for x in (r.get("note"), "process_mrelease failed") if x)
            return r
        finally:
            ended.set()
            if pidfd is not None:
                os.close(pidfd)
            self.after_run(a0, victim, r.get("hog"))

    # --- lifecycled -------------------------------------------------------

    def check_lifecycled(self):
        for what, path in (("--lifecycled", self.args.lifecycled), ("--supervisorctl", self.args.supervisorctl)):
            if not (os.path.isfile(path) and os.access(path, os.X_OK)):
                raise BenchError("%s %s: no such executable (build the release binaries first, "
                                 "or use --only earlyoom)" % (what, path))
        mount = cgroup2_mount()
        if mount is None:
            raise BenchError("no cgroup2 mount: lifecycled cannot freeze the victim here")
        self.lc_root = mount + CGROUP_ROOT

    def write_lifecycled_config(self, d, T):
        """Writes d/lifecycled.toml and d/apps/victim.toml; returns (config path, socket, ready file)."""
        os.makedirs(os.path.join(d, "apps"), exist_ok=True)
        sock = os.path.join(d, "control.sock")
        ready = os.path.join(d, "victim.ready")
        q = json.dumps  # a JSON string is a valid TOML basic string
        with open(os.path.join(d, "lifecycled.toml"), "w") as f:
            f.write("# Generated by Benchmarks/memory/reaction.py: T = %d KiB\n" % T)
            f.write('apps_dir = "apps"\n')
            # Its own directories, not the system's (/run, /var/lib and /var/log/lifecycled).
            f.write('runtime_directory = "run"\nstate_directory = "state"\nlog_directory = "logs"\n')
            f.write("control_socket = %s\n" % q(sock))
            f.write("cgroup_root = %s\n" % q(CGROUP_ROOT))
            f.write("event_history = 10000\n")
            f.write("\n[memory]\n")
            f.write('available_warning = "%dK"\n' % (T + 262144))
            f.write('available_critical = "%dK"\n' % T)
            f.write("hysteresis = 1\n")
        with open(os.path.join(d, "apps", "victim.toml"), "w") as f:
            f.write("command = [%s]\n" % ", ".join(q(a) for a in self.victim_argv(ready)))
            f.write('delivery = "signals"\n')
            f.write("\n[timeouts]\n")
            # Long enough for the hog to become resident before it is frozen
            # (1 GiB takes ~0.7 s here); it only delays the setup, not the measurement.
            f.write("background_grace = %g\n" % self.args.victim_grace)
        return os.path.join(d, "lifecycled.toml"), sock, ready

    def ctl(self, sock, *argv, timeout=10):
        return subprocess.run([self.args.supervisorctl] + list(argv) + ["--socket", sock],
                              capture_output=True, text=True, timeout=timeout)

    def victim_status(self, sock):
        p = self.ctl(sock, "status", "--json", "victim")
        if p.returncode != 0:
            return None
        try:
            doc = json.loads(p.stdout)
        except ValueError:
            return None
        for app in doc.get("apps", []):
            if app.get("name") == "victim":
                return app
        return None

    def start_lifecycled(self, d, T):
        cfg, sock, ready = self.write_lifecycled_config(d, T)
        if os.path.exists(self.lc_root):
            log("leftover cgroup %s: removing it" % self.lc_root)
            if not remove_cgroup_tree(self.lc_root):
                raise BenchError("cannot remove leftover cgroup %s" % self.lc_root)
        state = os.path.join(d, "state")  # kill log etc., not /var/lib/lifecycled
        os.makedirs(state, exist_ok=True)
        lc = PROCS.spawn("lifecycled", [self.args.lifecycled, "--config", cfg],
                         log_path=os.path.join(d, "lifecycled.log"),
                         deathsig=signal.SIGTERM, graceful=signal.SIGTERM,
                         env=dict(os.environ, STATE_DIRECTORY=state))
        wait_for(lambda: os.path.exists(sock), 10, "the control socket %s" % sock, proc=lc)
        wait_for(lambda: self.ctl(sock, "status", "--json").returncode == 0, 10,
                 "lifecycled to answer on its socket", poll=0.05, proc=lc)
        p = self.ctl(sock, "launch", "--background", "victim")
        if p.returncode != 0:
            raise BenchError("supervisorctl launch --background victim: exit %d: %s"
                             % (p.returncode, (p.stderr or p.stdout).strip()))
        deadline = time.monotonic() + 30
        app = None
        while True:
            app = self.victim_status(sock)
            if app and app.get("state") == "suspended":
                if os.path.exists(ready):
                    break
                raise BenchError("the victim was frozen before it was resident (no ready file): "
                                 "raise --victim-grace (now %s s)" % self.args.victim_grace)
            if lc.poll() is not None:
                raise BenchError("lifecycled exited (status %s); see %s/lifecycled.log" % (lc.returncode, d))
            if time.monotonic() > deadline:
                raise BenchError("the victim was not suspended within 30 s (last status: %s); see %s/lifecycled.log"
                                 % (app, d))
            time.sleep(0.02)
        pid = app.get("pid")
        if not isinstance(pid, int):
            raise BenchError("status --json gave no pid for the victim: %s" % app)
        return lc, sock, pid

    def stop_lifecycled(self, lc, d):
        """SIGTERM, wait for it to exit (it removes its cgroups); SIGKILL + cleanup otherwise."""
        note = None
        if lc.poll() is None:
            os.kill(lc.pid, signal.SIGTERM)
            try:
                lc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                note = "lifecycled did not exit within 15 s of SIGTERM; SIGKILLed"
                PROCS.kill(lc)
        if lc.returncode not in (0, None):
            note = (note + "; " if note else "") + "lifecycled exited with status %s" % lc.returncode
        if os.path.exists(self.lc_root):
            note = (note + "; " if note else "") + "its cgroup %s was left behind (removed)" % self.lc_root
            remove_cgroup_tree(self.lc_root)
        return note

    def lifecycled_idle(self):
        a0 = self.mem.available()
        T = self.threshold(a0)
        d = os.path.join(self.tmp, "lifecycled-idle")
        lc = None
        try:
            lc, _, _ = self.start_lifecycled(d, T)
            return self.idle_window("lifecycled", lc.pid, T)
        finally:
            if lc is not None:
                n = self.stop_lifecycled(lc, d)
                if n:
                    self.notes.append("idle: " + n)
            wait_recovered(self.mem, a0)

    def lifecycled_run(self, i):
        a0, T, r = self.begin_run(i)
        d = os.path.join(self.tmp, "lifecycled-%d" % i)
        lc = None
        try:
            lc, sock, vpid = self.start_lifecycled(d, T)
            measure(self.mem, T, vpid, self.victim_kib,
                    self.hog_argv(os.path.join(d, "hog.ready")),
                    on_event=lambda: None, tag="lifecycled-%d" % i, r=r)
            r["perturbed"] = perturbation(r, self.args.overshoot_mb)
            try:
                j = self.ctl(sock, "jetsam", "--json")
                with open(os.path.join(d, "jetsam.json"), "w") as f:
                    f.write(j.stdout)
                    if j.returncode != 0 or j.stderr:
                        f.write("\n# exit %d, stderr:\n%s" % (j.returncode, j.stderr))
                r["jetsam_file"] = os.path.join(d, "jetsam.json")
                # Where the time goes: the daemon stamps its kill decision
                # with CLOCK_MONOTONIC, the clock of t_cross and t_release.
                ev = self.ctl(sock, "events", "--json", "victim")
                for line in ev.stdout.splitlines():
                    rec = json.loads(line)
                    if rec.get("kind") == "jetsam" and r.get("t_cross") and r.get("t_release"):
                        r["decide_ms"] = (rec["monotonic"] - r["t_cross"]) / 1e6
                        r["free_ms"] = (r["t_release"] - rec["monotonic"]) / 1e6
                        break
            except (subprocess.TimeoutExpired, ValueError):
                r["jetsam_file"] = None
            return r
        finally:
            hog = r.get("hog")
            if hog is not None:
                PROCS.kill(hog)
            if lc is not None:
                n = self.stop_lifecycled(lc, d)
                if n:
                    r["note"] = ((r.get("note") or "") + "; " + n).strip("; ")
            wait_recovered(self.mem, a0)

    # --- driver -------------------------------------------------------------

    def run_tool(self, tool):
        idle = {"earlyoom": self.earlyoom_idle, "lifecycled": self.lifecycled_idle, "floor": lambda: None}[tool]
        run = {"earlyoom": self.earlyoom_run, "lifecycled": self.lifecycled_run, "floor": self.floor_run}[tool]
        for attempt in range(1, 7):
            wait_quiet(self.mem)
            idle_res = idle()
            if idle_res is None or not idle_res.get("perturbed"):
                break
            log("%s idle: discarded (%s); again" % (tool, idle_res["perturbed"]))
        else:
            raise BenchError("%s idle: every window was disturbed: the machine is not quiet enough" % tool)
        res = {"idle": idle_res, "runs": []}
        self.results[tool] = res
        res["discarded"] = []
        attempt = 0
        for i in range(1, self.args.runs + 1):
            while True:
                attempt += 1
                r = run(attempt)
                r.pop("hog", None)
                if not r.get("perturbed"):
                    break
                res["discarded"].append(r)
                log("%s run %d/%d: discarded (%s); again" % (tool, i, self.args.runs, r["perturbed"]))
                if len(res["discarded"]) > max(5, self.args.runs):
                    raise BenchError("too many disturbed runs: the machine is not quiet enough")
            res["runs"].append(r)
            if r.get("valid"):
                log("%s run %d/%d: reaction %.1f ms (victim exit %.1f ms after the crossing)"
                    % (tool, i, self.args.runs, r["reaction_ms"], r["victim_exit_ms"] or float("nan")))
            else:
                log("%s run %d/%d: INVALID: %s" % (tool, i, self.args.runs, r.get("note")))
                if "aborted" in (r.get("note") or ""):
                    raise BenchError(r["note"])

    def report(self, tools):
        a = self.args
        lines = []
        out = lines.append
        out("# Memory-pressure reaction: lifecycled vs earlyoom")
        out("")
        out("Machine: %d CPUs, MemTotal %d MiB, kernel %s, swap %d MiB; earlyoom %s."
            % (os.cpu_count(), self.mem_total // MIB, os.uname().release, self.mem.field("SwapTotal") // MIB,
               self.eo_version or "(not run)"))
        if self.Ts:
            out("Parameters: victim %d MiB, hog %d MiB, overshoot %d MiB, "
                "T = A0 - (victim + hog - overshoot) MiB = %d..%d MiB "
                "(A0 = available memory before each run), %d runs per tool, idle window %.0f s, "
                "each hog started after a random delay of 0-%.0f ms (seed %d)."
                % (a.victim_mb, a.hog_mb, a.overshoot_mb, min(self.Ts) // MIB, max(self.Ts) // MIB,
                   a.runs, a.idle_s, PHASE_S * 1000, a.seed))
        if "earlyoom" in tools:
            out("earlyoom: `earlyoom -M T,T -r 0` (SIGKILL at MemAvailable <= T, adaptive polling "
                "100-1000 ms, no report); victim oom_score_adj 1000, hog 0.")
        if "floor" in tools:
            out("floor: no tool; a thread of the harness sends SIGKILL and calls process_mrelease the moment "
                "its monitor sees the crossing: the best any monitor could do, the rest is the kernel freeing.")
        if "lifecycled" in tools:
            out("lifecycled: `[memory] available_critical = T, available_warning = T + 256 MiB, hysteresis = 1`; "
                "victim frozen (suspended) before the hog starts.")
        out("")
        out("| tool | reaction p50 | p99 | min | max | n | idle CPU | wake-ups/s |")
        out("|---|---|---|---|---|---|---|---|")
        gaps_all = []
        for tool in tools:
            res = self.results.get(tool)
            if not res:
                continue
            vals = sorted(r["reaction_ms"] for r in res["runs"] if r.get("valid"))
            for r in res["runs"]:
                gaps_all.extend(r.get("gaps_ns") or [])
            n = len(vals)
            f = lambda v: "-" if v is None else "%.1f ms" % v
            idle = res["idle"]
            out("| %s | %s | %s | %s | %s | %d%s | %s | %s |"
                % ("floor (the harness kills at the crossing)" if tool == "floor" else tool,
                   f(percentile(vals, 50)), f(percentile(vals, 99)), f(vals[0] if vals else None),
                   f(vals[-1] if vals else None), n,
                   "" if n == len(res["runs"]) else " (+%d invalid)" % (len(res["runs"]) - n),
                   "-" if idle is None else "%.4f %%" % idle["cpu_pct"],
                   "-" if idle is None else "%.2f" % idle["wakeups_per_s"]))
        out("")
        out("Percentiles are nearest-rank; with n <= 100 the p99 is the max. Reaction: first monitor sample "
            "below T by the tool's own measure (earlyoom: MemAvailable; lifecycled and floor: available = "
            "MemAvailable + per-CPU free pages) to the first with available >= (lowest since) + victim/2.")
        if gaps_all:
            gaps_all.sort()
            out("Monitor sampling after the crossing: median interval %.2f ms, p99 %.2f ms, max %.2f ms "
                "(the resolution of every number above)."
                % (statistics.median(gaps_all) / 1e6, percentile(gaps_all, 99) / 1e6, gaps_all[-1] / 1e6))
        for tool in tools:
            res = self.results.get(tool)
            if not res:
                continue
            idle = res["idle"]
            if idle is None:
                continue
            out("Idle %s: %.2f ms CPU (schedstat; %.2f s by utime+stime ticks) and %d context switches in "
                "%.1f s, available memory %d MiB above T."
                % (tool, (idle["cpu_s"] or 0) * 1000, idle["tick_cpu_s"], idle["ctx"], idle["window_s"],
                   idle["headroom_mib"]))
        for n in self.notes:
            out("Note: " + n)
        out("")
        out("## Runs")
        out("")
        out("Discarded runs were disturbed by something else (a build, memory use) and were repeated; "
            "they are not in the table above. Victim exit: when its pidfd reported the exit. "
            "Lowest - T: how far below T the tool's measure went (the hog alone takes the available memory "
            "at most %d MiB below; earlyoom's MemAvailable also lacks the per-CPU pages). "
            "Per-CPU: the free pages in per-CPU lists at the crossing, which MemAvailable leaves out."
            % self.args.overshoot_mb)
        out("")
        out("Decide: the kill decision after the crossing (lifecycled: from its event stream; floor: the "
            "harness's own kill); free: from the decision to the memory being back.")
        out("")
        out("| tool | run | T MiB | reaction ms | decide ms | free ms | victim exit ms | lowest - T MiB "
            "| per-CPU MiB | valid | note |")
        out("|---|---|---|---|---|---|---|---|---|---|---|")
        for tool in tools:
            res = self.results.get(tool)
            if not res:
                continue
            for r in sorted(res["runs"] + res.get("discarded", []), key=lambda r: r["run"]):
                g = lambda k, fmt="%.1f": "-" if r.get(k) is None else fmt % r[k]
                valid = "discarded" if r.get("perturbed") else ("yes" if r.get("valid") else "NO")
                note = "; ".join(x for x in (r.get("perturbed"), r.get("note")) if x)
                out("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |"
                    % (tool, r["run"], g("T_mib", "%.0f"), g("reaction_ms"), g("decide_ms"), g("free_ms"),
                       g("victim_exit_ms"), g("low_minus_T_mib", "%.0f"), g("percpu_at_cross_mib", "%.0f"),
                       valid, note.replace("|", "/")))
        out("")
        out("Logs%s: `%s`." % ("".join(x for t, x in (("earlyoom", ", earlyoom output"),
                                                    ("lifecycled", ", `supervisorctl jetsam --json` output"))
                                   if t in tools), self.tmp))
        lc = self.results.get("lifecycled")
        if lc:
            for r in reversed(lc["runs"]):
                jf = r.get("jetsam_file")
                if jf and os.path.exists(jf):
                    out("")
                    out("Last `supervisorctl jetsam --json` (run %d):" % r["run"])
                    out("")
                    out("```")
                    out((read_text(jf) or "").strip()[:3000])
                    out("```")
                    break
        return "\n".join(lines) + "\n"


def parse_args(argv):
    ap = argparse.ArgumentParser(description="Memory-pressure reaction time: lifecycled vs earlyoom (run as root).")
    ap.add_argument("--runs", type=int, default=None, help="runs per tool (default 20; 5 with --quick)")
    ap.add_argument("--quick", action="store_true", help="5 runs, 10 s idle window")
    ap.add_argument("--only", choices=["earlyoom", "lifecycled", "floor"], help="measure one tool")
    ap.add_argument("--no-floor", action="store_true", help="skip the floor runs (the harness killing at the crossing)")
    ap.add_argument("--lifecycled", default=None, help="default: .build/release/lifecycled of the repo")
    ap.add_argument("--supervisorctl", default=None, help="default: .build/release/supervisorctl of the repo")
    ap.add_argument("--victim-mb", type=int, default=1024)
    ap.add_argument("--hog-mb", type=int, default=2048)
    ap.add_argument("--overshoot-mb", type=int, default=512,
                    help="MiB the hog allocates past T (default 512, at least 64, at most half the victim)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the random delay before each hog (default 1)")
    ap.add_argument("--victim-grace", type=float, default=5.0,
                    help="background_grace of the lifecycled victim, seconds (default 5): must exceed the "
                         "time it takes to become resident")
    ap.add_argument("--idle-seconds", dest="idle_s", type=float, default=None,
                    help="idle CPU window (default 30; 10 with --quick)")
    ap.add_argument("--out", default=None, help="markdown results (default: bench-results/memory.md of the repo)")
    ap.add_argument("--write-config", metavar="DIR",
                    help="only write the lifecycled config for the current available memory to DIR and exit")
    a = ap.parse_args(argv)
    if a.runs is None:
        a.runs = 5 if a.quick else 20
    if a.idle_s is None:
        a.idle_s = 10.0 if a.quick else 30.0
    a.lifecycled = a.lifecycled or os.path.join(REPO, ".build/release/lifecycled")
    a.supervisorctl = a.supervisorctl or os.path.join(REPO, ".build/release/supervisorctl")
    a.lifecycled = os.path.abspath(a.lifecycled)
    a.supervisorctl = os.path.abspath(a.supervisorctl)
    a.out = os.path.abspath(a.out or os.path.join(REPO, "bench-results/memory.md"))
    if a.runs < 1:
        ap.error("--runs must be at least 1")
    if a.overshoot_mb < 64:
        ap.error("--overshoot-mb must be at least 64: the hog must still be allocating while the tool reacts")
    if a.victim_mb < 2 * a.overshoot_mb:
        ap.error("--victim-mb must be at least twice --overshoot-mb: after the kill the available memory settles "
                 "at T + victim - overshoot MiB, and a run ends when half the victim is back")
    if a.hog_mb < a.overshoot_mb + 512:
        ap.error("--hog-mb must be at least --overshoot-mb + 512: it crosses T after hog - overshoot MiB")
    if a.victim_mb + a.hog_mb > RAM_BUDGET_MIB:
        ap.error("--victim-mb + --hog-mb must stay within %d MiB" % RAM_BUDGET_MIB)
    return a


def main(argv):
    args = parse_args(argv)
    PHASE_RNG.seed(args.seed)
    if args.write_config:
        b = Bench(args)
        try:
            os.makedirs(os.path.abspath(args.write_config), exist_ok=True)
            b.hog = os.path.join(os.path.abspath(args.write_config), "hog")
            b.compile_hog()
            T = b.threshold(b.mem.available())
            cfg, _, _ = b.write_lifecycled_config(os.path.abspath(args.write_config), T)
            print(cfg)
        finally:
            shutil.rmtree(b.tmp, ignore_errors=True)
        return 0
    if os.geteuid() != 0:
        print("reaction.py: run as root (earlyoom, oom_score_adj and cgroups need it)", file=sys.stderr)
        return 2
    tools = [args.only] if args.only else ["earlyoom", "lifecycled"] + ([] if args.no_floor else ["floor"])
    signal.signal(signal.SIGTERM, _raise_exit)
    signal.signal(signal.SIGHUP, _raise_exit)
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("-1000")  # never earlyoom's pick; children start from 0
    except OSError:
        pass  # no CAP_SYS_RESOURCE (containers): the victim-on-top check still guards earlyoom's pick
    bench = Bench(args)
    status = 2
    try:
        log("scratch directory %s" % bench.tmp)
        bench.compile_hog()
        if "lifecycled" in tools:
            bench.check_lifecycled()
        if "earlyoom" in tools:
            bench.ensure_earlyoom()
        for tool in tools:
            log("=== %s: idle %.0f s, then %d runs" % (tool, args.idle_s, args.runs))
            bench.run_tool(tool)
        text = bench.report(tools)
        sys.stdout.write(text)
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text)
        log("wrote %s" % args.out)
        invalid = sum(1 for t in tools for r in bench.results[t]["runs"] if not r.get("valid"))
        status = 1 if invalid else 0
        if invalid:
            log("%d invalid run(s)" % invalid)
    except BenchError as e:
        log("error: %s" % e)
    except KeyboardInterrupt:
        log("interrupted")
    except SystemExit as e:
        log("terminated (%s)" % e.code)
    except Exception:
        traceback.print_exc()
    finally:
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
        PROCS.stop_all()
        if bench.lc_root and os.path.exists(bench.lc_root):
            log("cleanup: removing cgroup %s" % bench.lc_root)
            remove_cgroup_tree(bench.lc_root)
        left = [p for p in comm_pids({"earlyoom", "hog"})
                if any(it[1].pid == p[0] for it in PROCS.items)]
        if left:
            log("warning: still running: %s" % left)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
