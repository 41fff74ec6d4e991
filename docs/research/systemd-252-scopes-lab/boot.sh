#!/bin/bash
# usage: boot.sh NAME [v2]
# Boots the host's own root as a container with systemd as PID 1, in the background,
# in a host cgroup of its own (/nspawn-lab-NAME in the v2 and name=systemd trees) so
# that two containers never share nspawn's "payload"/"supervisor" cgroups.
# Prints the container's PID 1 (host pid) once systemctl is-system-running says running/degraded.
set -e
NAME=$1; MODE=${2:-hybrid}
LAB=/work/nspawn-lab
V2=$(awk '$9=="cgroup2"{print $5; exit}' /proc/self/mountinfo)
CG=/nspawn-lab-$NAME
[ -n "$V2" ] && mkdir -p $V2$CG
[ -d /sys/fs/cgroup/systemd ] && mkdir -p /sys/fs/cgroup/systemd$CG
[ "$MODE" = v2 ] && export SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1
setsid bash -c "
  echo \$\$ > $V2$CG/cgroup.procs
  [ -d /sys/fs/cgroup/systemd ] && echo \$\$ > /sys/fs/cgroup/systemd$CG/cgroup.procs
  exec systemd-nspawn --volatile=yes -D / --register=no --keep-unit --private-network \
  --machine=$NAME \
  --bind-ro=/opt/swift --bind-ro=/work/nspawn-bin:/opt/x \
  --bind-ro=$LAB/config:/etc/lifecycled \
  --bind-ro=$LAB/units/lifecycled.service:/etc/systemd/system/lifecycled.service \
  --bind-ro=$LAB/units/lifecycled.socket:/etc/systemd/system/lifecycled.socket \
  --bind=$LAB/shared:/lab \
  -b systemd.firstboot=off" > $LAB/$NAME.console 2>&1 < /dev/null &
NSPID=$!
echo $NSPID > $LAB/$NAME.nspawn.pid
for i in $(seq 150); do
  P=$(pgrep -P $NSPID -x systemd || true)
  if [ -n "$P" ]; then
    S=$(nsenter -t $P -a systemctl is-system-running 2>/dev/null || true)
    case "$S" in running|degraded) echo $P > $LAB/$NAME.pid; echo "leader=$P state=$S after ~$((i*200))ms cgroup=$(grep ^0:: /proc/$P/cgroup)"; exit 0;; esac
  fi
  sleep 0.2
done
echo "timeout"; exit 1
