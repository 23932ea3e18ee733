#!/bin/bash
# Task-group gathering (issue: task-group-idle wakeup placement): a group of
# tasks that wake each other, in a cgroup v2 group at depth 1 or 2, while
# other groups keep every CPU busy; what the group gets against what it is
# entitled to.  Usage:
#   tg-gather.sh WAKER DEPTH SHARE TASKS [LOAD]
#     WAKER  dbench | hackbench (threads over pipes, each sender to every
#            receiver) | fifo (one writer, TASKS-1 readers) | pipeherd (100
#            processes on one pipe) | switch (TASKS/2 ping-pong pairs) |
#            cpu (TASKS CPU hogs, no wakeups: the control, whose CPU time
#            should match its entitlement)
#     DEPTH  1 or 2: the depth of the group's tasks (p->se.depth)
#     SHARE  seed: default weights everywhere (at depth 2 the group has two
#            busy siblings in its parent: a third of the depth-1 share, as in
#            the 2014 report); or a number of CPUs: weights chosen so that
#            the group is entitled to that many CPUs at either depth (at
#            depth 2 the group is the only child of its parent: the same
#            weights one level deeper)
#     TASKS  the group's task count (ignored by pipeherd)
#     LOAD   runnable tasks per CPU in all (the group's and the hogs of the
#            busy groups, which split the rest evenly, one hog each at least),
#            e.g. 1, 1.5 or 2; default: NCPU hogs in every busy group
# NCPU and SECS come from the plan runner.  Layout (all weights 100 unless
# chosen): depth 1: /schedlab-g, /schedlab-b1, /schedlab-b2; depth 2:
# /schedlab-p/g (+ /schedlab-p/c1, /schedlab-p/c2 when SHARE is seed),
# /schedlab-b1, /schedlab-b2.  Every busy group runs NCPU CPU hogs, or its
# part of LOAD.
# Prints "tg: KEY VALUE" lines, the probe's maps (guest/bt/tg.bt) and the
# waker's own output; parsers.tg_gather() turns them into metrics.
set -u
waker=${1:?usage: tg-gather.sh WAKER DEPTH SHARE TASKS}
depth=${2:?usage: tg-gather.sh WAKER DEPTH SHARE TASKS}
share=${3:?usage: tg-gather.sh WAKER DEPTH SHARE TASKS}
tasks=${4:?usage: tg-gather.sh WAKER DEPTH SHARE TASKS}
load=${5:-}
: "${NCPU:?} ${SECS:?}"
here=$(cd "$(dirname "$0")" && pwd)
cgr=/sys/fs/cgroup
warmup=5

die() { echo "tg-gather: $*" >&2; exit 2; }
case $waker in dbench|hackbench|fifo|pipeherd|switch|cpu) ;; *) die "unknown waker $waker" ;; esac
case $depth in 1|2) ;; *) die "depth must be 1 or 2, not $depth" ;; esac
if ! [[ $tasks =~ ^[0-9]+$ ]] || (( tasks < 2 )); then die "TASKS must be 2 or more, not $tasks"; fi
[[ $share = seed || $share =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "SHARE must be seed or CPUs, not $share"
[[ -z $load || $load =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "LOAD must be a number of tasks per CPU, not $load"

# cgroup v2 with the cpu controller, or nothing to measure.
mountpoint -q "$cgr" || mount -t cgroup2 none "$cgr" 2>/dev/null
[ -e "$cgr/cgroup.controllers" ] ||
	die "no cgroup v2 hierarchy at $cgr (cgroup v1 only?): the study needs cgroup v2"
grep -qw cpu "$cgr/cgroup.controllers" ||
	die "cgroup v2 has no cpu controller here (CONFIG_FAIR_GROUP_SCHED off, or bound to v1)"

# Weights: a group of weight w beside two busy groups of 100 gets
# NCPU * w / (w + 200) CPUs when all three want more.
if [ "$share" = seed ]; then
	w=100
else
	w=$(awk -v s="$share" -v n="$NCPU" 'BEGIN {
		if (s >= n) { print "x"; exit }
		w = int(200 * s / (n - s) + 0.5); print (w < 1 ? 1 : (w > 10000 ? 10000 : w)) }')
	[ "$w" = x ] && die "SHARE $share must be below NCPU ($NCPU)"
fi

pids=()
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
	trap - EXIT INT TERM
	[ ${#pids[@]} -gt 0 ] && kill -TERM "${pids[@]}" 2>/dev/null
	sleep 1
	[ ${#pids[@]} -gt 0 ] && kill -KILL "${pids[@]}" 2>/dev/null
	wait 2>/dev/null
	local top
	for top in "$cgr"/schedlab-*; do
		[ -d "$top" ] && find "$top" -depth -type d -exec rmdir {} + 2>/dev/null
	done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo +cpu > "$cgr/cgroup.subtree_control"
mk() {	# mk GROUP WEIGHT
	if ! mkdir -p "$cgr/$1" || ! echo "$2" > "$cgr/$1/cpu.weight"; then
		die "cannot make $cgr/$1 with cpu.weight $2"
	fi
}
mk schedlab-b1 100
mk schedlab-b2 100
busy=(schedlab-b1 schedlab-b2)
if [ "$depth" = 1 ]; then
	g=schedlab-g
	mk "$g" "$w"
else
	mk schedlab-p "$w"
	echo +cpu > "$cgr/schedlab-p/cgroup.subtree_control"
	g=schedlab-p/g
	mk "$g" 100
	if [ "$share" = seed ]; then
		mk schedlab-p/c1 100
		mk schedlab-p/c2 100
		busy+=(schedlab-p/c1 schedlab-p/c2)
	fi
fi

# The hogs of each busy group: NCPU, or their part of LOAD.
if [ -z "$load" ]; then
	hogs=$NCPU
else
	hogs=$(awk -v l="$load" -v n="$NCPU" -v t="$tasks" -v b="${#busy[@]}" 'BEGIN {
		h = int((l * n - t) / b + 0.5); print (h < 1 ? 1 : h) }')
fi

# The entitlement: CPUs shared out by weight among the groups that want them,
# level by level, a group taking no more than it has tasks (a task uses one
# CPU at most) and the rest going to the others (max-min fairness by
# weight).  share_of_machine is the group's weight fraction alone, and
# entitled_by_weight what it would get if every group wanted more than that.
read -r frac by_weight entitled < <(awk -v n="$NCPU" -v t="$tasks" -v w="$w" -v d="$depth" \
	-v s="$share" -v h="$hogs" '
	# Max-min by weight of CAP over K groups: W[i] weights, D[i] demands; into A[i].
	function fill(cap, k, W, D, A,   i, left, sw, done, more) {
		for (i = 1; i <= k; i++) done[i] = 0
		left = cap
		do {
			more = 0; sw = 0
			for (i = 1; i <= k; i++) if (!done[i]) sw += W[i]
			if (sw == 0) break
			for (i = 1; i <= k; i++)
				if (!done[i] && D[i] <= left * W[i] / sw) {
					A[i] = D[i]; left -= D[i]; done[i] = 1; more = 1
				}
		} while (more)
		for (i = 1; i <= k; i++) if (!done[i]) A[i] = left * W[i] / sw
	}
	BEGIN {
		f = w / (w + 200); if (d == 2 && s == "seed") f = (1 / 3) * (100 / 300)
		W[1] = 100; W[2] = 100; W[3] = w; D[1] = h; D[2] = h
		if (d == 2 && s == "seed") {
			D[3] = t + 2 * h; fill(n, 3, W, D, A)
			V[1] = 100; V[2] = 100; V[3] = 100; E[1] = t; E[2] = h; E[3] = h
			fill(A[3], 3, V, E, B); e = B[1]
		} else {
			D[3] = t; fill(n, 3, W, D, A); e = A[3]
		}
		printf "%.4f %.4f %.4f\n", f, n * f, e }')
gid=$(stat -c %i "$cgr/$g")
echo "tg: waker $waker"
echo "tg: depth $depth"
echo "tg: group $cgr/$g"
echo "tg: cgroup_id $gid"
echo "tg: weight $w"
echo "tg: share_of_machine $frac"
echo "tg: cpus $NCPU"
echo "tg: tasks $tasks"
echo "tg: entitled_by_weight $by_weight"
echo "tg: entitled $entitled"
echo "tg: hogs_per_busy_group $hogs"

# The probe first, attached before any load (bpftrace is slow to attach
# when every vCPU is busy).
pd=$(mktemp -d /tmp/tg-gather.XXXXXX)
cp /bin/true "$pd/tg-on"
cp /bin/true "$pd/tg-off"
bpftrace "$here/../bt/tg.bt" "$gid" > "$pd/probe.txt" 2>&1 &
bt=$!
pids+=("$bt")
for _ in $(seq 300); do
	grep -q Attaching "$pd/probe.txt" && break
	kill -0 "$bt" 2>/dev/null || break
	sleep 0.5
done
grep -q Attaching "$pd/probe.txt" || { cat "$pd/probe.txt"; die "the probe did not attach"; }

for b in "${busy[@]}"; do
	(echo "$BASHPID" > "$cgr/$b/cgroup.procs" &&
	 exec stress-ng --cpu "$hogs" --cpu-load 100 --timeout $(( SECS * 20 + 120 ))s \
		> /dev/null 2>&1) &
	pids+=("$!")
done
sleep "$warmup"

usage() { awk '$1 == "usage_usec" { print $2 }' "$cgr/${1:-$g}/cpu.stat"; }
busy_usage() { local b s=0; for b in "${busy[@]}"; do s=$(( s + $(usage "$b") )); done; echo $s; }
rounds() { grep -c '^Time:' "$pd/waker.txt"; }
# The waker runs past the window (warm-up, SECS, 2 s) and stops by itself,
# so that it prints its own totals; hackbench, a fixed amount of work, runs
# in rounds until told to stop, and its rounds inside the window are counted.
runtime=$(( warmup + SECS + 2 ))
run_waker() (	# a subshell: it moves itself into the group, then execs
	echo "$BASHPID" > "$cgr/$g/cgroup.procs" || exit 1
	case $waker in
		dbench) cd /tmp && exec dbench -t "$runtime" "$tasks" ;;
		hackbench)
			while [ ! -e "$pd/stop" ]; do
				hackbench -T -p -g 1 -f $(( tasks / 2 )) -l 20 || exit
			done ;;
		fifo) exec stress-ng --fifo 1 --fifo-readers $(( tasks - 1 )) \
				--timeout "${runtime}s" --metrics-brief ;;
		pipeherd) exec stress-ng --pipeherd 1 --timeout "${runtime}s" --metrics-brief ;;
		switch) exec stress-ng --switch $(( tasks / 2 )) --timeout "${runtime}s" \
				--metrics-brief ;;
		cpu) exec stress-ng --cpu "$tasks" --cpu-load 100 --timeout "${runtime}s" \
				--metrics-brief ;;
	esac
)
run_waker > "$pd/waker.txt" 2>&1 &
wk=$!
pids+=("$wk")
sleep "$warmup"
"$pd/tg-on"
u0=$(usage)
b0=$(busy_usage)
r0=$(rounds)
t0=$EPOCHREALTIME
sleep "$SECS"
u1=$(usage)
b1=$(busy_usage)
r1=$(rounds)
t1=$EPOCHREALTIME
"$pd/tg-off"
touch "$pd/stop"
wait "$wk"
rc=$?
for _ in $(seq 120); do
	grep -q "tg: stopped" "$pd/probe.txt" && break
	sleep 0.5
done
echo "tg: usage_usec $(( u1 - u0 ))"
# The busy groups' CPU time too: with the group's, it should add up to
# about every CPU over the window (a check on the accounting).
echo "tg: busy_usage_usec $(( b1 - b0 ))"
echo "tg: window_usec $(( ${t1/./} - ${t0/./} ))"
[ "$waker" = hackbench ] && echo "tg: rounds $(( r1 - r0 ))"
echo "tg: waker_status $rc"
cat "$pd/probe.txt"
cat "$pd/waker.txt"
rm -rf "$pd"
exit "$rc"
