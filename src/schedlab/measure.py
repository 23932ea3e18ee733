"""Measurement runs, in the lab VM or on the machine itself: one JSON per run.

One guest script runs a whole plan (one boot in the VM, one process group on
the host).  For every run it starts the probes, opens the counting window,
snapshots /proc/schedstat and /proc/stat, runs the workload under a time
limit, snapshots again, closes the window and stops the probes, writing raw
outputs into one folder per run (shared read-write with the host when in
the VM).  The host parses them
(parsers.py) into results/LABEL/run-WORKLOAD-N.json.

Counts (should_we_balance() calls, idle_cpu() probes made inside it,
sched_balance_rq() calls by idle type, migrations, balance attempts by
domain and idle type from schedstat) come first: they survive TCG's
distortion.  Times are reported beside them.

Probe tools: the counts always come from one bpftrace script, attached with
fentry (bpftrace 'kfunc') when the kernel has BTF, else with kprobes; the
latency histogram of should_we_balance() comes from bcc funclatency where it
works on the kernel at hand, else libbpf-tools funclatency, else the
bpftrace script's own histogram.  The guest tries them in that order and
writes down which it used and why; a comparison refuses to mix them.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from . import parsers
from . import topology as topomod
from . import vm
from .util import LabError, REPO, fmt_secs, kill_group, say, work_dir

# ------------------------------------------------------------------ probes


@dataclass(frozen=True)
class Probe:
    name: str
    what: str
    functions: tuple      # must be in /proc/kallsyms (out of line)


PROBES: Dict[str, Probe] = {
    "swb": Probe("swb", "should_we_balance(): calls, the idle_cpu() probes made inside it, "
                        "time", ("should_we_balance", "idle_cpu")),
    "lb": Probe("lb", "sched_balance_rq(): calls and time by idle type (busy, idle, newidle)",
                ("sched_balance_rq",)),
    "migrate": Probe("migrate", "sched:sched_migrate_task events", ()),
    "avgidle": Probe("avgidle", "rq->avg_idle as newidle balancing saw it when a CPU went "
                                "idle (read when the idle period ends): mean, share below "
                                "500 us, histogram", ("update_rq_avg_idle",)),
    "latency": Probe("latency", "funclatency histogram of should_we_balance() (bcc, else "
                                "libbpf-tools, else bpftrace)", ("should_we_balance",)),
}
DEFAULT_PROBES = ["swb", "lb", "migrate", "latency"]
ATTACH_METHODS = ("auto", "kfunc", "kprobe")
LATENCY_TOOLS = ("auto", "bcc", "libbpf", "bpftrace")
LATENCY_FUNCTION = "should_we_balance"
# bcc compiles its program with clang at every start; under TCG that takes
# minutes.  auto passes over it when its trial start takes longer than this.
BCC_MAX_START = 30
# The Debian package of each guest tool, for "missing tool" messages.
TOOL_PACKAGES = {"bpftrace": "bpftrace", "stress-ng": "stress-ng", "hackbench": "rt-tests",
                 "perf": "linux-perf", "dbench": "dbench", "tbench": "dbench",
                 "tbench_srv": "dbench", "funclatency-bpfcc": "bpfcc-tools",
                 "funclatency": "libbpf-tools"}


def probe_names(text: Optional[str]) -> List[str]:
    names = text.split(",") if text else list(DEFAULT_PROBES)
    for n in names:
        if n not in PROBES:
            raise LabError(f"unknown probe {n!r}; known: "
                           + "; ".join(f"{p.name} ({p.what})" for p in PROBES.values()))
    return names


def bpftrace_script(probe: str, attach: str) -> str:
    """The bpftrace lines of one probe for one attach method ('kfunc' or 'kprobe').

    Keyed by CPU, not by thread: should_we_balance() and sched_balance_rq()
    run with preemption off, mostly in softirq context where tid is whoever
    was interrupted.  Calls are counted at entry, so the counts are exact; a
    time is taken only when entry and exit pair up on one CPU (a softirq
    balance nested in a newly-idle one drops the outer time, not a count).
    Nothing is counted until the gate (GATE_BT) opens: the counts cover the
    workload's run, not the tools' start-up around it.
    """
    entry, exit_ = ("kfunc", "kretfunc") if attach == "kfunc" else ("kprobe", "kretprobe")
    idle = "args->idle" if attach == "kfunc" else "arg3"
    if probe in PROBE_MAPS:
        return _probe_lines(probe, entry, exit_, idle) + "\n" + _print_at_close(probe)
    return ""


# The maps each probe fills, printed when the counting window closes (see
# _print_at_close) and again by bpftrace at exit.
PROBE_MAPS = {"swb": ("swb_calls", "swb_idle_probes", "swb_ns_sum", "swb_ns"),
              "lb": ("lb_calls", "lb_ns_sum"),
              "migrate": ("migrations",),
              "avgidle": ("ai_n", "ai_lt500", "ai_sum", "ai_us")}


def _print_at_close(probe: str) -> str:
    """Print the probe's maps when the window closes, before the gate says
    'stopped' (the gate is attached last, so it runs last): the counts are out
    even when bpftrace then hangs detaching its fentry probes under TCG and
    has to be killed, which lost 3 of 15 runs of one plan before this."""
    prints = " ".join(f"print(@{m});" for m in PROBE_MAPS[probe])
    return f'tracepoint:sched:sched_process_exec /comm == "schedlab-off"/ {{ {prints} }}'


def _probe_lines(probe: str, entry: str, exit_: str, idle: str) -> str:
    if probe == "swb":
        return "\n".join([
            f"{entry}:should_we_balance /@on/ {{ @swb_calls = count(); @swb_in[cpu] = 1; "
            "@swb_t0[cpu] = nsecs; }",
            f"{exit_}:should_we_balance /@swb_t0[cpu]/ {{ $d = nsecs - @swb_t0[cpu]; "
            "@swb_ns_sum = sum($d); @swb_ns = hist($d); delete(@swb_t0[cpu]); "
            "delete(@swb_in[cpu]); }",
            f"{entry}:idle_cpu /@swb_in[cpu]/ {{ @swb_idle_probes = count(); }}",
        ])
    if probe == "lb":
        return "\n".join([
            f"{entry}:sched_balance_rq /@on/ {{ @lb_calls[{idle}] = count(); "
            f"@lb_t0[cpu] = nsecs; @lb_type[cpu] = {idle}; }}",
            f"{exit_}:sched_balance_rq /@lb_t0[cpu]/ {{ "
            "@lb_ns_sum[@lb_type[cpu]] = sum(nsecs - @lb_t0[cpu]); delete(@lb_t0[cpu]); }",
        ])
    if probe == "avgidle":
        # update_rq_avg_idle() runs when an idle period ends; with idle_stamp
        # set, rq->avg_idle at its entry is the value sched_balance_newidle()
        # compared when the CPU went idle (nothing else writes it in between).
        rq = "args->rq" if entry == "kfunc" else "((struct rq *)arg0)"
        return (f"{entry}:update_rq_avg_idle /@on && {rq}->idle_stamp/ {{ "
                f"$a = {rq}->avg_idle; @ai_n = count(); @ai_sum = sum($a); "
                "if ($a < 500000) { @ai_lt500 = count(); } @ai_us = hist($a / 1000); }")
    return "tracepoint:sched:sched_migrate_task /@on/ { @migrations = count(); }"


# The counting window: the guest execs a copy of /bin/true named schedlab-on
# right before the workload and schedlab-off right after it; the probes count
# only in between.  The gate prints a line when it switches, and the guest
# waits for that line, so the window is known to be open.  The gate comes
# last in the program; that the other probes are attached by then relies on
# bpftrace attaching in program order (not checked beyond the counts of
# every run so far being there).
GATE_BT = "\n".join([
    'tracepoint:sched:sched_process_exec /comm == "schedlab-on"/ { @on = 1; '
    'printf("schedlab: counting\\n"); }',
    'tracepoint:sched:sched_process_exec /comm == "schedlab-off"/ { @on = 0; '
    'printf("schedlab: stopped\\n"); }',
])


# ------------------------------------------------------------------ workloads


@dataclass(frozen=True)
class Workload:
    name: str
    command: str        # bash; may use $NCPU (CPUs online), $SECS
    parser: str
    tools: tuple        # binaries it needs
    what: str
    timed: bool = True  # runs for $SECS (else a fixed amount of work)


# Groups for the messaging benchmarks: one per four CPUs (20 senders and 20
# receivers each), so the task count follows the topology.
_G = "G=$(( NCPU >= 8 ? NCPU / 4 : 2 ))"

# Nested-cgroup ping-pong (cgroup v2) for the task-group-idle study: the same
# two-task pipe ping-pong in a group at depth 1 or depth 2, while sibling
# groups at the same depth keep half the CPUs busy.
_CGROUP_PP = (
    "CGR=/sys/fs/cgroup; mountpoint -q $CGR || mount -t cgroup2 none $CGR; "
    "echo +cpu > $CGR/cgroup.subtree_control; "
    "P=$CGR/schedlab; [ {depth} = 2 ] && P=$CGR/schedlab/top; mkdir -p $P; "
    "[ {depth} = 2 ] && echo +cpu > $CGR/schedlab/cgroup.subtree_control; "
    "echo +cpu > $P/cgroup.subtree_control; mkdir -p $P/pp $P/busy1 $P/busy2; "
    "B=; for b in busy1 busy2; do (echo $BASHPID > $P/$b/cgroup.procs; "
    "exec stress-ng --cpu $(( NCPU > 3 ? NCPU / 4 : 1 )) --timeout $(( SECS * 10 ))s "
    ">/dev/null 2>&1) & B=\"$B $!\"; done; sleep 1; "
    "(echo $BASHPID > $P/pp/cgroup.procs; exec perf bench sched pipe -l 2000); rc=$?; "
    "kill -TERM $B; wait; exit $rc"
)

WORKLOADS: Dict[str, Workload] = {}


def _add(w: Workload) -> None:
    WORKLOADS[w.name] = w


for _load in (100, 90, 50, 25):
    _add(Workload(f"stress-{_load}",
                  f"stress-ng --cpu $NCPU --cpu-load {_load} --timeout ${{SECS}}s "
                  "--metrics-brief", "stress_ng", ("stress-ng",),
                  f"stress-ng, one CPU worker per online CPU at {_load}% load (seed 000)"))
_add(Workload("hackbench-process", f"{_G}; hackbench -g $G -l 50", "hackbench",
              ("hackbench",), "rt-tests hackbench, processes over sockets, 1 group per 4 CPUs",
              timed=False))
_add(Workload("hackbench-overload", "hackbench -g $(( 2 * NCPU )) -l 20", "hackbench",
              ("hackbench",), "rt-tests hackbench, processes over sockets, 2 groups per "
              "online CPU (80 tasks per CPU): overloaded and going idle often", timed=False))
_add(Workload("hackbench-pipe", f"{_G}; hackbench -p -T -g $G -l 50", "hackbench",
              ("hackbench",), "rt-tests hackbench, threads over pipes, 1 group per 4 CPUs",
              timed=False))
_add(Workload("perf-messaging", f"{_G}; perf bench sched messaging -g $G -l 50",
              "perf_bench_sched", ("perf",),
              "perf bench sched messaging (the in-tree hackbench), 1 group per 4 CPUs",
              timed=False))
_add(Workload("perf-pipe", "perf bench sched pipe -l 20000", "perf_bench_sched", ("perf",),
              "perf bench sched pipe, 20000 round trips between two tasks", timed=False))
_add(Workload("dbench", "cd /tmp && dbench -t $SECS $NCPU", "dbench", ("dbench",),
              "dbench on /tmp, one client per online CPU"))
_add(Workload("tbench", "tbench_srv >/dev/null 2>&1 & SRV=$!; sleep 2; "
              "tbench -t $SECS $NCPU 127.0.0.1; rc=$?; kill $SRV; exit $rc", "dbench",
              ("tbench", "tbench_srv"), "tbench over loopback, one client per online CPU"))
for _d in (1, 2):
    _add(Workload(f"cgroup-pingpong-d{_d}", _CGROUP_PP.format(depth=_d), "perf_bench_sched",
                  ("perf", "stress-ng"),
                  f"pipe ping-pong in a cgroup v2 group at depth {_d}, sibling groups busy "
                  "(task-group-idle study)", timed=False))

SCHBENCH = "schbench"
DEFAULT_PLAN = ["stress-100", "stress-50", "hackbench-process"]


def schbench_workload(binary: Path) -> Workload:
    return Workload(SCHBENCH, f"{shlex.quote(str(binary))} -m 2 -t $(( NCPU / 2 > 0 ? "
                    "NCPU / 2 : 1 )) -r $SECS", "schbench", (str(binary),),
                    "schbench (your binary), 2 message threads, NCPU/2 workers each")


def workload(name: str, schbench: Optional[Path] = None) -> Workload:
    if name == SCHBENCH:
        if not schbench:
            raise LabError("the schbench workload needs your binary: --schbench PATH "
                           "(schbench is not packaged by Debian)")
        return schbench_workload(schbench)
    if name not in WORKLOADS:
        raise LabError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}, "
                       f"{SCHBENCH} (with --schbench PATH)")
    return WORKLOADS[name]


def plan_workloads(text: Optional[str], schbench: Optional[Path] = None) -> List[Workload]:
    names = text.split(",") if text else list(DEFAULT_PLAN)
    return [workload(n, schbench) for n in names]


def missing_tools(plan: Sequence[Workload], probes: Sequence[str],
                  latency_tool: str = "auto") -> List[str]:
    """Tools the plan needs that this machine lacks, with the package for each."""
    need = {"bpftrace"}
    for w in plan:
        need.update(w.tools)
    if "latency" in probes and latency_tool == "bcc":
        need.add("funclatency-bpfcc")
    if "latency" in probes and latency_tool == "libbpf":
        need.add("funclatency")
    out = []
    for tool in sorted(need):
        found = Path(tool).is_file() if "/" in tool else (
            shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin"))
        if not found:
            pkg = TOOL_PACKAGES.get(tool)
            out.append(f"{tool} (Debian package {pkg})" if pkg else tool)
    return out


# ------------------------------------------------------------------ sched knobs

KNOB_DIR = "/sys/kernel/debug/sched"
_KNOB_NAME = re.compile(r"[a-z0-9_]+")
_KNOB_VALUE = re.compile(r"[A-Za-z0-9_.+-]+")


def parse_knobs(items: Optional[Sequence[str]]) -> Dict[str, str]:
    """NAME=VALUE pairs for files in /sys/kernel/debug/sched/, in the order given."""
    out: Dict[str, str] = {}
    for item in items or ():
        name, eq, value = item.partition("=")
        if not eq or not _KNOB_NAME.fullmatch(name) or not _KNOB_VALUE.fullmatch(value):
            raise LabError(f"--knob {item!r}: expected NAME=VALUE, NAME a file in "
                           f"{KNOB_DIR}/ (e.g. newidle_min_avg_idle_ns=500000)")
        if name in out:
            raise LabError(f"--knob {name} is given twice")
        out[name] = value
    return out


def _knob_lines(knobs: Dict[str, str]) -> List[str]:
    """Write each knob before the plan, check it reads back, restore it on exit.

    A knob that is missing or refuses the value stops the plan: results
    measured with a setting other than the one asked for must not exist.
    """
    if not knobs:
        return [": > \"$OUT/knobs.txt\""]
    lines = [f"[ -d {KNOB_DIR} ] || mount -t debugfs none /sys/kernel/debug 2>/dev/null",
             ': > "$OUT/knobs.txt"']
    for name, value in knobs.items():
        f = f"{KNOB_DIR}/{name}"
        lines += [
            f"if [ ! -w {f} ]; then echo '{name}: {f} is not there or not writable "
            "(a kernel without the patch?)' > \"$OUT/knob-error.txt\"; exit 3; fi",
            f"OLD=$(cat {f}); KNOB_RESTORE=\"$KNOB_RESTORE echo $OLD > {f};\"",
            f"if ! echo {value} > {f} 2>/dev/null || [ \"$(cat {f})\" != {value} ]; then "
            f"echo \"{name}: writing {value} gave $(cat {f})\" > \"$OUT/knob-error.txt\"; "
            "exit 3; fi",
            f'echo "{name}=$(cat {f})" >> "$OUT/knobs.txt"',
        ]
    return lines


# ------------------------------------------------------------------ guest script

RUN_MARK = "@@schedlab-run"


def guest_script(plan: Sequence[Workload], runs: int, secs: int,
                 probes: Sequence[str] = tuple(DEFAULT_PROBES), attach: str = "auto",
                 latency_tool: str = "auto", limit: Optional[int] = None,
                 knobs: Optional[Dict[str, str]] = None) -> str:
    """The bash script that runs a whole plan (pure).  Argument: the output folder.

    It cleans up after itself on exit, interrupt and termination: probes
    and workloads are stopped, cgroups removed, schedstats and knobs restored.
    """
    limit = limit or max(120, 6 * secs)
    names = [w.name for w in plan]
    if len(set(names)) != len(names):
        raise LabError(f"a workload appears twice in the plan: {', '.join(names)}")
    files = []
    for p in probes:
        for method in ("kfunc", "kprobe"):
            text = bpftrace_script(p, method)
            if text:
                files.append(f"cat > $PD/{p}.{method}.bt <<'SCHEDLAB_EOF'\n{text}\n"
                             "SCHEDLAB_EOF")
    required = {p: " ".join(PROBES[p].functions) for p in probes}
    lines = [
        "set -u",
        'OUT="$1"',
        "PD=$(mktemp -d /tmp/schedlab-probes.XXXXXX); MOUNTED=",
        "OLD_SCHEDSTATS=$(sysctl -n kernel.sched_schedstats 2>/dev/null || echo 0)",
        "KNOB_RESTORE=",
        "cleanup() {",
        "  trap - EXIT INT TERM",
        "  kill -INT $(jobs -p) 2>/dev/null; sleep 1; kill -KILL $(jobs -p) 2>/dev/null",
        "  wait 2>/dev/null",
        "  for d in /sys/fs/cgroup/schedlab/top/* /sys/fs/cgroup/schedlab/top "
        "/sys/fs/cgroup/schedlab/*; do [ -d $d ] && rmdir $d 2>/dev/null; done",
        "  rmdir /sys/fs/cgroup/schedlab 2>/dev/null",
        "  sysctl -q kernel.sched_schedstats=$OLD_SCHEDSTATS 2>/dev/null",
        '  [ -n "$KNOB_RESTORE" ] && eval "$KNOB_RESTORE" 2>/dev/null',
        '  [ -n "$MOUNTED" ] && umount /sys/kernel/tracing',
        "  rm -rf $PD",
        "}",
        "trap cleanup EXIT",
        "trap 'echo interrupted > \"$OUT/interrupted.txt\"; exit 130' INT TERM",
        "cd /tmp",
        "NCPU=$(nproc)",
        f"SECS={secs}",
        "export NCPU SECS",
        "sysctl -q kernel.sched_schedstats=1 2>/dev/null",
        *_knob_lines(dict(knobs or {})),
        # Tracepoints and kprobes need tracefs; mounted only if it is not, undone on exit.
        "MOUNTED=; if [ ! -d /sys/kernel/tracing/events ] && mount -t tracefs nodev "
        "/sys/kernel/tracing 2>/dev/null; then MOUNTED=1; fi",
        'uname -r > "$OUT/uname.txt"',
        # For telling boots apart afterwards (under TCG the clocksource can differ).
        'dmesg > "$OUT/dmesg.txt" 2>/dev/null; cat /sys/devices/system/clocksource/'
        'clocksource0/current_clocksource > "$OUT/clocksource.txt" 2>/dev/null',
        '{ bpftrace --version; stress-ng --version; dpkg-query -W -f \'${Package} '
        '${Version}\\n\' bpftrace bpfcc-tools libbpf-tools stress-ng rt-tests linux-perf '
        'dbench; } > "$OUT/versions.txt" 2>&1',
        'have() { grep -qE " $1$" /proc/kallsyms; }',
        *files,
        f"cat > $PD/gate.bt <<'SCHEDLAB_EOF'\n{GATE_BT}\nSCHEDLAB_EOF",
        "cp /bin/true $PD/schedlab-on; cp /bin/true $PD/schedlab-off",
        # Attach method: fentry needs BTF; the same method for every probe of the plan.
        f"ATTACH={attach}",
        'if [ "$ATTACH" = auto ]; then',
        "  if [ -r /sys/kernel/btf/vmlinux ] && "
        "bpftrace -l 'kfunc:vmlinux:sched_balance_rq' 2>/dev/null | grep -q .; then "
        "ATTACH=kfunc; else ATTACH=kprobe; fi",
        "fi",
        'echo $ATTACH > "$OUT/attach.txt"',
        ': > $PD/probe.bt; : > "$OUT/probes-missing.txt"; : > "$OUT/probes-used.txt"',
        "try_bt() { timeout -k 5 150 bpftrace -e \"$(cat $1 $PD/gate.bt)\n"
        "interval:s:1 { exit(); }\" "
        "> $PD/try.txt 2>&1 && grep -q Attaching $PD/try.txt; }",
        "CANDIDATES=",
    ]
    for p in probes:
        funcs = required[p]
        cond = " && ".join(f"have {f}" for f in funcs.split()) or "true"
        lines += [
            f"if {cond}; then CANDIDATES=\"$CANDIDATES {p}\"; else",
            f"  for f in {funcs}; do have $f || echo \"{p}: $f is not in /proc/kallsyms "
            "(inlined?)\" >> \"$OUT/probes-missing.txt\"; done",
            "fi",
        ]
    lines += [
        # One trial of all candidates; if it fails, one per probe, keeping those that work.
        ": > $PD/all.bt; for p in $CANDIDATES; do [ -f $PD/$p.$ATTACH.bt ] && "
        "cat $PD/$p.$ATTACH.bt >> $PD/all.bt; done",
        'if [ ! -s $PD/all.bt ] || try_bt $PD/all.bt; then',
        '  cp $PD/all.bt $PD/probe.bt; for p in $CANDIDATES; do echo $p >> "$OUT/probes-used.txt"; '
        "done",
        "else",
        "  for p in $CANDIDATES; do",
        "    if [ ! -f $PD/$p.$ATTACH.bt ] || try_bt $PD/$p.$ATTACH.bt; then",
        "      [ -f $PD/$p.$ATTACH.bt ] && cat $PD/$p.$ATTACH.bt >> $PD/probe.bt",
        '      echo $p >> "$OUT/probes-used.txt"',
        "    else",
        '      why=$(grep ERROR $PD/try.txt | grep -v RLIMIT | tail -1)',
        '      echo "$p: bpftrace cannot attach it here: $why" >> "$OUT/probes-missing.txt"',
        "    fi",
        "  done",
        "fi",
        '[ -r /proc/schedstat ] || echo "schedstat: /proc/schedstat is absent '
        '(CONFIG_SCHEDSTATS off): no balance counts by domain" >> "$OUT/probes-missing.txt"',
    ]
    lines += [
        # Latency tool: the first that works here, with the reasons for the others.
        'LAT=none; LATSTART=0; : > "$OUT/latency-why.txt"',
        'if grep -qx latency "$OUT/probes-used.txt" 2>/dev/null; then',
        f"  for t in {' '.join(LATENCY_TOOLS[1:]) if latency_tool == 'auto' else latency_tool}; do",
        "    case $t in",
        "      bcc) C=$(command -v funclatency-bpfcc) ;;",
        "      libbpf) C=$(PATH=$PATH:/usr/sbin command -v funclatency) ;;",
        "      bpftrace) C=bpftrace ;;",
        "    esac",
        '    if [ -z "$C" ]; then echo "$t: not installed" >> "$OUT/latency-why.txt"; continue; fi',
        "    if [ $t = bpftrace ]; then",
        f"      grep -q {LATENCY_FUNCTION} $PD/probe.bt || cat $PD/swb.$ATTACH.bt "
        ">> $PD/probe.bt; LAT=bpftrace; break",
        "    fi",
        "    T0=$(date +%s)",
        f"    timeout -k 5 300 $C -d 3 {LATENCY_FUNCTION} > $PD/try-$t.txt 2>&1",
        "    START=$(( $(date +%s) - T0 - 3 ))",
        '    cp $PD/try-$t.txt "$OUT/latency-try-$t.txt"',
        "    if grep -q distribution $PD/try-$t.txt; then",
        # bcc compiles its program with clang at every start: slow under TCG.
        f'      if [ $t = bcc ] && [ {"1" if latency_tool == "auto" else "0"} = 1 ] && '
        f"[ $START -gt {BCC_MAX_START} ]; then",
        '        echo "bcc: works, but takes ${START}s to start (compiling with clang); '
        f'over {BCC_MAX_START}s, so not picked for every run: --latency-tool bcc forces it" '
        '>> "$OUT/latency-why.txt"; continue',
        "      fi",
        '      LAT=$t; LATSTART=$START; echo "$t: works, starts in ${START}s" '
        '>> "$OUT/latency-why.txt"; break',
        "    fi",
        '    echo "$t: failed: $(grep -v "^ *$" $PD/try-$t.txt | tail -3 | tr "\\n" " ")" '
        '>> "$OUT/latency-why.txt"',
        "  done",
        "fi",
        'echo $LAT > "$OUT/latency-tool.txt"',
        # Last, after the bpftrace latency fallback may have added its lines.
        "cat $PD/gate.bt >> $PD/probe.bt",
        # Unbuffered: the "Tracing" line must reach the file while the tool runs.
        # bash starts background jobs with SIGINT ignored, and Python keeps it
        # ignored: bcc's funclatency would never print its histogram.
        "printf '%s\\n' '#!/usr/bin/env python3' 'import os, signal, sys' "
        "'signal.signal(signal.SIGINT, signal.SIG_DFL)' 'os.execvp(sys.argv[1], sys.argv[1:])' "
        "> $PD/sigdfl; chmod +x $PD/sigdfl",
        'case $LAT in bcc) LATC="$PD/sigdfl env PYTHONUNBUFFERED=1 funclatency-bpfcc" ;; '
        'libbpf) LATC="stdbuf -oL $(PATH=$PATH:/usr/sbin command -v funclatency)" ;; '
        '*) LATC= ;; esac',
        # Stop a tool (it prints its maps or histogram on SIGINT); kill it if it
        # hangs, after $4 half-seconds (default 240: 120 s). bpftrace detaching
        # fentry probes can take minutes under TCG; its maps are printed when the
        # window closes, so it gets 20 s and a note, not a lost run.
        "stop() { local n=${4:-240}; kill -INT $1 2>/dev/null; for t in $(seq $n); do "
        "kill -0 $1 2>/dev/null || { wait $1 2>/dev/null; return 0; }; sleep 0.5; done; "
        'kill -KILL $1 2>/dev/null; wait $1 2>/dev/null; echo "$2 did not stop within '
        '$(( n / 2 )) s after SIGINT: killed" >> "$3"; }',
        # Wait until a tool prints its first line saying it is attached.
        # (at most $4 half-seconds: 120 s by default).
        "wait_for() { for t in $(seq ${4:-240}); do grep -qE \"$2\" \"$1\" && return 0; "
        "kill -0 $3 2>/dev/null || return 1; sleep 0.5; done; return 1; }",
        "LATWAIT=$(( 4 * LATSTART + 240 ))",
        # Open or close the counting window (GATE_BT) and wait until bpftrace says so.
        "gate() { for t in $(seq 60); do $PD/schedlab-$1; grep -q \"schedlab: $2\" $3 && "
        "return 0; kill -0 $4 2>/dev/null || return 1; sleep 0.5; done; return 1; }",
    ]
    total = len(plan) * runs
    k = 0
    for w in plan:
        for i in range(runs):
            k += 1
            d = f'"$OUT/{w.name}-{i}"'
            lines += [
                f"mkdir -p {d}",
                f"echo {RUN_MARK} {k}/{total} {w.name} {i}",
                f"echo {shlex.quote(w.command)} > {d}/command.txt",
                f"echo $ATTACH $LAT > {d}/tools.txt",
                # Line-buffered: a map dump cut short by a kill is still seen as such.
                f"stdbuf -oL bpftrace $PD/probe.bt > {d}/probe.txt 2>&1 & BPF=$!",
                f"wait_for {d}/probe.txt Attaching $BPF || echo 'probe did not attach' "
                f">> {d}/problems.txt",
                f'if [ -n "$LATC" ]; then $LATC {LATENCY_FUNCTION} > {d}/latency.txt 2>&1 & '
                f"LATP=$!; wait_for {d}/latency.txt Tracing $LATP $LATWAIT || echo 'latency "
                f"tool did not attach' >> {d}/problems.txt; fi",
                f"gate on counting {d}/probe.txt $BPF || echo 'the counting window did not "
                f"open' >> {d}/problems.txt",
                f"cat /proc/schedstat > {d}/schedstat-before.txt 2>/dev/null",
                f"head -1 /proc/stat > {d}/stat-before.txt",
                f"S=$(date +%s.%N); (timeout -k 10 {limit} bash -c {shlex.quote(w.command)}) "
                f"> {d}/workload.txt 2>&1; echo $? > {d}/status.txt",
                f"echo $(date +%s.%N) $S | awk '{{print $1 - $2}}' > {d}/seconds.txt",
                f"head -1 /proc/stat > {d}/stat-after.txt",
                f"cat /proc/schedstat > {d}/schedstat-after.txt 2>/dev/null",
                f"gate off stopped {d}/probe.txt $BPF || echo 'the counting window did not "
                f"close' >> {d}/problems.txt",
                f"stop $BPF bpftrace {d}/notes.txt 40",
                f'if [ -n "$LATC" ]; then stop $LATP "$LAT funclatency" {d}/problems.txt; fi',
            ]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ parsing

PROBE_METRICS = (
    # map, metric name, unit, probe
    ("swb_calls", "should_we_balance calls", "calls", "swb"),
    ("swb_idle_probes", "idle_cpu probes in should_we_balance", "probes", "swb"),
    ("lb_calls[0]", "sched_balance_rq busy calls", "calls", "lb"),
    ("lb_calls[1]", "sched_balance_rq idle calls", "calls", "lb"),
    ("lb_calls[2]", "sched_balance_rq newidle calls", "calls", "lb"),
    ("migrations", "migrations", "events", "migrate"),
)


def _read(d: Path, name: str) -> str:
    p = d / name
    return p.read_text(errors="replace") if p.is_file() else ""


def parse_run(d: Path, w: Workload, probes_used: Sequence[str] = tuple(DEFAULT_PROBES),
              latency_tool: str = "bpftrace", schedstat: bool = True) -> dict:
    """Metrics of one run folder; 'complete' false with the reasons when not."""
    metrics: Dict[str, parsers.Metric] = {}
    problems = [ln for ln in _read(d, "problems.txt").splitlines() if ln.strip()]
    status = _read(d, "status.txt").strip()
    if not d.is_dir() or not status:
        problems.append("did not finish (interrupted, crashed or timed out)")
    elif status == "124":
        problems.append("workload hit its time limit")
    elif status != "0":
        problems.append(f"workload exited with status {status}")
    work = getattr(parsers, w.parser)(_read(d, "workload.txt"))
    if status == "0" and not work:
        problems.append("no result in the workload's output")
    metrics.update(work)
    try:
        secs = float(_read(d, "seconds.txt").strip())
    except ValueError:
        secs = 0.0
    probe_out = _read(d, "probe.txt")
    maps = parsers.bpftrace_maps(probe_out)
    for key, name, unit, probe in PROBE_METRICS:
        if probe not in probes_used:
            continue
        value = maps.get(key, 0.0)   # bpftrace prints nothing for a map never written
        metrics[name] = parsers.Metric(value, unit, "count", False)
        if secs > 0:
            metrics[name + " per s"] = parsers.Metric(value / secs, unit + "/s", "count",
                                                      False)
    if "avgidle" in probes_used:
        n = maps.get("ai_n", 0.0)
        metrics["idle periods ended"] = parsers.Metric(n, "events", "count", False)
        if n:
            metrics["avg_idle at newidle mean"] = parsers.Metric(
                maps.get("ai_sum", 0.0) / n / 1000, "us", "count", False)
            metrics["avg_idle at newidle below 500 us"] = parsers.Metric(
                100.0 * maps.get("ai_lt500", 0.0) / n, "%", "count", False)
    if "swb" in probes_used and maps.get("swb_calls"):
        metrics["idle_cpu probes per should_we_balance call"] = parsers.Metric(
            maps.get("swb_idle_probes", 0.0) / maps["swb_calls"], "probes", "count", False)
    if "lb" in probes_used:
        for idx, itype in enumerate(parsers.IDLE_TYPES):
            # A map key never written is not printed: no call, no time.
            calls, total = maps.get(f"lb_calls[{idx}]"), maps.get(f"lb_ns_sum[{idx}]", 0.0)
            metrics[f"sched_balance_rq {itype} total time"] = parsers.Metric(
                total, "ns", "time", False)
            if calls:
                metrics[f"sched_balance_rq {itype} mean time"] = parsers.Metric(
                    total / calls, "ns", "time", False)
    histograms = {}
    bt_hist = parsers.bpftrace_hist(probe_out).get("swb_ns")
    if "swb" in probes_used and "swb_ns_sum" in maps and maps.get("swb_calls"):
        count = sum(c for _, _, c in bt_hist) if bt_hist else 0
        if count:
            metrics["should_we_balance mean time (bpftrace)"] = parsers.Metric(
                maps["swb_ns_sum"] / count, "ns", "time", False)
    if "latency" in probes_used:
        if latency_tool in ("bcc", "libbpf"):
            lat = parsers.funclatency(_read(d, "latency.txt"))
            if not lat.buckets:
                problems.append(f"no histogram from {latency_tool} funclatency")
            else:
                histograms["should_we_balance"] = {"tool": latency_tool, "unit": lat.unit,
                                                   "buckets": lat.buckets}
                mean = lat.avg if lat.avg is not None else parsers.hist_mean(lat.buckets)
                metrics["should_we_balance mean time (funclatency)"] = parsers.Metric(
                    mean * parsers.UNIT_NS.get(lat.unit, 1), "ns", "time", False)
        elif bt_hist:
            histograms["should_we_balance"] = {"tool": "bpftrace", "unit": "nsecs",
                                               "buckets": bt_hist}
    if "Attaching" not in probe_out:
        problems.append("the probe did not attach: " + probe_out.strip()[:200])
    elif "@on:" not in probe_out and "schedlab: stopped" not in probe_out:
        # The maps are printed when the window closes, before the gate's
        # 'stopped' line, and at exit with the gate's own map: without either
        # line, no map was.
        problems.append("bpftrace printed no maps")
    try:
        if schedstat:
            metrics.update(parsers.schedstat_delta(_read(d, "schedstat-before.txt"),
                                                   _read(d, "schedstat-after.txt")))
        metrics.update(parsers.proc_stat_busy(_read(d, "stat-before.txt"),
                                              _read(d, "stat-after.txt")))
    except ValueError as exc:
        problems.append(str(exc))
    notes = [ln for ln in _read(d, "notes.txt").splitlines() if ln.strip()]
    return {"complete": not problems, "problems": sorted(set(problems)), "notes": notes,
            "seconds": secs,
            "command": _read(d, "command.txt").strip(),
            "metrics": {k: m.__dict__ for k, m in metrics.items()},
            "histograms": histograms,
            "raw": {"workload": _read(d, "workload.txt")[-4000:],
                    "probe": probe_out[-4000:]}}


# Labels of the lab's own scratch runs (the test command's integration run):
# their results go under work/, so that a run leaves the checkout clean.
SCRATCH = "scratch/"


def results_dir(label: str) -> Path:
    """results/LABEL, or work/results/NAME for a scratch label 'scratch/NAME'."""
    if label.startswith(SCRATCH):
        return work_dir() / "results" / label[len(SCRATCH):]
    return REPO / "results" / label


@dataclass
class GuestFacts:
    release: str
    attach: str
    latency_tool: str
    latency_why: List[str]
    probes_used: List[str]
    probes_missing: List[str]
    versions: List[str]


def guest_facts(tmp: Path) -> GuestFacts:
    def lines(name: str) -> List[str]:
        return [ln.strip() for ln in _read(tmp, name).splitlines() if ln.strip()]
    return GuestFacts(_read(tmp, "uname.txt").strip(), _read(tmp, "attach.txt").strip(),
                      _read(tmp, "latency-tool.txt").strip() or "none",
                      lines("latency-why.txt"), lines("probes-used.txt"),
                      lines("probes-missing.txt"), lines("versions.txt"))


def collect(label: str, tmp: Path, plan: Sequence[Workload], runs: int, setting: dict,
            extra: dict) -> List[dict]:
    """Parse every run folder (finished or not) into results/LABEL/."""
    facts = guest_facts(tmp)
    setting = dict(setting, release=facts.release,
                   probe_tool=f"bpftrace/{facts.attach or '?'}",
                   latency_tool=facts.latency_tool, probes=sorted(facts.probes_used),
                   accel=extra.get("accel", ""))
    out_dir = results_dir(label)
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("run-*.json"):
        old.unlink()
    done = []
    for w in plan:
        for i in range(runs):
            run = _parse_in_plan(tmp, w, i, facts.probes_used, facts.latency_tool,
                                 facts.probes_missing)
            run.update({"label": label, "workload": w.name, "workload_what": w.what,
                        "run": i, "setting": setting, "tool_versions": facts.versions,
                        "probes_missing": facts.probes_missing,
                        "latency_why": facts.latency_why, "raw_dir": str(tmp), **extra})
            (out_dir / f"run-{w.name}-{i}.json").write_text(json.dumps(run, indent=1) + "\n")
            done.append(run)
    (out_dir / "plan.json").write_text(json.dumps(
        {"plan": [w.name for w in plan], "runs": runs, "setting": setting,
         "key": extra.get("key", "")}, indent=1) + "\n")
    return done


def _parse_in_plan(raw: Path, w: Workload, index: int, probes_used: Sequence[str],
                   latency_tool: str, probes_missing: Sequence[str]) -> dict:
    """parse_run() of run INDEX of a plan's raw folder, with what holds for the
    whole plan: schedstat absent, a knob that could not be set."""
    run = parse_run(raw / f"{w.name}-{index}", w, probes_used, latency_tool,
                    schedstat=not any(m.startswith("schedstat:") for m in probes_missing))
    knob_error = _read(raw, "knob-error.txt").strip()
    if knob_error:
        run["problems"] = sorted(set(run["problems"]) | {f"knob: {knob_error}"})
        run["complete"] = False
    return run


def reparse(folder: Path) -> List[dict]:
    """Parse the raw outputs of results/LABEL/run-*.json again (after a parser
    change), keeping what the run recorded about its setting and tools."""
    done = []
    for f in sorted(folder.glob("run-*.json")):
        r = json.loads(f.read_text())
        raw = Path(r.get("raw_dir", ""))
        if not (raw / f"{r['workload']}-{r['run']}").is_dir():
            raise LabError(f"{f}: its raw outputs are gone ({raw})")
        # schbench is the one workload not in WORKLOADS (the user's binary).
        w = WORKLOADS.get(r["workload"]) or Workload(SCHBENCH, r.get("command", ""),
                                                     "schbench", (), "")
        st = r.get("setting", {})
        r.update(_parse_in_plan(raw, w, r["run"], st.get("probes", DEFAULT_PROBES),
                                st.get("latency_tool", "none"), r.get("probes_missing", [])))
        f.write_text(json.dumps(r, indent=1) + "\n")
        done.append(r)
    if not done:
        raise LabError(f"no run-*.json in {folder}")
    return done


def report(label: str, runs: List[dict]) -> None:
    if not runs:
        return
    s, first = runs[0]["setting"], runs[0]
    say(f"  probes: counts with {s['probe_tool']}, latency with {s['latency_tool']}"
        + (f" ({'; '.join(first['latency_why'])})" if first["latency_why"] else ""))
    for miss in first["probes_missing"]:
        hint = (": build with the measurement series (build --measure, patches/measure/), "
                "which keeps the probed functions out of line") if "kallsyms" in miss else ""
        say(f"  NOTE: not measured: {miss}{hint}")
    for r in runs:
        state = "ok" if r["complete"] else "INCOMPLETE: " + "; ".join(r["problems"])
        say(f"  {r['workload']} #{r['run']}: {state}")
    bad = sum(1 for r in runs if not r["complete"])
    say(f"  results in {results_dir(label)}: {len(runs) - bad} complete, {bad} incomplete")


# What a complete run of each probe must have produced (integration check).
EXPECTED_METRICS = {
    "swb": ("should_we_balance calls per s", "idle_cpu probes in should_we_balance per s",
            "idle_cpu probes per should_we_balance call",
            "should_we_balance mean time (bpftrace)"),
    "lb": ("sched_balance_rq busy calls", "sched_balance_rq idle calls",
           "sched_balance_rq newidle calls"),
    "migrate": ("migrations per s",),
    "avgidle": ("idle periods ended",),
    "latency": ("should_we_balance mean time (funclatency)",),
}


def check_runs(runs: List[dict], probes: Sequence[str]) -> List[str]:
    """Problems with a plan's results: incomplete runs, probes or metrics missing,
    values that are not finite, counts that stayed at zero."""
    import math
    problems = []
    for r in runs:
        name = f"{r['workload']} #{r['run']}"
        if not r["complete"]:
            problems.append(f"{name}: incomplete: {'; '.join(r['problems'])}")
            continue
        used = r["setting"].get("probes", [])
        metrics = r["metrics"]
        for p in probes:
            if p not in used:
                problems.append(f"{name}: probe {p} was not used")
                continue
            for m in EXPECTED_METRICS.get(p, ()):
                if m not in metrics:
                    problems.append(f"{name}: no {m!r}")
        if not any(m.startswith("balance ") for m in metrics):
            problems.append(f"{name}: no /proc/schedstat balance counts")
        if "cpu busy" not in metrics:
            problems.append(f"{name}: no CPU busy % from /proc/stat")
        for m, v in metrics.items():
            if not math.isfinite(v["value"]):
                problems.append(f"{name}: {m} = {v['value']}")
        for m in ("should_we_balance calls per s", "migrations per s"):
            if m in metrics and metrics[m]["value"] <= 0:
                problems.append(f"{name}: {m} is zero")
    return problems


def estimate_seconds(plan: Sequence[Workload], runs: int, secs: int, accel: str = "tcg") -> float:
    """A rough duration of a plan, for progress and the VM's time limit."""
    # Under TCG (one thread) a run costs about 25 s besides the workload:
    # bpftrace attaching, bcc compiling, the counting window's handshakes;
    # the tools' trials before the first run about a minute.
    per = {True: secs + (25 if accel == "tcg" else 10), False: 35 if accel == "tcg" else 20}
    return 90 + sum(per[w.timed] for w in plan) * runs


class Progress:
    """Prints 'run k/N' with the time left while a plan runs (polls the run folders)."""

    def __init__(self, tmp: Path, plan: Sequence[Workload], runs: int, secs: int) -> None:
        self.tmp, self.plan, self.runs, self.secs = tmp, plan, runs, secs
        self.total = len(plan) * runs
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.start = time.monotonic()

    def _finished(self) -> int:
        return sum(1 for w in self.plan for i in range(self.runs)
                   if (self.tmp / f"{w.name}-{i}" / "schedstat-after.txt").is_file())

    def _loop(self) -> None:
        seen = -1
        while not self.stop.wait(15):
            done = self._finished()
            if done == seen:
                continue
            seen = done
            took = time.monotonic() - self.start
            if done:
                left = took / done * (self.total - done)
            else:
                left = estimate_seconds(self.plan, self.runs, self.secs) - took
            say(f"  [measure] {done}/{self.total} runs done, {fmt_secs(took)} elapsed, "
                f"about {fmt_secs(max(left, 0))} left")

    def __enter__(self) -> "Progress":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(timeout=1)


def _tmp_dir(label: str) -> Path:
    flat = label.replace("/", "-")
    tmp = work_dir() / "measure" / f"{flat}-{time.strftime('%Y%m%dT%H%M%S')}"
    tmp.mkdir(parents=True)
    return tmp


def measure_vm(label: str, image: Path, topo: topomod.Topology, plan: List[Workload],
               runs: int, secs: int, setting: dict, timeout: float,
               probes: Sequence[str] = tuple(DEFAULT_PROBES), attach: str = "auto",
               latency_tool: str = "auto", online: Optional[int] = None,
               key: str = "", knobs: Optional[Dict[str, str]] = None) -> List[dict]:
    tmp = _tmp_dir(label)
    script = vm.guest_script(f"measure-{label.replace('/', '-')}.sh",
                             guest_script(plan, runs, secs, probes, attach, latency_tool,
                                          knobs=knobs))
    est = estimate_seconds(plan, runs, secs)
    timeout = max(timeout, 3 * est)
    say(f"  plan: {', '.join(w.name for w in plan)} x {runs} run(s), {secs}s per timed "
        f"workload; about {fmt_secs(est)} under TCG; raw outputs in {tmp}")
    res = None
    try:
        with Progress(tmp, plan, runs, secs):
            # The guest's own output goes to a file beside the runs' (kept).
            # One host thread for all vCPUs: attaching the probes patches
            # kernel text, which multi-threaded TCG does not survive (vm.py).
            res = vm.boot(image, topo, f"bash {script} {tmp} > {tmp}/guest.log 2>&1 "
                          "< /dev/null", timeout=timeout, rwdirs=[tmp], online=online,
                          tcg_single=True)
        (tmp / "console.txt").write_text(res.output)
        if res.returncode != 0 and ("Kernel panic" in res.output or "BUG:" in res.output):
            say(f"  the guest kernel crashed: see {tmp / 'console.txt'}")
    finally:
        # Also on a timeout or Ctrl-C (the VM is stopped by then): keep what ran.
        extra = {"accel": res.accel if res else "?", "vm_exit": res.returncode if res else None,
                 "key": key}
        done = collect(label, tmp, plan, runs, setting, extra)
        report(label, done)
    return done


# ------------------------------------------------------------------ host mode


def host_topology() -> str:
    """'host: 64 CPUs online, 2 package(s), SMT8, 2 node(s)' from sysfs (any arch)."""
    base = Path("/sys/devices/system/cpu")
    online = [p for p in base.glob("cpu[0-9]*") if (p / "topology").is_dir()]
    pkgs, smt = set(), 1
    for p in online:
        try:
            pkgs.add((p / "topology/physical_package_id").read_text().strip())
            sib = (p / "topology/thread_siblings_list").read_text().strip()
            smt = max(smt, len(topomod.parse_cpulist(sib)))
        except OSError:
            continue
    nodes = len(list(Path("/sys/devices/system/node").glob("node[0-9]*"))) or 1
    return f"host: {len(online)} CPUs online, {len(pkgs)} package(s), SMT{smt}, {nodes} node(s)"


def host_config_key(text: str) -> str:
    """A hash of a kernel config that ignores what differs between base and patched."""
    import hashlib
    keep = [ln for ln in text.splitlines() if ln.startswith("CONFIG_")
            and not ln.startswith(("CONFIG_LOCALVERSION", "CONFIG_CC_VERSION_TEXT",
                                   "CONFIG_BUILD_SALT"))]
    return "host-config:" + hashlib.sha256("\n".join(sorted(keep)).encode()).hexdigest()[:12]


def running_config() -> str:
    import gzip
    p = Path("/proc/config.gz")
    if p.is_file():
        return gzip.decompress(p.read_bytes()).decode(errors="replace")
    boot = Path(f"/boot/config-{os.uname().release}")
    return boot.read_text() if boot.is_file() else ""


def _kill_stragglers(pgid: int) -> None:
    """Whatever the plan left in its process group after it ended."""
    import signal
    try:
        os.killpg(pgid, signal.SIGKILL)
        say("  stopped processes the plan left behind")
    except (ProcessLookupError, PermissionError):
        pass


def measure_host(label: str, plan: List[Workload], runs: int, secs: int, setting: dict,
                 timeout: float, probes: Sequence[str] = tuple(DEFAULT_PROBES),
                 attach: str = "auto", latency_tool: str = "auto", key: str = "",
                 knobs: Optional[Dict[str, str]] = None) -> List[dict]:
    if os.geteuid() != 0:
        raise LabError("measure --host needs root: bpftrace and funclatency load BPF programs, "
                       "and the plan switches kernel.sched_schedstats on and off; run it "
                       "with sudo")
    tmp = _tmp_dir(label)
    script = tmp.parent / f"measure-{label}.sh"
    script.write_text(guest_script(plan, runs, secs, probes, attach, latency_tool,
                                   knobs=knobs))
    est = estimate_seconds(plan, runs, secs, accel="host")
    timeout = max(timeout, 3 * est)
    say(f"  plan: {', '.join(w.name for w in plan)} x {runs} run(s) on this machine "
        f"({os.uname().release}), about {fmt_secs(est)}; raw outputs in {tmp}")
    log = tmp / "console.txt"
    rc: Optional[int] = None
    try:
        with Progress(tmp, plan, runs, secs), open(log, "w") as f:
            proc = subprocess.Popen(["bash", str(script), str(tmp)], stdout=f,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
            try:
                rc = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                say(f"  the plan did not finish within {fmt_secs(timeout)}: stopping it")
            finally:
                # The script's own trap stops probes and workloads on SIGTERM;
                # the process group is killed after a grace period anyway.
                kill_group(proc, grace=15)
                _kill_stragglers(proc.pid)
    finally:
        done = collect(label, tmp, plan, runs, setting,
                       {"accel": "host", "host_exit": rc, "key": key})
        report(label, done)
    return done
