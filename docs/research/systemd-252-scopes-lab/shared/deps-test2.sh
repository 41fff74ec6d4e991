#!/bin/bash
# Focus: scope with PartOf=SVC: restart (several kinds), kill -9, watchdog-like SIGABRT, stop.
SVC=dep2svc.service
systemd-run --quiet --unit dep2svc -p KillMode=mixed -p Delegate=yes -p Restart=on-failure -p RestartSec=100ms -p StartLimitIntervalSec=0 sleep infinity
setsid systemd-run --quiet --scope --unit dep2-PartOf -p PartOf=$SVC -p Delegate=yes sleep infinity </dev/null >/dev/null 2>&1 &
sleep 0.5
K=$(cat /sys/fs/cgroup/unified/system.slice/dep2-PartOf.scope/cgroup.procs); echo keeper $K
st() { echo "after $1: scope $(systemctl is-active dep2-PartOf.scope) keeper-alive=$(kill -0 $K 2>/dev/null && echo yes || echo no) svc=$(systemctl is-active $SVC) NRestarts=$(systemctl show -p NRestarts --value $SVC)"; }
systemctl restart $SVC; sleep 0.5; st "systemctl restart"
systemctl try-restart $SVC; sleep 0.5; st "systemctl try-restart"
systemctl reload-or-restart $SVC; sleep 0.5; st "systemctl reload-or-restart"
kill -9 $(systemctl show -p MainPID --value $SVC); sleep 1; st "kill -9"
kill -ABRT $(systemctl show -p MainPID --value $SVC); sleep 1; st "SIGABRT"
systemctl kill -s KILL $SVC; sleep 1; st "systemctl kill -s KILL"
systemctl stop $SVC; sleep 0.5; st "systemctl stop"
journalctl -u dep2-PartOf.scope -o short-precise --no-pager
