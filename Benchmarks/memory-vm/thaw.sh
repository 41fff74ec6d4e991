#!/bin/bash
# What a thaw costs after lifecycled pushed a suspended app's memory to swap
# (issue 26: "kills avoided and the thaw's cost measured"). Runs inside the
# virtual machine of scripts/vm.sh, with swap:
#
#   scripts/vm.sh --swap 1G [--zswap] -- Benchmarks/memory-vm/thaw.sh [MB] [RUNS]
#
# An app holding MB MiB (default 128) of half-compressible data
# (Benchmarks/memory-vm/thaw.c) is launched into the background and frozen;
# "frozen": activated again as it is; "reclaimed": `supervisorctl pressure
# warning` first, which pushes its memory to swap (the `reclaimed` event),
# then activated. Reported per run: the activation (request to active, as
# `supervisorctl activate` waits for it), then the app touching all of its
# memory once it is active (its didBecomeActive signal): the time until all
# of it is back, and the major page faults that took. RUNS (default 3) of
# each, alternating. BIN: the build (default .build/release).
set -euo pipefail
MB=${1:-128}
RUNS=${2:-3}
BIN=${BIN:-$PWD/.build/release}
CTL=$BIN/supervisorctl
W=$(mktemp -d /tmp/thaw.XXXXXX)
gcc -O2 -Wall -Wextra -Werror -o "$W/thaw" Benchmarks/memory-vm/thaw.c
mkdir -p "$W/apps"
cat >"$W/lifecycled.toml" <<EOC
apps_dir = "apps"
state_directory = "state"
runtime_directory = "run"
log_directory = "logs"
EOC
cat >"$W/apps/warm.toml" <<EOC
command = ["$W/thaw", "--mb", "$MB", "--log", "$W/touch.log"]
delivery = "signals"
readiness = "notify"
user = "root"
[signals]
didBecomeActive = "SIGUSR2"
[timeouts]
background_grace = 0.2
launch = 60
EOC
"$BIN/lifecycled" --config "$W/lifecycled.toml" --control-socket "$W/ctl.sock" --cgroup-root /thaw-bench \
    >"$W/daemon.log" 2>&1 &
DAEMON=$!
trap 'kill $DAEMON 2>/dev/null; wait $DAEMON 2>/dev/null' EXIT
# Each wait is bounded: 300 s, then the benchmark fails.
until_() { local i; for i in $(seq ${WAIT_TENTHS:-3000}); do "$@" && return 0; sleep 0.1; done
    echo "thaw.sh: timed out: $*" >&2
    "$CTL" status --socket "$W/ctl.sock" >&2 || true
    tail -5 "$W/daemon.log" >&2
    local g; g=$(group 2>/dev/null) && for f in cgroup.events cgroup.freeze memory.events memory.stat; do
        echo "$f: $(head -c 600 "$g/$f" | tr '\n' ' ')" >&2
    done
    for p in $(cat "$g/cgroup.procs" 2>/dev/null); do
        grep -E "State|VmRSS|VmSwap" /proc/$p/status >&2; cat /proc/$p/stack >&2 2>/dev/null || true
    done
    exit 1
}
state() { "$CTL" status --socket "$W/ctl.sock" --json warm 2>/dev/null | python3 -c 'import json, sys; print(json.load(sys.stdin)["apps"][0]["state"])'; }
is() { [ "$(state)" = "$1" ]; }
touches() { [ -e "$W/touch.log" ] && wc -l <"$W/touch.log" || echo 0; }
touched_since() { [ "$(touches)" -gt "$1" ]; }
reclaim_done() { "$CTL" events --socket "$W/ctl.sock" warm 2>/dev/null | grep -c "pushed to swap" | grep -qx "$1"; }
until_ "$CTL" status --socket "$W/ctl.sock" >/dev/null 2>&1
group() { ls -d /sys/fs/cgroup/thaw-bench/apps/warm.* | sort -t. -k2 -n | tail -1; }
ms() { echo $(( ($2 - $1) / 1000000 )); }

echo "thaw of a $MB MiB app: $(uname -r), swap $(awk '/SwapTotal/{print int($2/1024)}' /proc/meminfo) MiB, zswap $(cat /sys/module/zswap/parameters/enabled)"
reclaims=0
printf '%-10s %4s %12s %12s %10s %12s %12s\n' mode run "in swap MiB" "in memory MiB" activate "all back ms" "major faults"
for run in $(seq "$RUNS"); do
    for mode in frozen reclaimed; do
        "$CTL" launch --socket "$W/ctl.sock" --background warm >/dev/null
        until_ is suspended
        g=$(group)
        if [ "$mode" = reclaimed ]; then
            "$CTL" pressure --socket "$W/ctl.sock" warning >/dev/null
            # The reclaim is over when the event says so.
            reclaims=$((reclaims + 1))
            until_ reclaim_done "$reclaims"
        fi
        swap=$(( $(cat "$g/memory.swap.current") >> 20 ))
        mem=$(( $(cat "$g/memory.current") >> 20 ))
        lines=$(touches)
        t0=$(date +%s%N)
        "$CTL" activate --socket "$W/ctl.sock" warm >/dev/null
        t1=$(date +%s%N)
        until_ touched_since "$lines"
        last=$(tail -1 "$W/touch.log")
        touch=${last#touch_ms=}; touch=${touch%% *}; faults=${last##*majflt=}
        printf '%-10s %4s %12s %12s %8s ms %12s %12s\n' "$mode" "$run" "$swap" "$mem" "$(ms "$t0" "$t1")" "$touch" "$faults"
        "$CTL" stop --socket "$W/ctl.sock" warm >/dev/null
        until_ is not-running
    done
done
