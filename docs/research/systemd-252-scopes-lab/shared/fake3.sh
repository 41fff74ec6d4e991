#!/bin/bash
# lcfake: a stand-in for lifecycled using the recommended layout.
#  - the daemon stays in its service's cgroup (SVC/daemon leaf, controllers enabled in SVC as lifecycled does);
#  - apps live in a delegated transient scope lcfake-apps.scope (PartOf=+Before=lcfake.service),
#    created at start when missing, with a keeper process moved into SCOPE/keeper;
#  - on SIGTERM it asks systemd for the job on its unit: "restart" -> leave the apps, else stop them.
M=$(grep -m1 ' - cgroup2 ' /proc/self/mountinfo | cut -d' ' -f5)
UNIT=lcfake.service; SCOPE=lcfake-apps.scope; OBJ=/org/freedesktop/systemd1/unit/lcfake_2dapps_2escope
SVC=$M$(grep ^0:: /proc/self/cgroup | cut -d: -f3)
mkdir -p $SVC/daemon && echo $$ > $SVC/daemon/cgroup.procs
C=$(cat $SVC/cgroup.controllers); for c in $C; do echo +$c > $SVC/cgroup.subtree_control; done
if ! systemctl is-active -q $SCOPE; then /lab/mkscope.sh $SCOPE $UNIT; fi
S=$M$(busctl get-property org.freedesktop.systemd1 $OBJ org.freedesktop.systemd1.Scope ControlGroup | cut -d'"' -f2)
if [ ! -d $S/keeper ]; then
  mkdir -p $S/keeper $S/apps
  for p in $(cat $S/cgroup.procs); do echo $p > $S/keeper/cgroup.procs; done
  for c in $(cat $S/cgroup.controllers); do echo +$c > $S/cgroup.subtree_control; echo +$c > $S/apps/cgroup.subtree_control; done
fi
A=$(cat /run/lcfake.app 2>/dev/null)
if [ -z "$A" ] || ! kill -0 $A 2>/dev/null; then
  mkdir -p $S/apps/app.$$; A=$(/lab/cgclone $S/apps/app.$$ sleep 6000); echo $A > /run/lcfake.app
  echo "lcfake $$: launched app $A into $(grep ^0:: /proc/$A/cgroup)"
else
  echo "lcfake $$: re-adopted app $A in $(grep ^0:: /proc/$A/cgroup)"
fi
echo "lcfake $$: scope $S subtree=[$(cat $S/cgroup.subtree_control)] service subtree=[$(cat $SVC/cgroup.subtree_control)]"
onterm() {
  J=$(busctl get-property org.freedesktop.systemd1 /org/freedesktop/systemd1/unit/lcfake_2eservice org.freedesktop.systemd1.Unit Job)
  JP=${J##* }; JP=${JP//\"/}; T=none
  [ "$JP" != / ] && T=$(busctl get-property org.freedesktop.systemd1 "$JP" org.freedesktop.systemd1.Job JobType | cut -d'"' -f2)
  if [ "$T" = restart ]; then echo "lcfake $$: SIGTERM, job=$T: leaving the apps running"
  else echo "lcfake $$: SIGTERM, job=$T: stopping the apps"; for d in $S/apps/*/; do echo 1 > $d/cgroup.kill; done; sleep 0.5; echo "lcfake $$: apps stopped"; fi
  exit 0
}
trap onterm TERM
while :; do sleep 1 & wait $!; done
