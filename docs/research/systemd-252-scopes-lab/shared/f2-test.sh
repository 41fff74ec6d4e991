#!/bin/bash
# fake2 with APPS=scope under KillMode=$1: kill -9, restart, then report.
KM=$1; U=f2$KM
systemd-run --quiet --unit $U -p Delegate=yes -p KillMode=$KM -p Restart=on-failure -p RestartSec=100ms -p StartLimitIntervalSec=0 -E APPS=scope /lab/fake2.sh; sleep 0.5
kill -9 $(systemctl show -p MainPID --value $U); sleep 1
systemctl restart $U; sleep 0.5
journalctl -u $U -o short-precise --no-pager | cut -c8-
systemctl show $U -p NRestarts -p ActiveState -p SubState -p ExecMainStatus | tr '\n' ' '; echo
systemd-cgls --no-pager -u $U.service; systemd-cgls --no-pager -u lifecycled-apps.scope
systemctl stop $U
