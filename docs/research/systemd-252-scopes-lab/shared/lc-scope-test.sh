#!/bin/bash
# The unmodified lifecycled with --cgroup-root pointing at the delegated scope (the daemon then
# moves itself into SCOPE/daemon): kill -9 and watchdog with apps running.
mkdir -p /etc/systemd/system/lifecycled.service.d
cat > /etc/systemd/system/lifecycled.service.d/scope.conf <<EOT
[Service]
ExecStart=
ExecStart=/opt/x/lifecycled --config /etc/lifecycled/lifecycled.toml --cgroup-root /system.slice/lifecycled-apps.scope
EOT
systemctl daemon-reload; systemctl restart lifecycled; sleep 0.3
/opt/x/supervisorctl activate recorder >/dev/null; /opt/x/supervisorctl launch --background worker >/dev/null; sleep 0.3
/opt/x/supervisorctl status | head -4
echo "--- kill -9 at $(date +%T.%N)"
kill -9 $(systemctl show -p MainPID --value lifecycled); sleep 1.5
journalctl -u lifecycled -u lifecycled-apps.scope -o short-precise --no-pager --since=-2s | cut -c8-
/opt/x/supervisorctl status | head -4
echo "--- SIGSTOP at $(date +%T.%N)"
kill -STOP $(systemctl show -p MainPID --value lifecycled); sleep 13
journalctl -u lifecycled -u lifecycled-apps.scope -o short-precise --no-pager --since=-14s | grep -v ']: /' | cut -c8-
/opt/x/supervisorctl status | head -4
systemd-cgls --no-pager -u lifecycled-apps.scope
