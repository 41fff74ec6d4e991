#!/bin/bash
# A stand-in for lifecycled that lays out its own (delegated) service cgroup like lifecycled does:
#   SVC/daemon (itself), SVC/apps/NAME (an "app"), +CTRL in SVC's and SVC/apps' subtree_control.
# APPS=service: the app goes under SVC/apps; APPS=scope: under the scope's apps/.
M=/sys/fs/cgroup
SVC=$M$(grep ^0:: /proc/self/cgroup | cut -d: -f3)
CTRL=${CTRL:-hugetlb}
mkdir -p $SVC/daemon $SVC/apps
echo $$ > $SVC/daemon/cgroup.procs || echo "move to leaf failed"
echo +$CTRL > $SVC/cgroup.subtree_control || echo "enable $CTRL in service failed"
if [ "${APPS:-service}" = scope ]; then A=$M/system.slice/lifecycled-apps.scope/apps; else A=$SVC/apps; echo +$CTRL > $A/cgroup.subtree_control; fi
mkdir -p $A/app.$$
P=$(/lab/cgclone $A/app.$$ sleep 4000)
echo "fake2 $$: svc=$SVC subtree=[$(cat $SVC/cgroup.subtree_control)] app $P in $(grep ^0:: /proc/$P/cgroup)"
exec sleep infinity
