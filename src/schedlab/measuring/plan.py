"""A measurement plan as a typed request, and the plan folder the guest reads.

The plan runner (guest/run-plan.sh) is a fixed script; what varies is in
the plan folder Python writes: plan.env (shell variables), probes.txt (one
candidate probe per line with the functions it needs), knobs.txt, runs.txt
(one run per line) with each workload's command in cmd/NAME, and the
bpftrace programs in bt/NAME.METHOD.bt.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from schedlab.core.util import LabError, package_file
from schedlab.measuring import bpfgen, linecount
from schedlab.measuring import probes as probemod
from schedlab.measuring import workloads as workmod

KNOB_DIR = "/sys/kernel/debug/sched"
_KNOB_NAME = re.compile(r"[a-z0-9_]+")
_KNOB_VALUE = re.compile(r"[A-Za-z0-9_.+-]+")
RUN_MARK = "@@schedlab-run"
# The most seconds between the runner's checks during a clean run (a third
# of --seconds where that is less), and two of the places it looks.
WATCH_EVERY = 5
TRACEFS = "/sys/kernel/tracing"
# Where bcc keeps its tools when they are not on PATH as NAME-bpfcc
# (Fedora, RHEL), and where the runner finds which functions are out of line.
BCC_DIR = "/usr/share/bcc/tools"
KALLSYMS = "/proc/kallsyms"
KPROBES_LIST = "/sys/kernel/debug/kprobes/list"
# The files of KNOB_DIR a plan may write: 7.3's own (kernel/sched/debug.c),
# the series' newidle_cost_pct and the kit's swb_state (patches/kit/).  A
# tree with more adds them here.
KNOBS = ("base_slice_ns", "cgroup_mode", "features", "latency_warn_ms", "latency_warn_once",
         "migration_cost_ns", "newidle_cost_pct", "nr_migrate", "preempt", "swb_state",
         "tunable_scaling", "verbose")


def parse_knobs(items: Optional[Sequence[str]]) -> Dict[str, str]:
    """NAME=VALUE pairs for files in /sys/kernel/debug/sched/, in the order given."""
    out: Dict[str, str] = {}
    for item in items or ():
        name, eq, value = item.partition("=")
        if not eq or not _KNOB_NAME.fullmatch(name) or not _KNOB_VALUE.fullmatch(value):
            raise LabError(f"--knob {item!r}: expected NAME=VALUE, NAME a file in "
                           f"{KNOB_DIR}/ (e.g. newidle_cost_pct=400)")
        if name not in KNOBS:
            raise LabError(f"--knob {item!r}: {name} is not a knob the lab knows in "
                           f"{KNOB_DIR}/; known: {', '.join(KNOBS)}")
        if name in out:
            raise LabError(f"--knob {name} is given twice (for features: one per plan)")
        out[name] = value
    return out


@dataclass(frozen=True)
class Plan:
    """What one boot (or one host run) measures."""
    workloads: Tuple[workmod.Workload, ...]
    probes: Tuple[str, ...] = tuple(probemod.DEFAULT_PROBES)
    runs: int = 3
    seconds: int = 10
    attach: str = "auto"
    latency_tool: str = "auto"
    knobs: Tuple[Tuple[str, str], ...] = ()
    accel: str = "auto"     # "icount": the guest clock counts instructions (vm.py)
    # One run of each workload before its first, not recorded (the kit's:
    # caches, the page cache, a server's start); with WARM, of those named
    # there only (the first point of each of the kit's sweeps).
    warmup: bool = False
    warm: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.runs < 1 or self.seconds < 1:
            raise LabError(f"--runs and --seconds must be 1 or more (not {self.runs}, "
                           f"{self.seconds})")
        for p in self.probes:
            if p not in probemod.PROBES:
                raise LabError(f"unknown probe {p!r}")
        cost = [p for p in self.probes if probemod.PROBES[p].program == "cost"]
        if cost and len(self.probes) > 1:
            # Every other probe's instructions would be counted as the
            # function's (the swb probe hooks idle_cpu(), sched_balance_rq()
            # calls should_we_balance()).
            raise LabError(f"--probe {','.join(self.probes)}: a cost probe ({cost[0]}) is "
                           "measured alone; run one plan per cost probe")

    def warmed(self, name: str) -> bool:
        """Whether workload NAME runs once unrecorded before its first run."""
        return self.warmup and (not self.warm or name in self.warm)

    @property
    def clean(self) -> bool:
        """Nothing attached to the runs, and the runner checks that nothing
        is (guest/run-plan.sh): no probe, or only the lines probe, which a
        qemu plugin counts outside the guest."""
        return not self.probes or self.probes == ("lines",)

    @property
    def limit(self) -> int:
        """The time limit of one workload run."""
        return max(120, 6 * self.seconds, *(w.min_limit for w in self.workloads))

    def names(self) -> List[str]:
        return [w.name for w in self.workloads]

    def with_(self, **changes) -> "Plan":
        return replace(self, **changes)

    def needs(self) -> List[str]:
        """The tools the plan runs."""
        need = set() if self.clean else {"bpftrace"}
        for w in self.workloads:
            need.update(w.tools)
        # latency-lb runs with latency's tool (probes.probe_names).
        if "latency" in self.probes and self.latency_tool == "bcc":
            need.add("funclatency-bpfcc")
        if "latency" in self.probes and self.latency_tool == "libbpf":
            need.add("funclatency")
        return sorted(need)

    def check_tools(self) -> None:
        missing = workmod.missing_tools(self.needs())
        if missing:
            raise LabError("missing tool(s) the plan needs: " + ", ".join(missing)
                           + "; './schedlab setup' installs them")


# The longest warm-up of a timed workload, in seconds.
WARMUP_MAX = 3


def make_plan(workloads: Optional[str] = None, probes: Optional[str] = None, *,
              schbench: Optional[Path] = None, runs: int = 3, seconds: int = 10,
              attach: str = "auto", latency_tool: str = "auto",
              knobs: Optional[Dict[str, str]] = None, accel: str = "auto") -> Plan:
    """A plan from the command line's comma-separated lists."""
    names = tuple(probemod.probe_names(probes))
    for name in probemod.PLUGIN_PROBES:
        if name in names and accel != "icount":
            raise LabError(f"the {name} probe needs --accel icount: its plugin's counts are "
                           "exact only with one host thread for all vCPUs")
    return Plan(tuple(workmod.plan_workloads(workloads, schbench)), names, runs, seconds,
                attach, latency_tool, tuple((knobs or {}).items()), accel)


def warmup_seconds(seconds: int) -> int:
    """How long a timed workload's warm-up runs: its first seconds are the
    ones a cold start disturbs."""
    return min(seconds, WARMUP_MAX)


def _env_line(name: str, value: object) -> str:
    return f"{name}={shlex.quote(str(value))}"


def write(plan: Plan, folder: Path) -> Path:
    """The plan folder the runner reads (its argument besides the output folder)."""
    names = plan.names()
    if len(set(names)) != len(names):
        raise LabError(f"a workload appears twice in the plan: {', '.join(names)}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bt").mkdir(exist_ok=True)
    (folder / "cmd").mkdir(exist_ok=True)
    auto = plan.latency_tool == "auto"
    env = [
        _env_line("SECS", plan.seconds),
        _env_line("LIMIT", plan.limit),
        _env_line("ATTACH", plan.attach),
        _env_line("LATENCY_TOOLS", " ".join(probemod.LATENCY_TOOLS[1:]) if auto
                  else plan.latency_tool),
        _env_line("LATENCY_AUTO", 1 if auto else 0),
        _env_line("LATENCY_FUNCTION", probemod.LATENCY_FUNCTION),
        _env_line("LATENCY_MORE", " ".join(probemod.LATENCY_MORE)
                  if "latency-lb" in plan.probes else ""),
        _env_line("BCC_MAX_START", probemod.BCC_MAX_START),
        _env_line("KNOB_DIR", KNOB_DIR),
        _env_line("RUN_MARK", RUN_MARK),
        _env_line("SIGDFL", package_file("guest/sigdfl")),
        _env_line("CLEAN", 1 if plan.clean else 0),
        _env_line("WARMUP", 1 if plan.warmup else 0),
        _env_line("WARMUP_SECS", warmup_seconds(plan.seconds)),
        _env_line("WATCH_EVERY", max(1, min(WATCH_EVERY, plan.seconds // 3))),
        _env_line("TRACEFS", TRACEFS),
        _env_line("KPROBES_LIST", KPROBES_LIST),
        _env_line("BCC_DIR", BCC_DIR),
        _env_line("KALLSYMS", KALLSYMS),
        # The lines probe's marker (measuring/linecount.py), built on the host.
        _env_line("LINES_MARK", linecount.proof_program() if "lines" in plan.probes else ""),
    ]
    (folder / "plan.env").write_text("\n".join(env) + "\n")
    (folder / "probes.txt").write_text("".join(
        f"{p} {' '.join(probemod.PROBES[p].functions)}\n" for p in plan.probes))
    for p in plan.probes:
        for method in ("kfunc", "kprobe"):
            text = probemod.PROBES[p].bpftrace(method)
            if text:
                (folder / "bt" / f"{p}.{method}.bt").write_text(text)
    (folder / "bt" / "gate.bt").write_text(bpfgen.gate())
    if any(probemod.PROBES[p].program == "cost" for p in plan.probes):
        # The cost probes' own instructions, measured before the runs.
        for method in ("kfunc", "kprobe"):
            (folder / "bt" / f"calibrate.{method}.bt").write_text(
                probemod.CALIBRATION.bpftrace(method))
    (folder / "knobs.txt").write_text("".join(f"{k} {v}\n" for k, v in plan.knobs))
    (folder / "warmup.txt").write_text("".join(f"{n}\n" for n in names if plan.warmed(n)))
    runs = []
    for w in plan.workloads:
        (folder / "cmd" / w.name).write_text(w.command + "\n")
        runs += [f"{w.name} {i}" for i in range(plan.runs)]
    (folder / "runs.txt").write_text("\n".join(runs) + "\n")
    return folder


def runner() -> Path:
    return package_file("guest/run-plan.sh")
