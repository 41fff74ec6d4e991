#!/bin/bash
# What a prewarmed Swift app executes in its activation, counted (issue 31,
# part 3; docs/performance.md, "Prewarming"). For each recorder given
# (default: .build/release/example-recorder): one daemon (.build/release)
# with that recorder as an app with prewarm = "always", run under valgrind
# --tool=callgrind with collection on only inside the Swift library's
# Channel.receiveOnce and Application.handle (the app's start, and the time
# it waits in recv, count nothing). Once it is held: activate, then stop.
# Prints the instructions counted: the six events (three launch events,
# willResignActive, didEnterBackground, willTerminate), the library's part
# and the app's callbacks. Needs root (cgroups) and valgrind.
#
#   Benchmarks/counted/app.sh [RECORDER ...]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
daemon=$root/.build/release/lifecycled
ctl=$root/.build/release/supervisorctl
[ $# -gt 0 ] || set -- "$root/.build/release/example-recorder"

count() {
    local recorder=$1 dir group daemon_pid
    dir=$(mktemp -d /tmp/lifecycled-app-count.XXXXXX)
    group=lifecycled-app-count-$$
    mkdir "$dir/apps"
    cat > "$dir/apps/warm.toml" <<EOF
command = ["/usr/bin/valgrind", "--tool=callgrind", "--callgrind-out-file=$dir/callgrind.out.%p", "--collect-atstart=no", "--toggle-collect=\$s15LifecycleClient11ApplicationC6handleyy0A4Wire13DaemonMessageOF", "--toggle-collect=\$s15LifecycleClient7ChannelC11receiveOnce*", "$recorder", "--log", "/dev/null"]
prewarm = "always"
[timeouts]
launch = 60
EOF
    cat > "$dir/lifecycled.toml" <<EOF
apps_dir = "apps"
state_directory = "state"
runtime_directory = "run"
log_directory = "logs"
cgroup_root = "/$group"
prewarm_budget = "512M"
EOF
    "$daemon" --config "$dir/lifecycled.toml" --control-socket "$dir/control.sock" > "$dir/daemon.log" 2>&1 &
    daemon_pid=$!
    export LIFECYCLED_SOCKET=$dir/control.sock
    # Held: prewarmed (valgrind's start takes a second or two).
    for _ in $(seq 300); do
        "$ctl" status warm 2>/dev/null | grep -q "prewarmed" && break
        sleep 0.1
    done
    "$ctl" activate warm > /dev/null
    # The next prewarm starts when this run ends: its own dump file (%p).
    "$ctl" stop warm > /dev/null
    local first=""
    for _ in $(seq 300); do
        first=$(ls -tr "$dir"/callgrind.out.* 2>/dev/null | head -1)
        [ -n "$first" ] && grep -q "^totals:" "$first" && break
        sleep 0.1
    done
    kill "$daemon_pid"
    wait "$daemon_pid" || true
    printf '%s: %s instructions\n' "$recorder" "$(grep "^totals:" "$first" | cut -d' ' -f2)"
    [ -n "${KEEP:-}" ] && echo "kept $first" || rm -rf "$dir"
    rmdir "/sys/fs/cgroup/unified/$group" "/sys/fs/cgroup/$group" 2> /dev/null || true
}

for recorder in "$@"; do count "$recorder"; done
