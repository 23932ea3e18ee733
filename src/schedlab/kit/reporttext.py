"""report.txt: a kit pass's report as plain text under 80 columns, to paste
into a mail.

In the manner of LKP's comparisons: for each pair of arms the report shows
and each headline metric, the reference's mean and %stddev, the change,
the arm's mean and %stddev, the A/A margin and a mark where the change
survives Holm's correction; then the machine, the kernel and the command.
"""

from __future__ import annotations

import shlex
import textwrap
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from schedlab.core.util import LabError
from schedlab.kit import hwreport, significance
from schedlab.measuring import costmodel, equivalence, stats
from schedlab.measuring import tables as tablemod

REPORT = "report.txt"
WIDTH = 79
MARK = "*"


def _runs(folder: Path) -> List[dict]:
    try:
        return tablemod.load_runs(folder)
    except LabError:
        return []


def _num(x: float) -> str:
    """A mean in at most 12 characters."""
    if x == 0:
        return "0"
    if abs(x) >= 1e7 or abs(x) < 1e-3:
        return f"{x:.4g}"
    return f"{x:,.4g}" if abs(x) < 1e4 else f"{x:,.0f}"


def _wrap(text: str, indent: str = "") -> List[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent) or [""]


def pair_block(a: str, b: str, a_runs: List[dict], b_runs: List[dict],
               margins: Dict[Tuple[str, str], equivalence.Margin],
               significant: Dict[Tuple[str, str, str, str], bool],
               every_result: bool = False, title: str = "") -> List[str]:
    """The rows of B against A (significance.shown(): with EVERY_RESULT
    every result of each benchmark): a line naming the benchmark and
    metric, then the numbers under the column heads."""
    rows = significance.shown(tablemod.rows(a_runs, b_runs), every_result) \
        if a_runs and b_runs else []
    out = _wrap(title or f"{b} against {a}") + [""]
    if not rows:
        return out + ["  no finished runs of both arms"]
    out += [f"{a[:14]:>14} {'%stddev':>8} {'%change':>9}  {b[:14]:>14} {'%stddev':>8}"
            f" {'A/A':>7}", ""]
    hib = {k: ms[0].get("higher_is_better") for k, ms in tablemod.by_metric(a_runs).items()}
    for r in rows:
        h = hib.get((r.workload, r.metric))
        better = ("no better direction" if h is None else "higher is better" if h
                  else "lower is better")
        out += _wrap(f"{r.workload}: {r.metric} ({r.unit}, {better})")
        change = stats.pct_change(r.a.mean, r.b.mean)
        m = margins.get((r.workload, r.metric))
        aa = f"{m.margin_pct:.1f}%" if m and m.margin_pct != float("inf") else "-"
        mark = MARK if significant.get((a, b, r.workload, r.metric)) else " "
        out.append(f"{_num(r.a.mean):>14} {r.a.cv_pct:>7.1f}% "
                   f"{'-' if change is None else f'{change:+.1f}%':>9}{mark} "
                   f"{_num(r.b.mean):>14} {r.b.cv_pct:>7.1f}% {aa:>7}")
    return out


def write(results: Path, title: str, about: str, pairs: Sequence[Tuple[str, str]],
          folders: Dict[str, Path], replica: Optional[str],
          significant: Dict[Tuple[str, str, str, str], bool], machine: dict,
          settings: Dict[str, object], argv: Sequence[str], every_result: bool = False,
          titles: Optional[Dict[Tuple[str, str], str]] = None) -> Path:
    """RESULTS/report.txt of one pass: PAIRS (A, B) by arm name, FOLDERS
    their result sets, REPLICA the reference's repeat (the A/A margins),
    SIGNIFICANT by (A, B, benchmark, metric) from the Holm-corrected family;
    EVERY_RESULT: every result of each benchmark (the throughput pass);
    TITLES: each pair's heading, by (A, B) (default "B against A")."""
    runs = {n: _runs(f) for n, f in folders.items()}
    ref = pairs[0][0] if pairs else ""
    margins = (equivalence.margins(runs[ref], runs[replica])
               if replica and runs.get(ref) and runs.get(replica) else {})
    lines = _wrap(title) + [""] + _wrap(about) + [""]
    lines += _wrap(f"Each arm's mean over its runs and %stddev (the standard deviation in "
                   f"percent of the mean); %change of the second arm's mean; A/A: the A/A "
                   f"margin of {ref} and its repeat {replica}, the change these runs cannot "
                   f"tell from noise; {MARK}: significant after Holm's correction over "
                   f"every comparison of this report." if replica else
                   "Each arm's mean over its runs and %stddev; %change of the second "
                   f"arm's mean; no A/A margin (no repeat of {ref}); {MARK}: significant "
                   "after Holm's correction over every comparison of this report.")
    for a, b in pairs:
        lines += ["", ""] + pair_block(a, b, runs.get(a, []), runs.get(b, []), margins,
                                       significant, every_result,
                                       (titles or {}).get((a, b), ""))
    lines += model_block(machine, runs)
    lines += ["", "", "machine", ""]
    lines += _machine_lines(machine)
    lines += ["", "settings", ""]
    lines += [ln for k, v in settings.items() for ln in _wrap(f"{k}: {v}", "  ")]
    lines += ["", "command", ""]
    lines += _wrap(shlex.join(list(argv)), "  ")
    path = results / REPORT
    results.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(ln.rstrip() for ln in lines) + "\n")
    return path


def _machine_lines(machine: dict) -> List[str]:
    ident = machine.get("identity") or {}
    noise = machine.get("noise") or {}
    rows = [("model", machine.get("model", "")),
            ("threads per core", str(machine.get("threads_per_core", ""))),
            ("SMT mode", machine.get("smt_mode", ""))]
    kernels = machine.get("kernels") or {}
    # The kernels of the arms, else the one the record was taken on.
    rows += [(f"the {k} kernel", hwreport.kernel_line(v)) for k, v in kernels.items()] or [
        ("kernel", ident.get("release") or machine.get("kernel", "")),
        ("sources", " ".join(v for v in (ident.get("variant", ""),
                                         ident.get("sources", "")) if v)),
        ("config hash", ident.get("config") or machine.get("config_hash", ""))]
    rows += [(k, ", ".join(v) if isinstance(v, list) else str(v)) for k, v in noise.items()]
    out = []
    for k, v in rows:
        if v:
            out += _wrap(f"{k}: {v}", "  ")
    return out or ["  no record of the machine"]


# The kit's arms the cost model predicts, as (kit arm, the model's arm).
MODEL_ARMS = (("swb-v7.3", "v7.3"), ("series", "series"))
LATENCY = f"{costmodel.FUNC} mean time (funclatency)"
# A kit workload without a VM run of its own name, priced at the VM's run
# of the same program: perf bench sched messaging is hackbench (processes
# over sockets).  Other loads (stress-90, stress-50) have no VM count.
VM_WORKLOAD = {"perf-messaging": "hackbench-process"}


def cpu_model(machine: dict) -> str:
    """The CPU's model name from the machine record's lscpu."""
    return next((ln.split(":", 1)[1].strip() for ln in (machine.get("lscpu") or "").splitlines()
                 if ln.startswith("Model name:")), "")


def _mean(runs: List[dict], workload: str) -> Optional[float]:
    vals = [r["metrics"][LATENCY]["value"] for r in runs
            if r.get("workload") == workload and LATENCY in r.get("metrics", {})]
    return sum(vals) / len(vals) if vals else None


def model_block(machine: dict, runs: Dict[str, List[dict]]) -> List[str]:
    """The cost model's prediction for should_we_balance() beside
    funclatency's mean, per workload, when the pass ran both arms of
    MODEL_ARMS with funclatency (the probe pass); else nothing."""
    arms = [(k, m) for k, m in MODEL_ARMS if runs.get(k)]
    if len(arms) < 2:
        return []
    timed = [{r["workload"] for r in runs[k] if LATENCY in r.get("metrics", {})}
             for k, _ in arms]
    workloads = sorted(timed[0] & timed[1])
    if not workloads:
        return []
    out = ["", "", f"cost model of {costmodel.FUNC}(): a model, not a measurement", ""]
    out += _wrap("The lab's VM counted the cache lines each call moves between CPUs, by "
                 "distance, in a 16-CPU guest: 2 cores of 8 threads, one LLC, levels SMT "
                 "and MC (docs/results/cacheline-cost.md has the command). The model "
                 "prices those lines at published one-way core-to-core latencies of this "
                 "machine's family, the guest's SMT distance at the family's SMT figure, "
                 f"and adds the call's instructions at one cycle at {costmodel.GHZ:g} GHz. "
                 f"This machine has {machine.get('threads_per_core') or '?'} threads a core "
                 "and its own LLCs and nodes: the model only prices what the guest moved. "
                 "funclatency's time includes its own probe's, which the model leaves out: "
                 "the two arms' difference is the closer test.", "  ")
    try:
        vm = costmodel.model_counts()
    except LabError as e:
        return out + ["", *_wrap(f"no prediction: {e}", "  ")]
    model = cpu_model(machine)
    fam = costmodel.family_of(model)
    fams = [fam] if fam else list(costmodel.FAMILIES)
    out += [""] + _wrap(f"CPU: {model or 'unknown'}: " + (
        f"{fam.name} (figures of {fam.part})" if fam else
        "none of the model's families; every family's prediction follows"), "  ")
    (a, ma), (b, mb) = arms
    for w in workloads:
        vw = w if w in vm[ma] else next((v for k, v in VM_WORKLOAD.items()
                                         if w.startswith(k)), "")
        out += [""] + _wrap(f"{w}" + (f" (priced with the VM's {vw})" if vw and vw != w
                                      else ""), "  ")
        ta, tb = _mean(runs[a], w), _mean(runs[b], w)
        if ta is not None and tb is not None:
            out += _wrap(f"funclatency mean: {a} {_num(ta)} ns, {b} {_num(tb)} ns; "
                         f"{a} less {b}: {_num(ta - tb)} ns", "    ")
        if vw not in vm[ma] or vw not in vm[mb]:
            out += ["    no VM count of this load to price"]
            continue
        for f in fams:
            pa, pb = (costmodel.predict(vm[m][vw], f) for m in (ma, mb))
            if not f.ns:
                out += _wrap(f"model, {f.name}: no published latency, no prediction", "    ")
                continue
            out += _wrap(f"model, {f.name}: {a} {pa.text()}, {b} {pb.text()}; "
                         f"{a} less {b}: {pa.minus(pb).text()}", "    ")
    return out
