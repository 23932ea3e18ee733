#!/bin/bash
# Load for the data-race detector (configs/kcsan.config,
# docs/reliability-notes.md): more runnable tasks than CPUs, so that busy balancing at
# every level moves tasks (the writers and the generation bumps of the
# cached group statistics) while other CPUs balance (the readers), with
# hackbench rounds for wakeups and short sleeps, for SECS seconds.  Then
# KCSAN's counters, every report's title since boot with its count, and in
# full the reports that touch load balancing.
#
# usage: kcsan-load.sh [SECS]    (in the guest: ./schedlab vm --config kcsan)
set -u
secs=${1:-600}
n=$(nproc)
dbg=/sys/kernel/debug
mountpoint -q $dbg || mount -t debugfs none $dbg
if ! [ -r $dbg/kcsan ]; then
	echo "kcsan-load: no $dbg/kcsan: not a KCSAN kernel" >&2
	exit 2
fi
cd /tmp || exit 1	# stress-ng needs a writable working folder
echo "kcsan-load: $n CPUs, $secs s; features: $(cat $dbg/sched/features)"
echo "kcsan-load: counters before"; cat $dbg/kcsan

stress-ng --cpu $(( n + n / 2 )) --timeout "${secs}s" --metrics-brief > stress.out 2>&1 &
load=$!
end=$(( SECONDS + secs ))
rounds=0
while [ $SECONDS -lt $end ]; do
	hackbench -g 2 -l 20 > /dev/null 2>&1 && rounds=$(( rounds + 1 ))
	sleep 1
done
wait $load
rc=$?
echo "kcsan-load: stress-ng exited $rc, hackbench rounds $rounds"
[ $rc = 0 ] || tail -5 stress.out

echo "kcsan-load: counters after"; cat $dbg/kcsan
log=$(dmesg)
echo "kcsan-load: reports by title:"
grep -o 'BUG: KCSAN: .*' <<< "$log" | sort | uniq -c | sort -rn
# A report runs from its 'BUG: KCSAN' line to the closing '====' line.
lb='sg_lb_cache|update_sg_lb_stats|update_sd_lb_stats|sched_balance_find_src_group|sched_balance_rq|attach_tasks|active_load_balance'
balancing=$(awk -v lb="$lb" '
	/BUG: KCSAN:/ { inr = 1; block = "" }
	inr { block = block $0 "\n" }
	inr && /==========/ { inr = 0; if (block ~ lb) { n++; printf "%s", block } }
	END { print "kcsan-load: " n + 0 " reports touch load balancing" }' <<< "$log")
echo "$balancing"
