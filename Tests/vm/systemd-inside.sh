#!/bin/bash
# Inside the virtual machine of `scripts/vm.sh --systemd` (Tests/vm/run.sh):
# systemd 252 as PID 1 on pure cgroup v2 with the memory and cpu
# controllers, the shipped units with the build under test: what a Debian,
# Ubuntu or Fedora user runs. Prints ok/FAILED lines; exits 1 when anything
# failed. BIN: the build's binaries.
set -u
BIN=${BIN:-$PWD/.build/debug}
CTL=$BIN/supervisorctl
fails=0
ok() { echo "ok      $*"; }
failed() { echo "FAILED  $*"; fails=$((fails + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else failed "$what"; fi; }
json() { $CTL status --json | python3 -c "import json, sys; d = json.load(sys.stdin); print($1)"; }
xattr() { python3 -c 'import os, sys; os.getxattr(sys.argv[1], sys.argv[2])' "$1" "$2" 2>/dev/null; }
# Waits (at most 30 s, a failure bound) until "$@" succeeds.
until_() { local i; for i in $(seq 300); do "$@" && return 0; sleep 0.1; done; return 1; }

echo "systemd: $(systemctl --version | head -1); cgroup2 root: $(cat /sys/fs/cgroup/cgroup.controllers)"
systemctl start multi-user.target  # D-Bus: the daemon asks systemd for the apps' scope over it

# A machine that never ran the daemon: the guest's /etc and /var are
# overlays on the host's, where a daemon run by hand (make run's default
# config) leaves its kill log, history and app logs, and an install its
# configuration. The host's own files are not touched.
rm -rf /etc/lifecycled /var/lib/lifecycled /var/log/lifecycled

# The shipped units, run from the build (only ExecStart= and ExecReload= change).
rm -f /etc/systemd/system/lifecycled.service /etc/systemd/system/lifecycled.socket  # masked by the init
cp systemd/lifecycled.service systemd/lifecycled.socket /etc/systemd/system/
mkdir -p /etc/systemd/system/lifecycled.service.d /etc/lifecycled/apps
cat >/etc/systemd/system/lifecycled.service.d/test.conf <<UNIT
[Service]
ExecStart=
ExecStart=$BIN/lifecycled --config /etc/lifecycled/lifecycled.toml
ExecReload=
ExecReload=$BIN/supervisorctl reload
UNIT
echo 'apps_dir = "apps"' >/etc/lifecycled/lifecycled.toml
cat >/etc/lifecycled/apps/recorder.toml <<APP
command = ["$BIN/example-recorder", "--log", "/tmp/recorder.events"]
user = "root"
APP
cat >/etc/lifecycled/apps/greedy.toml <<'APP'
command = ["/usr/bin/python3", "-c", "import time; b = [b'x' * (8 << 20) for _ in range(16)]; time.sleep(600)"]
delivery = "signals"
user = "root"
[memory]
limit = "32M"
APP
systemctl daemon-reload
systemctl start lifecycled.socket lifecycled.service || { failed "lifecycled.service starts"; journalctl -u lifecycled -o cat | tail -20; exit 1; }
$CTL activate recorder >/dev/null || failed "activate recorder"

SCOPE=$(systemctl show -p ControlGroup --value lifecycled-apps.scope)
G=/sys/fs/cgroup$SCOPE/apps/recorder.1
check "the apps' scope is delegated the memory and cpu controllers" \
    grep -q "cpu .*memory\|memory .*cpu" <(cat /sys/fs/cgroup$SCOPE/apps/cgroup.subtree_control)
check "accounted by the cgroup v2 memory controller" \
    test "$(json 'd["daemon"]["memory"]["accounting"]')" = "cgroup-v2 memory controller"
check "the app in front stands so (memory.low max, cpu.weight 1000, oom group, oomd omit)" \
    test "$(cat $G/memory.low) $(cat $G/cpu.weight) $(cat $G/memory.oom.group)" = "max 1000 1"
check "systemd-oomd is told to leave the app in front alone" xattr "$G" user.oomd_omit
check "the scope asks for no cap (MemoryLow=infinity)" test "$(cat /sys/fs/cgroup$SCOPE/memory.low)" = max
problems=$(json '"; ".join(d["daemon"]["memory"].get("problems") or [])')
check "it says the slice above caps the foreground's protection ($problems)" \
    grep -q "capped by /sys/fs/cgroup/system.slice" <<<"$problems"
unit=$(for p in OOMPolicy ManagedOOMPreference CPUWeight; do systemctl show -p $p --value lifecycled; done | tr '\n' ' ')
check "the unit says OOMPolicy=continue, ManagedOOMPreference=omit, CPUWeight=100 ($unit)" \
    test "$unit" = "continue omit 100 "

# What configuration.md says to do about the cap, then a restart (apps stay).
PID=$($CTL pid recorder)
systemctl set-property --runtime system.slice MemoryLow=512M
systemctl restart lifecycled.service
until_ $CTL status >/dev/null 2>&1
check "after MemoryLow= on the slice and a restart: no cap said, the same app" \
    test "$(json '(d["daemon"]["memory"].get("problems"), [a.get("pid") for a in d["apps"] if a["name"] == "recorder"][0])')" = "(None, $PID)"

# The kernel's OOM kill at an app's limit under systemd: recorded, and the
# service carries on (OOMPolicy=continue).
$CTL launch --background --no-block greedy >/dev/null
until_ test "$($CTL jetsam --json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')" = 1
check "the kernel's kill at the limit is recorded as per-app-limit by the kernel" \
    test "$($CTL jetsam --json | python3 -c 'import json, sys; k = json.load(sys.stdin)[0]; print(k["app"], k["reason"], k.get("killer"))')" = "greedy per-app-limit kernel"
check "the service is still active" test "$(systemctl is-active lifecycled.service)" = active
check "the app in front is untouched" test "$($CTL pid recorder)" = "$PID"

# kill -9 of the daemon: the next one (Restart=on-failure) takes the app back.
MAIN=$(systemctl show -p MainPID --value lifecycled.service)
kill -9 "$MAIN"
until_ bash -c "[ \"\$(systemctl show -p MainPID --value lifecycled.service)\" != $MAIN ] && $CTL status >/dev/null 2>&1"
check "after kill -9 the next daemon has the app, same pid" test "$($CTL pid recorder)" = "$PID"

systemctl stop lifecycled.service
check "a stop ends the apps and the scope" test "$(systemctl is-active lifecycled-apps.scope)" != active
((fails == 0)) || { journalctl -u lifecycled -o cat --no-pager | tail -30; exit 1; }
