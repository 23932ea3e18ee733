#!/bin/bash
# Nested cgroup CPU shares, the layout of the cgroup selftest
# test_cpucg_nested_weight_overprovisioned: /schedlab-n/leaf0 (cpu.weight
# 1000) beside /schedlab-n/child (1000), which holds leaf1 and leaf2 (5000
# each); every leaf runs NCPU CPU hogs.  leaf0 is entitled to as much CPU
# time as leaf1 and leaf2 together.  Unlike the selftest, the CPU time is
# read over one window all three share (after a warm-up, before any hog
# stops), so start and exit times of the hogs do not enter it.
# NCPU and SECS come from the plan runner.  Prints "cgn: KEY VALUE" lines;
# parsers.cg_nested() turns them into metrics.
set -u
: "${NCPU:?} ${SECS:?}"
cgr=/sys/fs/cgroup
top=$cgr/schedlab-n
warmup=3
cd /tmp || exit 2	# stress-ng wants a writable working folder

die() { echo "cg-nested: $*" >&2; exit 2; }
mountpoint -q "$cgr" || mount -t cgroup2 none "$cgr" 2>/dev/null
[ -e "$cgr/cgroup.controllers" ] || die "no cgroup v2 hierarchy at $cgr"
grep -qw cpu "$cgr/cgroup.controllers" ||
	die "cgroup v2 has no cpu controller here (CONFIG_FAIR_GROUP_SCHED off?)"

# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {	# every hog at once (cgroup.kill), then the groups
	trap - EXIT INT TERM
	[ -e "$top/cgroup.kill" ] && echo 1 > "$top/cgroup.kill"
	wait 2>/dev/null
	local _
	for _ in $(seq 50); do	# the killed hogs leave their groups shortly
		[ -d "$top" ] || break
		find "$top" -depth -type d -exec rmdir {} + 2>/dev/null
		sleep 0.1
	done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mk() {	# mk GROUP WEIGHT
	if ! mkdir -p "$top/$1" || ! echo "$2" > "$top/$1/cpu.weight"; then
		die "cannot make $top/$1 with cpu.weight $2"
	fi
}
echo +cpu > "$cgr/cgroup.subtree_control"
if ! mkdir -p "$top" || ! echo +cpu > "$top/cgroup.subtree_control"; then
	die "cannot make $top"
fi
mk leaf0 1000
mk child 1000
echo +cpu > "$top/child/cgroup.subtree_control" || die "no cpu controller in $top/child"
mk child/leaf1 5000
mk child/leaf2 5000
leaves=(leaf0 child/leaf1 child/leaf2)
stats=()
for l in "${leaves[@]}"; do stats+=("$top/$l/cpu.stat"); done

# One reading of the three leaves' usage_usec (one awk, so the three are
# read together), and the time in microseconds at its middle.
snap() {
	local a=${EPOCHREALTIME/./} u b
	u=$(awk '$1 == "usage_usec" { printf "%s ", $2 }' "${stats[@]}")
	b=${EPOCHREALTIME/./}
	echo "$(( (a + b) / 2 )) $u"
}
for l in "${leaves[@]}"; do
	(echo "$BASHPID" > "$top/$l/cgroup.procs" &&
	 exec stress-ng --cpu "$NCPU" --cpu-load 100 --timeout $(( SECS + warmup + 60 ))s \
		> /dev/null 2>&1) &
done
sleep "$warmup"
for l in "${leaves[@]}"; do
	[ -n "$(cat "$top/$l/cgroup.procs")" ] || die "no hog runs in $top/$l"
done
read -r t0 a0 b0 c0 < <(snap)
sleep "$SECS"
read -r t1 a1 b1 c1 < <(snap)
if [ -z "$c0" ] || [ -z "$c1" ]; then die "could not read usage_usec of the three leaves"; fi
echo "cgn: cpus $NCPU"
echo "cgn: window_usec $(( t1 - t0 ))"
echo "cgn: leaf0_usec $(( a1 - a0 ))"
echo "cgn: leaf1_usec $(( b1 - b0 ))"
echo "cgn: leaf2_usec $(( c1 - c0 ))"
