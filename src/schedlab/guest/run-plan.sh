#!/bin/bash
# Run a measurement plan: run-plan.sh PLAN_DIR OUT_DIR
#
# PLAN_DIR is written by the lab (plan.py): plan.env, probes.txt, knobs.txt,
# runs.txt, cmd/WORKLOAD, bt/*.bt.  For every run it starts the probes,
# opens the counting window, snapshots /proc/schedstat and /proc/stat, runs
# the workload under a time limit, snapshots again, closes the window and
# stops the probes, writing raw outputs into OUT_DIR/WORKLOAD-N/ for the
# host to parse (results.py).  It cleans up after itself on exit, interrupt
# and termination: probes and workloads stopped, cgroups removed,
# schedstats and knobs restored.
set -u
PLAN=${1:?usage: run-plan.sh PLAN_DIR OUT_DIR}
OUT=${2:?usage: run-plan.sh PLAN_DIR OUT_DIR}
# shellcheck source=/dev/null
. "$PLAN/plan.env"
: "${SECS:?} ${LIMIT:?} ${ATTACH:?} ${LATENCY_TOOLS:?} ${LATENCY_AUTO:?}"
: "${LATENCY_FUNCTION:?} ${BCC_MAX_START:?} ${KNOB_DIR:?} ${RUN_MARK:?} ${SIGDFL:?}"
LINES_MARK=${LINES_MARK:-}
: "${LATENCY_MORE?} ${CLEAN:?} ${WATCH_EVERY:?} ${TRACEFS:?} ${KPROBES_LIST:?} ${WARMUP:?} ${WARMUP_SECS:?}"
: "${BCC_DIR:?} ${KALLSYMS:?}"

PD=$(mktemp -d /tmp/schedlab-probes.XXXXXX)
MOUNTED=
OLD_SCHEDSTATS=$(sysctl -n kernel.sched_schedstats 2>/dev/null || echo 0)
KNOBS_SET=()
KNOBS_OLD=()

cleanup() {
	trap - EXIT INT TERM
	# shellcheck disable=SC2046
	kill -INT $(jobs -p) 2>/dev/null
	sleep 1
	# shellcheck disable=SC2046
	kill -KILL $(jobs -p) 2>/dev/null
	wait 2>/dev/null
	for d in /sys/fs/cgroup/schedlab/top/* /sys/fs/cgroup/schedlab/top /sys/fs/cgroup/schedlab/*; do
		[ -d "$d" ] && rmdir "$d" 2>/dev/null
	done
	rmdir /sys/fs/cgroup/schedlab 2>/dev/null
	for d in /sys/fs/cgroup/schedlab-*; do
		[ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	sysctl -q kernel.sched_schedstats="$OLD_SCHEDSTATS" 2>/dev/null
	local i
	for i in "${!KNOBS_SET[@]}"; do
		echo "${KNOBS_OLD[$i]}" > "${KNOBS_SET[$i]}" 2>/dev/null
	done
	[ -n "$MOUNTED" ] && umount /sys/kernel/tracing
	rm -rf "$PD"
}
trap cleanup EXIT
trap 'echo interrupted > "$OUT/interrupted.txt"; exit 130' INT TERM

cd /tmp || exit 1
NCPU=$(nproc)
export NCPU SECS
# The cost probes' 1-instruction buckets need more map entries than the default 4096.
export BPFTRACE_MAP_KEYS_MAX=65536
# A clean run leaves schedstats as they are: switching them changes the
# scheduler's own cost.
[ "$CLEAN" = 1 ] || sysctl -q kernel.sched_schedstats=1 2>/dev/null

# Knobs: each written before the plan, checked to read back, restored on exit.
# A knob that is missing or refuses the value stops the plan: results measured
# with a setting other than the one asked for must not exist.
: > "$OUT/knobs.txt"
if [ -s "$PLAN/knobs.txt" ]; then
	[ -d "$KNOB_DIR" ] || mount -t debugfs none /sys/kernel/debug 2>/dev/null
	while read -r name value; do
		f=$KNOB_DIR/$name
		if [ ! -w "$f" ]; then
			echo "$name: $f is not there or not writable (a kernel without the patch?)" > "$OUT/knob-error.txt"
			exit 3
		fi
		if [ "$name" = features ]; then
			# Features, each NAME or NO_NAME: all must be listed so before
			# any is written; each is put back as it was.
			for v in $value; do
				feature=${v#NO_}
				if ! grep -qE "(^| )(NO_)?$feature( |\$)" "$f"; then
					echo "features: $feature is not a feature of this kernel" > "$OUT/knob-error.txt"
					exit 3
				fi
				KNOBS_SET+=("$f")
				if grep -qE "(^| )NO_$feature( |\$)" "$f"; then KNOBS_OLD+=("NO_$feature")
				else KNOBS_OLD+=("$feature"); fi
			done
			for v in $value; do
				if ! echo "$v" > "$f" 2>/dev/null || ! grep -qE "(^| )$v( |\$)" "$f"; then
					echo "features: writing $v did not take" > "$OUT/knob-error.txt"
					exit 3
				fi
				echo "features=$v" >> "$OUT/knobs.txt"
			done
			continue
		fi
		# A choice (cgroup_mode) reads as every choice with the one in
		# force in parentheses: "up smp (concur) max tasks"; a boolean
		# (llc_balancing/enabled) may read Y or N, taken as 1 or 0.
		chosen() {
			local v; v=$(cat "$1"); [[ $v =~ \(([^\)]+)\) ]] && v=${BASH_REMATCH[1]}
			case $v in Y) v=1 ;; N) v=0 ;; esac
			echo "$v"
		}
		KNOBS_SET+=("$f")
		KNOBS_OLD+=("$(chosen "$f")")
		if ! echo "$value" > "$f" 2>/dev/null || [ "$(chosen "$f")" != "$value" ]; then
			echo "$name: writing $value gave $(cat "$f")" > "$OUT/knob-error.txt"
			exit 3
		fi
		echo "$name=$(chosen "$f")" >> "$OUT/knobs.txt"
	done < "$PLAN/knobs.txt"
fi

# Tracepoints and kprobes need tracefs; mounted only if it is not, undone on exit.
if [ ! -d /sys/kernel/tracing/events ] && mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; then
	MOUNTED=1
fi
uname -r > "$OUT/uname.txt"
# Which CPUs share a core, as the guest's kernel sees it (a probe's pairs of CPUs).
for c in /sys/devices/system/cpu/cpu[0-9]*; do
	echo "${c##*/cpu} $(cat "$c/topology/thread_siblings_list" 2>/dev/null)"
done > "$OUT/cores.txt"
# For telling boots apart afterwards (under TCG the clocksource can differ).
dmesg > "$OUT/dmesg.txt" 2>/dev/null
cat /sys/devices/system/clocksource/clocksource0/current_clocksource > "$OUT/clocksource.txt" 2>/dev/null
# The sched domains of CPU 0 by level, "LEVEL NAME" (the lines probe's keys):
# debugfs lists them while sched/verbose is on, switched on for the reading.
if [ -n "$LINES_MARK" ]; then
	[ -d "$KNOB_DIR" ] || mount -t debugfs none /sys/kernel/debug 2>/dev/null
	verbose=$(cat "$KNOB_DIR/verbose" 2>/dev/null)
	[ "$verbose" = Y ] || echo Y > "$KNOB_DIR/verbose" 2>/dev/null
	for dom in "$KNOB_DIR"/domains/cpu0/domain*; do
		[ -r "$dom/level" ] && echo "$(cat "$dom/level") $(cat "$dom/name")"
	done > "$OUT/domains.txt" 2>/dev/null
	[ "$verbose" = Y ] || echo N > "$KNOB_DIR/verbose" 2>/dev/null
fi
# Whether returns go through a thunk (the calibration's path lengths).
cat /sys/devices/system/cpu/vulnerabilities/retbleed > "$OUT/retbleed.txt" 2>/dev/null
{
	bpftrace --version
	stress-ng --version
	dpkg-query -W -f '${Package} ${Version}\n' bpftrace bpfcc-tools libbpf-tools stress-ng rt-tests linux-perf dbench
} > "$OUT/versions.txt" 2>&1

have() { grep -qE " $1$" "$KALLSYMS"; }
try_bt() {
	timeout -k 5 150 bpftrace -e "$(cat "$1" "$PLAN/bt/gate.bt")
interval:s:1 { exit(); }" > "$PD/try.txt" 2>&1 && grep -q Attaching "$PD/try.txt"
}
cp /bin/true "$PD/schedlab-on"
cp /bin/true "$PD/schedlab-off"

LAT=none
LATPATH=
LATSTART=0
MORE=
CYCLES=
C2C=
: > "$OUT/probes-missing.txt"
: > "$OUT/probes-used.txt"
: > "$OUT/latency-why.txt"
if [ "$CLEAN" = 1 ]; then
	echo clean > "$OUT/pass.txt"
	echo none > "$OUT/attach.txt"
	echo none > "$OUT/latency-tool.txt"
	# A clean plan's probes are counted outside the guest (a qemu plugin).
	cut -d' ' -f1 "$PLAN/probes.txt" > "$OUT/probes-used.txt"
else
	echo probes > "$OUT/pass.txt"
	# Attach method: fentry needs BTF; the same method for every probe of the plan.
	if [ "$ATTACH" = auto ]; then
		if [ -r /sys/kernel/btf/vmlinux ] && bpftrace -l 'kfunc:vmlinux:sched_balance_rq' 2>/dev/null | grep -q .; then
			ATTACH=kfunc
		else
			ATTACH=kprobe
		fi
	fi
	echo "$ATTACH" > "$OUT/attach.txt"
	: > "$PD/probe.bt"

	# Candidates: the probes whose functions are out of line in this kernel.
	CANDIDATES=()
	while read -r p funcs; do
		ok=1
		for f in $funcs; do
			if ! have "$f"; then
				echo "$p: $f is not in $KALLSYMS (inlined?)" >> "$OUT/probes-missing.txt"
				ok=
			fi
		done
		[ -n "$ok" ] && CANDIDATES+=("$p")
	done < "$PLAN/probes.txt"

	# One trial of all candidates; if it fails, one per probe, keeping those that work.
	: > "$PD/all.bt"
	for p in "${CANDIDATES[@]}"; do
		[ -f "$PLAN/bt/$p.$ATTACH.bt" ] && cat "$PLAN/bt/$p.$ATTACH.bt" >> "$PD/all.bt"
	done
	if [ ! -s "$PD/all.bt" ] || try_bt "$PD/all.bt"; then
		cp "$PD/all.bt" "$PD/probe.bt"
		for p in "${CANDIDATES[@]}"; do echo "$p" >> "$OUT/probes-used.txt"; done
	else
		for p in "${CANDIDATES[@]}"; do
			bt=$PLAN/bt/$p.$ATTACH.bt
			if [ ! -f "$bt" ] || try_bt "$bt"; then
				[ -f "$bt" ] && cat "$bt" >> "$PD/probe.bt"
				echo "$p" >> "$OUT/probes-used.txt"
			else
				why=$(grep ERROR "$PD/try.txt" | grep -v RLIMIT | tail -1)
				echo "$p: bpftrace cannot attach it here: $why" >> "$OUT/probes-missing.txt"
			fi
		done
	fi
	[ -r /proc/schedstat ] || echo "schedstat: /proc/schedstat is absent (CONFIG_SCHEDSTATS off): no balance counts by domain" >> "$OUT/probes-missing.txt"

	# Latency tool: the first that works here, with the reasons for the others.
	if grep -qx latency "$OUT/probes-used.txt" 2>/dev/null; then
		for t in $LATENCY_TOOLS; do
			case $t in
				# bcc's tool: NAME-bpfcc on PATH (Debian, Ubuntu), or
				# in bcc's folder (Fedora, RHEL).
				bcc) C=$(command -v funclatency-bpfcc || command -v "$BCC_DIR/funclatency") ;;
				libbpf) C=$(PATH=$PATH:/usr/sbin command -v funclatency) ;;
				bpftrace) C=bpftrace ;;
				*) C= ;;
			esac
			if [ -z "$C" ]; then
				echo "$t: not installed" >> "$OUT/latency-why.txt"
				continue
			fi
			if [ "$t" = bpftrace ]; then
				grep -v '^//' "$PD/probe.bt" | grep -q "$LATENCY_FUNCTION" || cat "$PLAN/bt/swb.$ATTACH.bt" >> "$PD/probe.bt"
				LAT=bpftrace
				break
			fi
			T0=$(date +%s)
			timeout -k 5 300 "$C" -d 3 "$LATENCY_FUNCTION" > "$PD/try-$t.txt" 2>&1
			START=$(( $(date +%s) - T0 - 3 ))
			cp "$PD/try-$t.txt" "$OUT/latency-try-$t.txt"
			if grep -q distribution "$PD/try-$t.txt"; then
				# bcc compiles its program with clang at every start: slow under TCG.
				if [ "$t" = bcc ] && [ "$LATENCY_AUTO" = 1 ] && [ "$START" -gt "$BCC_MAX_START" ]; then
					echo "bcc: works, but takes ${START}s to start (compiling with clang); over ${BCC_MAX_START}s, so not picked for every run: --latency-tool bcc forces it" >> "$OUT/latency-why.txt"
					continue
				fi
				LAT=$t
				LATPATH=$C
				LATSTART=$START
				echo "$t: works, starts in ${START}s" >> "$OUT/latency-why.txt"
				break
			fi
			echo "$t: failed: $(grep -v "^ *$" "$PD/try-$t.txt" | tail -3 | tr "\n" " ")" >> "$OUT/latency-why.txt"
		done
	fi
	echo "$LAT" > "$OUT/latency-tool.txt"
	# The latency-lb probe: one more funclatency per function, with that tool.
	MORE=
	if grep -qx latency-lb "$OUT/probes-used.txt" 2>/dev/null; then
		case $LAT in
			bcc|libbpf) MORE=$LATENCY_MORE ;;
			*) echo "latency-lb: needs funclatency (bcc or libbpf-tools); the latency tool here is $LAT" >> "$OUT/probes-missing.txt" ;;
		esac
	fi

	# The cycles probe (probes.py): perf stat of every CPU over each run's
	# window.  Where nothing counts cycles (no PMU: the lab's TCG guests, many
	# VMs) the probe is dropped here with a note, not failed in every run.
	CYCLES=
	if grep -qx cycles "$OUT/probes-used.txt" 2>/dev/null; then
		why=
		if ! command -v perf > /dev/null; then
			why="perf is not installed (Debian package linux-perf)"
		else
			perf stat -a -x, -e cycles -- sleep 0.2 > "$PD/cycles-try.txt" 2>&1
			grep -q '^[0-9][0-9.]*,[^,]*,cycles' "$PD/cycles-try.txt" ||
				why="perf stat counts no cycles here (no PMU?): $(tail -1 "$PD/cycles-try.txt")"
		fi
		if [ -n "$why" ]; then
			echo "cycles: $why" >> "$OUT/probes-missing.txt"
			sed -i '/^cycles$/d' "$OUT/probes-used.txt"
		else
			CYCLES=1
		fi
	fi
	# The c2c probe (probes.py): perf c2c record of every CPU's kernel loads
	# over each run's window.  It needs load sampling (a PMU feature: Intel's
	# ldlat loads, AMD's IBS, POWER's marked events); where perf c2c cannot
	# record, the probe is dropped here with perf's words, as cycles is.
	C2C=
	if grep -qx c2c "$OUT/probes-used.txt" 2>/dev/null; then
		why=
		if ! command -v perf > /dev/null; then
			why="perf is not installed (Debian package linux-perf)"
		elif ! perf c2c record -a -k -B -N -o "$PD/c2c-try.data" -- sleep 0.2 > "$PD/c2c-try.txt" 2>&1; then
			why="perf c2c cannot record here (no load sampling?): $(tail -1 "$PD/c2c-try.txt")"
		fi
		rm -f "$PD/c2c-try.data"
		if [ -n "$why" ]; then
			echo "c2c: $why" >> "$OUT/probes-missing.txt"
			sed -i '/^c2c$/d' "$OUT/probes-used.txt"
		else
			C2C=1
		fi
	fi
	# Last, after the bpftrace latency fallback may have added its lines.
	cat "$PLAN/bt/gate.bt" >> "$PD/probe.bt"
fi

# Unbuffered: the "Tracing" line must reach the file while the tool runs.
case $LAT in
	bcc) LATC=(python3 "$SIGDFL" env PYTHONUNBUFFERED=1 "$LATPATH") ;;
	libbpf) LATC=(stdbuf -oL "$(PATH=$PATH:/usr/sbin command -v funclatency)") ;;
	*) LATC=() ;;
esac

# Stop a tool (it prints its maps or histogram on SIGINT); kill it if it hangs,
# after $4 half-seconds (default 240: 120 s).  bpftrace detaching fentry probes
# can take minutes under TCG; its maps are printed when the window closes, so
# it gets 20 s and a note, not a lost run.
stop() {
	local n=${4:-240} t
	kill -INT "$1" 2>/dev/null
	for t in $(seq "$n"); do
		kill -0 "$1" 2>/dev/null || { wait "$1" 2>/dev/null; return 0; }
		sleep 0.5
	done
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	echo "$2 did not stop within $(( n / 2 )) s after SIGINT: killed" >> "$3"
}

# Wait until a tool prints its first line saying it is attached (at most $4
# half-seconds: 120 s by default).
wait_for() {
	local t
	for t in $(seq "${4:-240}"); do
		grep -qE "$2" "$1" && return 0
		kill -0 "$3" 2>/dev/null || return 1
		sleep 0.5
	done
	return 1
}
LATWAIT=$(( 4 * LATSTART + 240 ))

# Open or close the counting window (bt/gate.bt) and wait until bpftrace says
# so: up to a minute, as bpftrace's reader may wait that long for a CPU in a
# TCG guest whose every CPU is busy.
gate() {
	local t
	for t in $(seq 120); do
		"$PD/schedlab-$1"
		grep -q "schedlab: $2" "$3" && return 0
		kill -0 "$4" 2>/dev/null || return 1
		sleep 0.5
	done
	return 1
}

# What a clean run must not have beside it, one line each: a tracer's or
# a profiler's process (perf bench is a workload, not a probe), a BPF
# program of a tracing type (bpftool's list, but the kernel's own
# iterators of CONFIG_BPF_PRELOAD; else the fdinfo of the processes that
# hold one), a kprobe (but the one powerpc's kernel puts on its return-probe
# trampoline at boot, arch_init_kprobes()), a function ftrace or a
# trampoline patches, an ftrace tracer or event, and schedstats switched
# since the plan started.
# debugfs and tracefs files read as size 0: they are read, not tested.
attached() {
	local t=$TRACEFS v
	ps -eo pid=,args= | awk '{
		a = $2; sub(/.*\//, "", a); b = $3; sub(/.*\//, "", b)
		if (a ~ /^(bpftrace|trace-cmd|stap|funclatency.*|.*-bpfcc)$/ ||
		    b ~ /^(bpftrace|funclatency.*|.*-bpfcc)$/ || $3 ~ /\/bcc\/tools\// ||
		    (a == "perf" && $3 != "bench")) print "process " $0 }'
	if command -v bpftool > /dev/null; then
		bpftool prog show 2> /dev/null | awk '$2 ~ /^(kprobe|tracepoint|raw_tracepoint|raw_tracepoint_writable|perf_event|tracing)$/ && $4 !~ /^dump_bpf_(map|prog)$/ { print "bpf program " $0 }'
	else
		# BPF_PROG_TYPE_ KPROBE 2, TRACEPOINT 5, PERF_EVENT 7,
		# RAW_TRACEPOINT 17, RAW_TRACEPOINT_WRITABLE 24, TRACING 26
		find /proc/[0-9]*/fdinfo -type f -exec grep -hs '^prog_type:' {} + 2> /dev/null |
			awk '$2 ~ /^(2|5|7|17|24|26)$/ { n[$2]++ }
			END { for (k in n) print "bpf program of type " k " (" n[k] " fd)" }'
	fi
	grep -Ev ' (arch_rethook|kretprobe)_trampoline\+0x0 ' "$KPROBES_LIST" 2> /dev/null |
		head -5 | sed 's/^/kprobe /'
	head -3 "$t/enabled_functions" 2> /dev/null | sed 's/^/ftrace on /'
	v=$(cat "$t/current_tracer" 2> /dev/null)
	[ -n "$v" ] && [ "$v" != nop ] && echo "ftrace tracer $v"
	v=$(head -3 "$t/set_event" 2> /dev/null | tr '\n' ' ')
	[ -n "$v" ] && echo "ftrace events $v"
	v=$(sysctl -n kernel.sched_schedstats 2> /dev/null || echo 0)
	[ "$v" != "$OLD_SCHEDSTATS" ] && echo "schedstats switched from $OLD_SCHEDSTATS to $v"
	return 0
}

# attached() into the file $1, each line after the check's name $2, or
# "$2: clean".
check_into() {
	local found
	found=$(attached)
	if [ -z "$found" ]; then
		echo "$2: clean" >> "$1"
	else
		printf '%s\n' "$found" | sed "s|^|$2: |" >> "$1"
	fi
}

# The lines probe's window (measuring/linecount.py): each call of the
# marker starts the next epoch of the qemu plugin, which its records carry;
# the epoch of run folder D's window goes into D when it opens (WHAT: open
# or close).  A marker that fails moves no epoch, and makes the run invalid.
MARKS=0
lines_mark() {
	local d=$1 what=$2
	[ -n "$LINES_MARK" ] || return 0
	if ! "$LINES_MARK" mark < /dev/null 3<&-; then
		echo "the lines probe's marker failed at the window's $what" >> "$d/problems.txt"
		return 0
	fi
	MARKS=$(( MARKS + 1 ))
	[ "$what" = close ] || echo "$MARKS" > "$d/lines-epoch.txt"
}

# A clean run: the workload alone, the runner's checks before it, every
# WATCH_EVERY s during it and after it in watch.txt (the host makes a run
# with any finding invalid).
run_clean() {
	local d=$1 cmd=$2 wp i
	check_into "$d/watch.txt" before
	( i=0; while [ ! -e "$d/watch.stop" ] && sleep "$WATCH_EVERY"; do
		i=$(( i + 1 )); check_into "$d/watch.txt" "during $i"; done ) 3<&- &
	wp=$!
	head -1 /proc/stat > "$d/stat-before.txt"
	lines_mark "$d" open
	S=$(date +%s.%N)
	(timeout -k 10 "$LIMIT" bash -c "$cmd") > "$d/workload.txt" 2>&1 < /dev/null 3<&-
	echo $? > "$d/status.txt"
	echo "$(date +%s.%N) $S" | awk '{print $1 - $2}' > "$d/seconds.txt"
	lines_mark "$d" close
	head -1 /proc/stat > "$d/stat-after.txt"
	touch "$d/watch.stop"
	pkill -P "$wp" sleep 2> /dev/null
	wait "$wp" 2> /dev/null
	rm -f "$d/watch.stop"
	check_into "$d/watch.txt" after
}

# The cost probes' calibration: their program alone on idle_cpu() for a few
# seconds of load, before the runs (icount.py reads calibration.txt).
if [ -f "$PLAN/bt/calibrate.$ATTACH.bt" ]; then
	cat "$PLAN/bt/calibrate.$ATTACH.bt" "$PLAN/bt/gate.bt" > "$PD/calibrate.bt"
	stdbuf -oL bpftrace "$PD/calibrate.bt" > "$OUT/calibration.txt" 2>&1 3<&- &
	CAL=$!
	if wait_for "$OUT/calibration.txt" Attaching $CAL && gate on counting "$OUT/calibration.txt" $CAL; then
		timeout -k 5 120 stress-ng --cpu "$NCPU" --cpu-load 50 --timeout 3s > /dev/null 2>&1
		gate off stopped "$OUT/calibration.txt" $CAL
	fi
	stop $CAL bpftrace "$OUT/calibration-notes.txt" 40
fi

total=$(grep -c . "$PLAN/runs.txt")
k=0
while read -r name i <&3; do
	k=$(( k + 1 ))
	d=$OUT/$name-$i
	cmd=$(cat "$PLAN/cmd/$name")
	# The warm-up: the workload once before its first run, a timed one for
	# WARMUP_SECS, nothing attached yet, its output kept apart and not
	# parsed; only the workloads warmup.txt names.
	if [ "$WARMUP" = 1 ] && [ "$i" = 0 ] && grep -qxF "$name" "$PLAN/warmup.txt"; then
		echo "warm-up $name"
		(SECS=$WARMUP_SECS timeout -k 10 "$LIMIT" bash -c "$cmd") > "$OUT/warmup-$name.txt" 2>&1 < /dev/null 3<&-
		echo "status $?" >> "$OUT/warmup-$name.txt"
	fi
	mkdir -p "$d"
	echo "$RUN_MARK $k/$total $name $i"
	echo "$cmd" > "$d/command.txt"
	if [ "$CLEAN" = 1 ]; then
		run_clean "$d" "$cmd"
		continue
	fi
	echo "$ATTACH $LAT" > "$d/tools.txt"
	# Line-buffered: a map dump cut short by a kill is still seen as such.
	stdbuf -oL bpftrace "$PD/probe.bt" > "$d/probe.txt" 2>&1 3<&- &
	BPF=$!
	wait_for "$d/probe.txt" Attaching $BPF || echo 'probe did not attach' >> "$d/problems.txt"
	if [ ${#LATC[@]} -gt 0 ]; then
		"${LATC[@]}" "$LATENCY_FUNCTION" > "$d/latency.txt" 2>&1 3<&- &
		LATP=$!
		wait_for "$d/latency.txt" Tracing $LATP $LATWAIT || echo 'latency tool did not attach' >> "$d/problems.txt"
	fi
	MOREP=()
	for f in $MORE; do
		"${LATC[@]}" "$f" > "$d/latency-$f.txt" 2>&1 3<&- &
		MOREP+=("$!")
		wait_for "$d/latency-$f.txt" Tracing $! $LATWAIT || echo "latency tool did not attach to $f" >> "$d/problems.txt"
	done
	# perf c2c starts before the window opens and stops after it closes, so
	# that neither its start nor its exit (perf record reads its samples
	# back then) falls inside what the other probes count; no build-ids
	# (-B -N), whose collection at exit is the slow part.
	if [ -n "$C2C" ]; then
		perf c2c record -a -k -B -N -o "$d/c2c.data" > "$d/c2c-record.txt" 2>&1 < /dev/null 3<&- &
		C2CP=$!
		sleep 1
	fi
	gate on counting "$d/probe.txt" $BPF || echo 'the counting window did not open' >> "$d/problems.txt"
	cat /proc/schedstat > "$d/schedstat-before.txt" 2>/dev/null
	head -1 /proc/stat > "$d/stat-before.txt"
	if [ -n "$CYCLES" ]; then
		perf stat -a -x, -e cycles,instructions -o "$d/perf-stat.txt" < /dev/null 3<&- &
		CYCP=$!
	fi
	S=$(date +%s.%N)
	(timeout -k 10 "$LIMIT" bash -c "$cmd") > "$d/workload.txt" 2>&1 < /dev/null 3<&-
	echo $? > "$d/status.txt"
	echo "$(date +%s.%N) $S" | awk '{print $1 - $2}' > "$d/seconds.txt"
	if [ -n "$CYCLES" ]; then
		stop "$CYCP" "perf stat" "$d/problems.txt"
	fi
	head -1 /proc/stat > "$d/stat-after.txt"
	cat /proc/schedstat > "$d/schedstat-after.txt" 2>/dev/null
	gate off stopped "$d/probe.txt" $BPF || echo 'the counting window did not close' >> "$d/problems.txt"
	# c2c's troubles are notes, not problems: its numbers are an extra, and
	# a run whose scheduler counts are whole is kept without them.
	if [ -n "$C2C" ]; then
		stop "$C2CP" "perf c2c record" "$d/notes.txt"
	fi
	stop $BPF bpftrace "$d/notes.txt" 40
	if [ ${#LATC[@]} -gt 0 ]; then
		stop "$LATP" "$LAT funclatency" "$d/problems.txt"
	fi
	for p in ${MOREP[@]+"${MOREP[@]}"}; do
		stop "$p" "$LAT funclatency" "$d/problems.txt"
	done
	# perf c2c's reports, made once the run's probes are stopped: its
	# statistics (what probe_parsers.c2c reads) and the first 400 lines of
	# its table by cache line (which lines and functions, for a reader);
	# the samples themselves go, they are large on a big machine.
	if [ -n "$C2C" ]; then
		perf c2c report -i "$d/c2c.data" --stats > "$d/c2c-stats.txt" 2>&1 ||
			echo "perf c2c report failed: $(tail -1 "$d/c2c-stats.txt")" >> "$d/notes.txt"
		perf c2c report -i "$d/c2c.data" --stdio --call-graph none 2> /dev/null |
			head -n 400 > "$d/c2c-report.txt"
		rm -f "$d/c2c.data"
	fi
done 3< "$PLAN/runs.txt"
