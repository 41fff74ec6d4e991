#!/usr/bin/env bash
# Runs a command in a virtual machine that boots this machine's own root
# (read-only over 9p, with QEMU and virtme-ng) on Debian's kernel: pure
# cgroup v2 with the memory, cpu, io and pids controllers and PSI, which is
# what Debian 11+, Ubuntu 21.10+, Fedora and current embedded systems run,
# and what a hybrid host like our development machine cannot show. The
# guest's /tmp, /etc, /var and /usr are throwaway overlays; everything else
# is the host's, read-only, so the build under test is used as it is.
#
# usage: scripts/vm.sh [options] [--] COMMAND [ARG...]
#   --memory SIZE   guest RAM (default 1G)
#   --cpus N        guest CPUs (default 2)
#   --swap SIZE     a swap device of SIZE in the guest (a sparse file here, /dev/vda there)
#   --zswap         zswap in front of that swap device (needs --swap)
#   --timeout S     hard limit on the whole run, boot included (default 600)
#   --out DIR       shared read-write with the guest, at the same path (results)
#   --systemd       boot a real systemd as PID 1 (Tests/vm/systemd-init.sh), which
#                   runs the command as a service (systemd.run=) and powers off;
#                   the guest's /tmp is then a fresh tmpfs (--out still works)
#   --oomd          with --systemd: leave systemd-oomd enabled (it is masked
#                   otherwise, like every other OOM killer of this root)
# Inside, the command runs as root with LIFECYCLED_VM=1 and LIFECYCLED_VM_OUT=DIR
# in its environment (Tests/vm/guest.sh says what it sets up first).
#
# Exit status: the command's; 124 when the guest did not finish within
# --timeout (it is killed: a hung guest is a failure, never a hang); 125 when
# no guest could be booted at all (said loudly, with why).
#
# KVM is used where it boots (a 20 s probe, remembered until the host
# reboots); otherwise TCG, software emulation, about 10x slower. On our
# development machine a KVM guest hangs at boot, so TCG it is.
# LIFECYCLED_VM_ACCEL=kvm|tcg forces one.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

MEMORY=1G CPUS=2 SWAP="" ZSWAP=0 TIMEOUT=600 OUT="" SYSTEMD=0 OOMD=0
while (($#)); do
    case "$1" in
    --memory) MEMORY=$2; shift 2 ;;
    --cpus) CPUS=$2; shift 2 ;;
    --swap) SWAP=$2; shift 2 ;;
    --zswap) ZSWAP=1; shift ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --out) OUT=$(realpath -m "$2"); shift 2 ;;
    --systemd) SYSTEMD=1; shift ;;
    --oomd) OOMD=1; shift ;;
    --) shift; break ;;
    -*) echo "vm.sh: unknown option $1 (see the header of scripts/vm.sh)" >&2; exit 64 ;;
    *) break ;;
    esac
done
(($#)) || { echo "vm.sh: no command to run in the guest" >&2; exit 64; }
[[ $ZSWAP = 0 || -n $SWAP ]] || { echo "vm.sh: --zswap needs --swap (zswap is a cache in front of a swap device)" >&2; exit 64; }
[[ $OOMD = 0 || $SYSTEMD = 1 ]] || { echo "vm.sh: --oomd needs --systemd (systemd-oomd runs under systemd only)" >&2; exit 64; }
[[ $OUT =~ ^[A-Za-z0-9_+./-]*$ ]] || { echo "vm.sh: --out $OUT: only letters, digits and _+./- can be passed to the guest (virtme's rule)" >&2; exit 64; }
[[ $(id -u) = 0 ]] || { echo "vm.sh: needs root (the guest's kernel image in /boot is readable by root only)" >&2; exit 64; }

scripts/install-deps.sh --vm

fail_boot() {
    echo "vm.sh: CANNOT BOOT A VIRTUAL MACHINE HERE: $*" >&2
    echo "vm.sh: the pure cgroup v2 stage did not run; this is a failure, not a pass" >&2
    exit 125
}

KERNEL=$(ls /boot/vmlinuz-* 2>/dev/null | sort -V | tail -n 1 || true)
[[ -n $KERNEL ]] || fail_boot "no kernel in /boot (scripts/install-deps.sh --vm installs linux-image-amd64)"
VERSION=${KERNEL#/boot/vmlinuz-}
[[ -d /lib/modules/$VERSION ]] || fail_boot "no modules for $VERSION in /lib/modules"
VNG=$(command -v vng) || fail_boot "vng (virtme-ng) is not on PATH"

LAB=$(mktemp -d /tmp/lifecycled-vm.XXXXXX)
GUEST_PIDS=()
cleanup() {
    for p in "${GUEST_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    rm -rf "$LAB"
}
trap cleanup EXIT

# The accelerator: KVM when a guest really boots with it, else TCG.
accel() {
    [[ -n ${LIFECYCLED_VM_ACCEL:-} ]] && { echo "$LIFECYCLED_VM_ACCEL"; return; }
    local memo=/tmp/lifecycled-vm-accel.$(cat /proc/sys/kernel/random/boot_id)
    [[ -s $memo ]] && { cat "$memo"; return; }
    local found=tcg
    if [[ -w /dev/kvm ]] && timeout --kill-after=5 20 "$VNG" --run "$KERNEL" --force-9p --memory 256M --cpus 1 \
        --exec true </dev/null >/dev/null 2>&1; then
        found=kvm
    fi
    echo "$found" >"$memo"
    echo "$found"
}
ACCEL=$(accel)
ARGS=(--run "$KERNEL" --force-9p --memory "$MEMORY" --cpus "$CPUS" --cwd "$PWD")
[[ $ACCEL = kvm ]] || ARGS+=(--disable-kvm)

if [[ -n $SWAP ]]; then
    truncate -s "$SWAP" "$LAB/swap.img"
    ARGS+=(--disk "$LAB/swap.img")
fi
# The command, quoted for the guest's shell.
COMMAND=$(printf '%q ' "$@")
ENVIRONMENT="LIFECYCLED_VM_SWAP=${SWAP:+/dev/vda} LIFECYCLED_VM_ZSWAP=$ZSWAP LIFECYCLED_VM_OUT=$OUT"
mkdir -p "$LAB/mark"
if ((SYSTEMD)); then
    # The mark directory is the guest's /vm-out (its first --rwdir); systemd
    # runs run.sh as a service and powers off, whatever its status, which
    # comes back in a file.
    cat >"$LAB/mark/run.sh" <<RUN
#!/bin/bash
cd $(printf '%q' "$PWD")
{ $ENVIRONMENT LIFECYCLED_VM_MARK=/vm-out LIFECYCLED_VM_SYSTEMD=1 $ROOT/Tests/vm/guest.sh $COMMAND; echo \$? >/vm-out/status; } 2>&1 |
    tee /vm-out/log >/dev/console
RUN
    chmod +x "$LAB/mark/run.sh"
    # Unknown NAME=VALUE arguments reach the init in its environment.
    APPEND="console=ttyS0 quiet loglevel=3 panic=-1 init=$ROOT/Tests/vm/systemd-init.sh systemd.show_status=0"
    APPEND+=" lc_vm_oomd=$OOMD lc_vm_out=$OUT"
    APPEND+=" systemd.run=/vm-out/run.sh systemd.run_success_action=poweroff-force"
    APPEND+=" systemd.run_failure_action=poweroff-force"
    # QEMU keeps the last -append: this one, not vng's (whose init would run the command instead).
    ARGS+=(--rwdir "$LAB/mark")
    if [[ -n $OUT ]]; then
        mkdir -p "$OUT"
        ARGS+=(--rwdir "$OUT")  # the second: tag virtme.initmount1, mounted at the same path by the init
    fi
    ARGS+=(--systemd "--qemu-opts=-no-reboot -append '$APPEND'")
else
    if [[ -n $OUT ]]; then
        mkdir -p "$OUT"
        ARGS+=(--rwdir "$OUT")
    fi
    ARGS+=(--rwdir "$LAB/mark" --exec "$ENVIRONMENT LIFECYCLED_VM_MARK=$LAB/mark $ROOT/Tests/vm/guest.sh $COMMAND")
fi

ZNOTE=""
((ZSWAP)) && ZNOTE=", zswap"
echo "vm.sh: $VERSION, $MEMORY, $CPUS CPUs, $ACCEL${SWAP:+, swap $SWAP}$ZNOTE, at most $TIMEOUT s"
# stdin from /dev/null: vng otherwise wires the terminal to the guest. Its
# output through a pipe: QEMU reopens /proc/self/fd/1, which for a file
# would write from its start, over what is already there. QEMU's warning
# about the swap image's format (raw, as meant) is left out.
set +e
timeout --kill-after=15 "$TIMEOUT" "$VNG" "${ARGS[@]}" </dev/null 2>&1 |
    grep --line-buffered -v -e "Image format was not specified" -e "Automatically detecting the format" \
        -e "Specify the 'raw' format explicitly"
status=${PIPESTATUS[0]}
set -e
if [[ ! -e $LAB/mark/booted ]]; then
    ((status == 124)) && fail_boot "the guest did not reach its command within $TIMEOUT s ($ACCEL)"
    fail_boot "the guest never ran its command (vng exited with $status, $ACCEL)"
fi
if ((status == 124 || status == 137)); then
    echo "vm.sh: FAILED: the guest did not finish within $TIMEOUT s: killed" >&2
    exit 124
fi
if ((SYSTEMD)); then
    [[ -s $LAB/mark/status ]] || { echo "vm.sh: FAILED: the command under systemd never finished" >&2; exit 1; }
    status=$(cat "$LAB/mark/status")
fi
exit "$status"
