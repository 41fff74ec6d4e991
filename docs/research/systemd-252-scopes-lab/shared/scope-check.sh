#!/bin/bash
# Run inside the container: checks the transient-scope layout with lcfake (fake3.sh).
M=$(grep -m1 ' - cgroup2 ' /proc/self/mountinfo | cut -d' ' -f5)
ok() { echo "PASS: $*"; }; ko() { echo "FAIL: $*"; }
app() { cat /run/lcfake.app 2>/dev/null; }
alive() { kill -0 "$1" 2>/dev/null; }
main() { systemctl show -p MainPID --value lcfake; }
waitactive() { for i in $(seq 100); do [ "$(systemctl is-active lcfake)" = active ] && [ "$(main)" != "$1" ] && [ "$(main)" != 0 ] && return 0; sleep 0.02; done; return 1; }
echo "layout: v2 at $M; $(systemctl --version | head -1)"
systemd-run --quiet --unit lcfake -p Delegate=yes -p KillMode=mixed -p Restart=on-failure -p RestartSec=100ms \
  -p StartLimitIntervalSec=0 -p WatchdogSec=0 /lab/fake3.sh
waitactive 0; sleep 0.3; A=$(app)
[ -n "$A" ] && alive $A && ok "app $A launched in $(grep ^0:: /proc/$A/cgroup)" || ko "no app"
S=$M$(systemctl show -p ControlGroup --value lcfake-apps.scope)
echo 1 > $S/apps/app.*/cgroup.freeze; sleep 0.05; grep -q "frozen 1" $S/apps/app.*/cgroup.events && ok "freeze from the service" || ko freeze
echo 0 > $S/apps/app.*/cgroup.freeze
for how in "kill -9" "kill -ABRT" "systemctl restart" "systemctl try-restart" "systemctl kill -s KILL"; do
  M0=$(main); t0=$(date +%s%N)
  case "$how" in kill*) $how $M0;; "systemctl kill"*) systemctl kill -s KILL lcfake;; *) $how lcfake;; esac
  waitactive $M0 && t1=$(date +%s%N) || t1=0
  sleep 0.2
  alive $A && [ "$(systemctl is-active lcfake-apps.scope)" = active ] && ok "$how: app $A survived, service back ($(main)) after $(( (t1-t0)/1000000 )) ms" || ko "$how: app alive=$(alive $A && echo y || echo n) scope=$(systemctl is-active lcfake-apps.scope) svc=$(systemctl is-active lcfake)"
done
journalctl -u lcfake -o cat --no-pager | grep -E "re-adopted|SIGTERM|219|busy" | tail -4
systemctl stop lcfake; sleep 0.3
alive $A && ko "stop: app still alive" || ok "stop: app gone, scope $(systemctl is-active lcfake-apps.scope), cgroup $(ls -d $S 2>/dev/null || echo removed)"
journalctl -u lcfake -u lcfake-apps.scope -o short-precise --no-pager --since=-2s | cut -c8- | grep -E "SIGTERM|apps stopped|Stopp|Deactivated"
# GC: a scope whose keeper dies and which holds no app is collected at once, sub-cgroups included
/lab/mkscope.sh gc-test.scope >/dev/null; G=$M$(systemctl show -p ControlGroup --value gc-test.scope)
mkdir -p $G/keeper $G/apps/x.1; K=$(cat $G/cgroup.procs); echo $K > $G/keeper/cgroup.procs; kill $K; sleep 0.3
[ ! -d $G ] && [ "$(systemctl is-active gc-test.scope)" = inactive ] && ok "empty scope garbage-collected with its sub-cgroups" || ko "gc"
systemctl reset-failed lcfake 2>/dev/null; rm -f /run/lcfake.app
