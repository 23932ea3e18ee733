"""Base-vs-patched comparison tables from a result set's run-*.json.

Detail: docs/modules.md, section measuring/compare.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from schedlab.core.util import LabError, render_table
from schedlab.measuring import plots as plotmod
from schedlab.measuring import probes as probemod
from schedlab.measuring import results as resmod
from schedlab.measuring import stats
from schedlab.measuring import workloads as workmod
from schedlab.measuring.tables import (WALLCLOCK_MARK, WALLCLOCK_NOTE, Row, by_metric, fmt,
                                       load_runs, names_rx, rows, setting, short_wallclock,
                                       under_tcg)

# Also the names of tables.py other modules use from here.
__all__ = ["COMPARABLE", "HEADLINE", "HEADLINE_MAX", "HEADLINE_MEANINGS", "Row", "by_metric",
           "check_comparable", "compare_and_plot", "default_plots", "headline",
           "headline_summary", "load_runs", "rows", "select", "setting",
           "sweep_table", "table"]

# What must be equal for two result sets to be compared.
COMPARABLE = ("topology", "config", "probe_tool", "latency_tool", "probes", "arch", "seconds",
              "accel")


@dataclass(frozen=True)
class Meaning:
    """A kind of headline row: what it says, and the metrics that say it."""
    what: str
    short: str              # for the line under the table
    pattern: str            # regular expression on the metric's name


def _meanings() -> Tuple[Meaning, ...]:
    results = [w.sweep_result for w in workmod.all_results() if w.sweep_result]
    return (
        Meaning("idle-state probes (idle_cpu()) per should_we_balance() call",
                "idle-state probes per call",
                names_rx(["idle_cpu probes per should_we_balance call"])),
        Meaning("should_we_balance() calls per second", "calls per second",
                names_rx(["should_we_balance calls per s"])),
        Meaning("the workload's own result (throughput, or the time of a fixed amount of work)",
                "each workload's result", names_rx(results)),
        Meaning("newly idle balances per second", "newly idle balances per second",
                names_rx(["sched_balance_rq newidle calls per s"])),
        Meaning("runqueue reads per busy balance, by level", "runqueue reads per busy balance",
                names_rx([], ["runqueue reads per busy balance"])),
        Meaning("busy-balance reads that shared sums could serve, by level (lb-share)",
                "reads sums could serve", names_rx([], ["group reads sums could serve"])),
        Meaning("instructions per call, median, by level (icount)", "instructions per call",
                r"^\S+ instructions per call, median( \(.+\))?$"),
        Meaning("cache lines moved between CPUs per call, mean, by level (lines)",
                "lines moved per call", r"^\S+ lines moved per call, mean( \(.+\))?$"),
        Meaning("cycles of every CPU in the run (perf stat; hardware only)", "cycles",
                names_rx(["cycles (perf stat)"])),
        Meaning("CPU busy", "CPU busy", names_rx([m.name for m in probemod.SYSTEM_METRICS])),
    )


HEADLINE_MEANINGS = _meanings()
HEADLINE_MAX = 10
# Under a table with a metric that no direction makes better (Metric's
# higher_is_better None: the share of reads sums could serve is how in step
# the kernel's balances run, not a result of the arm)
NEUTRAL_NOTE = ("pct imp in parentheses: the plain change on B, for a metric that neither "
                "direction makes better.")

# The metrics the probe and workload records flag as headline metrics: the
# candidates of the headline.  Given as 'only' (compare --headline), the
# headline rows: headline() picks them among these.
HEADLINE = names_rx([m.name for m in probemod.catalogue() if m.headline and not m.per_domain]
                    + [r for w in workmod.all_results() for r in w.results],
                    [m.name for m in probemod.catalogue() if m.headline and m.per_domain])


def headline(rs: List[Row], limit: int = HEADLINE_MAX) -> List[Row]:
    """The headline rows of RS, among the flagged ones (HEADLINE):
    HEADLINE_MEANINGS in order, each with all its rows, while they fit in
    LIMIT (the first one whatever its size); where no meaning has a row, the
    first LIMIT flagged rows.  Never a short function's wall-clock time under
    TCG.  In workload order, then the meanings' order."""
    flagged = re.compile(HEADLINE)
    candidates = [r for r in rs if not r.wallclock and flagged.search(r.metric)]
    rank: Dict[int, int] = {}
    for i, m in enumerate(HEADLINE_MEANINGS):
        rx = re.compile(m.pattern)
        got = [r for r in candidates if id(r) not in rank and rx.search(r.metric)]
        if not got:
            continue
        if rank and len(rank) + len(got) > limit:
            break
        rank.update((id(r), i) for r in got)
    if not rank:
        rank = {id(r): 0 for r in candidates[:limit]}
    order = {w: i for i, w in enumerate(dict.fromkeys(r.workload for r in rs))}
    return sorted((r for r in rs if id(r) in rank),
                  key=lambda r: (order[r.workload], rank[id(r)], r.metric))


def select(rs: List[Row], pattern: Optional[str]) -> List[Row]:
    """Rows whose metric matches a regular expression (all rows without one);
    HEADLINE: the headline rows."""
    if not pattern:
        return rs
    if pattern == HEADLINE:
        return headline(rs)
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise LabError(f"--only: not a regular expression: {pattern!r} ({exc})") from exc
    return [r for r in rs if rx.search(r.metric)]


def check_comparable(a: List[dict], b: List[dict]) -> None:
    diffs = []
    for key in COMPARABLE:
        sa, sb = setting(a, key), setting(b, key)
        if len(sa) > 1 or len(sb) > 1:
            diffs.append(f"{key}: mixed within one side (A {sorted(sa)}, B {sorted(sb)})")
        elif sa != sb:
            diffs.append(f"{key}: A {sa.pop()} vs B {sb.pop()}")
    if diffs:
        raise LabError("refusing to compare runs that differ in:\n  " + "\n  ".join(diffs))


def table(rs: List[Row], a_name: str, b_name: str, markdown: bool = False,
          each: bool = False) -> str:
    """EACH: also every run's value, in run order (boots of an 'ab' arm)."""
    head = ["workload", "metric", f"{a_name} mean", "CV%", f"{b_name} mean", "CV%",
            "pct imp", "sig"] + ([f"{a_name} runs", f"{b_name} runs"] if each else [])
    body = []
    for r in rs:
        imp = "n/a" if r.imp is None else f"({r.imp:+.2f}%)" if r.neutral else f"{r.imp:+.2f}%"
        body.append([r.workload, r.label(), fmt(r.a.mean), f"{r.a.cv_pct:.2f}",
                     fmt(r.b.mean), f"{r.b.cv_pct:.2f}", imp, "*" if r.sig else ""]
                    + ([" ".join(fmt(x) for x in r.a_vals), " ".join(fmt(x) for x in r.b_vals)]
                       if each else []))
    lines = render_table(head, body, markdown)
    lines.append("")
    lines.append(f"pct imp > 0: {b_name} better than {a_name}. '*': significant, "
                 f"{stats.SIGNIFICANCE_RULE}.")
    if any(r.neutral for r in rs):
        lines.append(NEUTRAL_NOTE)
    if any(r.wallclock for r in rs):
        lines.append(WALLCLOCK_NOTE)
    return "\n".join(lines)


def headline_summary(shown: List[Row], every: List[Row], b_name: str) -> str:
    """The lines under a headline table: what its rows are, what is
    significant, what was left out."""
    said = [m.short for m in HEADLINE_MEANINGS
            if any(re.search(m.pattern, r.metric) for r in shown)]
    sig = [r for r in shown if r.sig]
    out = [f"headline: {len(shown)} of {len(every)} metrics"
           + (f" ({', '.join(said)})" if said else "")
           + ("; significant ('*'):" if sig else "; no significant change")]
    for r in sig:
        change = ("" if r.imp is None
                  else f": {r.imp:+.1f}% on {b_name}, neither better nor worse" if r.neutral
                  else f": {r.imp:+.1f}%, {'better' if r.imp > 0 else 'worse'} on {b_name}")
        out.append(f"  {r.workload} {r.metric}{change}")
    left = sum(1 for r in every if r.wallclock)
    if left:
        out.append(f"not in it: {left} wall-clock times of short functions under TCG, which "
                   "measure how the vCPUs are scheduled (`--accel icount` counts their "
                   "instructions)")
    return "\n".join(out)


def _sweep_columns() -> List[Tuple[str, str]]:
    """The columns of a sweep table (several arms of one 'ab' run: load level
    -> CPU utilisation, throughput), as (title, metric regex), from the
    records: CPU busy time, the workload's result, the probes' columns."""
    cols: Dict[str, List[str]] = {}
    for m in list(probemod.SYSTEM_METRICS):
        cols.setdefault(m.sweep, []).append(m.name)
    cols["result"] = [w.sweep_result for w in workmod.all_results() if w.sweep_result]
    for m in probemod.catalogue():
        if m.sweep:
            cols.setdefault(m.sweep, []).append(m.name)
    return [(title, names_rx(names)) for title, names in cols.items()]


SWEEP_COLUMNS = tuple(_sweep_columns())


def sweep_table(arms: List[Tuple[str, List[dict]]], markdown: bool = True) -> str:
    """One row per workload and arm: mean (CV%) of the SWEEP_COLUMNS metrics.

    A summary beside the pairwise tables, which carry the significance.
    """
    data = [(name, by_metric(runs)) for name, runs in arms]
    tcg = under_tcg(*(runs for _, runs in arms))
    workloads: List[str] = []
    for _, runs in arms:
        for r in runs:
            if r["workload"] not in workloads:
                workloads.append(r["workload"])
    head = ["workload", "arm"] + [t for t, _ in SWEEP_COLUMNS]
    marked = set()
    body = []
    for w in workloads:
        for name, c in data:
            row = [w, name]
            for i, (title, rx) in enumerate(SWEEP_COLUMNS):
                keys = [k for k in c if k[0] == w and re.search(rx, k[1])]
                if not keys:
                    row.append("-")
                    continue
                ms = c[keys[0]]
                if tcg and short_wallclock(ms[0]["unit"], ms[0]["kind"]):
                    marked.add(i + 2)
                vals = [m["value"] / (1e6 if m["unit"] == "ns" else 1) for m in ms]
                sm = stats.summarize(vals, ms[0]["kind"])
                cell = f"{fmt(sm.mean)} ({sm.cv_pct:.1f})"
                if title == "result":
                    cell = f"{keys[0][1]}: {cell} {ms[0]['unit']}"
                row.append(cell)
            body.append(row)
    head = [f"{t} {WALLCLOCK_MARK}" if i in marked else t for i, t in enumerate(head)]
    # A column no arm has (a probe not in the plan) is left out.
    keep = [i for i in range(len(head)) if i < 2 or any(r[i] != "-" for r in body)]
    head = [head[i] for i in keep]
    body = [[r[i] for i in keep] for r in body]
    lines = render_table(head, body, markdown)
    lines.append("")
    lines.append("mean (CV%) over the complete runs of each arm; significance in the "
                 "pairwise tables.")
    if marked:
        lines.append(WALLCLOCK_NOTE)
    return "\n".join(lines)


def compare_and_plot(a_dir: Path, b_dir: Path, markdown: bool, plots: Optional[Path],
                     only: Optional[str] = None, each: bool = False) -> str:
    """The table of B against A (rows matching ONLY; HEADLINE: the headline
    rows and what they leave out), and the plots into PLOTS."""
    a, b = load_runs(a_dir), load_runs(b_dir)
    check_comparable(a, b)
    rs = rows(a, b)
    if not rs:
        raise LabError("no metric has complete runs on both sides")
    shown = select(rs, only)
    if not shown:
        raise LabError(f"--only {only!r} matches no metric")
    text = table(shown, a_dir.name, b_dir.name, markdown=markdown, each=each)
    if only == HEADLINE:
        text += "\n" + headline_summary(shown, rs, b_dir.name)
    if plots:
        files = plotmod.write_plots(a, b, rs, a_dir.name, b_dir.name, plots)
        text += "\nplots:\n" + "\n".join(f"  {f}" for f in files)
    return text


def default_plots(a_dir: Path, b_dir: Path) -> Path:
    """Where 'compare A B' puts its plots unless told: work/results/A-vs-B-plots
    (outside the tracked tree, wherever A and B are)."""
    return resmod.results_dir(f"{a_dir.name}-vs-{b_dir.name}-plots")
