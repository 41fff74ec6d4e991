#!/usr/bin/env bash
# Installs the system packages lifecycled needs to build and test, when they
# are missing: libsystemd-dev (sd-event, sd-daemon, sd-journal) with
# pkg-config, libsqlite3-dev and sqlite3 (the state kept for the next daemon,
# and a test that another process cannot read it), gcc (the
# C shim's tests), systemd's tools (systemd-analyze, systemd-socket-activate,
# systemd-notify), systemd-nspawn (the tests under a real systemd), setpriv
# (util-linux), python3 (the Python example app and test programs), and for
# the D-Bus tests dbus-daemon, gdbus, dbus-python with GLib, and polkitd;
# for the compositor tests sway, weston (weston-flower), foot, wl-clipboard,
# fuzzel (a launcher), and PipeWire with WirePlumber (pipewire-bin, wireplumber).
# Debian and Ubuntu.
#
# With --vm, only what the virtual machine of scripts/vm.sh needs: QEMU,
# Debian's kernel (linux-image-amd64, whose modules the guest loads from
# this root), busybox for virtme-ng's initramfs, and virtme-ng itself
# (from PyPI: Debian 12 has no package of it).
set -euo pipefail

need=()
if [[ ${1:-} = --vm ]]; then
    command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
    ls /boot/vmlinuz-* >/dev/null 2>&1 || need+=(linux-image-amd64)
    command -v busybox >/dev/null || need+=(busybox-static)
    command -v python3 >/dev/null || need+=(python3 python3-pip)
else
    pkg-config --exists libsystemd 2>/dev/null || need+=(libsystemd-dev pkg-config)
    [[ -e /usr/include/sqlite3.h ]] || need+=(libsqlite3-dev)
    command -v sqlite3 >/dev/null || need+=(sqlite3)
    command -v gcc >/dev/null || need+=(gcc)
    command -v systemd-analyze >/dev/null || need+=(systemd)
    command -v systemd-socket-activate >/dev/null || need+=(systemd)
    command -v setpriv >/dev/null || need+=(util-linux)
    command -v systemd-notify >/dev/null || need+=(systemd)
    command -v systemd-nspawn >/dev/null || need+=(systemd-container)
    command -v dpkg-shlibdeps >/dev/null || need+=(dpkg-dev)  # the package's Depends
    command -v python3 >/dev/null || need+=(python3)
    # The D-Bus tests: a private bus daemon, busctl (systemd), gdbus, and a
    # Python shell on dbus-python with GLib.
    command -v dbus-daemon >/dev/null || need+=(dbus-daemon)
    command -v gdbus >/dev/null || need+=(libglib2.0-bin)
    /usr/bin/python3 -c 'import dbus, gi' 2>/dev/null || need+=(python3-dbus python3-gi)
    [[ -x /usr/lib/polkit-1/polkitd ]] || need+=(polkitd)
    # The compositor tests (docs/focus.md): a headless sway, and Wayland
    # clients that draw there (weston-flower).
    command -v sway >/dev/null || need+=(sway)
    command -v weston-flower >/dev/null || need+=(weston)
    command -v foot >/dev/null || need+=(foot)
    command -v wl-copy >/dev/null || need+=(wl-clipboard)
    command -v fuzzel >/dev/null || need+=(fuzzel)
    # The PipeWire hold: a real PipeWire and WirePlumber, and pw-dump, pw-play.
    command -v pw-dump >/dev/null || need+=(pipewire-bin)
    command -v wireplumber >/dev/null || need+=(wireplumber)
fi

if ((${#need[@]})); then
    echo "installing: ${need[*]}"
    if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [[ ${1:-} = --vm ]] && ! command -v vng >/dev/null; then
    echo "installing: virtme-ng (pip)"
    python3 -m pip install -q virtme-ng 2>/dev/null || python3 -m pip install -q --break-system-packages virtme-ng
    hash -r
    command -v vng >/dev/null || { echo "install-deps.sh: virtme-ng is installed, but vng is not on PATH" >&2; exit 1; }
fi
