#!/bin/bash
# Runs inside the container booted by Tests/systemd/nspawn.sh (make
# bench-systemd): the blackout after kill -9 of lifecycled.service under a
# real systemd, with 10, 100 and 1,000 C recorder apps (all suspended but
# app0000), from the kill to one event round trip done by the new daemon
# (supervisorctl activate waits for didBecomeActive; the socket, held by
# lifecycled.socket, queues the request meanwhile), and systemd's and the
# daemon's own account of the time in between. Prints a Markdown table.
set -u
export PATH=/opt/lifecycled/bin:$PATH
RUNS=${RUNS:-5}
now() { date +%s%N; }
mono() {  # the monotonic time (µs) of the last journal line of lifecycled matching $1
    journalctl -u lifecycled -o json --no-pager --output-fields=MESSAGE | grep -F "$1" | tail -1 \
        | sed 's/.*"__MONOTONIC_TIMESTAMP":"\([0-9]*\)".*/\1/'
}
mkdir -p /run/lcbench/apps /run/systemd/system/lifecycled.service.d
# Five kills in a row would hit systemd's default start limit (5 in 10 s).
# (1,000 apps need more than 1,024 descriptors: the shipped unit sets
# LimitNOFILE=65536.)
cat > /run/systemd/system/lifecycled.service.d/zz-bench.conf <<'UNIT'
[Unit]
StartLimitIntervalSec=0
[Service]
ExecStart=
ExecStart=/opt/lifecycled/bin/lifecycled --config /run/lcbench/lifecycled.toml
UNIT
printf 'apps_dir = "apps"\nevent_history = 0\n' > /run/lcbench/lifecycled.toml
echo "layout: $( [ -d /sys/fs/cgroup/memory ] && echo hybrid || echo 'pure cgroup v2'); $(systemctl --version | head -1); $RUNS runs each"
echo
echo "| apps | kill -9 to one round trip done (median, max) | exit seen to next start (systemd) | start to READY=1 (daemon; median, max) | the last start's phases (ms) |"
echo "|---|---|---|---|---|"
for n in ${COUNTS:-10 100 1000}; do
    systemctl stop lifecycled 2>/dev/null
    rm -f /run/lcbench/apps/*
    for i in $(seq 0 $((n - 1))); do
        printf 'command = ["/opt/lifecycled/clib/c-recorder", "--log", "/dev/null"]\n' > /run/lcbench/apps/$(printf app%04d "$i").toml
    done
    systemctl daemon-reload
    systemctl start lifecycled
    for i in $(seq 1 $((n - 1))); do supervisorctl launch --no-block --background $(printf app%04d "$i") >/dev/null; done
    supervisorctl activate app0000 >/dev/null
    for _ in $(seq 1 3000); do
        [ "$(supervisorctl status --json | grep -o '"state":"suspended"' | wc -l)" -ge $((n - 1)) ] && break
        sleep 0.1
    done
    totals=(); gaps=(); readies=(); phases=""
    for r in $(seq 1 "$RUNS"); do
        supervisorctl home >/dev/null
        m=$(systemctl show -p MainPID --value lifecycled)
        t0=$(now)
        kill -9 "$m"
        supervisorctl activate app0000 >/dev/null || echo "run $r: activate failed" >&2
        t1=$(now)
        totals+=($(( (t1 - t0) / 1000000 )))
        exited=$(mono "Main process exited, code=killed, status=9/KILL")
        starting=$(mono "Starting lifecycled.service")
        ready=$(mono "lifecycled ready")
        gaps+=($(( (starting - exited) / 1000 )))
        readies+=($(( (ready - starting) / 1000 )))
        phases=$(journalctl -u lifecycled -o json --no-pager MESSAGE=started -n 1 | grep -o '"\(CONFIG\|CONFINEMENT\|STATE\|STATE_READ\|ADOPTION\|PROBES\)_MS":"[0-9.]*"' | tr -d '"' | tr '\n' ' ')
        [ "$(supervisorctl status --json | grep -o '"pid":[1-9]' | wc -l)" -ge "$n" ] || echo "run $r: apps lost" >&2
    done
    med() { printf '%s\n' "$@" | sort -n | sed -n "$(( ($# + 1) / 2 ))p"; }
    max() { printf '%s\n' "$@" | sort -n | tail -1; }
    ph=$phases
    echo "| $n | $(med "${totals[@]}") ms, $(max "${totals[@]}") ms | $(med "${gaps[@]}") ms | $(med "${readies[@]}") ms, $(max "${readies[@]}") ms | ${ph:-?} |"
done
systemctl stop lifecycled
