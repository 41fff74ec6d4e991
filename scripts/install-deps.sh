#!/usr/bin/env bash
# Installs the system packages lifecycled needs to build and test, when they
# are missing: libsystemd-dev (sd-event, sd-daemon, sd-journal) with
# pkg-config, libsqlite3-dev and sqlite3 (the state kept for the next daemon,
# and a test that another process cannot read it), gcc (the
# C shim's tests), systemd's tools (systemd-analyze, systemd-socket-activate,
# systemd-notify), systemd-nspawn (the tests under a real systemd), setpriv
# (util-linux) and python3 (the Python example app and test programs).
# Debian and Ubuntu.
set -euo pipefail

need=()
pkg-config --exists libsystemd 2>/dev/null || need+=(libsystemd-dev pkg-config)
[[ -e /usr/include/sqlite3.h ]] || need+=(libsqlite3-dev)
command -v sqlite3 >/dev/null || need+=(sqlite3)
command -v gcc >/dev/null || need+=(gcc)
command -v systemd-analyze >/dev/null || need+=(systemd)
command -v systemd-socket-activate >/dev/null || need+=(systemd)
command -v setpriv >/dev/null || need+=(util-linux)
command -v systemd-notify >/dev/null || need+=(systemd)
command -v systemd-nspawn >/dev/null || need+=(systemd-container)
command -v python3 >/dev/null || need+=(python3)

if ((${#need[@]})); then
    echo "installing: ${need[*]}"
    if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
