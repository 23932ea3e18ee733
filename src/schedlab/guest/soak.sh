#!/bin/bash
# The soak (soak.py): load, CPU hotplug, cgroup churn, cpuset partitions and
# scheduler switch flips, all at once for SECS seconds, on a debug kernel.
# Usage: soak.sh OUT SECS
# Writes into OUT:
#   count.NAME      one line per fault injected (hotplug, cgroup, partition, flip)
#   work.NAME       one exit status per workload round (hackbench, stress,
#                   fanout); 124: the round hit its time limit, 137: then
#                   did not end on TERM, or a SIGKILL ended it
#   time.NAME       each round's length in seconds, in the same order
#   slow.NAME       the start (T) of each round that hit its time limit while
#                   its tasks were still getting CPU time: slow, not hung;
#   hung.NAME       and of each that hit it with none in PROGRESS_WINDOW (or
#                   no sample of it near the limit);
#   killed.NAME     and of each that a SIGKILL ended before the limit
#   stall.NAME.T    what a round that has run STALL_AFTER seconds is doing
#                   (T: its start): its tasks' states, wait channels, stacks
#                   and scheduler statistics, and the runqueues (the blocked
#                   tasks go to dmesg.txt through sysrq-w)
#   log.txt         what each loop did that failed, for the summary
#   dmesg.txt       the kernel log at the end; status.txt: 0 once done
set -u
out=${1:?usage: soak.sh OUT SECS}
secs=${2:?usage: soak.sh OUT SECS}
cgr=/sys/fs/cgroup
feat=/sys/kernel/debug/sched/features
knob=/sys/kernel/debug/sched/newidle_cost_pct
# The hardware kit's switch (patches/kit/), where the kernel has it.
swb=/sys/kernel/debug/sched/swb_state
# Cache aware scheduling's switch (CONFIG_SCHED_CACHE): where it is active
# (several LLCs, as smt4-numa's two nodes) SG_STATS_REUSE keeps no sums, so
# it is flipped too, at half the features' rate.
llc=/sys/kernel/debug/sched/llc_balancing/enabled
end=$(( EPOCHSECONDS + secs ))
ncpu=$(nproc --all)
# The environment may shorten the two for a quick check of this script.
round_limit=${SOAK_ROUND_LIMIT:-600}	# a workload round longer than this is ended
STALL_AFTER=${SOAK_STALL_AFTER:-240}	# a round still running after this is looked at, once
# A round that hits the limit is hung if its tasks got no CPU time in the
# last PROGRESS_WINDOW seconds, else slow: under TCG a guest's speed depends
# on the host's load (exec and file I/O go through 9p to the host), and the
# same rounds have taken 20 s or 600 s on the same kernel.
PROGRESS_WINDOW=120
SAMPLE_EVERY=30		# seconds between two looks at a round's CPU time
LIMIT_SLACK=10		# a round seen this close to the limit reached it
mkdir -p "$out"
: > "$out/log.txt"

# The loops run in a guest whose every CPU is busy: they use shell
# builtins where they can ($EPOCHSECONDS, read) rather than forks, and the
# fault injectors run at a higher priority than the load, so that the
# faults keep coming at a rate the floors of soak.py can ask for.
log() { echo "[$EPOCHSECONDS] $*" >> "$out/log.txt"; }
count() { echo "$2" >> "$out/count.$1"; }
alive() { [ "$EPOCHSECONDS" -lt "$end" ]; }
nap() { sleep "0.$(( RANDOM % 5 ))"; }
pause() { sleep "$(( $1 + RANDOM % 4 ))"; }
usec() { printf -v "$1" %s "${EPOCHREALTIME/./}"; }	# usec VAR: now, in µs
urgent() { renice -n -10 -p "$BASHPID" > /dev/null; }
val() { local v; read -r v < "$1" && echo "$v"; }

mountpoint -q "$cgr" || mount -t cgroup2 none "$cgr"
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
echo "+cpu +cpuset" > "$cgr/cgroup.subtree_control"
cd /tmp || exit 1
log "soak: $secs s on $ncpu CPUs, $(uname -r)"
# A task blocked for longer than a round may take is reported (a splat),
# before the round's own time limit kills it.
hung=/proc/sys/kernel/hung_task_timeout_secs
[ ! -w "$hung" ] || echo "$(( STALL_AFTER > 120 ? STALL_AFTER : 120 ))" > "$hung"

# --- load ------------------------------------------------------------------
# Each loop runs rounds until the window closes; every round's status is
# kept. The fan-out runs perf's hackbench in a group three levels deep.
workload() {
	local name=$1 rc pid t0 looked checked last moved age verdict; shift
	while alive; do
		# timeout runs the round in a process group of its own ($pid)
		timeout -k 10 "$round_limit" "$@" > "$out/out.$name" 2>&1 {NAP}<&- &
		pid=$! t0=$EPOCHSECONDS looked='' checked=-$SAMPLE_EVERY last=-1 moved=0 age=0
		while kill -0 "$pid" 2> /dev/null; do
			# The group's CPU time every SAMPLE_EVERY s of the round's own
			# age, up to the limit: after it, the dying tasks' exit would
			# count.
			round_age "$pid"
			(( AGE < 0 )) || age=$AGE
			if (( age < round_limit && age - checked >= SAMPLE_EVERY )); then
				group_ticks "$pid"
				(( TICKS > last )) && moved=$age
				last=$TICKS checked=$age
			fi
			if [ -z "$looked" ] && (( EPOCHSECONDS - t0 >= STALL_AFTER )); then
				stalled "$out/stall.$name.$t0" "$pid" "$t0" &
				log "$name: round running for $STALL_AFTER s: stall.$name.$t0"
				looked=1
			fi
			doze 2
		done
		wait "$pid"
		rc=$?
		echo $rc >> "$out/work.$name"
		echo $(( EPOCHSECONDS - t0 )) >> "$out/time.$name"
		if [ $rc = 124 ] || [ $rc = 137 ]; then
			if (( age < round_limit - LIMIT_SLACK )); then
				verdict=killed
			elif (( checked < round_limit - SAMPLE_EVERY - LIMIT_SLACK ||
				checked - moved > PROGRESS_WINDOW )); then
				verdict=hung
			else
				verdict=slow
			fi
			echo "$t0" >> "$out/$verdict.$name"
			log "$name: $verdict at $age s (CPU time last grew at $moved s, last looked at $checked s)"
		fi
		[ $rc = 0 ] || log "$name: exit status $rc: $(tail -c 300 "$out/out.$name")"
	done
}

# A wait without a fork (a sleep is an exec through 9p here): a read with a
# time limit from a FIFO nothing writes to, held open for reading and
# writing so that it never ends.
open_nap() {
	local fifo=/tmp/soak-nap.$$
	mkfifo "$fifo" && exec {NAP}<> "$fifo" && rm -f "$fifo"
}
doze() { read -r -t "$1" -u "$NAP" _ || :; }
open_nap

# The fields of /proc/PID/stat after the command name, into STAT (an array:
# STAT[0] is the state, STAT[2] the process group, STAT[11] and STAT[12]
# utime and stime, STAT[13] and STAT[14] those of reaped children, STAT[19]
# the start in clock ticks after boot).
stat_of() {
	local line
	read -r line 2> /dev/null < "$1" || return 1
	# shellcheck disable=SC2206 # numbers and a state letter, split on spaces
	STAT=( ${line##*) } )
}

# round_age PID: into AGE, the seconds since process PID started (USER_HZ
# is 100 on every architecture the lab boots), -1 if it is gone.
round_age() {
	local up
	AGE=-1
	stat_of "/proc/$1/stat" || return 0
	read -r up _ < /proc/uptime
	AGE=$(( ${up%.*} - STAT[19] / 100 ))
}

# group_ticks PGID: into TICKS, the CPU time in ticks of the processes of
# group PGID and of their reaped children. Builtins only: it runs every
# 30 s of a slow round, in a guest where every fork and exec is slow.
group_ticks() {
	local f
	TICKS=0
	for f in /proc/[0-9]*/stat; do
		if stat_of "$f" && [ "${STAT[2]}" = "$1" ]; then
			TICKS=$(( TICKS + STAT[11] + STAT[12] + STAT[13] + STAT[14] ))
		fi
	done
}

# show FILE: its lines, read at once (a line-by-line read seeks back after
# each line, and a seq_file then makes the file again from its start).
show() {
	local lines
	mapfile -t lines < "$1" && printf '%s\n' "${lines[@]}"
}

# stalled FILE PGID START: what the tasks of process group PGID (a round
# started at START) are doing, and the runqueues, into FILE; the blocked
# tasks of the whole guest to dmesg. Builtins only, as group_ticks.
stalled() {
	local p t c w args
	{
		echo "# at $EPOCHSECONDS, $(( EPOCHSECONDS - $3 )) s into the round"
		for p in /proc/[0-9]*; do
			if ! stat_of "$p/stat" || [ "${STAT[2]}" != "$2" ]; then continue; fi
			mapfile -d '' -t args < "$p/cmdline"
			c="${args[*]}"
			for t in "$p"/task/[0-9]*; do
				stat_of "$t/stat" || continue
				read -r w < "$t/wchan"
				echo "# $t ($c): state ${STAT[0]}, wchan ${w:-0}, utime ${STAT[11]}, stime ${STAT[12]}"
				show "$t/stack"
				show "$t/sched"
			done
		done
		echo "# /sys/kernel/debug/sched/debug"
		show /sys/kernel/debug/sched/debug
	} > "$1" 2>&1
	[ ! -w /proc/sysrq-trigger ] || echo w > /proc/sysrq-trigger
}

fanout() {
	local g=$cgr/soak-load/a/b
	mkdir -p "$g"
	echo +cpu > "$cgr/soak-load/cgroup.subtree_control"
	echo +cpu > "$cgr/soak-load/a/cgroup.subtree_control"
	echo "$BASHPID" > "$g/cgroup.procs"
	workload fanout perf bench sched messaging -g 1 -l 10
}

# --- CPU hotplug -----------------------------------------------------------
# A random CPU other than CPU 0 goes offline and online again; never the
# last online CPU of its node. A cycle holds the hotplug lock for seconds
# under TCG; the pause between cycles lets the cgroup and cpuset writers,
# which wait for that lock, make progress too.
cpus_of() {	# the CPU numbers of a list such as 0-3,8
	local part
	for part in ${1//,/ }; do
		if [ "${part#*-}" != "$part" ]; then seq "${part%-*}" "${part#*-}"
		else echo "$part"; fi
	done
}

declare -A node_of
for n in /sys/devices/system/node/node[0-9]*; do
	for c in $(cpus_of "$(val "$n/cpulist")"); do node_of[$c]=${n##*node}; done
done

online() { local v=1; [ -e "$1" ] && read -r v < "$1"; [ "$v" = 1 ]; }

last_of_node() {	# is CPU $1 the only online CPU of its node?
	local c
	for c in "${!node_of[@]}"; do
		[ "$c" != "$1" ] && [ "${node_of[$c]}" = "${node_of[$1]}" ] &&
			online "/sys/devices/system/cpu/cpu$c/online" && return 1
	done
	return 0
}

hotplug() {
	local cpu f
	urgent
	while alive; do
		cpu=$(( 1 + RANDOM % (ncpu - 1) ))
		f=/sys/devices/system/cpu/cpu$cpu/online
		if online "$f" && ! last_of_node "$cpu"; then
			if echo 0 > "$f" 2>/dev/null; then
				nap
				if echo 1 > "$f"; then count hotplug "$cpu"
				else log "hotplug: cpu$cpu did not come back online"; fi
			else
				log "hotplug: cpu$cpu: offline refused"
			fi
			pause 6
		fi
	done
	for f in /sys/devices/system/cpu/cpu*/online; do echo 1 > "$f" 2>/dev/null; done
}

# --- cgroup churn ----------------------------------------------------------
# A group (sometimes with a child) with random cpu.weight, cpu.max and
# cpu.idle; a busy task (at the default priority) moved in and out; the
# group removed. A step that takes over 5 s is logged with its time (a
# hint, not a failure). CHURNERS loops can run side by side; four did not
# raise the rate under TCG (a mkdir then took 20-28 s instead of 6-19 s:
# they serialize in the kernel) and slowed hotplug, so one runs.
CHURNERS=1
cgroups() {
	local w=$1 i=0 g leaf pid t0
	step() {	# step NAME: log NAME if it took long since the last step
		local t; usec t
		(( 10#$t - 10#$t0 > 5000000 )) &&
			log "cgroup: $1 took $(( (10#$t - 10#$t0) / 1000 )) ms"
		t0=$t
	}
	urgent
	while alive; do
		i=$(( i + 1 ))
		g=$cgr/soak-cg/w$w-g$i
		usec t0
		mkdir "$g" || { log "cgroup: mkdir $g failed"; sleep 1; continue; }
		step mkdir
		leaf=$g
		if (( RANDOM % 2 )); then
			echo +cpu > "$g/cgroup.subtree_control"
			mkdir "$g/c" && leaf=$g/c
		fi
		echo $(( 1 + RANDOM % 10000 )) > "$leaf/cpu.weight"
		if (( RANDOM % 2 )); then
			echo "$(( 1000 + RANDOM % 99000 )) 100000" > "$leaf/cpu.max"
		else
			echo "max 100000" > "$leaf/cpu.max"
		fi
		echo $(( RANDOM % 2 )) > "$leaf/cpu.idle"
		step "cpu.weight/max/idle"
		# The busy task gets the default priority from here: a renice
		# run by the task itself would fork a child that could still be
		# in the group when it is removed.
		(while :; do :; done) &
		pid=$!
		renice -n 0 -p "$pid" > /dev/null
		echo "$pid" > "$leaf/cgroup.procs"
		step "move in"
		nap
		echo $(( RANDOM % 2 )) > "$leaf/cpu.idle"
		usec t0
		echo "$pid" > "$cgr/cgroup.procs"
		step "move out"
		kill "$pid"; wait "$pid" 2>/dev/null
		[ "$leaf" = "$g" ] || remove "$leaf"
		if remove "$g"; then count cgroup "$w.$i"; fi
		step rmdir
	done
}

remove() {	# rmdir a group, waiting up to 30 s for it to empty
	local tries=0
	until rmdir "$1" 2> /dev/null; do
		if (( ++tries > 30 )); then
			log "cgroup: rmdir $1 failed: procs $(tr '\n' ' ' < "$1/cgroup.procs")"
			return 1
		fi
		sleep 1
	done
}

# --- sched-domain rebuilds -------------------------------------------------
# A cpuset partition over a random run of online CPUs (never CPU 0), made a
# root or an isolated partition, then a member again, then removed: each
# change that the kernel accepts as valid rebuilds the sched domains.
partitions() {
	local p=$cgr/soak-part first n cpus kind state
	urgent
	# One group for the whole window: creating a cpuset group waits for
	# the hotplug lock while it holds cgroup_mutex, which would stall the
	# cgroup churn behind every hotplug cycle.
	mkdir -p "$p"
	while alive; do
		n=$(( 1 + RANDOM % (ncpu / 2) ))
		first=$(( 1 + RANDOM % (ncpu - n) ))
		cpus=$first-$(( first + n - 1 ))
		kind=root
		(( RANDOM % 3 )) || kind=isolated
		if echo "$cpus" > "$p/cpuset.cpus" &&
		   { [ ! -e "$p/cpuset.cpus.exclusive" ] ||
		     echo "$cpus" > "$p/cpuset.cpus.exclusive"; } &&
		   echo "$kind" > "$p/cpuset.cpus.partition"; then
			state=$(val "$p/cpuset.cpus.partition")
			if [ "$state" = "$kind" ]; then count partition "$kind $cpus"
			else log "partition: $kind $cpus: $state"; fi
			sleep 1
			echo member > "$p/cpuset.cpus.partition" && count partition "member $cpus"
		else
			log "partition: $kind $cpus refused"
			echo member > "$p/cpuset.cpus.partition"
		fi
		# Free the run of CPUs, so that the next one may be any other.
		[ ! -e "$p/cpuset.cpus.exclusive" ] || echo > "$p/cpuset.cpus.exclusive"
		pause 3
	done
}

# --- switches --------------------------------------------------------------
# Scheduler features both kernels have, each turned off and on and then
# restored; the series' own features, where the kernel has them, turned
# on for one round and off for the next, so that the load runs with each
# of them on half of the time; and the series' debugfs knob
# through its range (then values outside it, which it must refuse).
FEATURES="NI_RANDOM NEXT_BUDDY CACHE_HOT_BUDDY SIS_UTIL LB_MIN TTWU_QUEUE WA_BIAS UTIL_EST"
SERIES_FEATURES="SIS_GROUP_IDLE SG_STATS_REUSE"
has_feature() { grep -qE "(^| )(NO_)?$1( |\$)" "$feat"; }
flips() {
	local f on knob_values v series=() initial=() round=0 llc_initial=''
	[ -e "$llc" ] && llc_initial=$(cat "$llc")
	knob_values="150 200 400 1000 100000 100"
	for f in $SERIES_FEATURES; do
		has_feature "$f" || continue
		series+=("$f")
		grep -qw "NO_$f" "$feat" && initial+=("NO_$f") || initial+=("$f")
	done
	urgent
	while alive; do
		for f in $FEATURES; do
			grep -qw "NO_$f" "$feat" && on=NO_ || on=
			# two changes of state: off, then on
			if echo "NO_$f" > "$feat" && echo "$f" > "$feat"; then
				count flip "NO_$f"; count flip "$f"
			else
				log "flip: $f refused"
			fi
			echo "${on}$f" > "$feat"
		done
		round=$(( round + 1 ))
		for f in "${series[@]}"; do
			(( round % 2 )) && on= || on=NO_
			if echo "${on}$f" > "$feat"; then count flip "${on}$f"
			else log "flip: ${on}$f refused"; fi
		done
		if [ -n "$llc_initial" ]; then
			# each pairing of SG_STATS_REUSE's state with this one
			v=$(( round / 2 % 2 ))
			if echo "$v" > "$llc"; then count flip "llc_balancing $v"
			else log "flip: llc_balancing $v refused"; fi
		fi
		if [ -e "$knob" ]; then
			for v in $knob_values; do
				if echo "$v" > "$knob"; then count flip "knob $v"
				else log "flip: knob $v refused"; fi
			done
			for v in 0 99 100001; do
				if echo "$v" > "$knob" 2>/dev/null; then
					log "flip: knob accepted $v, outside its range"
				fi
			done
		fi
		if [ -e "$swb" ]; then
			# every should_we_balance() state, the series' (4) last
			for v in 0 1 2 3 4; do
				if echo "$v" > "$swb"; then count flip "swb_state $v"
				else log "flip: swb_state $v refused"; fi
			done
			for v in 5 -1 x; do
				if echo "$v" > "$swb" 2>/dev/null; then
					log "flip: swb_state accepted $v, outside its range"
				fi
			done
		fi
	done
	# each of the series' features back to its state at the start
	for f in "${initial[@]}"; do echo "$f" > "$feat"; done
	[ -n "$llc_initial" ] && echo "$llc_initial" > "$llc"
}

# The load keeps every CPU partly busy, not saturated: one host thread runs
# all vCPUs, and a saturated debug guest takes tens of seconds per cgroup
# or hotplug operation.
workload hackbench perf bench sched messaging -g 1 -l 10 &
workload stress-mixed stress-ng --cpu "$(( ncpu / 2 ))" --cpu-load 60 --cpu-load-slice 10 \
	--timeout 20s &
workload stress-light stress-ng --cpu "$(( ncpu / 4 + 1 ))" --cpu-load 20 --timeout 15s &
fanout &
hotplug &
mkdir -p "$cgr/soak-cg"
echo +cpu > "$cgr/soak-cg/cgroup.subtree_control"
for w in $(seq "$CHURNERS"); do cgroups "$w" & done
partitions &
flips &
wait

rmdir "$cgr"/soak-load/a/b "$cgr"/soak-load/a "$cgr"/soak-load "$cgr"/soak-cg \
	"$cgr"/soak-part 2>/dev/null
dmesg > "$out/dmesg.txt"
echo 0 > "$out/status.txt"
