#!/bin/bash
# Scope PartOf=+Before= the service: on stop, does the service finish first?
SVC=ordsvc.service
systemd-run --quiet --unit ordsvc -p KillMode=mixed -p Delegate=yes bash -c 'trap "echo got TERM, 2 s of cleanup; sleep 2; echo daemon done; exit 0" TERM; while :; do sleep 0.1; done'
setsid systemd-run --quiet --scope --unit ord-apps -p PartOf=$SVC -p Before=$SVC -p Delegate=yes sleep infinity </dev/null >/dev/null 2>&1 &
sleep 0.5
systemctl stop $SVC
journalctl -u $SVC -u ord-apps.scope -o short-precise --no-pager --since=-4s
