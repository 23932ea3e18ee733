"""What the kit's report may call significant, and when it has enough rounds.

Every headline comparison of a pass (each pair of arms the report shows, the
headline rows 'ab' picked for it) is one test of a family: Welch's t-test
of the runs' values, then Holm's correction over the whole family, so that
a report of hundreds of comparisons does not find differences by chance.
The stopping rule asks of every arm's headline metrics that their 95%
interval be narrow enough.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

from schedlab.core.util import LabError
from schedlab.measuring import compare, stats
from schedlab.measuring import tables as tablemod
from schedlab.measuring import workloads as workmod

ALPHA = 0.05


@dataclass(frozen=True)
class Test:
    """One headline comparison: B against A on a benchmark's metric."""
    a: str
    b: str
    workload: str
    metric: str
    unit: str
    imp: float          # percent, > 0: B did better
    p: float            # Welch's two-sided p-value
    p_holm: float = 1.0

    @property
    def significant(self) -> bool:
        return self.p_holm < ALPHA


def _runs(folder: Path) -> List[dict]:
    try:
        return tablemod.load_runs(folder)
    except LabError:
        return []


def one_way(pairs: Sequence[Tuple[str, str]]) -> List[Tuple[str, str]]:
    """PAIRS with each pair once: where both (A, B) and (B, A) are there, the
    later one (a patch against the one before it, the series against the
    stock kernel) stays; a test of the family must not count twice."""
    out = []
    for i, (a, b) in enumerate(pairs):
        if (b, a) not in pairs[i + 1:] and (a, b) not in out:
            out.append((a, b))
    return out


def shown(rows: List[tablemod.Row], results: bool) -> List[tablemod.Row]:
    """The rows of a comparison a pass's report shows and tests: with
    RESULTS (the throughput pass), every metric a benchmark's record names
    as a result (schbench's every percentile); else 'ab''s headline."""
    if not results:
        return compare.headline(rows)
    names = {r for w in workmod.all_results() for r in w.results}
    return [r for r in rows if r.metric in names and not r.wallclock]


def stopping_metrics(results: bool) -> str:
    """What the stopping rule asks to be narrow: with RESULTS (the
    throughput pass), each benchmark's first result (schbench's wakeup
    p99, not its tails); else every flagged headline metric."""
    if not results:
        return compare.HEADLINE
    return tablemod.names_rx([w.sweep_result for w in workmod.all_results() if w.sweep_result])


def headline_tests(folders: Dict[str, Path], pairs: Sequence[Tuple[str, str]],
                   results: bool = False) -> List[Test]:
    """Every comparison of PAIRS (arm names, FOLDERS their result sets) the
    report shows (shown()), Holm-corrected as one family; metrics with no
    better direction are left out (nothing to call better)."""
    raw = []
    for a, b in one_way(pairs):
        ra, rb = _runs(folders[a]), _runs(folders[b])
        if not ra or not rb:
            continue
        for row in shown(tablemod.rows(ra, rb), results):
            if row.neutral or row.imp is None:
                continue
            raw.append(Test(a, b, row.workload, row.metric, row.unit, row.imp,
                            stats.welch_p(row.a_vals, row.b_vals)))
    adjusted = stats.holm([t.p for t in raw])
    return [Test(t.a, t.b, t.workload, t.metric, t.unit, t.imp, t.p, q)
            for t, q in zip(raw, adjusted)]


def section(tests: Sequence[Test]) -> List[str]:
    """The report's table of the family: each comparison's change, p-value
    and adjusted p-value, '*' where it survives the correction."""
    if not tests:
        return ["No headline comparison with finished runs of both arms yet."]
    out = [f"{len(tests)} headline comparisons, one family: Welch's t-test of the runs' "
           f"values, then {stats.HOLM}. '*': significant after the correction "
           f"(adjusted p < {ALPHA}); only these may be called differences.", "",
           "| B | against A | benchmark | metric | pct imp | p | Holm p | |",
           "|---|---|---|---|---:|---:|---:|---|"]
    for t in tests:
        out.append(f"| {t.b} | {t.a} | {t.workload} | {t.metric} ({t.unit}) | "
                   f"{t.imp:+.2f} | {t.p:.3g} | {t.p_holm:.3g} | "
                   f"{'*' if t.significant else ''} |")
    return out


NOTHING = "no finished run"


def too_wide(folders: Dict[str, Path], width: float,
             results: bool = False) -> List[Tuple[str, str, str, float]]:
    """(arm, benchmark, metric, width) of every stopping metric whose 95%
    interval of the mean is wider than WIDTH percent of the mean, the widest
    first.  A metric with fewer than two finished runs is too wide, also
    where an arm lacks one that another arm has, and an arm with no finished
    run at all is (NOTHING): runs made invalid do not stop the rounds."""
    flagged = re.compile(stopping_metrics(results))
    values: Dict[str, Dict[Tuple[str, str], List[float]]] = {}
    for arm, folder in folders.items():
        values[arm] = {k: [m["value"] for m in ms]
                       for k, ms in tablemod.by_metric(_runs(folder)).items()
                       if flagged.search(k[1]) and ms[0].get("higher_is_better") is not None}
    keys = sorted({k for v in values.values() for k in v})
    out = []
    for arm, have in values.items():
        if not have:
            out.append((arm, "-", NOTHING, math.inf))
            continue
        for key in keys:
            w = stats.ci_width_pct(have[key]) if key in have else math.inf
            if w > width:
                out.append((arm, key[0], key[1], w))
    return sorted(out, key=lambda x: -x[3])
