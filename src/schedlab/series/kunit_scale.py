"""The KUnit suite's probe table at scale: 192, 768 and 1920 CPUs.

The suite's case swb_probe_counts_at_scale prints 'swb-scale: key=value ...'
lines, one per fixture and busy level, as swb_probe_counts_per_pass prints
'swb-probes:'. This module reads them, puts v7.3's (the suite on the KUnit
series alone) beside them and fits how a balance pass grows with the number
of CPUs. Detail: docs/modules.md, section series/kunit_scale.py.
"""

from __future__ import annotations

import math
import re
from typing import Dict, List, Optional, Sequence, Tuple

from schedlab.core.util import render_table
from schedlab.series.kunit_report import ProbeRow, level_probes, merge_reference, parse_rows

SCALE_LINE = re.compile(r"swb-scale: (.*)$")

# The fixtures of the scale case, smallest first (tests/fair_kunit.c), and
# the busy levels it prints.
SCALE_FIXTURES = ("smt8-2x12x8", "multi-llc-2x12x16x2", "smt8-16x15x8")
SCALE_BUSY = (100, 90, 50)

TABLE_HEADING = ("  should_we_balance() idle-state probes per balance pass at scale, upstream "
                 "(v7.3: the suite on the KUnit series alone) vs this kernel (mean over "
                 "seeded patterns, each level rounded on its own):")
NO_REFERENCE = "  (no upstream columns: --reference adds v7.3's counts)"
GROWTH_HEADING = ("  growth with the number of CPUs: the exponent b of probes per pass = "
                  "a x CPUs^b, least squares over the fixtures' log-log points; top level: "
                  "the level that spans the machine:")


def parse_scale_lines(console: str) -> List[ProbeRow]:
    """The suite's 'swb-scale: key=value ...' lines, in order."""
    return [r for r in parse_rows(console, SCALE_LINE) if "cpus" in r.fields]


def merge(rows: List[ProbeRow], ref_rows: List[ProbeRow]) -> List[ProbeRow]:
    """This run's rows with the reference run's counts as 'upstream_*' keys."""
    merged, _ = merge_reference(rows, [], ref_rows, [])
    return merged


def missing(rows: List[ProbeRow]) -> List[str]:
    """'fixture busy%' of every row the scale case should print and did not."""
    have = {(r.fixture, r.busy) for r in rows}
    return [f"{f} {b}%" for f in SCALE_FIXTURES for b in SCALE_BUSY if (f, b) not in have]


def growth_exponent(points: Sequence[Tuple[float, float]]) -> Optional[float]:
    """Least-squares slope of log(y) on log(x) over (x, y) points; None with
    fewer than two distinct x, or a point not above zero."""
    if len(points) < 2 or any(x <= 0 or y <= 0 for x, y in points):
        return None
    lx = [math.log(x) for x, _ in points]
    ly = [math.log(y) for _, y in points]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    sxx = sum((a - mx) ** 2 for a in lx)
    if sxx == 0:
        return None
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sxx


def _int(fields: Dict[str, str], key: str) -> Optional[int]:
    try:
        return int(fields[key])
    except (KeyError, ValueError):
        return None


def _ratio(up: Optional[int], ours: Optional[int]) -> str:
    if up is None or ours is None:
        return ""
    if ours == 0:
        return "inf" if up else "1.00x"
    return f"{up / ours:.2f}x"


def _per_cpu(probes: Optional[int], cpus: Optional[int]) -> str:
    return "" if probes is None or not cpus else f"{probes / cpus:.2f}"


def scale_table(rows: List[ProbeRow]) -> str:
    """One row per fixture and busy level (Markdown)."""
    head = ["fixture", "CPUs", "busy %", "upstream probes/pass", "probes/pass", "fewer by",
            "upstream per CPU", "per CPU", "per level, this kernel (upstream)"]
    body = []
    for r in rows:
        f = r.fields
        cpus, ours, up = _int(f, "cpus"), _int(f, "pass_probes"), _int(f, "upstream_pass_probes")
        levels = f.get("levels", "").replace(",", " ")
        if f.get("upstream_levels"):
            levels += f" ({f['upstream_levels'].replace(',', ' ')})"
        body.append([r.fixture, str(cpus or ""), str(r.busy), "" if up is None else str(up),
                     "" if ours is None else str(ours), _ratio(up, ours),
                     _per_cpu(up, cpus), _per_cpu(ours, cpus), levels])
    return "\n".join(render_table(head, body, markdown=True)) if body else ""


def _points(rows: List[ProbeRow], busy: int, key: str,
            level: Optional[int] = None) -> List[Tuple[float, float]]:
    out = []
    for r in rows:
        cpus = _int(r.fields, "cpus")
        if r.busy != busy or not cpus:
            continue
        if level is None:
            value = _int(r.fields, key)
        else:
            per_level = level_probes(r.fields.get(key, ""))
            value = per_level[level] if len(per_level) > abs(level) else None
        if value is not None:
            out.append((float(cpus), float(value)))
    return out


def _fmt_exp(x: Optional[float]) -> str:
    return "" if x is None else f"{x:.2f}"


def growth_table(rows: List[ProbeRow]) -> str:
    """Per busy level: the growth exponent of the probes per pass, upstream and
    this kernel, and of the top level's (the one that spans the machine)."""
    head = ["busy %", "CPUs", "upstream exponent", "exponent", "top level: upstream",
            "top level"]
    body = []
    for busy in sorted({r.busy for r in rows}, reverse=True):
        cpus = sorted({_int(r.fields, "cpus") or 0 for r in rows if r.busy == busy})
        body.append([str(busy), "/".join(map(str, cpus)),
                     _fmt_exp(growth_exponent(_points(rows, busy, "upstream_pass_probes"))),
                     _fmt_exp(growth_exponent(_points(rows, busy, "pass_probes"))),
                     _fmt_exp(growth_exponent(_points(rows, busy, "upstream_levels", -1))),
                     _fmt_exp(growth_exponent(_points(rows, busy, "levels", -1)))])
    return "\n".join(render_table(head, body, markdown=True)) if body else ""


def more_than_upstream(rows: List[ProbeRow]) -> List[str]:
    """One line per row where this kernel probes more than upstream."""
    out = []
    for r in rows:
        ours, up = _int(r.fields, "pass_probes"), _int(r.fields, "upstream_pass_probes")
        if ours is not None and up is not None and ours > up:
            out.append(f"{r.fixture} {r.busy}% busy: {ours} probes per pass, upstream {up}")
    return out


def report_lines(rows: List[ProbeRow]) -> List[str]:
    """What './schedlab kunit --scale' prints (nothing without rows)."""
    if not rows:
        return []
    out = [TABLE_HEADING, scale_table(rows)]
    if not any("upstream_pass_probes" in r.fields for r in rows):
        out.append(NO_REFERENCE)
    return out + [GROWTH_HEADING, growth_table(rows)]
