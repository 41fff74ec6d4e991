#!/usr/bin/env bash
# Inside the virtual machine of scripts/vm.sh, before the command: the swap
# device and zswap when asked for, a line of facts about the guest, then the
# command with LIFECYCLED_VM=1 (the tests that need the guest check it).
# The cgroup root is left as the kernel booted it (no controller enabled
# below it): enabling what it needs is the daemon's job, and tested.
set -euo pipefail
[[ ${LIFECYCLED_VM_SYSTEMD:-0} = 1 ]] || touch "$LIFECYCLED_VM_MARK/booted"  # else the init did
if [[ -n ${LIFECYCLED_VM_SWAP:-} ]]; then
    mkswap -q "$LIFECYCLED_VM_SWAP" >/dev/null
    swapon "$LIFECYCLED_VM_SWAP"
fi
if [[ ${LIFECYCLED_VM_ZSWAP:-0} = 1 ]]; then
    echo lzo >/sys/module/zswap/parameters/compressor
    echo 20 >/sys/module/zswap/parameters/max_pool_percent
    echo Y >/sys/module/zswap/parameters/enabled
fi
echo "guest: $(uname -r), $(nproc) CPUs, $(awk '/MemTotal/{print int($2/1024)}' /proc/meminfo) MiB," \
    "swap $(awk '/SwapTotal/{print int($2/1024)}' /proc/meminfo) MiB, zswap $(cat /sys/module/zswap/parameters/enabled)," \
    "cgroup2 controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
export LIFECYCLED_VM=1
exec "$@"
