#!/bin/sh
# PID 1 of a guest that boots a real systemd (scripts/vm.sh --systemd):
# this machine's root, read-only over 9p, under a throwaway overlay, then
# systemd itself, which runs the payload named on the kernel command line
# (systemd.run=) and powers off.
#
# Why not `vng --systemd`: this machine's root has /.dockerenv, so systemd
# takes itself for a container and ignores the kernel command line
# (systemd.run, vng's own units), and the guest waits at a login prompt
# nobody sees. Removing the file in the overlay is enough.
#
# From scripts/vm.sh's kernel command line, in this script's environment:
# lc_vm_out (its --out: shared read-write, mounted at the same path) and
# lc_vm_oomd (1 for --oomd: systemd-oomd is left enabled, for the
# benchmark's systemd-oomd arms; masked otherwise).
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
mount -t tmpfs -o mode=0755 lc-vm-root /mnt || exec /bin/sh
mkdir -p /mnt/upper /mnt/work /mnt/root
mount -t overlay overlay -o lowerdir=/,upperdir=/mnt/upper,workdir=/mnt/work /mnt/root || exec /bin/sh
R=/mnt/root
rm -f $R/.dockerenv
: >$R/etc/fstab
# What this machine enables that a test guest must not run: other OOM
# killers, servers, gettys, timers.
OOMD=""
[ "${lc_vm_oomd:-0}" = 1 ] || OOMD="systemd-oomd.service systemd-oomd.socket"
for u in earlyoom.service $OOMD postgresql.service postgresql@.service \
    getty@.service serial-getty@.service console-getty.service apt-daily.timer apt-daily-upgrade.timer \
    man-db.timer e2scrub_all.timer e2scrub_reap.service dpkg-db-backup.timer systemd-tmpfiles-clean.timer \
    fstrim.timer systemd-timesyncd.service systemd-pstore.service apparmor.service \
    lifecycled.service lifecycled.socket; do
    ln -sf /dev/null $R/etc/systemd/system/$u
done
mount -t tmpfs -o mode=1777 tmpfs $R/tmp
# The results directory (vng --rwdir, the first: tag virtme.initmount0).
mkdir -p $R/vm-out
mount -t 9p -o trans=virtio,version=9p2000.L,access=any virtme.initmount0 $R/vm-out || exec /bin/sh
if [ -n "${lc_vm_out:-}" ]; then
    mkdir -p "$R$lc_vm_out"
    mount -t 9p -o trans=virtio,version=9p2000.L,access=any virtme.initmount1 "$R$lc_vm_out" || exec /bin/sh
fi
touch $R/vm-out/booted
cd $R && mkdir -p oldroot && pivot_root . oldroot || exec /bin/sh
exec chroot . /bin/sh -c 'umount -l /oldroot; rmdir /oldroot 2>/dev/null; exec /lib/systemd/systemd "$@"' systemd "$@"
