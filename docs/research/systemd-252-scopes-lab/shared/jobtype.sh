#!/bin/bash
# On SIGTERM, ask systemd which job is running on our unit: restart or stop?
U=${UNIT:-fakejob.service}
P=/org/freedesktop/systemd1/unit/$(echo "$U" | sed 's/\./_2e/g; s/-/_2d/g')
onterm() {
  J=$(busctl get-property org.freedesktop.systemd1 $P org.freedesktop.systemd1.Unit Job)
  JP=${J##* }; JP=${JP//\"/}
  T=$(busctl get-property org.freedesktop.systemd1 "$JP" org.freedesktop.systemd1.Job JobType 2>&1)
  echo "SIGTERM: Job=[$J] JobType=[$T]"
  exit 0
}
trap onterm TERM
echo started; while :; do sleep 0.1; done
