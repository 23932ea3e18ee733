"""Measurement runs in the lab VM: workloads with probes, one JSON per run.

One boot runs the whole plan: for every run the guest snapshots
/proc/schedstat and /proc/stat, starts the probe (bpftrace, kprobes, so it
works without BTF too), runs the workload, stops the probe and snapshots
again, writing raw outputs into a folder shared read-write with the host.
The host parses them (parsers.py) into results/LABEL/run-WORKLOAD-N.json.
Counts (should_we_balance() calls, idle_cpu() probes made inside it,
sched_balance_rq() calls, balance attempts by domain and idle type) come
first: they survive TCG's distortion; times are reported beside them.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List

from . import parsers
from . import topology as topomod
from . import vm
from .util import LabError, REPO, say, work_dir

PROBE_TOOL = "bpftrace"

# Counts inside should_we_balance() (noinline in the measurement series),
# kprobe form for bpftrace 0.17.
BPFTRACE_SWB = r"""
kprobe:should_we_balance { @swb_calls = count(); @in[tid] = 1; @t0[tid] = nsecs; }
kretprobe:should_we_balance /@t0[tid]/ {
  @swb_ns = avg(nsecs - @t0[tid]); delete(@t0[tid]); delete(@in[tid]);
}
kprobe:idle_cpu /@in[tid]/ { @swb_idle_probes = count(); }
kprobe:sched_balance_rq { @lb_calls = count(); }
END { clear(@in); clear(@t0); }
"""

PROBED_FUNCTIONS = ("should_we_balance", "idle_cpu", "sched_balance_rq")


@dataclass(frozen=True)
class Workload:
    name: str
    command: str        # shell, may use $NCPU (CPUs online) and $SECS
    parser: str


WORKLOADS: Dict[str, Workload] = {
    "stress-100": Workload("stress-100",
                           "stress-ng --cpu $NCPU --cpu-load 100 --timeout ${SECS}s "
                           "--metrics-brief", "stress_ng"),
    "stress-50": Workload("stress-50",
                          "stress-ng --cpu $NCPU --cpu-load 50 --timeout ${SECS}s "
                          "--metrics-brief", "stress_ng"),
    "stress-25": Workload("stress-25",
                          "stress-ng --cpu $NCPU --cpu-load 25 --timeout ${SECS}s "
                          "--metrics-brief", "stress_ng"),
    "hackbench-process": Workload("hackbench-process",
                                  "hackbench -g $((NCPU > 2 ? NCPU / 2 : 1)) -l 200",
                                  "hackbench"),
    "hackbench-pipe": Workload("hackbench-pipe",
                               "hackbench -p -g $((NCPU > 2 ? NCPU / 2 : 1)) -l 200",
                               "hackbench"),
    "perf-messaging": Workload("perf-messaging",
                               "perf bench sched messaging -g $((NCPU > 2 ? NCPU / 2 : 1)) "
                               "-l 100", "perf_bench_sched"),
    "perf-pipe": Workload("perf-pipe", "perf bench sched pipe -l 20000", "perf_bench_sched"),
    "dbench": Workload("dbench", "dbench -t $SECS $NCPU", "dbench"),
}

DEFAULT_PLAN = ["stress-100", "stress-50", "hackbench-process"]


def workload(name: str) -> Workload:
    if name not in WORKLOADS:
        raise LabError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")
    return WORKLOADS[name]


def guest_script(plan: List[str], runs: int, secs: int) -> str:
    """The bash script the guest runs for a whole plan (pure)."""
    lines = [
        "set -u",
        'OUT="$1"',
        "cd /tmp",
        "NCPU=$(nproc)",
        f"SECS={secs}",
        "sysctl -q kernel.sched_schedstats=1",
        'uname -r > "$OUT/uname.txt"',
        '{ bpftrace --version; stress-ng --version; } > "$OUT/versions.txt" 2>&1',
        f"for f in {' '.join(PROBED_FUNCTIONS)}; do",
        '  grep -qw "$f" /proc/kallsyms && echo "$f" >> "$OUT/kallsyms.txt"',
        "done",
        f"cat > /tmp/probe.bt <<'SCHEDLAB_EOF'\n{BPFTRACE_SWB.strip()}\nSCHEDLAB_EOF",
    ]
    for name in plan:
        w = workload(name)
        for i in range(runs):
            d = f'"$OUT/{name}-{i}"'
            lines += [
                f"mkdir -p {d}",
                f"echo {shlex.quote(w.command)} > {d}/command.txt",
                f"cat /proc/schedstat > {d}/schedstat-before.txt",
                f"bpftrace /tmp/probe.bt > {d}/probe.txt 2>&1 & BPF=$!",
                # Wait until the probes are attached (at most 60 s under TCG).
                f"for t in $(seq 120); do grep -q Attaching {d}/probe.txt && break; "
                "sleep 0.5; done; sleep 1",
                f"head -1 /proc/stat > {d}/stat-before.txt",
                f"S=$(date +%s.%N); ({w.command}) > {d}/workload.txt 2>&1; "
                f"echo $? > {d}/status.txt",
                f"echo $(date +%s.%N) $S | awk '{{print $1 - $2}}' > {d}/seconds.txt",
                f"head -1 /proc/stat > {d}/stat-after.txt",
                "kill -INT $BPF; wait $BPF",
                f"cat /proc/schedstat > {d}/schedstat-after.txt",
            ]
    lines.append("sysctl -q kernel.sched_schedstats=0")
    return "\n".join(lines) + "\n"


def parse_run(d: Path, w: Workload) -> dict:
    """Metrics of one run folder; 'complete' false with the reason when not."""
    def read(name: str) -> str:
        p = d / name
        return p.read_text(errors="replace") if p.is_file() else ""
    metrics: Dict[str, parsers.Metric] = {}
    problems = []
    if read("status.txt").strip() != "0":
        problems.append(f"workload exited with status {read('status.txt').strip() or '?'}")
    metrics.update(getattr(parsers, w.parser)(read("workload.txt")))
    try:
        secs = float(read("seconds.txt").strip())
    except ValueError:
        secs = 0.0
        problems.append("no duration")
    maps = parsers.bpftrace_maps(read("probe.txt"))
    for key, name, unit in (("swb_calls", "should_we_balance calls", "calls"),
                            ("swb_idle_probes", "idle_cpu probes in should_we_balance",
                             "probes"),
                            ("lb_calls", "sched_balance_rq calls", "calls")):
        if key not in maps:
            maps[key] = 0.0   # bpftrace prints nothing for a map never written
        metrics[name] = parsers.Metric(maps[key], unit, "count", False)
        if secs > 0:
            metrics[name + " per s"] = parsers.Metric(maps[key] / secs, unit + "/s", "count",
                                                      False)
    if "swb_ns" in maps:
        metrics["should_we_balance mean time"] = parsers.Metric(maps["swb_ns"], "ns", "time",
                                                                False)
    if "Attaching" not in read("probe.txt"):
        problems.append("the probe did not attach: " + read("probe.txt").strip()[:200])
    try:
        metrics.update(parsers.schedstat_delta(read("schedstat-before.txt"),
                                               read("schedstat-after.txt")))
        metrics.update(parsers.proc_stat_busy(read("stat-before.txt"), read("stat-after.txt")))
    except ValueError as exc:
        problems.append(str(exc))
    return {"complete": not problems, "problems": problems, "seconds": secs,
            "command": read("command.txt").strip(),
            "metrics": {k: m.__dict__ for k, m in metrics.items()},
            "raw": {"workload": read("workload.txt")[-4000:],
                    "probe": read("probe.txt")[-4000:]}}


def results_dir(label: str) -> Path:
    return REPO / "results" / label


def measure_vm(label: str, image: Path, topo: topomod.Topology, plan: List[str], runs: int,
               secs: int, setting: dict, timeout: float) -> List[dict]:
    stamp = time.strftime("%Y%m%dT%H%M%S")
    tmp = work_dir() / "measure" / f"{label}-{stamp}"
    tmp.mkdir(parents=True)
    script = vm.guest_script(f"measure-{label}.sh", guest_script(plan, runs, secs))
    say(f"  plan: {', '.join(plan)} x {runs} run(s), {secs}s each; raw outputs in {tmp}")
    res = vm.boot(image, topo, f"bash {script} {tmp}", timeout=timeout, rwdirs=[tmp])
    found = (tmp / "kallsyms.txt").read_text().split() if (tmp / "kallsyms.txt").is_file() \
        else []
    missing = [f for f in PROBED_FUNCTIONS if f not in found]
    if missing:
        raise LabError(f"{', '.join(missing)} not in /proc/kallsyms of the guest (inlined): "
                       "build with the measurement series (--measure, patches/measure/), "
                       "which keeps them out of line")
    out_dir = results_dir(label)
    out_dir.mkdir(parents=True, exist_ok=True)
    setting = dict(setting, release=(tmp / "uname.txt").read_text().strip()
                   if (tmp / "uname.txt").is_file() else "")
    versions = (tmp / "versions.txt").read_text() if (tmp / "versions.txt").is_file() else ""
    done = []
    for name in plan:
        for i in range(runs):
            run = parse_run(tmp / f"{name}-{i}", workload(name))
            run.update({"label": label, "workload": name, "run": i, "setting": setting,
                        "tool_versions": versions.strip().splitlines(),
                        "accel": res.accel, "vm_exit": res.returncode})
            (out_dir / f"run-{name}-{i}.json").write_text(json.dumps(run, indent=1) + "\n")
            done.append(run)
            state = "ok" if run["complete"] else "INCOMPLETE: " + "; ".join(run["problems"])
            say(f"  {name} #{i}: {state}")
    return done
