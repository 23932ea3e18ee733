"""Base-vs-patched comparison tables from results/NAME/ (one JSON per run).

Sign convention, stated once: 'pct imp' is positive when B is better than
A, whatever the direction of the metric. Significance: see stats.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from . import probes as probemod
from . import stats
from . import workloads as workmod
from .util import LabError

# What must be equal for two result sets to be compared.
COMPARABLE = ("topology", "config", "probe_tool", "latency_tool", "probes", "arch", "seconds",
              "accel")


def _names_rx(names, per_domain=()) -> str:
    alts = [re.escape(n) for n in sorted(set(names))]
    alts += [re.escape(n) + r"( \(.+\))?" for n in sorted(set(per_domain))]
    return "^(" + "|".join(alts) + ")$"


# The rows 'ab' prints and the README quotes: the metrics the probe and
# workload records mark as headline metrics.
HEADLINE = _names_rx([m.name for m in probemod.catalogue() if m.headline and not m.per_domain]
                     + [r for w in workmod.all_results() for r in w.results],
                     [m.name for m in probemod.catalogue() if m.headline and m.per_domain])


def select(rs: List["Row"], pattern: Optional[str]) -> List["Row"]:
    """Rows whose metric matches a regular expression (all rows without one)."""
    if not pattern:
        return rs
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise LabError(f"--only: not a regular expression: {pattern!r} ({exc})") from exc
    return [r for r in rs if rx.search(r.metric)]


def load_runs(folder: Path) -> List[dict]:
    if not folder.is_dir():
        raise LabError(f"no results at {folder}")
    runs = []
    for f in sorted(folder.glob("run-*.json")):
        runs.append(json.loads(f.read_text()))
    if not runs:
        raise LabError(f"no run-*.json in {folder}")
    return runs


def setting(runs: List[dict], key: str) -> set:
    return {json.dumps(r.get("setting", {}).get(key), sort_keys=True) for r in runs}


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
    ca, cb = by_metric(a), by_metric(b)
    out = []
    for key in sorted(set(ca) & set(cb)):
        ma, mb = ca[key], cb[key]
        kind, hib = ma[0]["kind"], ma[0]["higher_is_better"]
        sa = stats.summarize([m["value"] for m in ma], kind)
        sb = stats.summarize([m["value"] for m in mb], kind)
        out.append(Row(key[0], key[1], ma[0]["unit"], sa, sb,
                       stats.pct_improvement(sa.mean, sb.mean, hib), stats.significant(sa, sb),
                       tuple(m["value"] for m in ma), tuple(m["value"] for m in mb)))
    return out


def _fmt(x: float) -> str:
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.3f}"


def render_table(head: List[str], body: List[List[str]], markdown: bool) -> List[str]:
    """Rows as Markdown or aligned text; the first two columns are labels."""
    if markdown:
        lines = ["| " + " | ".join(head) + " |",
                 "|" + "|".join(["---", "---"] + ["---:"] * (len(head) - 2)) + "|"]
        return lines + ["| " + " | ".join(row) + " |" for row in body]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    fmt = "  ".join(f"{{:<{w}}}" if i < 2 else f"{{:>{w}}}" for i, w in enumerate(widths))
    return [fmt.format(*head)] + [fmt.format(*row) for row in body]


def table(rs: List[Row], a_name: str, b_name: str, markdown: bool = False,
          each: bool = False) -> str:
    """EACH: also every run's value, in run order (boots of an 'ab' arm)."""
    head = ["workload", "metric", f"{a_name} mean", "CV%", f"{b_name} mean", "CV%",
            "pct imp", "sig"] + ([f"{a_name} runs", f"{b_name} runs"] if each else [])
    body = []
    for r in rs:
        imp = "n/a" if r.imp is None else f"{r.imp:+.2f}%"
        body.append([r.workload, f"{r.metric} ({r.unit})", _fmt(r.a.mean), f"{r.a.cv_pct:.2f}",
                     _fmt(r.b.mean), f"{r.b.cv_pct:.2f}", imp, "*" if r.sig else ""]
                    + ([" ".join(_fmt(x) for x in r.a_vals), " ".join(_fmt(x) for x in r.b_vals)]
                       if each else []))
    lines = render_table(head, body, markdown)
    lines.append("")
    lines.append(f"pct imp > 0: {b_name} better than {a_name}. '*': significant, "
                 f"{stats.SIGNIFICANCE_RULE}.")
    return "\n".join(lines)


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
    return [(title, _names_rx(names)) for title, names in cols.items()]


SWEEP_COLUMNS = tuple(_sweep_columns())


def sweep_table(arms: List[Tuple[str, List[dict]]], markdown: bool = True) -> str:
    """One row per workload and arm: mean (CV%) of the SWEEP_COLUMNS metrics.

    A summary beside the pairwise tables, which carry the significance.
    """
    data = [(name, by_metric(runs)) for name, runs in arms]
    workloads: List[str] = []
    for _, runs in arms:
        for r in runs:
            if r["workload"] not in workloads:
                workloads.append(r["workload"])
    head = ["workload", "arm"] + [t for t, _ in SWEEP_COLUMNS]
    body = []
    for w in workloads:
        for name, c in data:
            row = [w, name]
            for title, rx in SWEEP_COLUMNS:
                keys = [k for k in c if k[0] == w and re.search(rx, k[1])]
                if not keys:
                    row.append("-")
                    continue
                ms = c[keys[0]]
                vals = [m["value"] / (1e6 if m["unit"] == "ns" else 1) for m in ms]
                sm = stats.summarize(vals, ms[0]["kind"])
                cell = f"{_fmt(sm.mean)} ({sm.cv_pct:.1f})"
                if title == "result":
                    cell = f"{keys[0][1]}: {cell} {ms[0]['unit']}"
                row.append(cell)
            body.append(row)
    # A column no arm has (a probe not in the plan) is left out.
    keep = [i for i in range(len(head)) if i < 2 or any(r[i] != "-" for r in body)]
    head = [head[i] for i in keep]
    body = [[r[i] for i in keep] for r in body]
    lines = render_table(head, body, markdown)
    lines.append("")
    lines.append("mean (CV%) over the complete runs of each arm; significance in the "
                 "pairwise tables.")
    return "\n".join(lines)


def compare_and_plot(a_dir: Path, b_dir: Path, markdown: bool, plots: Optional[Path],
                     only: Optional[str] = None, each: bool = False) -> str:
    """The table of B against A (rows matching ONLY), and the plots into PLOTS."""
    a, b = load_runs(a_dir), load_runs(b_dir)
    check_comparable(a, b)
    rs = rows(a, b)
    if not rs:
        raise LabError("no metric has complete runs on both sides")
    shown = select(rs, only)
    if not shown:
        raise LabError(f"--only {only!r} matches no metric")
    text = table(shown, a_dir.name, b_dir.name, markdown=markdown, each=each)
    if plots:
        from . import plots as plotmod
        files = plotmod.write_plots(a, b, rs, a_dir.name, b_dir.name, plots)
        text += "\nplots:\n" + "\n".join(f"  {f}" for f in files)
    return text
