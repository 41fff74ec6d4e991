#!/usr/bin/env bash
# Installs the system packages lifecycled needs to build and test, when they
# are missing: libsystemd-dev (sd-event, sd-daemon, sd-journal) with
# pkg-config, gcc (the C shim's tests), systemd's tools (systemd-analyze,
# systemd-socket-activate) and setpriv (util-linux). Debian and Ubuntu.
set -euo pipefail

need=()
pkg-config --exists libsystemd 2>/dev/null || need+=(libsystemd-dev pkg-config)
command -v gcc >/dev/null || need+=(gcc)
command -v systemd-analyze >/dev/null || need+=(systemd)
command -v systemd-socket-activate >/dev/null || need+=(systemd)
command -v setpriv >/dev/null || need+=(util-linux)

if ((${#need[@]})); then
    echo "installing: ${need[*]}"
    if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
