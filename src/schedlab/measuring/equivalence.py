"""Equivalence margins of an 'ab' run from its A/A pair.

Detail: docs/modules.md, section measuring/equivalence.py.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from schedlab.core.util import render_table
from schedlab.measuring import probes as probemod
from schedlab.measuring import stats
from schedlab.measuring import workloads as workmod
from schedlab.measuring.tables import (WALLCLOCK_MARK, WALLCLOCK_NOTE, by_metric, fmt, names_rx,
                                       short_wallclock, under_tcg)

# The margin the 'runs needed' column aims at, in percent.
TARGET_PCT = 10.0
# What must stay inside the margin: each workload's results and CPU busy time.
GUARDED = re.compile(names_rx(
    [r for w in workmod.all_results() for r in w.results]
    + [m.name for m in probemod.SYSTEM_METRICS]))
# What the gating is expected to change, shown beside them.
CHANGED = re.compile(r"^sched_balance_rq newidle (calls|total time)$")


@dataclass(frozen=True)
class Margin:
    workload: str
    metric: str
    unit: str
    n: int                  # runs per arm in the A/A pair (the smaller side)
    aa_pct: Optional[float]
    margin_pct: float

    def runs_for(self, target: float = TARGET_PCT) -> int:
        """Runs per arm for a margin of TARGET percent, at the same spread."""
        if not math.isfinite(self.margin_pct):
            return 0
        return max(2, math.ceil(self.n * (self.margin_pct / target) ** 2))


def _summary(ms: List[dict]) -> stats.Summary:
    return stats.summarize([m["value"] for m in ms], ms[0]["kind"])


def margins(a: List[dict], a2: List[dict]) -> Dict[Tuple[str, str], Margin]:
    """The margins of the guarded metrics from the A/A pair A, A2."""
    ca, cb = by_metric(a), by_metric(a2)
    out: Dict[Tuple[str, str], Margin] = {}
    for key in sorted(set(ca) & set(cb)):
        if not GUARDED.search(key[1]):
            continue
        sa, sb = _summary(ca[key]), _summary(cb[key])
        if sa.n < 2 or sb.n < 2 or not sa.mean:
            continue
        se = math.sqrt(sa.stdev ** 2 / sa.n + sb.stdev ** 2 / sb.n)
        half = stats.t95(sa.n + sb.n - 2) * se
        hib = ca[key][0]["higher_is_better"]
        out[key] = Margin(key[0], key[1], ca[key][0]["unit"], min(sa.n, sb.n),
                          stats.pct_improvement(sa.mean, sb.mean, hib),
                          100.0 * half / abs(sa.mean))
    return out


def verdict(diff: Optional[float], margin: Margin) -> str:
    if diff is None:
        return "n/a"
    if abs(diff) <= margin.margin_pct:
        return "inside"
    return "better" if diff > 0 else "worse"


def find_replica(arms: List[Tuple[str, str, tuple]]) -> Optional[str]:
    """The name of the A/A replica among (name, variant, knobs): the first arm
    after the first with the first arm's build and knobs."""
    first = arms[0]
    for name, variant, knobs in arms[1:]:
        if (variant, knobs) == (first[1], first[2]):
            return name
    return None


def _pct(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{x:+.1f}%"


def table(runs: Dict[str, List[dict]], aa: Tuple[str, str],
          pairs: List[Tuple[str, str]], markdown: bool = True) -> str:
    """The A/A margins, then each pair's guarded differences and verdicts and
    its change in the metrics the gating is for."""
    first, replica = aa
    ms = margins(runs[first], runs[replica])
    if not ms:
        return f"no metric with 2 runs or more on both {first} and {replica}"
    head = ["workload", "metric", f"A/A ({replica} vs {first})", "margin (95%)",
            f"runs for {TARGET_PCT:.0f}%"]
    body = [[m.workload, f"{m.metric} ({m.unit})", _pct(m.aa_pct), f"{m.margin_pct:.1f}%",
             str(m.runs_for())] for m in ms.values()]
    lines = [f"A/A: {len(ms)} metrics, {min(m.n for m in ms.values())} runs per arm", ""]
    lines += render_table(head, body, markdown)
    tcg = under_tcg(*runs.values())
    marked = False
    for ref, arm in pairs:
        if replica in (ref, arm):
            continue
        ca, cb = by_metric(runs[ref]), by_metric(runs[arm])
        body = []
        for key in sorted(set(ca) & set(cb)):
            m = ms.get(key)
            if m is None and not CHANGED.search(key[1]):
                continue
            sa, sb = _summary(ca[key]), _summary(cb[key])
            diff = stats.pct_improvement(sa.mean, sb.mean, ca[key][0]["higher_is_better"])
            change = stats.pct_change(sa.mean, sb.mean)
            unit = ca[key][0]["unit"]
            wallclock = tcg and short_wallclock(unit, ca[key][0]["kind"])
            marked |= wallclock
            body.append([key[0], f"{key[1]} ({unit})" + (f" {WALLCLOCK_MARK}" if wallclock
                                                          else ""),
                         fmt(sa.mean), fmt(sb.mean),
                         _pct(change), _pct(diff),
                         verdict(diff, m) if m else "-",
                         "*" if stats.significant(sa, sb) else ""])
        if not body:
            continue
        lines += ["", f"{arm} against {ref}:", ""]
        lines += render_table(
            ["workload", "metric", ref, arm, "change", "pct imp", "margin", "sig"],
            body, markdown)
    lines += ["", "margin: the 95% half-width of a difference of two means at this many "
              "runs, from the A/A pair, in percent of the first arm's mean; 'inside': "
              "|pct imp| at most the margin. pct imp > 0: the second arm better. "
              f"'*': significant, {stats.SIGNIFICANCE_RULE}."]
    if marked:
        lines.append(WALLCLOCK_NOTE)
    return "\n".join(lines)
