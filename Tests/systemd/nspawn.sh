#!/bin/bash
# Boots a real systemd (the host's own root in systemd-nspawn, systemd as
# PID 1) with the shipped lifecycled.service and lifecycled.socket, and runs
# inside.sh in it: apps outliving kill -9, SIGSEGV, `systemctl restart`, a
# hang caught by the watchdog and daemon-reexec; a stop ending them.
#
# usage: Tests/systemd/nspawn.sh [hybrid|v2|both]    (default: both, one after the other)
#   BIN=dir   the built binaries (default .build/debug)
#   HOLD=1    boot and wait instead of testing, for trying things by hand
#   INSIDE=f  the script to run inside instead of Tests/systemd/inside.sh
#             (make bench-systemd runs Benchmarks/systemd/blackout.sh)
#   DEBS=dir  packages to install instead of binding the build: the root is
#             an overlay the container may write (dpkg -i), the debs are in
#             /opt/debs, and nothing of the build is bound (Tests/systemd/deb.sh)
# Needs root and systemd-nspawn (scripts/install-deps.sh installs
# systemd-container). Each container runs in a host cgroup of its own,
# removed afterwards with the empty cgroups nspawn leaves (/payload, /supervisor).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BIN=$(realpath "${BIN:-.build/debug}")
INSIDE=$(realpath "${INSIDE:-Tests/systemd/inside.sh}")
CLIB=$ROOT/.build/clib
[ -d "$CLIB" ] || CLIB=$BIN  # the C recorder, for the benchmark
LAYOUTS=${1:-both}
[ "$LAYOUTS" = both ] && LAYOUTS="hybrid v2"
[ "$(id -u)" = 0 ] || { echo "nspawn.sh: needs root"; exit 1; }
command -v systemd-nspawn >/dev/null || { echo "nspawn.sh: systemd-nspawn is missing (apt-get install systemd-container)"; exit 1; }
for b in lifecycled supervisorctl example-recorder example-worker example-plain; do
    [ -n "${DEBS:-}" ] || [ -x "$BIN/$b" ] || { echo "nspawn.sh: $BIN/$b is missing: build first (swift build)"; exit 1; }
done

# --volatile=yes shows the host's /usr and nothing else of its root: a Swift
# toolchain outside /usr (debug builds link its runtime) is bound too.
SWIFT_ROOT=$(command -v swift >/dev/null && realpath "$(dirname "$(realpath "$(command -v swift)")")/../.." || echo /usr)
BIND_SWIFT=()
case "$SWIFT_ROOT" in /usr | /usr/*) ;; *) BIND_SWIFT=(--bind-ro="$SWIFT_ROOT") ;; esac

LAB=$(mktemp -d /tmp/lifecycled-nspawn.XXXXXX)
mkdir -p "$LAB/etc/apps" "$LAB/dropin"
cat > "$LAB/etc/lifecycled.toml" <<'TOML'
apps_dir = "apps"
cgroup_root = "auto"
TOML
cat > "$LAB/etc/apps/recorder.toml" <<'TOML'
command = ["/opt/lifecycled/bin/example-recorder", "--log", "/tmp/lifecycled-recorder.events"]
TOML
cat > "$LAB/etc/apps/worker.toml" <<'TOML'
command = ["/opt/lifecycled/bin/example-worker", "--log", "/tmp/lifecycled-worker.log", "--work-ms", "600000"]
[timeouts]
background_task_budget = 600
TOML
cat > "$LAB/etc/apps/plain.toml" <<'TOML'
command = ["/opt/lifecycled/bin/example-plain", "--log", "/tmp/lifecycled-plain.log"]
delivery = "signals"
[timeouts]
background_grace = 1
TOML
# The shipped unit, run from where the binaries are: only ExecStart= changes.
cat > "$LAB/dropin/test.conf" <<'UNIT'
[Service]
ExecStart=
ExecStart=/opt/lifecycled/bin/lifecycled --config /etc/lifecycled/lifecycled.toml
ExecReload=
ExecReload=/opt/lifecycled/bin/supervisorctl reload
UNIT

V2=$(awk '$9=="cgroup2"{print $5; exit}' /proc/self/mountinfo)
cleanup_host() {
    for top in "$V2" /sys/fs/cgroup/systemd; do
        [ -n "$top" ] && [ -d "$top" ] || continue
        for d in "$top"/lifecycled-nspawn-* "$top"/payload "$top"/supervisor; do
            [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
        done
    done
}

run() {
    local layout=$1 name=lcnspawn-$1 cg=/lifecycled-nspawn-$1 pid leader=""
    echo "== $layout: booting systemd in systemd-nspawn"
    mkdir -p "$V2$cg"
    [ -d /sys/fs/cgroup/systemd ] && mkdir -p "/sys/fs/cgroup/systemd$cg"
    local env=()
    [ "$layout" = v2 ] && env=(SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1)
    # nspawn in a host cgroup of its own, so that two runs never share
    # nspawn's payload/supervisor cgroups.
    local binds="--volatile=yes ${BIND_SWIFT[*]} --bind-ro=$BIN:/opt/lifecycled/bin --bind=$LAB/etc:/etc/lifecycled
        --bind-ro=$ROOT/systemd/lifecycled.service:/etc/systemd/system/lifecycled.service
        --bind-ro=$ROOT/systemd/lifecycled.socket:/etc/systemd/system/lifecycled.socket
        --bind-ro=$ROOT/dbus/io.lifecycled.Lifecycle1.conf:/etc/dbus-1/system.d/io.lifecycled.Lifecycle1.conf
        --bind-ro=$LAB/dropin:/etc/systemd/system/lifecycled.service.d --bind-ro=$CLIB:/opt/lifecycled/clib"
    local root=/
    # Installed from packages: no build bound; a root dpkg may write, an
    # overlay of the host's over a tmpfs (nspawn will not overlay / itself).
    if [ -n "${DEBS:-}" ]; then
        mkdir -p "$LAB/layer" "$LAB/root"
        mount -t tmpfs tmpfs "$LAB/layer" && mkdir -p "$LAB/layer/upper" "$LAB/layer/work"
        mount -t overlay overlay -o "lowerdir=/,upperdir=$LAB/layer/upper,workdir=$LAB/layer/work" "$LAB/root"
        root=$LAB/root
        binds="--bind-ro=$(realpath "$DEBS"):/opt/debs"
    fi
    binds=$(echo $binds)  # one line: it goes into bash -c
    env "${env[@]}" setsid bash -c "
        echo \$\$ > $V2$cg/cgroup.procs
        [ -d /sys/fs/cgroup/systemd ] && echo \$\$ > /sys/fs/cgroup/systemd$cg/cgroup.procs
        exec systemd-nspawn --quiet -D $root --register=no --keep-unit --private-network \
            --machine=$name $binds --bind-ro=$INSIDE:/opt/lifecycled/inside.sh \
            -b systemd.firstboot=off" > "$LAB/$layout.console" 2>&1 < /dev/null &
    pid=$!
    local state=""
    for _ in $(seq 1 300); do
        leader=$(pgrep -P $pid -x systemd || true)
        if [ -n "$leader" ]; then
            state=$(nsenter -t "$leader" -a systemctl is-system-running 2>/dev/null || true)
            case "$state" in running | degraded) break ;; esac
        fi
        kill -0 $pid 2>/dev/null || break
        sleep 0.1
    done
    local rc=0
    case "$state" in
    running | degraded)
        if [ -n "${HOLD:-}" ]; then
            echo "HOLD: the container's PID 1 is host pid $leader (nsenter -t $leader -a bash); remove $LAB/hold to end it"
            touch "$LAB/hold"
            while [ -e "$LAB/hold" ]; do sleep 1; done
        else
            nsenter -t "$leader" -a env COUNTS="${COUNTS:-}" /opt/lifecycled/inside.sh || rc=1
        fi ;;
    *) echo "FAIL: the container did not boot (state '$state'):"; tail -20 "$LAB/$layout.console"; rc=1 ;;
    esac
    [ -n "$leader" ] && nsenter -t "$leader" -a systemctl poweroff 2>/dev/null || kill $pid 2>/dev/null || true
    for _ in $(seq 1 300); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
    kill -9 $pid 2>/dev/null || true
    wait $pid 2>/dev/null || true
    if [ "$root" != / ]; then umount "$root" "$LAB/layer" 2>/dev/null || umount -l "$root" "$LAB/layer" || true; fi
    cleanup_host
    return $rc
}

trap 'cleanup_host; rm -rf "$LAB"' EXIT
status=0
for layout in $LAYOUTS; do run "$layout" || status=1; done
exit $status
