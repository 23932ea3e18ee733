#!/bin/sh
# /init of the POWER guest's initramfs: a static busybox, this script and the
# lab's topology probe. Mounts what the probe reads, runs it between the two
# marks the host splits the console at, shows cpu0's sched domains (name and
# flags, from debugfs) and powers the machine off.
/bin/busybox mkdir -p /bin /proc /sys /dev /tmp
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug
echo "@@schedlab-guest-begin@@"
sh /topology-probe.sh
echo "@@schedlab-topology-end@@"
for d in /sys/kernel/debug/sched/domains/cpu0/domain[0-9]*; do
  [ -r "$d/name" ] && echo "cpu0 ${d##*/}: $(cat "$d/name") flags: $(cat "$d/flags")"
done
echo "uname: $(uname -r -m)"
poweroff -f
