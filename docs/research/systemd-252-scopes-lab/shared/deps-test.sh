#!/bin/bash
# Which dependency from a transient scope to the service survives what?
SVC=depsvc.service
systemctl reset-failed $SVC 2>/dev/null
systemctl stop $SVC 2>/dev/null
setup() {
  systemd-run --quiet --unit depsvc -p KillMode=mixed -p Delegate=yes -p Restart=on-failure -p RestartSec=100ms sleep infinity
  for d in none BindsTo PartOf StopPropagatedFrom Requisite; do
    systemctl is-active --quiet dep-$d.scope && continue
    if [ $d = none ]; then P=(); else P=(-p "$d=$SVC" -p "After=$SVC"); fi
    setsid systemd-run --quiet --scope --unit dep-$d "${P[@]}" -p Delegate=yes sleep infinity </dev/null >/dev/null 2>&1 &
  done
  sleep 0.5
}
report() { echo "after $1:"; for d in none BindsTo PartOf StopPropagatedFrom Requisite; do printf '  %-20s %s\n' $d "$(systemctl is-active dep-$d.scope)"; done; }
setup; report setup
kill -9 $(systemctl show -p MainPID --value $SVC); sleep 1; report "kill -9 (auto-restart)"
setup; systemctl restart $SVC; sleep 0.5; report "systemctl restart"
setup; systemctl stop $SVC; sleep 0.5; report "systemctl stop"
for d in none BindsTo PartOf StopPropagatedFrom Requisite; do systemctl stop dep-$d.scope 2>/dev/null; done
