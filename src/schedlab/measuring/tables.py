"""The ground floor of the comparison tables: result sets as data, rows, text.

Detail: docs/modules.md, section measuring/tables.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Tuple

from schedlab.core.util import LabError
from schedlab.measuring import stats

WALLCLOCK_MARK = "†"
WALLCLOCK_NOTE = (f"{WALLCLOCK_MARK}: wall-clock time of a short kernel function under TCG: "
                  "it measures how the host schedules the vCPUs (a vCPU waits for the "
                  "others inside the function) as much as the function itself; for its "
                  "cost, count instructions with `--accel icount`.")


def names_rx(names: Iterable[str], per_domain: Iterable[str] = ()) -> str:
    """A regular expression matching exactly NAMES, and PER_DOMAIN with or
    without a ' (DOMAIN)' suffix."""
    alts = [re.escape(n) for n in sorted(set(names))]
    alts += [re.escape(n) + r"( \(.+\))?" for n in sorted(set(per_domain))]
    return "^(" + "|".join(alts) + ")$"


def load_runs(folder: Path) -> List[dict]:
    """A result set's run-*.json, in name order."""
    if not folder.is_dir():
        raise LabError(f"no results at {folder}")
    runs = [json.loads(f.read_text()) for f in sorted(folder.glob("run-*.json"))]
    if not runs:
        raise LabError(f"no run-*.json in {folder}")
    return runs


def setting(runs: List[dict], key: str) -> set:
    """The values (as JSON) one setting has over RUNS."""
    return {json.dumps(r.get("setting", {}).get(key), sort_keys=True) for r in runs}


def accel_of(run: dict) -> str:
    """How a run was measured: tcg, tcg-single, icount, kvm, host or '' (older runs)."""
    return str(run.get("accel") or (run.get("setting") or {}).get("accel") or "")


def under_tcg(*sides: List[dict]) -> bool:
    """Whether any run of SIDES ran under TCG (not icount, KVM or the host)."""
    return any(accel_of(r).startswith("tcg") for runs in sides for r in runs)


def short_wallclock(unit: str, kind: str) -> bool:
    """A metric that is the elapsed time of a short kernel function (the
    probes' times are in ns; the workloads' own in s, ms or us)."""
    return unit == "ns" and kind == "time"


@dataclass
class Row:
    workload: str
    metric: str
    unit: str
    a: stats.Summary
    b: stats.Summary
    imp: float | None
    sig: bool
    a_vals: Tuple[float, ...] = ()
    b_vals: Tuple[float, ...] = ()
    wallclock: bool = False     # a short function's wall-clock time under TCG
    neutral: bool = False       # no better direction: imp is B's plain change

    def label(self) -> str:
        """The metric cell: name, unit and the wall-clock mark."""
        return f"{self.metric} ({self.unit})" + (f" {WALLCLOCK_MARK}" if self.wallclock else "")


def by_metric(runs: List[dict]) -> Dict[Tuple[str, str], List[dict]]:
    """The metrics of the complete runs, keyed by (workload, metric)."""
    out: Dict[Tuple[str, str], List[dict]] = {}
    for r in runs:
        if not r.get("complete", False):
            continue
        for name, m in r.get("metrics", {}).items():
            out.setdefault((r["workload"], name), []).append(m)
    return out


def rows(a: List[dict], b: List[dict]) -> List[Row]:
    """One row per (workload, metric) with complete runs on both sides."""
    ca, cb = by_metric(a), by_metric(b)
    tcg = under_tcg(a, b)
    out = []
    for key in sorted(set(ca) & set(cb)):
        ma, mb = ca[key], cb[key]
        kind, hib = ma[0]["kind"], ma[0]["higher_is_better"]
        sa = stats.summarize([m["value"] for m in ma], kind)
        sb = stats.summarize([m["value"] for m in mb], kind)
        neutral = hib is None
        imp = (stats.pct_change(sa.mean, sb.mean) if neutral
               else stats.pct_improvement(sa.mean, sb.mean, hib))
        out.append(Row(key[0], key[1], ma[0]["unit"], sa, sb, imp, stats.significant(sa, sb),
                       tuple(m["value"] for m in ma), tuple(m["value"] for m in mb),
                       tcg and short_wallclock(ma[0]["unit"], kind), neutral))
    return out


def fmt(x: float) -> str:
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.3f}"
