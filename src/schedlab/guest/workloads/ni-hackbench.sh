#!/bin/bash
# Newly idle balancing against NI_RANDOM/NI_RATE (docs/results/newidle-ni-screen-smt8.md):
# hackbench processes over sockets, one group of 40 per 4 CPUs (10 tasks per
# CPU), started again until $SECS of guest time have passed, so that the
# window is about the same on every topology (one fixed-size run took 0.3 s
# on icount smt4 and 2 s on smt8).  Every round is 20 loops, each sender
# sending to every receiver: 8,000 messages per group.  NCPU and SECS come
# from the plan runner.  Prints "ni-hackbench: ROUNDS MESSAGES SECONDS".
set -u
G=$(( NCPU >= 8 ? NCPU / 4 : 2 ))
LOOPS=20
start=$(date +%s%N)
end=$(( start + SECS * 1000000000 ))
rounds=0
while :; do
	hackbench -g "$G" -l "$LOOPS" >/dev/null || exit 1
	rounds=$(( rounds + 1 ))
	[ "$(date +%s%N)" -lt "$end" ] || break
done
stop=$(date +%s%N)
awk -v r="$rounds" -v m="$(( rounds * G * 400 * LOOPS ))" -v ns="$(( stop - start ))" \
	'BEGIN { printf "ni-hackbench: %d %d %.3f\n", r, m, ns / 1e9 }'
