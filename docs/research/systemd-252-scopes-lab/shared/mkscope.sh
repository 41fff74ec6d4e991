#!/bin/bash
# mkscope.sh UNIT.scope [SERVICE] : start a keeper process and make it the first member
# of a new delegated transient scope over D-Bus (StartTransientUnit), as lifecycled would.
# With SERVICE: PartOf=SERVICE and Before=SERVICE (stopped after SERVICE on stop, untouched
# by restarts). SLICE=... in the environment picks the slice (default: system.slice).
U=${1:-lifecycled-apps.scope}; SVC=${2:-}
setsid sleep infinity </dev/null >/dev/null 2>&1 &
K=$!
props=(PIDs au 1 $K Delegate b true Description s "lifecycled apps")
[ -n "$SLICE" ] && props+=(Slice s "$SLICE")
[ -n "$SVC" ] && props+=(PartOf as 1 "$SVC" Before as 1 "$SVC")
n=$(( ${#props[@]} ))
# count properties: each is NAME SIG VALUE..., so count the names we added
np=3; [ -n "$SLICE" ] && np=$((np+1)); [ -n "$SVC" ] && np=$((np+2))
t0=$(date +%s%N)
busctl call org.freedesktop.systemd1 /org/freedesktop/systemd1 org.freedesktop.systemd1.Manager \
  StartTransientUnit 'ssa(sv)a(sa(sv))' "$U" fail $np "${props[@]}" 0 || exit 1
t1=$(date +%s%N)
until [ "$(systemctl is-active $U)" = active ]; do sleep 0.005; done
t2=$(date +%s%N)
echo "keeper=$K call=$(( (t1-t0)/1000 ))us active-after=$(( (t2-t0)/1000 ))us cgroup=$(grep ^0:: /proc/$K/cgroup)"
