#!/bin/sh
# /init of the kit's POWER guest (kit/powerguest.py): a Debian ppc64el
# userspace, the lab in /lab, the kit's work folder of the boot before in
# /work. Mounts what the kit reads, runs /kit/run.sh, prints /work as a
# base64 tar.gz between two marks for the host, and powers the machine off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
export LANG=C.UTF-8
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t debugfs debugfs /sys/kernel/debug
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t bpf bpf /sys/fs/bpf
mount -t cgroup2 cgroup2 /sys/fs/cgroup
ip link set lo up
# The console is a tty: tools that ask for one (perf, bpftrace) have it.
sh /kit/run.sh < /dev/console > /dev/console 2>&1
# The kernel's messages would land among the lines the host decodes.
dmesg -n 1
echo "@@kit-results-begin@@"
tar -C /work -czf - . | base64 -w 76
echo "@@kit-results-end@@"
/bin/busybox poweroff -f
