#!/bin/bash
# The guest's view of its topology, one 'key value' line per fact; parsed by
# topology.parse_guest_report() on the host.
set -u
echo "nproc $(nproc)"
echo "possible $(cat /sys/devices/system/cpu/possible)"
echo "online $(cat /sys/devices/system/cpu/online)"
for d in /sys/devices/system/cpu/cpu[0-9]*; do
  c=${d##*cpu}
  [ -r "$d/topology/thread_siblings_list" ] || continue
  echo "cpu $c $(cat "$d/topology/thread_siblings_list") $(cat "$d/topology/core_id") $(cat "$d/topology/physical_package_id")"
done
for n in /sys/devices/system/node/node[0-9]*; do
  [ -d "$n" ] && echo "node ${n##*node} $(cat "$n/cpulist")"
done
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug 2>/dev/null
[ -w /sys/kernel/debug/sched/verbose ] && echo Y > /sys/kernel/debug/sched/verbose
for d in /sys/kernel/debug/sched/domains/cpu0/domain[0-9]*; do
  [ -r "$d/name" ] && echo "domain ${d##*domain} $(cat "$d/name")"
done
exit 0
