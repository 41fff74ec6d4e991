#!/bin/bash
# A stand-in for lifecycled: from its service cgroup, clone an "app" into the scope.
M=$(grep -m1 ' - cgroup2 ' /proc/self/mountinfo | cut -d' ' -f5)
S=$M${SCOPE:-/system.slice/lifecycled-apps.scope}
N=fake.$$; mkdir -p $S/apps/$N
P=$(/lab/cgclone $S/apps/$N sleep 2000)
echo "fake daemon $$ in $(grep ^0:: /proc/self/cgroup) cloned $P into $S/apps/$N"
exec sleep infinity
