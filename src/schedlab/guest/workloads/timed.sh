#!/bin/bash
# A fixed amount of work started again and again until $SECS seconds have
# passed (SECS from the plan runner), so that one run lasts as long on a
# large machine as on a small one.
#   timed.sh LABEL UNIT PER_ROUND COMMAND...
# PER_ROUND: the UNITs one round of COMMAND does (messages, round trips).
# Prints "timed: LABEL UNIT ROUNDS COUNT SECONDS OWN": SECONDS by the wall
# clock over every round, OWN the sum of the times COMMAND reports itself
# ("Time: S" of hackbench, "Total time: S [sec]" of perf bench: its work
# without its tasks' start and exit), 0 where it reports none.  A round
# that fails ends the run with its status and prints nothing.
set -u
label=$1 unit=$2 per=$3
shift 3
start=$(date +%s%N)
end=$(( start + SECS * 1000000000 ))
rounds=0
own=0
while :; do
	out=$("$@") || exit
	own=$(awk -v sum="$own" '/^ *(Total time|Time):/ { t = $2 == "time:" ? $3 : $2 }
		END { printf "%.6f", sum + t }' <<< "$out")
	rounds=$(( rounds + 1 ))
	[ "$(date +%s%N)" -lt "$end" ] || break
done
stop=$(date +%s%N)
awk -v l="$label" -v u="$unit" -v r="$rounds" -v c="$(( rounds * per ))" \
	-v ns="$(( stop - start ))" -v own="$own" \
	'BEGIN { printf "timed: %s %s %d %d %.3f %.3f\n", l, u, r, c, ns / 1e9, own }'
