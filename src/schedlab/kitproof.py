"""The kit's switches under icount: each should_we_balance() state against
the kernel built at its patch (issue 38, item 1's second proof).

One `ab` run under `--accel icount` on an SMT8 topology: five arms built at
each step of the should_we_balance() topic (v7.3, then the topic's first
one to four patches, each with the measurement series) and five arms of the
kit's one kernel, one per `swb_state`.  The swb-cost probe counts
should_we_balance()'s instructions per call, by level.

What must hold: at every level, the median of every run of state K equals
the median of the kernel built at patch K plus one constant, the same for
every state and level.  The constant is what the switch adds to a call: the
kit's should_we_balance() is a wrapper that jumps to the state's copy
through a static call, and the copy has its own (unpatched) fentry nop.  The
means are shown beside, with the range of the kernel built at the patch
(they follow the load of each run, not only the code).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from . import ab as abmod
from . import plan as planmod
from . import results as resmod
from . import topics as topicmod
from .spec import TreeSpec
from .util import LabError, say

TOPIC = "swb"
STATE_NAMES = ("v7.3", "busy", "one-cpu", "one-core", "prune")
PREFIX = "kit-icount-smt8"
TOPOLOGY = "smt8"
WORKLOADS, PROBES, RUNS, SECONDS, ACCEL, BOOTS = "stress-100", "swb-cost", 2, 5, "icount", 2
MEDIAN = "should_we_balance instructions per call, median ("
MEAN = "should_we_balance instructions per call, mean ("


def arms() -> List[abmod.Arm]:
    """At each state: the kernel built at its patch (at-NAME), then the kit's
    kernel in that state (kit-NAME)."""
    steps = ["base"] + topicmod.steps(TOPIC)
    if len(steps) != len(STATE_NAMES):
        raise LabError(f"kit proof: the {TOPIC} topic has {len(steps) - 1} patches; the "
                       f"kit switches between {len(STATE_NAMES) - 1}")
    built_at = [abmod.Arm(f"at-{n}", v) for n, v in zip(STATE_NAMES, steps)]
    kit = [abmod.Arm(f"kit-{n}", abmod.KIT_VARIANT, (("swb_state", str(k)),))
           for k, n in enumerate(STATE_NAMES)]
    return built_at + kit


def request(tree: TreeSpec, prefix: str = PREFIX, fresh: bool = False) -> abmod.AbRequest:
    plan = planmod.make_plan(WORKLOADS, PROBES, runs=RUNS, seconds=SECONDS, accel=ACCEL)
    return abmod.AbRequest(tree, plan, TOPOLOGY, tuple(arms()), prefix, BOOTS, fresh,
                           timeout=2400, plots=False)


def command(prefix: str = PREFIX) -> str:
    """The same run as one `ab` command line (for the docs)."""
    parts = ["./schedlab ab"] + [
        f"--arm {a.name}={a.variant}" + "".join(f":{k}={v}" for k, v in a.knobs)
        for a in arms()]
    parts += [f"-t {TOPOLOGY}", f"--accel {ACCEL}", f"--probe {PROBES}", f"--plan {WORKLOADS}",
              f"--runs {RUNS}", f"--seconds {SECONDS}", f"--boots {BOOTS}", f"--label {prefix}"]
    return " \\\n    ".join(parts)


@dataclass
class Cell:
    state: str
    level: str
    at: List[float]         # the kernel built at the patch: one median per run
    kit: List[float]        # the kit in that state
    at_means: List[float]
    kit_means: List[float]

    @property
    def offsets(self) -> List[float]:
        return sorted({k - a for k in self.kit for a in self.at})


def _values(folder: Path, prefix: str) -> Dict[str, List[float]]:
    """Per level: the metric's value in every run of every boot in FOLDER."""
    out: Dict[str, List[float]] = {}
    boots = sorted(p for p in folder.glob("boot-*") if p.is_dir()) or [folder]
    for b in boots:
        if not any(b.glob("run-*.json")):
            continue
        for run in resmod.read_runs(b):
            for name, m in run.metrics.items():
                if name.startswith(prefix) and name.endswith(")"):
                    out.setdefault(name[len(prefix):-1], []).append(float(m["value"]))
    return out


def cells(prefix: str = PREFIX) -> List[Cell]:
    out = []
    for state in STATE_NAMES:
        at_dir = resmod.results_dir(f"{prefix}-at-{state}")
        kit_dir = resmod.results_dir(f"{prefix}-kit-{state}")
        at, kit = _values(at_dir, MEDIAN), _values(kit_dir, MEDIAN)
        at_m, kit_m = _values(at_dir, MEAN), _values(kit_dir, MEAN)
        for level in sorted(set(at) | set(kit)):
            out.append(Cell(state, level, at.get(level, []), kit.get(level, []),
                            at_m.get(level, []), kit_m.get(level, [])))
    return out


def check(found: Sequence[Cell]) -> Tuple[Optional[float], List[str]]:
    """The constant the switch adds, and what breaks the proof."""
    problems = []
    for c in found:
        if not c.at or not c.kit:
            problems.append(f"{c.state}, {c.level}: no runs "
                            + ("of the kernel built at the patch" if not c.at else "of the kit"))
    for state in STATE_NAMES:
        if not any(c.state == state for c in found):
            problems.append(f"{state}: no runs")
    offsets = {o for c in found if c.at and c.kit for o in c.offsets}
    if len(offsets) > 1:
        problems.append("the kit's medians differ from those of the kernels built at the "
                        "patches by more than one constant: " +
                        ", ".join(f"{c.state}/{c.level} {'/'.join(f'{o:+g}' for o in c.offsets)}"
                                  for c in found if c.at and c.kit))
    if not found:
        problems.append("no should_we_balance() instructions per call in the results")
    return (offsets.pop() if len(offsets) == 1 else None), problems


def _rng(vals: Sequence[float], fmt: str = "{:g}") -> str:
    if not vals:
        return "-"
    lo, hi = min(vals), max(vals)
    return fmt.format(lo) if lo == hi else f"{fmt.format(lo)}-{fmt.format(hi)}"


def table(found: Sequence[Cell], constant: Optional[float]) -> str:
    c = constant or 0
    lines = ["| state | level | built at the patch, median | kit, median | kit - constant "
             "| built at the patch, mean | kit - constant, mean |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for x in found:
        lines.append(f"| {x.state} | {x.level} | {_rng(x.at)} | {_rng(x.kit)} | "
                     f"{_rng([v - c for v in x.kit])} | {_rng(x.at_means, '{:.1f}')} | "
                     f"{_rng([v - c for v in x.kit_means], '{:.1f}')} |")
    return "\n".join(lines)


def report(prefix: str = PREFIX) -> Tuple[str, bool]:
    found = cells(prefix)
    constant, problems = check(found)
    runs = {x.state: (len(x.at), len(x.kit)) for x in found}
    text = [f"should_we_balance() instructions per call, each kit state against the kernel "
            f"built at its patch ({TOPOLOGY}, {WORKLOADS}, {BOOTS} boots x "
            f"{RUNS} runs per arm; runs per cell: "
            + ", ".join(f"{s} {a}+{k}" for s, (a, k) in runs.items()) + ")", "",
            table(found, constant), ""]
    if constant is not None and not problems:
        text.append(f"Every median of the kit equals that of the kernel built at the patch "
                    f"plus {constant:g} instructions, in every state and at every level: "
                    "the switch's wrapper and the copy's fentry nop.")
    for p in problems:
        text.append(f"FAIL: {p}")
    return "\n".join(text) + "\n", not problems


def run(tree: TreeSpec, fresh: bool = False, prefix: str = PREFIX) -> int:
    rc = abmod.run(request(tree, prefix, fresh))
    if rc:
        return rc
    text, ok = report(prefix)
    out = resmod.results_dir(prefix) / "switch-proof.md"
    out.write_text(text)
    say(text + f"(written to {out})")
    return 0 if ok else 1
