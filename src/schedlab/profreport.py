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
instructions per call over that is the function's share (with the median
per call; the mean carries the calls that straddled a vCPU switch).
"""

from __future__ import annotations

import re
from typing import Dict, List, Sequence, Tuple

from . import stats, tables
from .profile import FUNCTIONS
from .results import Run, find, read_runs
from .util import LabError

INSNS_PER_SECOND = 1e9       # vm.ICOUNT_OPTS: shift=0
_MEAN = re.compile(r"^(\w+) instructions per call, mean(.*)$")


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


def cost_shares(run: Run, stat: str = "median") -> Dict[str, Dict[str, float]]:
    """Per mille of the run's instructions spent in each function a cost probe
    timed, by the probe's key (domain, idle type, ...; "" for none): every
    call (those over the probe's cut and those lost to nesting included)
    counted at the median (or the mean) of the calls under the cut, over the
    run's instructions, at most 1e9 a guest second.  The median is robust;
    the mean also carries the calls that straddled a vCPU switch and counted
    other vCPUs' instructions, up to the cut."""
    if not run.seconds:
        raise LabError(f"{run.label} {run.workload} #{run.run}: no duration")
    total = INSNS_PER_SECOND * run.seconds
    out: Dict[str, Dict[str, float]] = {}
    for name, m in run.metrics.items():
        hit = _MEAN.match(name)
        if not hit:
            continue
        func, tag = hit.groups()
        calls = run.metrics.get(f"{func} calls{tag}", {}).get("value", 0.0)
        per = m["value"] if stat == "mean" else run.metrics.get(
            f"{func} instructions per call, median{tag}", m)["value"]
        out.setdefault(func, {})[tag.strip(" ()")] = 1000.0 * calls * per / total
    return out


def cost_table(labels: Sequence[str]) -> Tuple[List[str], List[List[str]]]:
    head = ["result set", "workload", "function", "runs", "‰ by median", "‰ by mean",
            "by key, by median ‰"]
    rows = []
    for label in labels:
        for w, runs in _by_workload(label).items():
            med = [cost_shares(r) for r in runs]
            mean = [cost_shares(r, "mean") for r in runs]
            for func in sorted({f for sh in med for f in sh}):
                cells = []
                for shares in (med, mean):
                    per = [sum(sh[func].values()) for sh in shares if func in sh]
                    s = stats.summarize(per, "count")
                    cells.append(f"{s.mean:.3f}" + (f" ± {s.stdev:.3f}" if s.n > 1 else ""))
                per_key = [sh[func] for sh in med if func in sh]
                keys = sorted({k for p in per_key for k in p if k})
                by = ", ".join(f"{k} {stats.amean([p.get(k, 0.0) for p in per_key]):.3f}"
                               for k in keys)
                rows.append([label, w, func, str(len(per_key)), *cells, by or "-"])
    if not rows:
        raise LabError("no cost probe runs in " + ", ".join(labels))
    return head, rows


def render(head: List[str], rows: List[List[str]], markdown: bool) -> str:
    return "\n".join(tables.render_table(head, rows, markdown)) + "\n"


def report(labels: Sequence[str], cost: Sequence[str] = (), markdown: bool = False) -> str:
    out = []
    if labels:
        out.append("Share of the busy samples, per mille: mean ± sd over runs (samples, "
                   "runs pooled); with what each function calls:\n")
        out.append(render(*sample_table(labels), markdown))
        out.append("\nIts own code and what is inlined into it:\n")
        out.append(render(*sample_table(labels, own=True), markdown))
    if cost:
        out.append("\nFrom the cost probes: calls x instructions per call (the median, "
                   "and the mean) over the run's instructions (at most 1e9 per guest second "
                   "under icount), per mille, mean ± sd over runs:\n")
        out.append(render(*cost_table(cost), markdown))
    return "".join(out)
