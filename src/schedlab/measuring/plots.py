"""PNG plots of a comparison (matplotlib, Agg backend: no display needed).

- counts.png and times.png: per workload, bars of A and B means for the key
  count and time metrics, error bars the 95% confidence interval of the mean
  (the same interval the significance rule uses).
- latency-WORKLOAD.png: the should_we_balance() latency histograms of A and
  B overlaid (log2 buckets summed over the runs, as fractions of the calls);
  latency-FUNCTION-WORKLOAD.png the same for the latency-lb probe's functions.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

from schedlab.core.util import LabError
from schedlab.measuring import probes as probemod
from schedlab.measuring import stats
from schedlab.measuring.tables import (WALLCLOCK_MARK, WALLCLOCK_NOTE, by_metric, short_wallclock,
                                       under_tcg)


def _plotted(kind: str) -> List[str]:
    """The metrics the records mark for the bar plot KIND ("count" or "time"), in order."""
    return [m.name for m in sorted((m for m in probemod.catalogue() if m.plot == kind),
                                   key=lambda m: m.rank)]


# Metrics shown in the bar plots, in this order, when present.
COUNT_METRICS = tuple(_plotted("count"))
TIME_METRICS = tuple(_plotted("time"))
# The functions whose funclatency histograms are plotted, when present.
LATENCY_FUNCTIONS = (probemod.LATENCY_FUNCTION, *probemod.LATENCY_MORE)


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise LabError("the plots need matplotlib: pip install 'schedlab[plots]', "
                       "or pass --no-plots") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _note(fig, wallclock: bool) -> None:
    """Lay out FIG, with the wall-clock note under it when it shows a short
    function's time under TCG."""
    if not wallclock:
        fig.tight_layout()
        return
    width, height = fig.get_size_inches()
    lines = textwrap.wrap(WALLCLOCK_NOTE.replace("`", ""), int(width * 21))
    room = (len(lines) * 6.5 * 1.3 + 6) / 72 / height     # 6 pt text, in figure heights
    fig.tight_layout(rect=(0, room, 1, 1))
    fig.text(0.01, 0.01, "\n".join(lines), fontsize=6, va="bottom", ha="left",
             color="#8b0000")


def _bars(plt, rows, metrics: Sequence[str], a_name: str, b_name: str, title: str,
          path: Path, wallclock: bool = False) -> bool:
    chosen = [m for m in metrics if any(r["metric"] == m for r in rows)]
    if not chosen:
        return False
    workloads = sorted({r["workload"] for r in rows if r["metric"] in chosen})
    fig, axes = plt.subplots(1, len(chosen), figsize=(4.2 * len(chosen), 3.8), squeeze=False)
    for ax, metric in zip(axes[0], chosen):
        xs, a_vals, b_vals, a_err, b_err = [], [], [], [], []
        for i, w in enumerate(workloads):
            r = next((r for r in rows if r["workload"] == w and r["metric"] == metric), None)
            if r is None:
                continue
            xs.append(i)
            a_vals.append(r["a_mean"])
            b_vals.append(r["b_mean"])
            a_err.append(r["a_half"])
            b_err.append(r["b_half"])
        width = 0.38
        ax.bar([x - width / 2 for x in xs], a_vals, width, yerr=a_err, capsize=3,
               label=a_name, color="#8c8c8c")
        ax.bar([x + width / 2 for x in xs], b_vals, width, yerr=b_err, capsize=3,
               label=b_name, color="#2a6fbb")
        ax.set_xticks(range(len(workloads)))
        ax.set_xticklabels(workloads, rotation=20, ha="right", fontsize=8)
        unit = next(r["unit"] for r in rows if r["metric"] == metric)
        ax.set_title(f"{metric}\n({unit})", fontsize=8)
        ax.tick_params(axis="y", labelsize=8)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(title + " (error bars: 95% CI of the mean)"
                 + (f" {WALLCLOCK_MARK}" if wallclock else ""), fontsize=9)
    _note(fig, wallclock)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _half(s) -> float:
    if s.n < 2:
        return 0.0
    return (s.ci_high - s.ci_low) / 2


def merged_histogram(runs: List[dict], workload: str, name: str = "should_we_balance"):
    """Buckets summed over a workload's complete runs: ({low: count}, tool, unit)."""
    total: Dict[int, int] = {}
    tool = unit = ""
    for r in runs:
        if r.get("workload") != workload or not r.get("complete"):
            continue
        h = r.get("histograms", {}).get(name)
        if not h:
            continue
        tool, unit = h["tool"], h["unit"]
        for lo, _hi, c in h["buckets"]:
            total[lo] = total.get(lo, 0) + c
    return total, tool, unit


def plot_data(a: List[dict], b: List[dict], rows, a_name: str, b_name: str) -> dict:
    """Everything the plots need, as JSON-able data (rows from tables.rows);
    'wallclock': the times are short functions' wall-clock times under TCG."""
    table: List[dict] = []
    histograms: List[dict] = []
    data = {"a_name": a_name, "b_name": b_name, "rows": table, "histograms": histograms,
            "wallclock": under_tcg(a, b)}
    for r in rows:
        table.append({"metric": r.metric, "workload": r.workload, "unit": r.unit,
                             "a_mean": r.a.mean, "b_mean": r.b.mean,
                             "a_half": _half(r.a), "b_half": _half(r.b)})
    for w in sorted({r["workload"] for r in a} & {r["workload"] for r in b}):
        for func in LATENCY_FUNCTIONS:
            ha, tool, unit = merged_histogram(a, w, func)
            hb, _, _ = merged_histogram(b, w, func)
            if ha and hb:
                histograms.append({"workload": w, "function": func, "tool": tool,
                                   "unit": unit, "a": sorted(ha.items()),
                                   "b": sorted(hb.items())})
    return data


def write_plots(a: List[dict], b: List[dict], rows, a_name: str, b_name: str,
                folder: Path) -> List[Path]:
    """Write the PNGs."""
    data = plot_data(a, b, rows, a_name, b_name)
    folder.mkdir(parents=True, exist_ok=True)
    return render(data, folder)


def render(data: dict, folder: Path) -> List[Path]:
    plt = _pyplot()
    a_name, b_name, rows = data["a_name"], data["b_name"], data["rows"]
    wallclock = bool(data.get("wallclock"))
    out = []
    p = folder / "counts.png"
    if _bars(plt, rows, COUNT_METRICS, a_name, b_name, "Counts per second", p):
        out.append(p)
    p = folder / "times.png"
    if _bars(plt, rows, TIME_METRICS, a_name, b_name, "Times", p, wallclock):
        out.append(p)
    for h in data["histograms"]:
        w, tool, unit = h["workload"], h["tool"], h["unit"]
        func = h.get("function", LATENCY_FUNCTIONS[0])
        ha, hb = dict(h["a"]), dict(h["b"])
        lows = sorted(lo for lo in set(ha) | set(hb) if ha.get(lo) or hb.get(lo))
        if not lows:
            continue
        # Every log2 bucket between the first and last non-empty one.
        lows = sorted(lo for lo in set(ha) | set(hb) if lows[0] <= lo <= lows[-1])
        fig, ax = plt.subplots(figsize=(7, 3.8))
        for hist, name, color in ((ha, a_name, "#8c8c8c"), (hb, b_name, "#2a6fbb")):
            n = sum(hist.values())
            ax.step(range(len(lows)), [hist.get(lo, 0) / n for lo in lows], where="mid",
                    label=f"{name} ({n:,} calls)", color=color, linewidth=2)
        ax.set_xticks(range(len(lows)))
        ax.set_xticklabels([_fmt_low(lo) for lo in lows], rotation=45, ha="right", fontsize=7)
        ax.set_xlabel(f"latency bucket, {unit} (log2)")
        ax.set_ylabel("fraction of calls")
        ax.set_title(f"{func}() latency, {w} ({tool})"
                     + (f" {WALLCLOCK_MARK}" if wallclock else ""), fontsize=9)
        ax.legend(fontsize=8)
        _note(fig, wallclock)
        p = folder / (f"latency-{w}.png" if func == LATENCY_FUNCTIONS[0]
                      else f"latency-{func}-{w}.png")
        fig.savefig(p, dpi=110)
        plt.close(fig)
        out.append(p)
    return out


def _fmt_low(v: int) -> str:
    for div, suf in ((1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")):
        if v >= div and v % div == 0:
            return f"{v // div}{suf}"
    return str(v)



def sweep_plot(arms: List[Tuple[str, List[dict]]], columns: Sequence[Tuple[str, str]],
               path: Path) -> bool:
    """sweep.png: one panel per sweep column (CPU busy, the workload's
    result, the probes' sweep metrics), the arms in their order on the x
    axis, one line per workload: the arm's mean in percent of the first arm's."""
    data = [(name, by_metric(runs)) for name, runs in arms]
    tcg = under_tcg(*(runs for _, runs in arms))
    workloads = sorted({k[0] for _, c in data for k in c})
    panels = []
    wallclock = False
    for title, rx in columns:
        lines = {}
        marked = False
        for w in workloads:
            ys: List[float] = []
            for _, c in data:
                keys = [k for k in c if k[0] == w and re.search(rx, k[1])]
                ms = c[keys[0]] if keys else []
                ys.append(stats.summarize([m["value"] for m in ms], ms[0]["kind"]).mean
                          if ms else float("nan"))
                marked |= bool(ms) and tcg and short_wallclock(ms[0]["unit"], ms[0]["kind"])
            ref = ys[0]
            if ref and ref == ref and any(y == y for y in ys[1:]):
                lines[w] = [100.0 * y / ref for y in ys]
        if lines:
            panels.append((title + (f" {WALLCLOCK_MARK}" if marked else ""), lines))
            wallclock |= marked
    if not panels:
        return False
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8), squeeze=False)
    names = [n for n, _ in arms]
    for ax, (title, lines) in zip(axes[0], panels):
        for w, ys in sorted(lines.items()):
            ax.plot(range(len(names)), ys, marker="o", label=w)
        ax.axhline(100, color="#8c8c8c", linewidth=0.8)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=20, ha="right", fontsize=8)
        ax.set_title(f"{title}\n(% of {names[0]})", fontsize=8)
        ax.tick_params(axis="y", labelsize=8)
    axes[0][0].legend(fontsize=7)
    fig.suptitle("Means per arm in percent of the first arm's (significance: the "
                 "pairwise tables)", fontsize=9)
    _note(fig, wallclock)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
