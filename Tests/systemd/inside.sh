#!/bin/bash
# Runs inside the container booted by nspawn.sh (systemd as PID 1, the
# shipped units): the apps must outlive every end of the daemon but a stop;
# the compositor's follower follows the session's lock from the real logind.
# Prints PASS/FAIL lines and timings; exits 1 when anything failed.
set -u
export PATH=/opt/lifecycled/bin:$PATH
CTL=supervisorctl
fails=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ms() { echo $(( ($2 - $1) / 1000000 )); }
now() { date +%s%N; }
mainpid() { systemctl show -p MainPID --value lifecycled.service; }
# "name state pid" per app, sorted.
apps() { $CTL status --json | python3 -c '
import json, signal, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
for a in json.load(sys.stdin)["apps"]: print(a["name"], a["state"], a.get("pid") or 0)'; }
pids() { apps | while read -r n s p; do echo "$n $p"; done; }
# The pid that owns the daemon's bus name on the container's (real) system bus.
BUS=io.lifecycled.Lifecycle1
owner() { busctl status $BUS 2>/dev/null | grep -m1 '^PID=' | cut -d= -f2; }
# Waits until the service's main pid owns the name.
owns() {
    local i
    for i in $(seq 1 1000); do [ "$(owner)" = "$(mainpid)" ] && return 0; sleep 0.01; done
    return 1
}
# Waits until the service has a main pid other than $1 and answers status.
back() {
    local i
    for i in $(seq 1 3000); do
        local p; p=$(mainpid)
        if [ "$p" != 0 ] && [ "$p" != "$1" ] && [ "$(systemctl is-active lifecycled)" = active ] \
            && $CTL status >/dev/null 2>&1; then return 0; fi
        sleep 0.01
    done
    return 1
}
M=$(grep -m1 ' - cgroup2 ' /proc/self/mountinfo | cut -d' ' -f5)
echo "layout: cgroup2 at $M$( [ -d /sys/fs/cgroup/memory ] && echo ' (hybrid)' || echo ' (pure v2)'); $(systemctl --version | head -1)"

systemctl start lifecycled.service || { fail "lifecycled.service did not start"; journalctl -u lifecycled -o cat | tail -20; exit 1; }
SCOPE=$(systemctl show -p ControlGroup --value lifecycled-apps.scope)
[ "$(systemctl is-active lifecycled-apps.scope)" = active ] && pass "lifecycled-apps.scope active at $SCOPE" \
    || fail "no active lifecycled-apps.scope"
SVC=$(systemctl show -p ControlGroup --value lifecycled.service)
# Beside the socket-activated control socket: root's own, mode 0600.
[ "$(stat -c %a:%U /run/lifecycled/control.sock.private 2>&1)" = 600:root ] \
    && pass "root's private control socket beside the activated one" \
    || fail "private socket: $(stat -c %a:%U /run/lifecycled/control.sock.private 2>&1)"

owns && pass "the daemon owns $BUS on the system bus (real dbus-daemon, the shipped policy)" \
    || fail "$BUS owned by '$(owner)', not the daemon $(mainpid); $(journalctl -u lifecycled -o cat | grep -i bus | tail -3)"
op=$(busctl call $BUS /io/lifecycled/Lifecycle1/app/recorder $BUS.App Activate 'a{sv}' 0 | cut -d'"' -f2)
[ "$(busctl call $BUS "$op" $BUS.Operation Wait 2>&1)" = 'ss "done" ""' ] && [ "$($CTL status --json recorder | grep -c '"state":"active"')" = 1 ] \
    && pass "busctl: Activate, then Operation.Wait: done, and the recorder is active" \
    || fail "busctl activate: $op $(busctl call $BUS "$op" $BUS.Operation Wait 2>&1)"
$CTL activate recorder >/dev/null || fail "activate recorder"
$CTL launch --background worker >/dev/null || fail "launch --background worker"
$CTL launch --background plain >/dev/null || fail "launch --background plain"
# The plain program gets no background time: wait until it is frozen.
for i in $(seq 1 500); do apps | grep -q "^plain suspended" && break; sleep 0.01; done
BEFORE=$(pids)
echo "apps: $(apps | tr '\n' ';')"
apps | grep -q "^recorder active" && apps | grep -q "^worker background" && apps | grep -q "^plain suspended" \
    && pass "recorder active, worker background in a task, plain suspended" || fail "states before: $(apps | tr '\n' ';')"
R=$(pids | grep '^recorder ' | cut -d' ' -f2)  # (no awk in a --volatile container)
grep -q "^0::$SCOPE/apps/recorder\." /proc/$R/cgroup && pass "recorder (pid $R) runs in $SCOPE/apps" \
    || fail "recorder's cgroup: $(grep ^0:: /proc/$R/cgroup)"
ls "$M$SVC" | grep -q '^apps$\|^daemon$' && fail "the service's cgroup has sub-cgroups: $(ls -d $M$SVC/*/)" \
    || pass "the service's cgroup holds only the daemon (no sub-cgroups, no controllers enabled by it)"

# Each way the daemon can end but a stop: the same apps, same pids, after.
survive() {
    local how=$1 m0 t0 t1
    m0=$(mainpid); t0=$(now)
    case "$how" in
    "kill -9") kill -9 "$m0" ;;
    "watchdog") kill -STOP "$m0" ;;
    "systemctl restart") systemctl restart lifecycled ;;
    "systemctl kill -s SEGV") systemctl kill -s SEGV lifecycled ;;
    esac
    if ! back "$m0"; then fail "$how: the daemon did not come back"; return; fi
    t1=$(now)
    if [ "$(pids)" = "$BEFORE" ]; then
        pass "$how: every app kept its pid; daemon $m0 -> $(mainpid), answering after $(ms $t0 $t1) ms"
    else
        fail "$how: apps before: $(echo $BEFORE) after: $(pids | tr '\n' ' ')"
    fi
    # One event round trip with the active app.
    $CTL home >/dev/null && $CTL activate recorder >/dev/null && apps | grep -q "^recorder active" \
        && pass "$how: recorder went to the background and came back" || fail "$how: no round trip: $(apps | tr '\n' ';')"
    apps | grep -q "^plain suspended" && pass "$how: plain still suspended" || fail "$how: plain: $(apps | grep ^plain)"
    owns && [ "$(busctl get-property $BUS /io/lifecycled/Lifecycle1/app/recorder $BUS.App State)" = 's "active"' ] \
        && pass "$how: the new daemon owns $BUS, and its recorder object says active" \
        || fail "$how: $BUS owned by '$(owner)', daemon $(mainpid)"
}
survive "kill -9"
survive "systemctl kill -s SEGV"
survive "systemctl restart"
survive "watchdog"
journalctl -u lifecycled -o cat --no-pager | grep -q "Watchdog timeout" \
    || journalctl -o cat --no-pager | grep -q "lifecycled.service: Watchdog timeout" \
    && pass "the watchdog replaced the stopped daemon" || fail "no watchdog timeout in the journal"

m0=$(mainpid)
$CTL daemon-reexec >/dev/null && [ "$(mainpid)" = "$m0" ] && [ "$(pids)" = "$BEFORE" ] \
    && pass "supervisorctl daemon-reexec: same main pid, same apps" || fail "daemon-reexec: $(pids | tr '\n' ' ')"
owns && pass "daemon-reexec: the re-executed daemon owns $BUS" || fail "daemon-reexec: $BUS owned by '$(owner)'"
# systemctl reload: a manifest added appears; every app runs on untouched.
cat > /etc/lifecycled/apps/extra.toml <<'TOML'
command = ["sh", "-c", "echo hello-from-extra; echo '<3>extra-error' >&2; exec sleep 100000"]
delivery = "signals"
user = "nobody"
autostart = "background"
TOML
m0=$(mainpid)
systemctl reload lifecycled && $CTL status extra >/dev/null && [ "$(mainpid)" = "$m0" ] \
    && [ "$(pids | grep -v '^extra ')" = "$BEFORE" ] \
    && pass "systemctl reload: the new app appears, every app runs on" \
    || fail "systemctl reload: $(systemctl status lifecycled --no-pager 2>&1 | tail -5)"
# Its output went straight to the journal, under its own name, with its priorities.
for i in $(seq 1 300); do journalctl --sync; journalctl -t extra -o cat --no-pager | grep -q extra-error && break; sleep 0.01; done
journalctl -t extra -o cat --no-pager | grep -q hello-from-extra \
    && [ "$(journalctl -t extra -p err -o cat --no-pager)" = extra-error ] \
    && pass "an app's output is in the journal: journalctl -t extra, stderr's <3> at priority err" \
    || fail "journalctl -t extra: $(journalctl -t extra -o verbose --no-pager | grep -E 'MESSAGE|PRIORITY|_PID' | tr '\n' ' ')"
$CTL tail -n 5 extra | grep -q hello-from-extra && pass "supervisorctl tail extra reads it from the journal" \
    || fail "supervisorctl tail extra: $($CTL tail extra 2>&1)"
rm -f /etc/lifecycled/apps/extra.toml
systemctl reload lifecycled && ! $CTL status extra >/dev/null 2>&1 && [ "$(pids)" = "$BEFORE" ] \
    && pass "systemctl reload: a manifest removed, its app is gone" || fail "reload after removal: $(pids | tr '\n' ' ')"
n=$(journalctl -u lifecycled -o cat --no-pager | grep -c "lifecycled ready")
[ "$n" -ge 5 ] && pass "the daemon's log lines stay credited to lifecycled.service ($n \"ready\" lines)" \
    || fail "only $n \"lifecycled ready\" lines under -u lifecycled"
n=$(journalctl -u lifecycled -o cat --no-pager | grep -c "Scheduled restart job")
[ "$n" -ge 3 ] && pass "$n automatic restarts (kill -9, SIGSEGV, watchdog)" || fail "$n automatic restarts, 3 expected"
journalctl -u lifecycled -o cat --no-pager | grep -q "219/CGROUP\|Failed at step CGROUP" && fail "a restart failed at step CGROUP"

# The session's lock (docs/focus.md): a follower in a logind session (a PAM
# session of root's, beside a headless sway of nobody's) locks the followed
# display while logind's LockedHint says the session is locked, as a screen
# locker sets it; `unlock` is the locker's; the recorder is in front again
# after.
state() { apps | grep "^$1 " | cut -d' ' -f2; }
locked() { $CTL status --json | python3 -c '
import json, sys
d = json.load(sys.stdin)["daemon"]["displays"][0]
print(d["locked"], d.get("sessionLocked", False))'; }
mkdir -p /etc/pam.d
printf 'auth required pam_permit.so\naccount required pam_permit.so\nsession required pam_systemd.so\n' \
    > /etc/pam.d/lifecycled-test
cat > /tmp/lifecycled-session.sh <<'SESSION'
#!/bin/bash
D=/tmp/lifecycled-sway
rm -rf $D && mkdir -p $D && chown nobody $D && chmod 700 $D
printf 'output HEADLESS-1 resolution 640x480\nxwayland disable\n' > $D/sway.conf
setpriv --reuid=nobody --regid=nogroup --clear-groups env -i XDG_RUNTIME_DIR=$D HOME=$D PATH=/usr/bin:/bin \
    WLR_BACKENDS=headless WLR_LIBINPUT_NO_DEVICES=1 WLR_RENDERER=pixman sway -c $D/sway.conf > $D/log 2>&1 &
for i in $(seq 1 1000); do S=$(ls $D/sway-ipc.*.sock 2>/dev/null) && [ -n "$S" ] && break; sleep 0.01; done
exec lifecycled-follow --sway-socket "$S" --interval 0.5
SESSION
chmod +x /tmp/lifecycled-session.sh
systemd-run --quiet --unit=lifecycled-session -p PAMName=lifecycled-test -p User=root \
    -p Environment=PATH=/opt/lifecycled/bin:/usr/bin:/bin /tmp/lifecycled-session.sh
for i in $(seq 1 1000); do $CTL status --json | grep -q '"state":"following"' && break; sleep 0.01; done
SESSION=$(loginctl list-sessions --no-legend | while read -r id uid user rest; do [ "$user" = root ] && echo "$id"; done | head -1)
# Activated with the follower there: it has the focus (it has no window for the compositor to focus).
$CTL activate recorder >/dev/null
sethint() { busctl call org.freedesktop.login1 "/org/freedesktop/login1/session/$SESSION" org.freedesktop.login1.Session SetLockedHint b "$1"; }
if [ -z "$SESSION" ] || ! $CTL status --json | grep -q '"state":"following"'; then
    fail "no follower in a logind session: $(loginctl list-sessions --no-legend | tr '\n' ';') $(journalctl -u lifecycled-session -o cat | tail -3)"
else
    [ "$(state recorder)" = active ] && [ "$(locked)" = "False False" ] \
        && pass "a follower in logind session $SESSION: the recorder active, nothing locked" \
        || fail "before the lock: recorder $(state recorder), locked $(locked)"
    t0=$(now)
    sethint true
    for i in $(seq 1 500); do [ "$(locked)" = "True True" ] && [ "$(state recorder)" != active ] && break; sleep 0.01; done
    t1=$(now)
    [ "$(locked)" = "True True" ] && [ "$(state recorder)" != active ] \
        && pass "SetLockedHint true: the display locked (session), the recorder $(state recorder) after $(ms $t0 $t1) ms" \
        || fail "after SetLockedHint true: locked $(locked), recorder $(state recorder)"
    out=$($CTL unlock 2>&1) && fail "supervisorctl unlock of the session's lock: $out" \
        || { echo "$out" | grep -q "session is locked" && pass "supervisorctl unlock refused: $out" || fail "unlock: $out"; }
    sethint false
    inFront() { $CTL status --json | grep -q '"foreground":\["recorder"\]' && case "$(state recorder)" in active | inactive) true ;; *) false ;; esac; }
    for i in $(seq 1 500); do [ "$(locked)" = "False False" ] && inFront && break; sleep 0.01; done
    [ "$(locked)" = "False False" ] && inFront \
        && pass "SetLockedHint false: unlocked, the recorder in front again ($(state recorder))" \
        || fail "after SetLockedHint false: locked $(locked), recorder $(state recorder)"
fi
systemctl stop lifecycled-session 2>/dev/null
pkill -x sway

# A stop ends every app as docs/lifecycle.md says, then the scope.
R_PIDS=$(pids | cut -d' ' -f2)
systemctl stop lifecycled
left=""
for p in $R_PIDS; do kill -0 "$p" 2>/dev/null && left="$left $p"; done
[ -z "$left" ] && pass "systemctl stop: every app ended" || fail "systemctl stop: still alive:$left"
grep -q willTerminate /tmp/lifecycled-recorder.events 2>/dev/null && pass "systemctl stop: recorder got willTerminate" \
    || fail "systemctl stop: no willTerminate in the recorder's log"
for i in $(seq 1 300); do [ "$(systemctl is-active lifecycled-apps.scope)" != active ] && [ ! -d "$M$SCOPE" ] && break; sleep 0.01; done
[ "$(systemctl is-active lifecycled-apps.scope)" != active ] && [ ! -d "$M$SCOPE" ] \
    && pass "systemctl stop: the scope ended and its cgroup is gone" || fail "scope: $(systemctl is-active lifecycled-apps.scope), $(ls -d $M$SCOPE 2>&1)"

echo "journal (lifecycled):"
journalctl -u lifecycled -u lifecycled-apps.scope -o short-precise --no-pager | grep -E "ready|re-adopted|restart|Watchdog|scope|keeper|Main process|Scheduled" | cut -c8- | tail -40 | sed 's/^/  /'
echo "$fails failure(s)"
[ "$fails" = 0 ]
