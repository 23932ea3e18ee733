"""The task-group gathering study: depth 1 against depth 2 in one result set.

The runs of the tg-WAKER-dDEPTH-SHARE-tTASKS workloads (workloads.py,
guest/workloads/tg-gather.sh) of one label, paired by setting (waker, share,
tasks): for each depth the group's CPU time against its entitlement, the
waker's throughput per entitled CPU (so that depth 2 is held to what depth 1
does with the same entitlement), how many CPUs carried the group, where its
wakeups went; and whether depth 2 differs from depth 1 by the lab's one
significance rule (stats.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from . import stats
from . import workloads as workmod
from .results import Run, find, read_runs
from .tables import render_table
from .util import LabError

_NAME = re.compile(r"tg-(\w+)-d([12])-(seed|s[0-9.]+)-t(\d+)(?:-l([0-9.]+))?")
RATIO = "tg achieved/entitled"
CONTROL = "cpu"
SHOWN = (("tg cpus used", "CPUs used"), ("tg cpus entitled", "entitled"),
         ("tg cpus carrying >=10% of its time", "CPUs >=10%"),
         ("tg wakeups placed on a busy cpu", "wakeups on busy %"),
         ("tg migrations per s", "migrations/s"))


@dataclass
class Side:
    n: int
    values: Dict[str, stats.Summary]
    per_cpu: Optional[stats.Summary]     # throughput per entitled CPU


def setting_of(workload: str) -> Optional[Tuple[str, str, str, str]]:
    """(waker, share, tasks, depth) of a tg workload name; the share carries the
    load when the name gives one ('seed l1.5'): the control is matched on both."""
    m = _NAME.fullmatch(workload)
    if not m:
        return None
    share = m.group(3) + (f" l{m.group(5)}" if m.group(5) else "")
    return (m.group(1), share, m.group(4), m.group(2))


def throughput_metric(waker: str) -> str:
    return workmod.TG_WAKERS[waker][2]


def _side(runs: Sequence[Run], waker: str) -> Optional[Side]:
    done = [r for r in runs if RATIO in r.metrics]
    if not done:
        return None
    values = {}
    for metric, _ in ((RATIO, ""),) + SHOWN:
        xs = [r.metrics[metric]["value"] for r in done if metric in r.metrics]
        if xs:
            values[metric] = stats.summarize(xs, "count")
    tp = throughput_metric(waker)
    per: List[float] = []
    for r in done:
        if tp in r.metrics and r.metrics["tg cpus entitled"]["value"] > 0:
            per.append(r.metrics[tp]["value"] / r.metrics["tg cpus entitled"]["value"])
    return Side(len(done), values, stats.summarize(per, "count") if per else None)


def table(label: str, markdown: bool = False) -> str:
    runs = read_runs(find(label))
    groups: Dict[Tuple[str, str, str], Dict[str, List[Run]]] = {}
    for r in runs:
        s = setting_of(r.workload or "")
        if s:
            groups.setdefault(s[:3], {}).setdefault(s[3], []).append(r)
    if not groups:
        raise LabError(f"{label}: no runs of tg-... workloads")
    head = ["waker", "share", "tasks", "depth", "n", "achieved/entitled %", "CV%",
            "of control %"] + [t for _, t in SHOWN] + ["throughput/entitled CPU", "CV%",
                                                       "d2 vs d1", "d2 beyond control"]
    # The control (CPU hogs) of each share and depth: what the machine gives a
    # group that never wakes anyone, with the same weights.
    control: Dict[Tuple[str, str], float] = {}
    for (waker, share, _tasks), depths in groups.items():
        if waker == CONTROL:
            for d, rs in depths.items():
                side = _side(rs, waker)
                if side:
                    control[(share, d)] = side.values[RATIO].mean
    rows: List[List[str]] = []
    for (waker, share, tasks), depths in sorted(groups.items()):
        sides = {d: _side(rs, waker) for d, rs in depths.items()}
        for d in sorted(sides):
            side = sides[d]
            if side is None:
                rows.append([waker, share, tasks, d, "0"] + ["-"] * (len(head) - 5))
                continue
            ratio = side.values[RATIO]
            ctl = control.get((share, d))
            row = [waker, share, tasks, d, str(side.n), f"{ratio.mean:.1f}",
                   f"{ratio.cv_pct:.1f}", f"{100 * ratio.mean / ctl:.0f}" if ctl else "-"]
            row += [f"{side.values[m].mean:.2f}" if m in side.values else "-" for m, _ in SHOWN]
            if side.per_cpu:
                row += [f"{side.per_cpu.mean:.4g}", f"{side.per_cpu.cv_pct:.1f}"]
            else:
                row += ["-", "-"]
            row.append(_versus(sides, d))
            row.append(_beyond(sides, d, control, share) if waker != CONTROL else "")
            rows.append(row)
    # Runs whose window failed the accounting check (parsers.tg_gather) have
    # no share: say how many the table left out.
    failed = sum(1 for r in runs if setting_of(r.workload or "")
                 and "tg window check failed" in r.metrics)
    left = (f"Left out: {failed} run(s) whose window failed the accounting check "
            "(every group's CPU time over it above what the CPUs can give).\n"
            if failed else "")
    return "\n".join(render_table(head, rows, markdown)) + "\n" + left + (
        "d2 vs d1: depth 2's achieved/entitled and throughput per entitled CPU against "
        "depth 1's, in % (negative: depth 2 gets less); * where it is significant "
        f"({stats.SIGNIFICANCE_RULE}). of control: achieved/entitled over that of the "
        "control (waker cpu: hogs that never wake anyone) at the same share and depth. "
        "d2 beyond control: depth 2's achieved/entitled over depth 1's, against the "
        "control's same ratio, in % (negative: depth 2 loses more than the control).\n")


def _beyond(sides: Dict[str, Optional[Side]], d: str, control: Dict[Tuple[str, str], float],
            share: str) -> str:
    """Depth 2's achieved/entitled over depth 1's, against the same ratio of the
    control at this share, in % (negative: depth 2 loses more than the control
    does: the symptom the screening looks for)."""
    one, two = sides.get("1"), sides.get("2")
    c1, c2 = control.get((share, "1")), control.get((share, "2"))
    if d != "2" or not one or not two or not c1 or not c2 or not one.values[RATIO].mean:
        return ""
    return f"{_beyond_pct(one.values[RATIO].mean, two.values[RATIO].mean, c1, c2):+.1f}%"


def _beyond_pct(one: float, two: float, c1: float, c2: float) -> float:
    """Depth 2's ratio to depth 1 (ONE, TWO) against the control's (C1, C2), in %."""
    return 100.0 * ((two / one) / (c2 / c1) - 1)


def _versus(sides: Dict[str, Optional[Side]], d: str) -> str:
    one, two = sides.get("1"), sides.get("2")
    if d != "2" or not one or not two:
        return ""
    parts = []
    for a, b in ((one.values[RATIO], two.values[RATIO]), (one.per_cpu, two.per_cpu)):
        if a is None or b is None or not a.mean:
            parts.append("-")
            continue
        star = "*" if stats.significant(a, b) else ""
        parts.append(f"{100.0 * (b.mean - a.mean) / a.mean:+.1f}%{star}")
    return " / ".join(parts)


Setting = Tuple[str, str, str]          # waker, share, tasks


def beyond_by_boot(label: str) -> Dict[Setting, Dict[int, float]]:
    """Each waker setting's "d2 beyond control" per boot of LABEL: depth 2's
    achieved/entitled over depth 1's, against the control's same ratio at
    that share in the same boot, in % (the runs of a boot averaged first)."""
    cells: Dict[Tuple[str, str, str, str, int], List[float]] = {}
    for r in read_runs(find(label)):
        s = setting_of(r.workload or "")
        if s and RATIO in r.metrics:
            cells.setdefault((*s, r.boot or 0), []).append(r.metrics[RATIO]["value"])
    mean = {k: sum(v) / len(v) for k, v in cells.items()}
    control = {(share, d, boot): v for (waker, share, _t, d, boot), v in mean.items()
               if waker == CONTROL}
    out: Dict[Setting, Dict[int, float]] = {}
    for (waker, share, tasks, d, boot), two in sorted(mean.items()):
        one = mean.get((waker, share, tasks, "1", boot))
        c1, c2 = control.get((share, "1", boot)), control.get((share, "2", boot))
        if waker == CONTROL or d != "2" or not one or not c1 or not c2:
            continue
        out.setdefault((waker, share, tasks), {})[boot] = _beyond_pct(one, two, c1, c2)
    return out


def versus_table(labels: Sequence[str], markdown: bool = False) -> str:
    """"d2 beyond control" per boot of each result set, and each set after the
    first against the first: the change in points, the share of the first's
    depth-2 loss it closes, and whether the change is significant."""
    by_label = [(label, beyond_by_boot(label)) for label in labels]
    settings = sorted({s for _, sets in by_label for s in sets})
    if not settings:
        raise LabError(f"{', '.join(labels)}: no boot with both depths of a waker and "
                       "of the control")
    head = ["setting", "result set", "boots", "d2 beyond control per boot %", "mean %",
            "sd", "vs first (points)", "loss closed %", "sig"]
    body: List[List[str]] = []
    for setting in settings:
        first: Optional[stats.Summary] = None
        for i, (label, sets) in enumerate(by_label):
            xs = [v for _, v in sorted(sets.get(setting, {}).items())]
            if not xs:
                continue
            sm = stats.summarize(xs, "count")
            row = [" ".join(setting), label, str(len(xs)), ", ".join(f"{x:+.1f}" for x in xs),
                   f"{sm.mean:+.1f}", f"{sm.stdev:.1f}"]
            if i == 0:
                first = sm
                row += ["", "", ""]
            elif first is None:
                row += ["-", "-", "-"]
            else:
                closed = (f"{100.0 * (sm.mean - first.mean) / -first.mean:.0f}"
                          if first.mean < 0 else "-")
                row += [f"{sm.mean - first.mean:+.1f}", closed,
                        "*" if stats.significant(first, sm) else ""]
            body.append(row)
    return "\n".join(render_table(head, body, markdown)) + "\n" + (
        "d2 beyond control per boot: in each boot, depth 2's achieved/entitled over depth "
        "1's against the control's same ratio (negative: depth 2 loses more than the "
        "control). loss closed: the change against the first set, as a share of the first "
        f"set's loss (100: none left). sig: {stats.SIGNIFICANCE_RULE}, over boots.\n")
