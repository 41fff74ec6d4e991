#!/bin/bash
# Remove the (empty) cgroups nspawn leaves on the host: /nspawn-lab-* (boot.sh) and the
# default /payload and /supervisor, in the v2 tree and in name=systemd; depth first.
for top in /sys/fs/cgroup/unified /sys/fs/cgroup/systemd /sys/fs/cgroup; do
  [ -d $top ] || continue
  for d in $top/nspawn-lab-* $top/payload $top/supervisor; do
    [ -d "$d" ] || continue
    find "$d" -depth -type d | while read -r c; do
      p=$(cat "$c/cgroup.procs" 2>/dev/null)
      [ -n "$p" ] && { echo "not empty, left alone: $c ($p)"; continue; }
      rmdir "$c" && echo "removed $c"
    done
  done
done
