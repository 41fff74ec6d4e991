#!/usr/bin/env python3
"""Memory pressure side by side, in one guest kernel: lifecycled against the
kernel's OOM killer alone, earlyoom and systemd-oomd (shared/MEMORY.md §8,
scaled to a 1 GiB, 2-CPU guest); and a cpu workload: the foreground app's
latency with busy background apps, lifecycled's cpu.weight by state on
and off, and the build before it.

HOW TO RUN (as root, on the host; Python 3 standard library, gcc, and the
release binaries in .build/release, which this does not build; earlyoom and
systemd-oomd are installed with apt-get when missing):

    make bench-memory-vm                                  # the full run (below)
    python3 Benchmarks/memory-vm/run.py --quick           # 1 run each: leak+burst, M0+M1, K E O L; cpu 20 s
    python3 Benchmarks/memory-vm/run.py --configs M1 --arms E,L --workloads burst --runs 5
    python3 Benchmarks/memory-vm/run.py --workloads cpu   # the cpu workload alone
    python3 Benchmarks/memory-vm/run.py --analyze-only    # the summary again from the raw data

Full run: workloads leak and burst, memory configs M0/M1/M2, arms K, E, O,
O+, L, L0, L-before, --runs 3 each: one fresh guest (TCG here) per (config,
arm) with all its runs inside, arm order within a config shuffled with
--seed; then the cpu workload (below) in one guest of its own. Before each
boot it waits while a Swift build or another QEMU runs (one guest at a
time; --max-wait, then the guest is recorded as not run). Each guest has a
hard --timeout (killed with its QEMU): a guest that times out, or a run it
did not finish, is a FAILED run: fg dead, latency = run length. Results:
bench-results/memory-vm/summary.md (the tables), results.json (every run's
numbers) and raw/CONFIG/ARM/ and raw/cpu/ (what the guests wrote: samples,
pings, killer logs, console).

GUESTS: scripts/vm.sh for every guest: vng's own init (no systemd) for K,
E, L, L0, L-before and the cpu workload; `--systemd --oomd` for O and O+:
the same kernel, root, QEMU, memory, CPUs, swap and zswap, but systemd as
PID 1 (Tests/vm/systemd-init.sh: a tmpfs overlay over the read-only 9p
root, /.dockerenv removed so that systemd does not take itself for a
container, earlyoom and the host's other services masked, systemd-oomd
left on), the guest's work as systemd.run=, powered off at its end.
systemd, journald, dbus, logind and systemd-oomd leave MemAvailable at boot
about 10 MiB lower than in the other guests (meta.json has it; the burst
hog is sized from MemAvailable just before it, run.json).

THE SETUP (Benchmarks/memory-vm/guest.py does it in the guest; C programs
here, compiled by this script into OUT/bin):
  configs  M0 no swap; M1 a 1 GiB swap device; M2 M1 + zswap (lzo, 20 % pool).
  arms     K  the kernel's OOM killer alone;
           E  earlyoom 1.7, `earlyoom -r 3600` (its defaults);
           O  systemd-oomd as distributions ship it (Fedora, Ubuntu, Debian's
              systemd-oomd package): -.slice ManagedOOMSwap=kill (SwapUsedLimit
              90 %, oomd's default), the apps' slice ManagedOOMMemoryPressure=kill
              with ManagedOOMMemoryPressureLimit=50 %, DefaultMemoryPressureDurationSec=20s;
           O+ systemd-oomd tuned as systemd's own test (TEST-55-OOMD): the slice's
              limit 20 %, DefaultMemoryPressureDurationSec=2s; the rest as O.
              O and O+: a fresh systemd-oomd per run (systemctl restart);
           L  lifecycled, default configuration (a fresh daemon per run; since
              this work: reclaim to swap at warning and above, memory.low = max
              and cpu.weight 1000 in front, 50 behind);
           L0 lifecycled with [memory] reclaim = false (a daemon that rejects
              the key is reported as "not run: <its error>");
           L-before  lifecycled as it was before this work (--before DIR, default
              /work/before/.build/release: commit bb49fa0), the same configuration
              as L (which sets no key that build does not know); "not run: no
              build at DIR" when it is absent.
  apps     fg      96 MiB working set, touches a random 1/16 every 16 ms, echoes pings (fg.c);
           pinger  pings fg every 10 ms (mlockall, SCHED_FIFO, cgroup /bench-pinger
                   with memory.min 16M, outside any killer's tree) (pinger.c);
           susp-1..5  96 MiB each of ~50 %-compressible, non-zero, non-repeating data,
                   frozen, susp-1 least recently used (susp.c);
           hog     leak: 50 MiB/s for 4 s, then up to 400 MiB/s until MemTotal+SwapTotal;
                   burst: the same growth up to MemAvailable-before-it + 2.5 x 96 MiB,
                   then holds and rewrites 1/16 of its pages every 100 ms (hog.c).
           K/E: cgroups /bench/NAME (memory.oom.group=1), oom_score_adj fg 0, hog 500,
           susp-1..5 900..820, frozen by the harness. O/O+: the same, each app a
           systemd scope bench.slice/NAME.scope (systemd-run --scope; memory.oom.group=1
           written by the harness), fg with ManagedOOMPreference=avoid. L/L0/L-before:
           lifecycled apps (delivery signals; susp readiness notify +
           background_grace 0.2; hog audio mode + band normal; fg activated).
  timeline per run: killer started; settle (root PSI some avg10 < 1, at most 10 s);
           sampler; susp-1..5 allocate and are frozen one by one; fg + pinger;
           3 s baseline; hog; the run ends 10 s after the hog dies or stops growing,
           or 60 s after it started; then everything is killed, caches dropped,
           swap emptied (swapoff/swapon).
  sampler  every 10 ms (sampler.c): MemAvailable/MemFree/SwapFree, root PSI some/full
           total, fg's memory.pressure full total, per app memory.current,
           memory.swap.current, memory.events, cgroup.events; every 100 ms
           memory.stat (zswap, zswapped, pgmajfault) and /proc/vmstat oom_kill.

WHAT EACH NUMBER MEANS (per run; the table aggregates the runs of one
workload x config x arm):
  fg survived     fg alive at the end AND >= 99 % of the pings sent after the hog
                  started (to 1 s before the end) answered within 1 s. Table: runs
                  survived / runs.
  ping p50/p99/max  RTT of the pings sent from the hog's start to 1 s before the
                  end (later replies may still be on their way when it ends; a ping
                  not answered within 1 s counts as 1000 ms, or its real RTT if a
                  late reply came); table: median over runs of p50 and of p99,
                  the max over runs of max.
  longest gap     longest time with no reply arriving, from the hog's start to the
                  end (a dead fg: until the end). Table: max over runs; "(pinger
                  stalled N)" when the pinger itself sent nothing for N > 100 ms (it
                  is mlocked and SCHED_FIFO, but a send allocates and can stall in
                  reclaim: the whole guest was unresponsive, not only fg; the pings it
                  could not send are in no percentile).
  T0              first sample after the hog's start where the root PSI `some`
                  total rose >= 10 ms over the trailing 100 ms.
  T0->1st kill    time from T0 to the first kill (the kill's own stamp: the kernel's
                  log time, earlyoom's log line, lifecycled's jetsam record,
                  systemd-oomd's user.oomd_ooms mark on the group, polled every
                  50 ms, else its journal line; else the death; the death when it
                  is earlier); negative when the killer acted before the stall; n/a
                  when there was no stall (T0 n/a: the killer acted first) or no kill.
                  Table: "T0 s after the hog started / T0->1st kill ms", medians.
                  A table of its own: the first kill's stamp from the hog's start
                  (medians), which still compares killers that act before T0.
  kills           in order, VICTIM:KILLER:SIGNAL (s1..s5 = susp-1..5, hog, FG;
                  killer K kernel, E earlyoom, O systemd-oomd, L lifecycled, ? nobody
                  claimed it). Attribution: the pid in the kernel's "Killed process"
                  line, earlyoom's "sending SIGx to process", systemd-oomd's journal
                  "Killed /bench.slice/NAME.scope due to ..." (and the user.oomd_ooms
                  mark it leaves on the group, in killer.log), lifecycled's jetsam
                  records; else memory.events oom_kill of the victim's cgroup.
  policy order    the kills are exactly susp-1, susp-2, ... in that order, then the
                  hog, never fg. Table: runs in order / runs with kills.
  extra kills     burst only: kills - the oracle minimum, the fewest apps in policy
                  order whose memory.current just before the first kill covers the
                  deficit against keeping 10 % of MemTotal available: hog target -
                  (MemAvailable just before the hog - 10 % of MemTotal), i.e. 2.5 apps
                  + 96 MiB here, 4 apps of 96 MiB (10 % of MemTotal is the default
                  threshold of both earlyoom's SIGTERM and lifecycled's critical level:
                  a killer that keeps that much available needs this many kills, not
                  the fewer that would leave zero); with no kill, memory.current just
                  before the hog. Negative = fewer kills than that (swap absorbed the
                  rest). leak: n/a.
  kernel OOM kills  delta of /proc/vmstat oom_kill over the run. It counts processes,
                  and with memory.oom.group=1 (K, E and O) the kernel counts its
                  chosen victim twice (as the victim, then as a member of its group):
                  about 2 per app killed here (one process each). The kills column has
                  the apps.
  fg full stall   delta of fg's cgroup memory.pressure `full` total from the hog's
                  start to the end (or fg's death), ms. guest full stall: the same
                  of /proc/pressure/memory. Medians over runs.
  back per kill   victim's own memory just before the kill: memory.current less
                  zswap's compressed pool, plus memory.swap.current, each page once
                  (the largest in the 0.5 s before it: the kill's stamp may be a few ms
                  late) / MemAvailable 500 ms after the kill minus just before it
                  (the hog keeps allocating meanwhile), MiB; medians over every kill.
  idle CPU        the killer's CPU time (all its threads, /proc schedstat) over
                  30 s (10 s with --quick) with susp-1..5 and fg in place and no
                  hog, measured once per guest; K: none.
  vs best peer    (second table) L's, L0's and L-before's value / the best of K, E, O,
                  O+ for the same workload and config (lower is better for all of
                  them; idle CPU against killers that are processes).

THE CPU WORKLOAD (--workloads cpu; guest.py --arm cpu; cpu.c): one guest (M0,
no swap), its arms alternated (in a shuffled order in each of --runs rounds):
  L           lifecycled, default: [cpu] weights on (cpu.weight 1000 for the
              app in front, 50 for the ones behind, the daemon 100, as heavy as all its apps);
  L-noweights the same build with [cpu] weights = false;
  L-before    the earlier build (--before): no use of the cpu controller at all,
              every app at the kernel's default weight and nice 0.
  apps        fg: answers each ping after a fixed loop of about 6 ms of CPU
              (calibrated once per guest at start, nothing else running:
              raw/cpu/calibration.json), activated (in front); spin-1..4: busy
              loops, launched into the background with background_modes =
              ["audio"] (kept running), on the guest's 2 CPUs; the pinger pings
              fg every 10 ms (100 pings/s: fg needs ~60 % of one CPU) for
              --cpu-seconds (60; 20 with --quick) after 2 s of warm-up.
              --cpu-work-ms N: N ms of work per ping instead of 6. Above 4 ms
              fg needs more than an equal share (2 CPUs / 5 apps = 40 % of
              one), which only cpu.weight gives it; at 2 ms (20 % of a CPU)
              the scheduler's wake-up preference serves it with or without
              weights.
  table       fg ping p50/p99/max over the window (median over runs of p50 and
              p99, max of max; no reply within 1 s counts as 1000 ms); the ideal
              is about the work itself (6 ms). fg CPU share: fg's cgroup cpu.stat
              usage_usec over the window / all five apps' usage (and / the
              guest's 2 CPUs x the window); the cpu.weight each app's group had.

Exit status: 0 when every guest ran (failed runs are data, not errors); 1 when
a guest could not boot or the setup failed; 2 bad arguments.
"""

import argparse
import gzip
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import guest  # noqa: E402  (the arms, for their not-run reasons)

PROGRAMS = ["fg", "pinger", "susp", "hog", "sampler", "cpu"]
ALL_CONFIGS = ["M0", "M1", "M2"]
ALL_ARMS = ["K", "E", "O", "O+", "L", "L0", "L-before"]
PEERS = ["K", "E", "O", "O+"]
SYSTEMD_ARMS = ("O", "O+")  # booted with scripts/vm.sh --systemd --oomd (systemd as PID 1)
LC_ARMS = ("L", "L0", "L-before")
CPU_ARMS = ["L", "L-noweights", "L-before"]
MEMORY_WORKLOADS = ("leak", "burst")


def say(*a):
    print(time.strftime("%H:%M:%S"), "run.py:", *a, flush=True)


# ----------------------------------------------------------------------------
# Driving the guests.


def compile_programs(bindir):
    os.makedirs(bindir, exist_ok=True)
    for p in PROGRAMS:
        src = os.path.join(HERE, f"{p}.c")
        subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", os.path.join(bindir, p), src],
                       check=True)


def busy():
    """What keeps the host busy: a Swift build or another QEMU guest."""
    for args, what in ((["pgrep", "-f", "swift-build"], "a Swift build"), (["pgrep", "-x", "swift-frontend"],
                                                                            "a Swift compile"),
                       (["pgrep", "-f", "qemu-system"], "another QEMU guest")):
        r = subprocess.run(args, capture_output=True, text=True)
        mine = {str(os.getpid())}
        pids = [p for p in r.stdout.split() if p not in mine]
        if pids:
            return f"{what} (pid {', '.join(pids[:3])})"
    return None


def session_pids(sid):
    """Every process of session SID (vm.sh is started as a session of its own;
    `timeout` inside it makes process groups of its own, so a process group
    would miss QEMU)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[3]) == sid:  # state ppid pgrp session
                    out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return out


def kill_session(sid):
    for pid in session_pids(sid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def intruder(our_sid):
    """Another QEMU (not of our guest's session) or a Swift build, running now."""
    r = subprocess.run(["pgrep", "-f", "qemu-system"], capture_output=True, text=True)
    for pid in r.stdout.split():
        try:
            if os.getsid(int(pid)) != our_sid:
                return f"another QEMU guest (pid {pid})"
        except OSError:
            pass
    for args, what in ((["pgrep", "-f", "swift-build"], "a Swift build"), (["pgrep", "-x", "swift-frontend"],
                                                                            "a Swift compile")):
        if subprocess.run(args, capture_output=True).returncode == 0:
            return what
    return None


def wait_quiet(max_wait):
    start, last = time.monotonic(), 0
    while True:
        b = busy()
        if b is None:
            return None
        waited = time.monotonic() - start
        if waited > max_wait:
            return b
        if time.monotonic() - last > 60:
            say(f"waiting: {b} is running ({waited:.0f} s so far, at most {max_wait} s)")
            last = time.monotonic()
        time.sleep(5)


def guest_timeout(a, nruns, arm=None):
    per_run = 10 + 150 + a.deadline + 90  # settle, apps, the hog, teardown (generous: TCG)
    boot = 150 + (150 if arm in SYSTEMD_ARMS else 0)  # systemd's boot: ~80 s more under TCG
    return int(boot + 150 + a.idle_seconds + per_run * nruns)


def cpu_guest_timeout(a):
    per_run = a.cpu_seconds + 150  # daemon, 5 apps, warm-up, teardown (generous: TCG)
    return int(150 + 120 + per_run * a.runs * len(a.cpu_arms.split(",")))


def installed(arm):
    """Why ARM's killer cannot run on this host, after trying to install it
    (Debian's packages: the guest runs this root); None when it can."""
    need = {"E": ("earlyoom", lambda: shutil.which("earlyoom")),
            "O": ("systemd-oomd", lambda: os.access("/lib/systemd/systemd-oomd", os.X_OK)),
            "O+": ("systemd-oomd", lambda: os.access("/lib/systemd/systemd-oomd", os.X_OK))}.get(arm)
    if need is None or need[1]():
        return None
    pkg = need[0]
    say(f"{arm}: installing {pkg} (apt-get)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if not getattr(installed, "updated", False):
        subprocess.run(["apt-get", "update", "-qq"], env=env, stdin=subprocess.DEVNULL, timeout=900)
        installed.updated = True
    r = subprocess.run(["apt-get", "install", "-y", "-qq", pkg], env=env, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=900)
    if r.returncode or not need[1]():
        return f"{pkg} is not installed and apt-get could not install it: " + \
            ((r.stderr or r.stdout).strip().splitlines() or ["?"])[-1][:200]
    return None


def not_run(out, why):
    """Records in OUT that its guest was not run, and why (the summary says it)."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "guest.json"), "w") as f:
        json.dump({"not_run": why}, f)


def run_guest(a, config, arm, bindir, rawdir):
    """One guest: every run of ARM in memory CONFIG, or (arm "cpu") the cpu
    workload's arms in turn."""
    out = os.path.join(rawdir, "cpu") if arm == "cpu" else os.path.join(rawdir, config, arm)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    if arm == "cpu":
        nruns = a.runs * len(a.cpu_arms.split(","))
        timeout = a.guest_timeout or cpu_guest_timeout(a)
    else:
        nruns = a.runs * len(a.memory_workloads.split(","))
        timeout = a.guest_timeout or guest_timeout(a, nruns, arm)
    vm = ["bash", os.path.join(ROOT, "scripts", "vm.sh"), "--memory", "1G", "--cpus", "2", "--timeout", str(timeout),
          "--out", out]
    if arm in SYSTEMD_ARMS:
        vm += ["--systemd", "--oomd"]
    if config in ("M1", "M2"):
        vm += ["--swap", "1G"]
    if config == "M2":
        vm += ["--zswap"]
    cmd = vm + ["--", "/usr/bin/python3", os.path.join(HERE, "guest.py"), "--arm", arm, "--config", config,
                "--out", out, "--bin", bindir, "--runs", str(a.runs), "--seed", str(a.seed),
                "--lifecycled-before", a.before]
    if arm == "cpu":
        cmd += ["--cpu-arms", a.cpu_arms, "--cpu-seconds", str(a.cpu_seconds), "--cpu-work-ms", str(a.cpu_work_ms),
                "--idle-seconds", "0"]
    else:
        cmd += ["--workloads", a.memory_workloads, "--idle-seconds", str(a.idle_seconds),
                "--deadline", str(a.deadline), "--fg-mb", str(a.fg_mb), "--susp-mb", str(a.susp_mb),
                "--susp-count", str(a.susp_count), "--burst-apps", str(a.burst_apps), "--after-hog", str(a.after_hog)]
    say(f"{config} {arm}: booting a guest ({nruns} runs, at most {timeout} s)")
    t0 = time.monotonic()
    with open(os.path.join(out, "console.log"), "wb") as con:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=con, stderr=subprocess.STDOUT, cwd=ROOT,
                             start_new_session=True)
        contended = []  # times another QEMU (not ours) or a Swift build ran alongside
        try:
            deadline = time.monotonic() + timeout + 120
            while True:
                try:
                    status = p.wait(timeout=5)
                    break
                except subprocess.TimeoutExpired:
                    if time.monotonic() > deadline:
                        raise
                    other = intruder(p.pid)
                    if other:
                        contended.append((round(time.monotonic() - t0), other))
        except subprocess.TimeoutExpired:
            kill_session(p.pid)  # vm.sh and its QEMU: the session this started
            p.wait()
            status = 124
        except BaseException:  # Ctrl-C, SIGTERM (below), a bug: no guest is left behind
            kill_session(p.pid)
            p.wait()
            raise
        kill_session(p.pid)  # anything vm.sh left (nothing, normally)
    took = time.monotonic() - t0
    say(f"{config} {arm}: guest ended with status {status} after {took:.0f} s")
    # The samples are large: compress them here, at native speed.
    for d, _, files in os.walk(out):
        for f in files:
            if f == "samples.jsonl":
                src = os.path.join(d, f)
                with open(src, "rb") as i, gzip.open(src + ".gz", "wb", compresslevel=6) as o:
                    shutil.copyfileobj(i, o)
                os.unlink(src)
    with open(os.path.join(out, "guest.json"), "w") as f:
        json.dump({"status": status, "seconds": round(took, 1), "timeout": timeout, "timed_out": status == 124,
                   "contended": contended, "command": cmd}, f, indent=1)
    if contended:
        say(f"{config} {arm}: WARNING: {contended[0][1]} ran alongside this guest "
            f"(seen {len(contended)} times, 5 s apart): its numbers may be perturbed")
    return status


# ----------------------------------------------------------------------------
# Analysis.


def json_lines(path):
    """The lines of a JSON-lines file that parse: a guest killed mid-write
    leaves its last line torn."""
    out = []
    for line in open(path, errors="replace"):
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return None
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))]


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def load_samples(rd):
    path = os.path.join(rd, "samples.jsonl.gz")
    opener = gzip.open
    if not os.path.exists(path):
        path, opener = os.path.join(rd, "samples.jsonl"), open
    if not os.path.exists(path):
        return None, []
    head, out = None, []
    with opener(path, "rt") as f:
        for line in f:
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if d.get("sampler"):
                head = d
            else:
                out.append(d)
    return head, out


def load_pings(rd):
    path = os.path.join(rd, "pings.txt")
    if not os.path.exists(path):
        return None, []
    with open(path) as f:
        head = json.loads(f.readline() or "{}")
        pings = []
        for line in f:
            p = line.split()
            if len(p) == 4:
                pings.append((int(p[0]), float(p[1]), int(p[2]), int(p[3])))
    return head, pings


def before(samples, t):
    """The last sample at or before t (None if none)."""
    lo, hi, best = 0, len(samples) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        if samples[mid]["t"] <= t:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


def charged_before(samples, app, t, value, window=0.5):
    """VALUE(the app's sample) just before a kill at t: the sample in the
    WINDOW seconds before it where it was largest (the last sample before t
    may already show the memory going: the kill's own stamp can be a few
    ms late, and a dying app's memory goes in a few ms); that sample's
    whole entry, or None."""
    i = before(samples, t)
    best, entry = -1, None
    while i is not None and i >= 0 and samples[i]["t"] >= t - window:
        a = samples[i]["apps"].get(app)
        if a and value(a) > best:
            best, entry = value(a), a
        i -= 1
    return entry


def own_memory(a):
    """An app's memory, each page once: memory.current without zswap's
    compressed pool (which it also counts) plus memory.swap.current (which
    counts the zswapped pages whole)."""
    return max(a.get("cur", 0) - max(a.get("zs", 0), 0), 0) + max(a.get("swap", 0), 0)


def short(app):
    return {"hog": "hog", "fg": "FG"}.get(app, app.replace("susp-", "s"))


KILLER_LETTER = {"kernel": "K", "earlyoom": "E", "lifecycled": "L", "systemd-oomd": "O"}


def attribute(res, samples):
    """Each death during the run, with who killed it and when the kill was sent."""
    end = res["marks"]["end"]
    claims = res.get("claims", [])
    out = []
    pid_app = {d["pid"]: d["app"] for d in res.get("deaths", [])}
    for d in sorted(res.get("deaths", []), key=lambda d: d["t"]):
        if d["t"] > end + 0.2:
            continue
        k = {"app": d["app"], "pid": d["pid"], "t_death": d["t"], "killer": None, "signal": None}
        if "signal" in d:
            k["exit_signal"] = d["signal"]
        if "exit" in d:
            k["exit_code"] = d["exit"]
        mine = [c for c in claims if c.get("pid") == d["pid"] and c["t"] <= d["t"] + 2 and not c.get("escalation")]
        if not mine:
            mine = [c for c in claims if c.get("app") == d["app"] and c.get("pid") is None
                    and abs(c["t"] - d["t"]) < 3]
        if mine:
            c = min(mine, key=lambda c: abs(c["t"] - d["t"]))
            k.update(killer=c["killer"], signal=c["signal"], t_claim=c["t"])
        else:
            # The kernel, by the victim cgroup's memory.events?
            i = before(samples, d["t"] + 0.05)
            j = before(samples, res["marks"].get("hog_start", d["t"]) - 0.01)
            if i is not None and j is not None:
                a_now = next((s["apps"].get(d["app"]) for s in reversed(samples[j:i + 1]) if d["app"] in s["apps"]),
                             None)
                a_then = samples[j]["apps"].get(d["app"])
                if a_now and a_then and a_now.get("ok", 0) > a_then.get("ok", 0):
                    k.update(killer="kernel", signal="SIGKILL", how="memory.events oom_kill")
            if k["killer"] is None:
                if k.get("exit_code") == 0 or (d["app"] == "hog" and res.get("hog_final_status") == "deadline"):
                    k["killer"] = "exited"
                else:
                    k["killer"] = "?"
                    if "exit_signal" in k:
                        try:
                            k["signal"] = signal.Signals(k["exit_signal"]).name
                        except ValueError:
                            k["signal"] = str(k["exit_signal"])
        k["t_kill"] = min(k.get("t_claim", d["t"]), d["t"])
        out.append(k)
    # Kills claimed by a killer whose death was not seen (a pid never watched,
    # or a process that is not one of the apps: "other:COMM").
    seen = {k["pid"] for k in out}
    for c in claims:
        if c.get("escalation") or c["t"] > end or (c.get("pid") is not None and c["pid"] in seen):
            continue
        app = c.get("app") or pid_app.get(c.get("pid")) or f"other:{c.get('comm') or c.get('pid')}"
        if c.get("pid") is None and any(k["app"] == app for k in out):
            continue
        out.append({"app": app, "pid": c.get("pid"), "t_death": None, "t_kill": c["t"], "killer": c["killer"],
                    "signal": c["signal"], "note": "claimed; its death was not seen"})
        seen.add(c.get("pid"))
    out.sort(key=lambda k: k["t_kill"])
    return out


def analyze_run(res, rd, opts):
    m = {"workload": res["workload"], "index": res["index"], "ok": bool(res.get("ok")), "error": res.get("error")}
    if not res.get("ok"):
        return failed_metrics(m, opts, res.get("error") or "the run did not finish")
    marks = res["marks"]
    hs, end = marks["hog_start"], marks["end"]
    head, samples = load_samples(rd)
    phead, pings = load_pings(rd)
    m["sampler"] = head
    m["pinger"] = phead
    m["hog_mb_reached"] = res.get("hog_mb_reached")
    m["hog_target_mb"] = res.get("hog_target_mb")
    m["run_seconds"] = round(end - hs, 2)
    m["hog_stop_why"] = marks.get("hog_stop_why")
    kills_all = attribute(res, samples)
    kills = [k for k in kills_all if k["killer"] != "exited"]
    m["deaths"] = kills_all
    m["kills"] = [{"victim": k["app"], "killer": k["killer"], "signal": k.get("signal"),
                   "t": round(k["t_kill"] - hs, 3)} for k in kills]
    fg_dead = any(k["app"] == "fg" for k in kills_all)
    # Pings after the hog's start; the last second is left out (its replies may
    # be on their way when the pinger stops).
    ps = [p for p in pings if hs <= p[1] <= end - 1.0]
    answered = [p for p in ps if 0 <= p[2] <= 1_000_000]
    m["pings"] = len(ps)
    m["answered_pct"] = 100.0 * len(answered) / len(ps) if ps else 0.0
    lat = [(p[2] / 1000 if 0 <= p[2] <= 1_000_000 else max(1000.0, p[2] / 1000)) for p in ps]
    m["ping_p50"], m["ping_p99"], m["ping_max"] = pct(lat, 50), pct(lat, 99), (max(lat) if lat else None)
    arrivals = sorted(p[1] + p[2] / 1e6 for p in pings if p[2] >= 0 and hs <= p[1] + p[2] / 1e6 <= end)
    edges = [hs] + arrivals + [end]
    m["longest_gap_ms"] = max(b - a for a, b in zip(edges, edges[1:])) * 1000
    # The instrument's own health: the longest time the pinger sent nothing
    # (it is mlocked and SCHED_FIFO, but its sends allocate, and can stall in
    # reclaim like anything else: then the whole guest was unresponsive).
    sends = [p[1] for p in pings if hs <= p[1] <= end]
    m["pinger_stall_ms"] = max((b - a for a, b in zip(sends, sends[1:])), default=0) * 1000
    m["fg_survived"] = (not fg_dead) and m["answered_pct"] >= 99.0
    m["fg_alive_at_end"] = not fg_dead
    if not samples:
        m["note"] = "no samples"
        return m
    # T0
    t0 = None
    j = 0
    for i, s in enumerate(samples):
        while j < i and samples[j + 1]["t"] <= s["t"] - 0.1:
            j += 1
        if s["t"] < hs or samples[j]["t"] > s["t"] - 0.1 + 0.02:
            continue
        if s["some"] >= 0 and s["some"] - samples[j]["some"] >= 10_000:
            t0 = s["t"]
            break
    m["t0"] = round(t0 - hs, 3) if t0 else None
    m["t0_to_first_kill_ms"] = (kills[0]["t_kill"] - t0) * 1000 if (t0 and kills) else None
    m["first_kill_after_hog_ms"] = (kills[0]["t_kill"] - hs) * 1000 if kills else None
    # Policy order.
    order = [f"susp-{i}" for i in range(1, opts["susp_count"] + 1)] + ["hog"]
    victims = [k["app"] for k in kills]
    m["policy_order"] = victims == order[:len(victims)] if victims else None
    # Oracle (burst).
    if res["workload"] == "burst" and res.get("deficit_mb") is not None:
        # The deficit against keeping 10 % of MemTotal available (earlyoom's
        # SIGTERM threshold and lifecycled's critical level, both by default).
        mem_total_kb = (res.get("before_hog_kb") or {}).get("MemTotal") or opts.get("mem_total_kb") or 0
        reserve_mb = mem_total_kb / 1024 * 0.10
        m["reserve_mb"] = round(reserve_mb, 1)
        need = (res["deficit_mb"] + reserve_mb) * 1024 * 1024
        # No kill (swap took it all): what the apps held when the hog started.
        t_ref = kills[0]["t_kill"] if kills else hs
        have, oracle = 0, 0
        for app in order:
            if have >= need:
                break
            have += (charged_before(samples, app, t_ref, lambda e: e.get("cur", 0)) or {}).get("cur", 0)
            oracle += 1
        m["deficit_mb"] = res["deficit_mb"]
        m["oracle_kills"] = oracle if have >= need else None
        m["extra_kills"] = len(kills) - oracle if have >= need else None
    else:
        m["oracle_kills"] = m["extra_kills"] = None
    # Kernel OOM kills, stalls.
    m["kernel_oom_kills"] = samples[-1]["oomk"] - samples[0]["oomk"] if samples[0]["oomk"] >= 0 else None
    i0, i1 = before(samples, hs), before(samples, end)
    if i0 is not None and i1 is not None:
        m["guest_full_ms"] = (samples[i1]["full"] - samples[i0]["full"]) / 1000
        m["guest_some_ms"] = (samples[i1]["some"] - samples[i0]["some"]) / 1000
        fg_full = [s["apps"]["fg"]["full"] for s in samples[i0:i1 + 1]
                   if "fg" in s["apps"] and "full" in s["apps"]["fg"]]
        m["fg_full_ms"] = (fg_full[-1] - fg_full[0]) / 1000 if len(fg_full) >= 2 else None
        fg_maj = [s["apps"]["fg"]["maj"] for s in samples[i0:i1 + 1] if "fg" in s["apps"]]
        m["fg_majfaults"] = fg_maj[-1] - fg_maj[0] if len(fg_maj) >= 2 else None
    # Memory back per kill.
    back = []
    for k in kills:
        i = before(samples, k["t_kill"] - 0.0001)
        if i is None:
            continue
        after = before(samples, k["t_kill"] + 0.5)
        a = charged_before(samples, k["app"], k["t_kill"], own_memory) or {}
        cur, swap, zs = (max(a.get(x, 0), 0) for x in ("cur", "swap", "zs"))
        back.append({
            "victim": k["app"], "charged_mb": own_memory(a) / 2**20 if a else 0.0, "cur_mb": cur / 2**20,
            "swap_mb": swap / 2**20, "zswap_mb": zs / 2**20,
            "d_avail_500ms_mb": ((samples[after]["avail"] - samples[i]["avail"]) / 1024
                                 if after is not None and samples[after]["t"] >= k["t_kill"] + 0.45 else None),
        })
    m["back"] = back
    return m


def failed_metrics(m, opts, why):
    length = float(opts.get("deadline", 60)) * 1000
    m.update(ok=False, failed=why, fg_survived=False, fg_alive_at_end=False, ping_p50=length, ping_p99=length,
             ping_max=length, longest_gap_ms=length, kills=[], back=[])
    return m


def fmt(x, nd=0):
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


def aggregate(runs, idle):
    ok = [r for r in runs if r.get("ok")]
    g = {"runs": len(runs), "failed": len(runs) - len(ok)}
    g["survived"] = sum(1 for r in runs if r.get("fg_survived"))
    g["ping_p50"] = med([r.get("ping_p50") for r in runs])
    g["ping_p99"] = med([r.get("ping_p99") for r in runs])
    g["ping_max"] = max((r.get("ping_max") or 0 for r in runs), default=None)
    g["gap"] = max((r.get("longest_gap_ms") or 0 for r in runs), default=None)
    g["pinger_stall"] = max((r.get("pinger_stall_ms") or 0 for r in ok), default=0)
    g["t0"] = med([r.get("t0") for r in ok])
    g["t0_kill"] = med([r.get("t0_to_first_kill_ms") for r in ok])
    g["t0_kill_all"] = [r.get("t0_to_first_kill_ms") for r in ok]
    g["kills"] = [" ".join(f"{short(k['victim'])}:{KILLER_LETTER.get(k['killer'], '?')}:"
                           f"{(k.get('signal') or '?').replace('SIG', '')}" for k in r.get("kills", [])) or "none"
                  for r in ok]
    with_kills = [r for r in ok if r.get("policy_order") is not None]
    g["policy"] = (sum(1 for r in with_kills if r["policy_order"]), len(with_kills))
    g["extra"] = [r.get("extra_kills") for r in ok]
    g["oracle"] = [r.get("oracle_kills") for r in ok]
    g["kernel_oom"] = [r.get("kernel_oom_kills") for r in ok]
    g["fg_full"] = med([r.get("fg_full_ms") for r in ok])
    g["guest_full"] = med([r.get("guest_full_ms") for r in ok])
    backs = [b for r in ok for b in r.get("back", [])]
    g["back_charged"] = med([b["charged_mb"] for b in backs])
    g["back_avail"] = med([b["d_avail_500ms_mb"] for b in backs])
    g["idle_cpu_ms"] = idle.get("cpu_ms") if idle else None
    g["idle_seconds"] = idle.get("seconds") if idle else None
    g["idle_note"] = idle.get("note") if idle else None
    return g


def summarize(a, rawdir, outdir):
    rows, results, notes = [], {"runs": [], "groups": [], "not_run": []}, []
    for config in ALL_CONFIGS:
        for arm in ALL_ARMS:
            gd = os.path.join(rawdir, config, arm)
            if not os.path.isdir(gd):
                continue
            guest_info = {}
            if os.path.exists(os.path.join(gd, "guest.json")):
                guest_info = json.load(open(os.path.join(gd, "guest.json")))
            meta = json.load(open(os.path.join(gd, "meta.json"))) if os.path.exists(os.path.join(gd, "meta.json")) \
                else {}
            opts = dict(meta.get("options", {"deadline": a.deadline, "susp_count": a.susp_count,
                                             "runs": a.runs, "workloads": a.memory_workloads}))
            opts["mem_total_kb"] = meta.get("meminfo_kb", {}).get("MemTotal")
            progress = []
            if os.path.exists(os.path.join(gd, "progress.jsonl")):
                progress = json_lines(os.path.join(gd, "progress.jsonl"))
            not_run = next((p["why"] for p in progress if p.get("step") == "not-run"), None)
            if guest_info.get("not_run"):
                not_run = guest_info["not_run"]
            if not_run:
                for w in opts.get("workloads", a.memory_workloads).split(","):
                    rows.append((w, config, arm, None, f"not run: {not_run}"))
                results["not_run"].append({"config": config, "arm": arm, "why": not_run})
                continue
            idle = json.load(open(os.path.join(gd, "idle.json"))) if os.path.exists(os.path.join(gd, "idle.json")) \
                else None
            if guest_info.get("timed_out"):
                notes.append(f"{config} {arm}: the guest timed out after {guest_info.get('seconds')} s "
                             f"(limit {guest_info.get('timeout')} s); unfinished runs count as failed")
            if guest_info.get("contended"):
                c = guest_info["contended"]
                notes.append(f"{config} {arm}: {c[0][1]} ran alongside this guest (seen {len(c)} times, 5 s "
                             f"apart): its numbers may be perturbed")
            if guest_info.get("timed_out"):
                pass
            elif guest_info.get("status") not in (0, None):
                notes.append(f"{config} {arm}: the guest exited with status {guest_info.get('status')} "
                             f"(see raw/{config}/{arm}/console.log)")
            for w in opts.get("workloads", a.memory_workloads).split(","):
                runs = []
                for i in range(1, int(opts.get("runs", a.runs)) + 1):
                    rd = os.path.join(gd, f"{w}-{i}")
                    rp = os.path.join(rd, "run.json")
                    if os.path.exists(rp):
                        try:  # a guest killed while writing leaves it torn
                            m = analyze_run(json.load(open(rp)), rd, opts)
                        except Exception as e:  # noqa: BLE001 - an analysis bug must not hide the other runs
                            m = failed_metrics({"workload": w, "index": i}, opts, f"analysis failed: {e!r}")
                    else:
                        why = ("the guest timed out before this run ended" if guest_info.get("timed_out")
                               else "no result (the guest ended before this run)")
                        m = failed_metrics({"workload": w, "index": i}, opts, why)
                    if m.get("failed"):
                        notes.append(f"{w} {config} {arm} run {i}: FAILED: {m['failed']}")
                    m.update(config=config, arm=arm)
                    runs.append(m)
                    results["runs"].append(m)
                g = aggregate(runs, idle)
                g.update(workload=w, config=config, arm=arm)
                results["groups"].append(g)
                rows.append((w, config, arm, g, None))
    # The table.
    hdr = ["workload", "config", "arm", "fg survived", "ping p50 / p99 / max ms", "longest gap ms",
           "T0 s / T0→1st kill ms", "kills per run (victim:killer:signal)", "policy order", "extra kills",
           "kernel OOM kills", "fg full stall ms", "guest full stall ms", "back per kill MiB (charged / ΔAvail 0.5 s)",
           "idle CPU ms"]
    lines = ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
    for w, config, arm, g, why in sorted(rows, key=lambda r: (r[0], r[1], ALL_ARMS.index(r[2]))):
        if g is None:
            lines.append(f"| {w} | {config} | {arm} | {why} |" + " |" * (len(hdr) - 4))
            continue
        surv = f"{g['survived']}/{g['runs']}" + (f" ({g['failed']} failed)" if g["failed"] else "")
        idle = ("none" if arm == "K" else
                (f"{g['idle_cpu_ms']:.1f} / {g['idle_seconds']:.0f} s" if g["idle_cpu_ms"] is not None else "n/a"))
        extra = "n/a" if w == "leak" else ", ".join(fmt(x) for x in g["extra"]) or "n/a"
        if w == "burst" and any(o is not None for o in g["oracle"]):
            extra += f" (oracle {', '.join(fmt(o) for o in g['oracle'])})"
        lines.append("| " + " | ".join([
            w, config, arm, surv,
            f"{fmt(g['ping_p50'], 1)} / {fmt(g['ping_p99'], 1)} / {fmt(g['ping_max'], 0)}",
            fmt(g["gap"], 0) + (f" (pinger stalled {g['pinger_stall']:.0f})" if g["pinger_stall"] > 100 else ""),
            f"{fmt(g['t0'], 1)} / " + fmt(g["t0_kill"], 0)
            + (f" ({', '.join(fmt(x, 0) for x in g['t0_kill_all'])})" if len(g["t0_kill_all"]) > 1 else ""),
            " ; ".join(g["kills"]) or "n/a",
            f"{g['policy'][0]}/{g['policy'][1]}" if g["policy"][1] else "n/a (no kills)",
            extra,
            ", ".join(fmt(x) for x in g["kernel_oom"]) or "n/a",
            fmt(g["fg_full"], 0), fmt(g["guest_full"], 0),
            f"{fmt(g['back_charged'], 0)} / {fmt(g['back_avail'], 0)}",
            idle,
        ]) + " |")
    # L against the best peer.
    ratio_lines = []
    groups = {(g["workload"], g["config"], g["arm"]): g for g in results["groups"]}
    metrics = [("ping p99", "ping_p99"), ("longest gap", "gap"), ("fg full stall", "fg_full"),
               ("guest full stall", "guest_full"), ("T0→1st kill", "t0_kill"), ("idle CPU", "idle_cpu_ms")]
    for (w, config, arm), g in sorted(groups.items()):
        if arm not in LC_ARMS:
            continue
        cells = []
        for label, key in metrics:
            peers = [(p, groups[(w, config, p)].get(key)) for p in PEERS if (w, config, p) in groups]
            if key == "idle_cpu_ms":
                peers = [(p, v) for p, v in peers if p != "K"]
            peers = [(p, v) for p, v in peers if v is not None]
            mine = g.get(key)
            if not peers or mine is None:
                cells.append("n/a")
                continue
            p, v = min(peers, key=lambda pv: pv[1])
            if v <= 0 or mine < 0:  # no ratio to a zero, nor of a negative time (acted before T0)
                cells.append(f"{fmt(mine)} vs {fmt(v)} {p}")
            else:
                cells.append(f"{mine / v:.2f}× {p}")
        ratio_lines.append(f"| {w} | {config} | {arm} | " + " | ".join(cells) + " |")
    os.makedirs(outdir, exist_ok=True)
    meta_line, metas = "", []
    for config in ALL_CONFIGS:
        for arm in ALL_ARMS:
            mp = os.path.join(rawdir, config, arm, "meta.json")
            if os.path.exists(mp):
                metas.append((arm, json.load(open(mp)), os.path.join(rawdir, config, arm, "console.log")))
    if metas:
        meta = metas[0][1]
        accel = "?"
        try:
            first = open(metas[0][2], errors="replace").readline()  # "vm.sh: VERSION, 1G, 2 CPUs, tcg, ..."
            accel = "TCG emulation (about 10x slower than native)" if ", tcg" in first else (
                "KVM" if ", kvm" in first else "?")
        except OSError:
            pass
        meta_line = (f"Guest: Linux {meta.get('uname')}, {meta.get('cpus')} CPUs, MemTotal "
                     f"{meta.get('meminfo_kb', {}).get('MemTotal', 0) // 1024} MiB, cgroup v2 "
                     f"({meta.get('cgroup_controllers')}); {accel}.")
        lc = next((m.get("lifecycled") for arm, m, _ in metas if arm in ("L", "L0") and m.get("lifecycled")), None)
        if lc:
            built = time.strftime("%Y-%m-%d %H:%M", time.localtime(lc["mtime"]))
            meta_line += f" lifecycled: {lc['path']}, built {built} ({lc['size']} bytes)."
        builds = {(m["lifecycled"]["mtime"], m["lifecycled"]["size"]) for arm, m, _ in metas
                  if arm in ("L", "L0") and m.get("lifecycled")}
        if len(builds) > 1:
            notes.append(f"the guests of L and L0 ran {len(builds)} different builds of .build/release/lifecycled "
                         "(rebuilt during the run; meta.json of each guest has the one it ran)")
        lb = next((m.get("lifecycled") for arm, m, _ in metas if arm == "L-before" and m.get("lifecycled")), None)
        if lb:
            built = time.strftime("%Y-%m-%d %H:%M", time.localtime(lb["mtime"]))
            meta_line += f" L-before: {lb['path']}, built {built} ({lb['size']} bytes)."
        oomd = next((m.get("systemd_oomd") for arm, m, _ in metas if arm in SYSTEMD_ARMS and m.get("systemd_oomd")),
                    None)
        if oomd:
            meta_line += f" systemd-oomd: {oomd}."
    text = ["# Memory pressure in a 1 GiB, 2-CPU guest: lifecycled against the kernel, earlyoom, systemd-oomd", "",
            f"Generated by Benchmarks/memory-vm/run.py on {time.strftime('%Y-%m-%d %H:%M')} "
            f"(up to {max((r['index'] for r in results['runs']), default=0)} runs per row in the data). "
            f"{meta_line}",
            "What each column means: the header of Benchmarks/memory-vm/run.py. Medians over runs unless said; "
            "kills: s1..s5 = susp-1..5, killer K kernel / E earlyoom / O systemd-oomd / L lifecycled / ? unclaimed. "
            "Extra kills: against the oracle's minimum for keeping 10 % of MemTotal available (the default "
            "threshold of earlyoom's SIGTERM and of lifecycled's critical level), not for keeping zero.", ""]
    text += lines if len(lines) > 2 else ["(no memory workload in this run)"]
    if ratio_lines:
        text += ["", "L, L0 and L-before against the best peer (value / the lowest of K, E, O, O+ with data; "
                 "below 1 is better; \"a vs b\" against a peer's zero or for a negative time):",
                 "", "| workload | config | arm | " + " | ".join(l for l, _ in metrics) + " |",
                 "|" + "---|" * (3 + len(metrics))] + ratio_lines
    text += first_kill_table(results["runs"])
    cpu_text, cpu_notes = summarize_cpu(a, rawdir, results)
    text += cpu_text
    notes += cpu_notes
    if notes:
        text += ["", "Notes:", ""] + [f"- {n}" for n in notes]
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write("\n".join(text) + "\n")
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    return "\n".join(text)


def analyze_cpu_run(res, rd):
    m = {"arm": res["arm"], "index": res["index"], "ok": bool(res.get("ok")), "error": res.get("error")}
    if not res.get("ok"):
        m["failed"] = res.get("error") or "the run did not finish"
        return m
    phead, pings = load_pings(rd)
    t0, end = res["marks"]["pinger_start"], res["marks"]["end"]
    ps = [p for p in pings if t0 + 0.5 <= p[1] <= end - 1.0]  # the last second's replies may be on their way
    lat = [(p[2] / 1000 if 0 <= p[2] <= 1_000_000 else max(1000.0, p[2] / 1000)) for p in ps]
    m["pings"] = len(ps)
    m["answered_pct"] = 100.0 * sum(1 for p in ps if 0 <= p[2] <= 1_000_000) / len(ps) if ps else 0.0
    m["p50"], m["p99"], m["max"] = pct(lat, 50), pct(lat, 99), (max(lat) if lat else None)
    m["pinger_fifo"] = (phead or {}).get("fifo")
    use = res.get("cpu_usec") or {}
    total = sum(v for v in use.values() if v)
    window = res.get("window_s") or 0
    if use.get("fg") is not None and total:
        m["fg_share_pct"] = 100.0 * use["fg"] / total
        m["fg_cpu_pct_of_guest"] = 100.0 * use["fg"] / 1e6 / (window * (res.get("ncpu") or 2)) if window else None
        m["fg_cpu_ms_per_ping"] = use["fg"] / 1000 / len(ps) if ps else None
    m["weights"] = res.get("cpu_weight")
    m["daemon_cpu_ms"] = res.get("daemon_cpu_ms")
    m["states"] = {a: (s or {}).get("state") for a, s in (res.get("states") or {}).items()}
    m["deaths"] = [d.get("app") for d in res.get("deaths") or []]
    return m


def first_kill_table(runs):
    """When each arm killed first, from the hog's start (median over runs),
    and how many apps each run killed: the comparison that still holds when
    a killer acts before any stall (T0 n/a)."""
    groups = {}
    for r in runs:
        groups.setdefault((r["workload"], r["config"], r["arm"]), []).append(r)
    rows = []
    for w in MEMORY_WORKLOADS:
        for c in ALL_CONFIGS:
            cells = []
            for arm in ALL_ARMS:
                rs = groups.get((w, c, arm))
                if not rs:
                    cells.append("–")
                    continue
                firsts = [r["first_kill_after_hog_ms"] for r in rs if r.get("first_kill_after_hog_ms") is not None]
                cell = f"{med(firsts) / 1000:.2f} s" if firsts else "no kill"
                if firsts and len(firsts) < len(rs):
                    cell += f" ({len(rs) - len(firsts)} no kill)"
                cell += "; " + "/".join(str(len(r.get("kills") or [])) for r in rs)
                if not all(r.get("ok", True) for r in rs):
                    cell += " (failed run)"
                cells.append(cell)
            if any(x != "–" for x in cells):
                rows.append(f"| {w} | {c} | " + " | ".join(cells) + " |")
    if not rows:
        return []
    return ["", "The first kill, from the hog's start (median over runs; then the apps each run killed):", "",
            "| workload | config | " + " | ".join(ALL_ARMS) + " |", "|---|---|" + "---|" * len(ALL_ARMS)] + rows


def summarize_cpu(a, rawdir, results):
    """The cpu workload's table (raw/cpu), or nothing when it did not run."""
    gd = os.path.join(rawdir, "cpu")
    if not os.path.isdir(gd):
        return [], []
    notes, text = [], ["", "## The cpu workload", ""]
    guest_info = json.load(open(os.path.join(gd, "guest.json"))) if os.path.exists(os.path.join(gd, "guest.json")) \
        else {}
    if guest_info.get("not_run"):
        return text + [f"Not run: {guest_info['not_run']}"], []
    meta = json.load(open(os.path.join(gd, "meta.json"))) if os.path.exists(os.path.join(gd, "meta.json")) else {}
    opts = meta.get("options", {})
    progress = []
    if os.path.exists(os.path.join(gd, "progress.jsonl")):
        progress = json_lines(os.path.join(gd, "progress.jsonl"))
    cal = json.load(open(os.path.join(gd, "calibration.json"))) if os.path.exists(os.path.join(gd, "calibration.json")) \
        else {}
    arms = opts.get("cpu_arms", a.cpu_arms).split(",")
    nruns = int(opts.get("runs", a.runs))
    if guest_info.get("timed_out"):
        notes.append(f"cpu: the guest timed out after {guest_info.get('seconds')} s; unfinished runs count as failed")
    elif guest_info.get("status") not in (0, None):
        notes.append(f"cpu: the guest exited with status {guest_info.get('status')} (see raw/cpu/console.log)")
    if guest_info.get("contended"):
        c = guest_info["contended"]
        notes.append(f"cpu: {c[0][1]} ran alongside this guest (seen {len(c)} times, 5 s apart): its numbers may be "
                     f"perturbed")
    text.append(f"fg answers each ping (every 10 ms) after ~{opts.get('cpu_work_ms', 6)} ms of CPU work "
                f"({cal.get('iters', '?')} iterations, calibrated in the guest at {cal.get('iters_per_ms', 0):.0f}/ms), "
                f"{opts.get('spinners', 4)} background apps spin on {meta.get('cpus', '?')} CPUs, "
                f"{opts.get('cpu_seconds', '?')} s per run, arms alternated. Ping RTT ms: median over runs of p50 "
                "and p99, max of max. fg CPU share: fg's cpu.stat usage / all apps' (and / the guest's CPUs). "
                "Weights: cpu.weight of fg / the spinners' groups (- : no cpu controller there).")
    text += ["", "| arm | runs ok | pings answered | fg ping p50 / p99 / max ms | fg CPU share of the apps "
             "| fg CPU % of the guest | cpu.weight fg / spinners | daemon CPU ms |", "|" + "---|" * 8]
    results["cpu"] = []
    for arm in arms:
        why = next((p["why"] for p in progress if p.get("step") == "not-run" and p.get("arm") == arm), None)
        if why:
            text.append(f"| {arm} | not run: {why} |" + " |" * 6)
            results["cpu"].append({"arm": arm, "not_run": why})
            continue
        runs = []
        for i in range(1, nruns + 1):
            rd = os.path.join(gd, f"{arm}-{i}")
            rp = os.path.join(rd, "run.json")
            if os.path.exists(rp):
                try:
                    m = analyze_cpu_run(json.load(open(rp)), rd)
                except Exception as e:  # noqa: BLE001
                    m = {"arm": arm, "index": i, "ok": False, "failed": f"analysis failed: {e!r}"}
            else:
                m = {"arm": arm, "index": i, "ok": False, "failed": "no result (the guest ended before this run)"}
            if m.get("failed"):
                notes.append(f"cpu {arm} run {i}: FAILED: {m['failed']}")
            runs.append(m)
            results["cpu"].append(m)
        ok = [r for r in runs if r.get("ok")]
        w = [r.get("weights") or {} for r in ok]
        wtxt = ", ".join(sorted({f"{x.get('fg') or '-'} / "
                                 f"{'/'.join(sorted({str(v or '-') for k, v in x.items() if k != 'fg'}))}" for x in w}))
        text.append("| " + " | ".join([
            arm, f"{len(ok)}/{len(runs)}",
            ", ".join(f"{r['answered_pct']:.1f} %" for r in ok) or "n/a",
            f"{fmt(med([r.get('p50') for r in ok]), 2)} / {fmt(med([r.get('p99') for r in ok]), 1)} / "
            f"{fmt(max((r.get('max') or 0 for r in ok), default=None), 0)}",
            fmt(med([r.get("fg_share_pct") for r in ok]), 1) + " %",
            fmt(med([r.get("fg_cpu_pct_of_guest") for r in ok]), 1) + " %",
            wtxt or "n/a",
            fmt(med([r.get("daemon_cpu_ms") for r in ok]), 0),
        ]) + " |")
        for r in ok:
            bad = {k: v for k, v in (r.get("states") or {}).items() if v not in (None, "active", "background")}
            if bad or r.get("deaths"):
                notes.append(f"cpu {arm} run {r['index']}: app states {bad or 'as meant'}, deaths {r.get('deaths')}")
    return text, notes


# ----------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="1 run, leak+burst+cpu, M0+M1, arms K E O L, 10 s idle window, cpu 20 s "
                    "(each overridable: --quick --arms K,E,L)")
    ap.add_argument("--runs", type=int)
    ap.add_argument("--configs")
    ap.add_argument("--arms")
    ap.add_argument("--workloads")
    ap.add_argument("--cpu-arms", default=",".join(CPU_ARMS), help="the cpu workload's arms")
    ap.add_argument("--cpu-seconds", type=float, help="s of pings per cpu run (60; --quick 20)")
    ap.add_argument("--cpu-work-ms", type=int, default=6,
                    help="fg's CPU work per ping (6: 60 %% of a CPU, more than an equal share of the 2 CPUs "
                    "among 5 apps; at 4 or less it needs no more than that share)")
    ap.add_argument("--before", default="/work/before/.build/release",
                    help="lifecycled and supervisorctl before this work (arm L-before)")
    ap.add_argument("--seed", type=int, default=20261125)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench-results", "memory-vm"))
    ap.add_argument("--idle-seconds", type=float)
    ap.add_argument("--deadline", type=int, default=60)
    ap.add_argument("--after-hog", type=float, default=10)
    ap.add_argument("--fg-mb", type=int, default=96)
    ap.add_argument("--susp-mb", type=int, default=96)
    ap.add_argument("--susp-count", type=int, default=5)
    ap.add_argument("--burst-apps", type=float, default=2.5)
    ap.add_argument("--guest-timeout", type=int, help="s per guest (default: from the runs it holds)")
    ap.add_argument("--max-wait", type=int, default=3600, help="s to wait for a busy host before each guest")
    ap.add_argument("--analyze-only", action="store_true", help="only the summary, from OUT/raw")
    ap.add_argument("--keep-others", action="store_true",
                    help="replace only the guests run now in OUT/raw (e.g. add --arms O later); default: start afresh")
    a = ap.parse_args()
    defaults = (dict(runs=1, workloads="leak,burst,cpu", configs="M0,M1", arms="K,E,O,L", idle_seconds=10,
                     cpu_seconds=20) if a.quick else
                dict(runs=3, workloads="leak,burst,cpu", configs="M0,M1,M2", arms=",".join(ALL_ARMS),
                     idle_seconds=30, cpu_seconds=60))
    for k, v in defaults.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    a.before = os.path.abspath(a.before)
    configs, arms = a.configs.split(","), a.arms.split(",")
    workloads = a.workloads.split(",")
    a.memory_workloads = ",".join(w for w in workloads if w in MEMORY_WORKLOADS)
    bad = [c for c in configs if c not in ALL_CONFIGS] + [x for x in arms if x not in ALL_ARMS] + \
        [w for w in workloads if w not in MEMORY_WORKLOADS + ("cpu",)] + \
        [x for x in a.cpu_arms.split(",") if x not in CPU_ARMS]
    if bad:
        ap.error(f"unknown: {', '.join(bad)}")
    rawdir, bindir = os.path.join(a.out, "raw"), os.path.join(a.out, "bin")
    if a.analyze_only:
        print(summarize(a, rawdir, a.out))
        return 0
    if os.geteuid() != 0:
        ap.error("needs root (scripts/vm.sh does)")
    uses_current = (a.memory_workloads and any(x in ("L", "L0") for x in arms)) or "cpu" in workloads
    for b in ("lifecycled", "supervisorctl"):
        if uses_current and not os.access(os.path.join(ROOT, ".build", "release", b), os.X_OK):
            say(f"no .build/release/{b}: build the release first (make release)")
            return 1
    before_missing = next((f"no build at {a.before} (no {b} there)" for b in ("lifecycled", "supervisorctl")
                           if not os.access(os.path.join(a.before, b), os.X_OK)), None)
    if any(x in SYSTEMD_ARMS for x in arms) and a.memory_workloads:
        hidden = [d for d in (bindir, a.before) if os.path.realpath(d).startswith("/tmp/")]
        if hidden:  # the systemd guest's /tmp is a tmpfs of its own (only --out's raw/ is shared)
            ap.error(f"the O arms' guest cannot see {', '.join(hidden)}: its /tmp is its own; "
                     "give --out and --before outside /tmp")
    compile_programs(bindir)
    if not a.keep_others:
        shutil.rmtree(rawdir, ignore_errors=True)
    rng = random.Random(a.seed)
    status = 0
    t_start = time.monotonic()
    missing = {}  # arm -> why its killer cannot be had on this host
    for config in configs if a.memory_workloads else []:
        order = arms[:]
        rng.shuffle(order)
        say(f"{config}: arms in the order {' '.join(order)}")
        for arm in order:
            out = os.path.join(rawdir, config, arm)
            if arm not in missing:
                missing[arm] = installed(arm)
            reason = guest.ARMS[arm].not_run_reason or missing[arm] or (before_missing if arm == "L-before" else None)
            if reason:
                not_run(out, reason)
                say(f"{config} {arm}: not run: {reason}")
                continue
            b = wait_quiet(a.max_wait)
            if b:
                not_run(out, f"the host stayed busy ({b}) for {a.max_wait} s")
                status = 1
                continue
            st = run_guest(a, config, arm, bindir, rawdir)
            if st == 125:
                status = 1
    if "cpu" in workloads:
        out = os.path.join(rawdir, "cpu")
        b = wait_quiet(a.max_wait)
        if b:
            not_run(out, f"the host stayed busy ({b}) for {a.max_wait} s")
            status = 1
        elif run_guest(a, "M0", "cpu", bindir, rawdir) == 125:
            status = 1
    say(f"all guests done in {(time.monotonic() - t_start) / 60:.1f} min")
    print(summarize(a, rawdir, a.out))
    return status


def on_term(signum, frame):
    raise KeyboardInterrupt  # the same clean-up as Ctrl-C: the running guest is killed


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, on_term)
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        say("interrupted")
        sys.exit(2)
