"""The cost model's tables for two result sets of the lines probe
(`./schedlab compare A B --model`): per workload and sched domain level, a
function's lines moved per call by distance and its instructions in each
set, then the ns per call each CPU family's published latencies predict
(measuring/costmodel.py).  A model, not a measurement."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, List, Optional, Tuple

from schedlab.core.util import LabError, render_table
from schedlab.measuring import costmodel, linecount
from schedlab.measuring import tables as tablemod
from schedlab.measuring.costmodel import Counts, Family, Prediction

# Levels in the order a domain hierarchy nests them; others after these.
ORDER = ("SMT", "CLS", "MC", "PKG", "NUMA")
ALL = "all"


def other_llc(c: Counts) -> Counts:
    """C with its lines to another core of the LLC counted as lines to
    another LLC of the socket: every other core of the guest's node read
    as sitting in an LLC of its own."""
    moved = dict(c.moved)
    moved["xllc"] += moved["llc"]
    moved["llc"] = 0.0
    return Counts(moved, c.insns, c.calls, c.runs)


def spread_for(c: Counts, fam: Family, spread: bool) -> Counts:
    """C as FAM prices it: with SPREAD, through other_llc() where FAM has a
    figure for another LLC of the socket (a family without one has one LLC
    a socket, and its LLC figure stands)."""
    return other_llc(c) if spread and "xllc" in fam.ns else c


def _order(level: str) -> Tuple[int, str, str]:
    base, _, split = level.partition(", ")
    return (ORDER.index(base) if base in ORDER else len(ORDER), base, split)


def set_levels(folder: Path, func: str) -> List[str]:
    """The levels FUNC has lines metrics at in any run of FOLDER."""
    found = {lv for run in tablemod.load_runs(folder) for lv in costmodel.levels(run, func)}
    if not found:
        raise LabError(f"cost model: no lines metrics of {func} in {folder.name} "
                       "(a set of a --probe lines run has them for should_we_balance, "
                       "sched_balance_rq, update_sd_lb_stats, sched_balance_find_src_group, "
                       "select_task_rq_fair)")
    return sorted(found, key=_order)


def cell(p: Prediction) -> str:
    """'78', '59-81', and '+ 0.44 smt' for the lines per call at each
    distance the family has no figure for."""
    return p.ns() + "".join(f" + {v:.2f} {d}" for d, v in p.unpriced.items())


def _moved(d: str) -> Callable[[Counts], str]:
    return lambda c: f"{c.moved[d]:.3f}"


def _priced(fam: Family, spread: bool) -> Callable[[Counts], str]:
    return lambda c: cell(costmodel.predict(spread_for(c, fam, spread), fam))


def _pair(a: Optional[Counts], b: Optional[Counts], value: Callable[[Counts], str]) -> str:
    """'A / B' of VALUE, '-' for a side without calls there."""
    return " / ".join("-" if c is None else value(c) for c in (a, b))


def model_table(a_dir: Path, b_dir: Path, func: str = costmodel.FUNC,
                markdown: bool = False, spread: bool = False) -> str:
    """The counts and the predicted ns per call of FUNC, A against B, per
    workload and level; with SPREAD, lines to another core of the LLC are
    priced as lines to another LLC of the socket (spread_for)."""
    a_name, b_name = a_dir.name, b_dir.name
    own = [set_levels(d, func) for d in (a_dir, b_dir)]
    levels = [ALL, *sorted(set(own[0]) | set(own[1]), key=_order)]
    sides = {lv: [costmodel.vm_counts(d, func, None if lv == ALL else lv)
                  for d in (a_dir, b_dir)] for lv in levels}
    workloads = sorted(set(sides[ALL][0]) & set(sides[ALL][1]))
    if not workloads:
        raise LabError(f"cost model: {a_name} and {b_name} ran no workload in common")
    runs = {w: [c[w].runs for c in sides[ALL]] for w in workloads}
    fams = [f for f in costmodel.FAMILIES if f.ns]
    count_rows: List[List[str]] = []
    price_rows: List[List[str]] = []
    for w in workloads:
        for lv in levels:
            a, b = (side.get(w) for side in sides[lv])
            if a is None and b is None:
                continue
            count_rows.append([
                w, lv, _pair(a, b, lambda c: f"{c.calls:.1f}"),
                " / ".join("-" if c is None else f"{c.runs} of {n}"
                           for c, n in zip((a, b), runs[w])),
                *(_pair(a, b, _moved(d)) for d in linecount.DISTANCES),
                _pair(a, b, lambda c: f"{c.insns:.0f}")])
            price_rows.append([w, lv, *(_pair(a, b, _priced(f, spread)) for f in fams)])
    out = [f"{func}() per call, {a_name} / {b_name}: each run's mean, averaged over the "
           "runs with a call at that level", ""]
    out += render_table(["workload", "level", "calls a run", "runs",
                         *(f"lines at {d}" for d in linecount.DISTANCES), "instructions"],
                        count_rows, markdown)
    out += ["", f"the cost model, not a measurement: predicted ns per call, {a_name} / {b_name}"
            + (" (--other-llc: lines at llc priced as at xllc)" if spread else ""), ""]
    out += render_table(["workload", "level", *(f.name for f in fams)], price_rows, markdown)
    unpriced = [f.name for f in costmodel.FAMILIES if not f.ns]
    out += ["", f"Lines by distance times the family's published one-way latency, plus the "
            f"instructions at one cycle at {costmodel.GHZ:g} GHz; a range where the figures "
            "span 1 ns or more; '+ 0.44 smt': lines per call at a distance the family has no "
            "published figure for, not in the sum. No published figure at all, no "
            f"prediction: {', '.join(unpriced) or 'none'}. Figures and their sources: "
            "docs/results/cacheline-cost.md."]
    plain = [[lv for lv in lvs if "," not in lv] for lvs in own]
    if plain[0] != plain[1]:
        out += [f"The sets' levels differ ({a_name}: {' '.join(plain[0])}; {b_name}: "
                f"{' '.join(plain[1])}): their rows '{ALL}' sum different levels."]
    if spread:
        out += ["--other-llc: lines to another core of the LLC are priced at the family's "
                "figure for another LLC of the socket, as if every other core of the guest's "
                "node sat in an LLC of its own; for the families with that figure: "
                + ", ".join(f.name for f in fams if "xllc" in f.ns) + "."]
    return "\n".join(out)
