"""The profile report: each function's share of the guest's work, from the
profile probe's samples (profile.py) and, as a check, from the cost probes'
exact instructions per call.

Samples: per result set and workload, the mean per mille of the busy samples
over the runs with its standard deviation, and the samples behind it (all
runs pooled).  cpu-clock samples are taken from a timer interrupt, so code
that runs with interrupts off (newly idle balancing inside schedule(), the
wakeup's CPU choice under p->pi_lock) is never seen: its samples land where
interrupts come back on.

Cost: under qemu -icount shift=0 the guest clock advances one ns per
instruction of whichever vCPU runs, and jumps ahead when every vCPU idles,
so a run of S seconds executed at most S * 1e9 instructions; calls times
instructions per call over that is a lower bound of the function's share.
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

from . import stats
from .profile import FUNCTIONS
from .results import Run, find, read_runs
from .util import LabError

INSNS_PER_SECOND = 1e9       # vm.ICOUNT_OPTS: shift=0
_COST = "should_we_balance instructions per call, mean ("
_CALLS = "should_we_balance calls ("


def _by_workload(label: str) -> Dict[str, List[Run]]:
    out: Dict[str, List[Run]] = {}
    for r in read_runs(find(label)):
        if r.complete:
            out.setdefault(r.workload or "?", []).append(r)
    return out


def _cell(runs: Sequence[Run], metric: str) -> str:
    xs = [r.metrics[metric]["value"] for r in runs if metric in r.metrics]
    if not xs:
        return "-"
    busy = [r.metrics["profile busy samples"]["value"] for r in runs if metric in r.metrics]
    pooled = sum(x * b / 1000.0 for x, b in zip(xs, busy))
    s = stats.summarize(xs, "count")
    sd = f" ± {s.stdev:.3f}" if len(xs) > 1 else ""
    return f"{s.mean:.3f}{sd} ({pooled:.0f})"


def sample_table(labels: Sequence[str], own: bool = False) -> Tuple[List[str], List[List[str]]]:
    head = ["result set", "workload", "runs", "busy samples"] + [
        f"{f}{' own' if own else ''} ‰" for f in FUNCTIONS]
    rows = []
    for label in labels:
        groups = _by_workload(label)
        if not any("profile busy samples" in r.metrics for rs in groups.values() for r in rs):
            raise LabError(f"{label}: no profile runs (measured with --probe profile?)")
        for w, runs in groups.items():
            busy = [r.metrics["profile busy samples"]["value"] for r in runs
                    if "profile busy samples" in r.metrics]
            rows.append([label, w, str(len(busy)), f"{stats.amean(busy):.0f}" if busy else "-"]
                        + [_cell(runs, f"{f} {'own ' if own else ''}share (profile)")
                           for f in FUNCTIONS])
    return head, rows


def cost_share(run: Run) -> Tuple[float, Dict[str, float]]:
    """Per mille of the run's most instructions spent in should_we_balance():
    in all and by domain, from the swb-cost probe's calls and mean."""
    by: Dict[str, float] = {}
    for name, m in run.metrics.items():
        if name.startswith(_COST):
            dom = name[len(_COST):-1]
            calls = run.metrics.get(f"{_CALLS}{dom})", {}).get("value", 0.0)
            by[dom] = calls * m["value"]
    if not run.seconds:
        raise LabError(f"{run.label} {run.workload} #{run.run}: no duration")
    total = INSNS_PER_SECOND * run.seconds
    return (1000.0 * sum(by.values()) / total, {d: 1000.0 * v / total for d, v in by.items()})


def cost_table(labels: Sequence[str]) -> Tuple[List[str], List[List[str]]]:
    head = ["result set", "workload", "runs", "should_we_balance ‰ (at least)", "by domain ‰"]
    rows = []
    for label in labels:
        for w, runs in _by_workload(label).items():
            shares = [cost_share(r) for r in runs if any(k.startswith(_COST) for k in r.metrics)]
            if not shares:
                continue
            s = stats.summarize([t for t, _ in shares], "count")
            doms = sorted({d for _, by in shares for d in by})
            by = ", ".join(f"{d} {stats.amean([b.get(d, 0.0) for _, b in shares]):.3f}"
                           for d in doms)
            rows.append([label, w, str(s.n), f"{s.mean:.3f} ± {s.stdev:.3f}", by])
    if not rows:
        raise LabError("no swb-cost runs in " + ", ".join(labels))
    return head, rows


def render(head: List[str], rows: List[List[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines) + "\n"
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    return "\n".join("  ".join(x.ljust(w) for x, w in zip(r, widths))
                     for r in [head] + rows) + "\n"


def report(labels: Sequence[str], cost: Sequence[str] = (), markdown: bool = False) -> str:
    out = []
    if labels:
        out.append("Share of the busy samples, per mille: mean ± sd over runs (samples, "
                   "runs pooled); with what each function calls:\n")
        out.append(render(*sample_table(labels), markdown))
        out.append("\nIts own code and what is inlined into it:\n")
        out.append(render(*sample_table(labels, own=True), markdown))
    if cost:
        out.append("\nshould_we_balance() from the cost probe: calls x instructions per call "
                   "over the run's instructions (at most 1e9 per guest second under "
                   "icount), per mille, mean ± sd over runs:\n")
        out.append(render(*cost_table(cost), markdown))
    return "".join(out)
