"""The series' own KUnit output: should_we_balance() idle-state probe counts.

Detail: docs/modules.md, section series/kunit_report.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from schedlab.core.util import render_table

PROBE_LINE = re.compile(r"swb-probes: (.*)$")
CALLS_LINE = re.compile(r"swb-calls: (.*)$")
READS_LINE = re.compile(r"lb-stats-reads: (.*)$")

# Group statistics reuse: the share of the per-CPU reads above the lowest
# level that busy balancing saves over the suite's timeline, at least;
# (fixture, busy %) -> percent.
READ_TARGETS = {
    ("smt8-2x12x8", 100): 50,
    ("smt8-2x12x8", 90): 50,
}
READS_HEADING = ("  per-CPU runqueue reads of busy balancing over a simulated timeline "
                 "(every level at its own interval), upstream vs with cached group sums:")
READ_TARGETS_HEADING = ("  targets (reads above the lowest level saved, at least the share "
                        "shown):")

# The series' goal: fewer idle-state probes per balance pass than v7.3 (the
# suite on the KUnit series alone), by at least this factor; (fixture, busy %) -> factor.
PROBE_TARGETS = {
    ("smt8-2x12x8", 100): 6.0,
    ("smt8-2x12x8", 90): 3.5,
    ("smt8-2x12x8", 50): 1.5,
    ("smt4-2x12x4", 100): 4.0,
    ("smt2-x86-2x16x2", 100): 4.0,
}

PROBES_HEADING = ("  should_we_balance() idle-state probes per balance pass, upstream (v7.3: "
                  "the suite on the KUnit series alone, with --reference) vs this kernel "
                  "(mean over seeded patterns):")
CALLS_HEADING = "  idle-state probes per call, every level and dst of the election patterns:"
RATES_HEADING = ("  idle-state probes per second per CPU when busy, each level weighted by its "
                 "busy balance interval (span weight x busy_factor 16 ms, as "
                 "get_sd_balance_interval() starts it), from the per-pass probes by level:")
TARGETS_HEADING = ("  targets (the series' goal: fewer idle-state probes per pass than v7.3, "
                   "by at least the factor shown):")


@dataclass
class ProbeRow:
    fixture: str
    busy: int
    fields: Dict[str, str] = field(default_factory=dict)


def _key_values(text: str) -> Dict[str, str]:
    return dict(item.split("=", 1) for item in text.split() if "=" in item)


def parse_rows(console: str, tag: "re.Pattern[str]") -> List[ProbeRow]:
    """The per-fixture and busy level lines the pattern matches, in order
    (lines without a fixture or a busy level are left out)."""
    return [ProbeRow(kv.pop("fixture"), int(kv.pop("busy")), kv)
            for kv in _tagged_lines(console, tag) if "fixture" in kv and "busy" in kv]


def parse_probe_lines(console: str) -> List[ProbeRow]:
    """The suite's 'swb-probes: key=value ...' lines, in order."""
    return parse_rows(console, PROBE_LINE)


def _tagged_lines(console: str, tag: "re.Pattern[str]") -> List[Dict[str, str]]:
    """The key=value fields of every console line that the pattern matches."""
    out = []
    for line in console.splitlines():
        m = tag.search(line)
        if m:
            out.append(_key_values(m.group(1)))
    return out


def parse_call_lines(console: str) -> List[Dict[str, str]]:
    """The suite's 'swb-calls: key=value ...' lines (per-call totals of the
    election cases), in order."""
    return _tagged_lines(console, CALLS_LINE)


def parse_read_lines(console: str) -> List[Dict[str, str]]:
    """The suite's 'lb-stats-reads: key=value ...' lines, in order."""
    return _tagged_lines(console, READS_LINE)


def reads_table(lines: List[Dict[str, str]]) -> str:
    """Reads per fixture, busy level and balance level (Markdown)."""
    head = ["fixture", "busy %", "level", "busy balances", "upstream reads", "reads",
            "saved"]
    # A suite that counts the writes of the sums (one a jiffy) adds a column.
    writes = any("writes" in f for f in lines)
    if writes:
        head.append("sums written / balances leaving them")
    body = []
    for f in lines:
        up, ours = _num(f, "upstream"), _num(f, "patched")
        if up is None or ours is None:
            continue
        saved = f"{100 * (up - ours) / up:.0f}%" if up else "-"
        row = [f.get("fixture", "?"), f.get("busy", ""), f.get("level", ""),
               f.get("balances", ""), str(up), str(ours), saved]
        if writes:
            left, wrote = _num(f, "leaving"), _num(f, "writes")
            row.append(f"{wrote} / {left}" if left else "")
        body.append(row)
    return "\n".join(render_table(head, body, markdown=True)) if body else ""


def check_read_targets(lines: List[Dict[str, str]]) -> List[str]:
    """One line per READ_TARGETS entry; 'MISSED' marks a miss."""
    out = []
    above = {(f.get("fixture"), _num(f, "busy")): f for f in lines
             if f.get("level") == "above-lowest"}
    for (fixture, busy), want in READ_TARGETS.items():
        f = above.get((fixture, busy))
        up, ours = (_num(f, "upstream"), _num(f, "patched")) if f else (None, None)
        if not up or ours is None:
            out.append(f"{fixture} {busy}% busy: no busy balance above the lowest level "
                       "in the output (MISSED)")
            continue
        got = 100 * (up - ours) / up
        verdict = "met" if got >= want else "MISSED"
        out.append(f"{fixture} {busy}% busy: {got:.0f}% of the reads above the lowest "
                   f"level saved, target >= {want}%: {verdict}")
    return out


def reads_report_lines(lines: List[Dict[str, str]]) -> List[str]:
    """The reads table and its targets (nothing without 'lb-stats-reads:' lines)."""
    table = reads_table(lines)
    if not table:
        return []
    return [READS_HEADING, table, READ_TARGETS_HEADING] + [
        f"    {line}" for line in check_read_targets(lines)]


def _num(fields: Dict[str, str], key: str) -> Optional[int]:
    try:
        return int(fields[key])
    except (KeyError, ValueError):
        return None


# The fields of a reference run filed under 'upstream_*' (this run's key ->
# the reference's key).
_REF_ROW_KEYS = {"upstream_pass_probes": "pass_probes",
                 "upstream_max_call_probes": "max_call_probes",
                 "upstream_levels": "levels"}
_REF_CALL_KEYS = {"upstream_probes": "probes", "upstream_max_call_probes": "max_call_probes"}


def merge_reference(rows: List[ProbeRow], calls: List[Dict[str, str]],
                    ref_rows: List[ProbeRow], ref_calls: List[Dict[str, str]]
                    ) -> Tuple[List[ProbeRow], List[Dict[str, str]]]:
    """This run's lines with a reference run's counts (v7.3's: the suite on the
    KUnit series alone) under 'upstream_*' keys, matched by fixture and busy
    level (per call: by fixture, and only where both ran the same patterns)."""
    by_key = {(r.fixture, r.busy): r.fields for r in ref_rows}
    out_rows = []
    for r in rows:
        fields = dict(r.fields)
        ref = by_key.get((r.fixture, r.busy))
        if ref and ref.get("patterns") == fields.get("patterns"):
            fields.update({k: ref[v] for k, v in _REF_ROW_KEYS.items() if v in ref})
        out_rows.append(ProbeRow(r.fixture, r.busy, fields))
    by_fixture = {c.get("fixture"): c for c in ref_calls}
    out_calls = []
    for c in calls:
        merged = dict(c)
        ref = by_fixture.get(c.get("fixture"))
        if ref and ref.get("patterns") == c.get("patterns") and ref.get("calls") == c.get("calls"):
            merged.update({k: ref[v] for k, v in _REF_CALL_KEYS.items() if v in ref})
        out_calls.append(merged)
    return out_rows, out_calls


def probe_ratio(row: ProbeRow) -> Optional[float]:
    """Upstream probes per pass / this kernel's (None without both)."""
    ours, up = _num(row.fields, "pass_probes"), _num(row.fields, "upstream_pass_probes")
    if ours is None or up is None:
        return None
    if ours == 0:
        return float("inf") if up else 1.0
    return up / ours


def _fmt_ratio(x: Optional[float]) -> str:
    if x is None:
        return ""
    return "inf" if x == float("inf") else f"{x:.2f}x"


def call_table(lines: List[Dict[str, str]]) -> str:
    """Mean and max idle-state probes per call, upstream vs this kernel (Markdown)."""
    head = ["fixture", "patterns", "calls", "upstream probes/call", "probes/call", "fewer by",
            "max/call (upstream)", "stale env->idle probes/call (max)"]
    body = []
    for f in lines:
        try:
            calls = int(f["calls"])
            ours, stale = int(f["probes"]) / calls, int(f["stale_probes"]) / calls
        except (KeyError, ValueError, ZeroDivisionError):
            continue
        up_n = _num(f, "upstream_probes")
        up = None if up_n is None else up_n / calls
        up_max = f.get("upstream_max_call_probes")
        body.append([f.get("fixture", "?"), f.get("patterns", ""), str(calls),
                     "" if up is None else f"{up:.2f}", f"{ours:.2f}",
                     _fmt_ratio(up / ours if up is not None and ours else None),
                     f.get("max_call_probes", "") + (f" ({up_max})" if up_max else ""),
                     f"{stale:.2f} ({f.get('stale_max_call_probes', '')})"])
    return "\n".join(render_table(head, body, markdown=True)) if body else ""


def probe_table(rows: List[ProbeRow]) -> str:
    """Per-pass probe table, upstream vs this kernel, one row per fixture and busy level."""
    if not rows:
        return ""
    head = ["fixture", "busy %", "upstream probes/pass", "probes/pass", "fewer by",
            "calls/pass", "max probes/call (upstream)", "per level (upstream)"]
    body = []
    for r in rows:
        f = r.fields
        up_max = f.get("upstream_max_call_probes")
        levels = f.get("levels", "").replace(",", " ")
        if f.get("upstream_levels"):
            levels += f" ({f['upstream_levels'].replace(',', ' ')})"
        body.append([r.fixture, str(r.busy), f.get("upstream_pass_probes", ""),
                     f.get("pass_probes", ""), _fmt_ratio(probe_ratio(r)),
                     f.get("pass_calls", ""),
                     f.get("max_call_probes", "") + (f" ({up_max})" if up_max else ""), levels])
    return "\n".join(render_table(head, body, markdown=True))


def check_targets(rows: List[ProbeRow]) -> List[str]:
    """One line per target and per row costlier than upstream; 'MISSED' marks a miss."""
    out = []
    by_key = {(r.fixture, r.busy): r for r in rows}
    for (fixture, busy), want in PROBE_TARGETS.items():
        r = by_key.get((fixture, busy))
        got = probe_ratio(r) if r else None
        if got is None:
            out.append(f"{fixture} {busy}% busy: no upstream comparison in the output (MISSED)")
            continue
        verdict = "met" if got >= want else "MISSED"
        out.append(f"{fixture} {busy}% busy: {_fmt_ratio(got)} fewer probes per pass, "
                   f"target >= {want:g}x: {verdict}")
    for r in rows:
        ours, up = _num(r.fields, "pass_probes"), _num(r.fields, "upstream_pass_probes")
        if ours is not None and up is not None and ours > up:
            out.append(f"{r.fixture} {r.busy}% busy: {ours} probes per pass, more than "
                       f"upstream's {up} (MISSED)")
    return out


# The span weights (CPUs) of each fixture's levels, bottom-up, as the KUnit patch's
# fixtures define them (tests/fair_kunit.c: sockets x cores x threads, SMT
# width, LLCs per socket, NUMA ring).
FIXTURE_SPANS: Dict[str, Tuple[int, ...]] = {
    "smt2-x86-2x16x2": (2, 32, 64),
    "smt4-2x12x4": (4, 48, 96),
    "smt8-2x12x8": (8, 96, 192),
    "power10-1x6x8-smt4": (4, 8, 48),
    "multi-llc-2x4x4x2": (2, 8, 32, 64),
    "numa-ring-4x4x2": (2, 8, 24, 32),
}
BUSY_FACTOR = 16


def level_probes(text: str) -> List[int]:
    """'SMT:0,MC:96,NUMA:94' -> [0, 96, 94]."""
    return [int(item.split(":")[1]) for item in text.split(",") if ":" in item]


def busy_rate(levels: str, spans: Tuple[int, ...]) -> Optional[float]:
    """Probes per second per CPU: each level's probes per pass spread over the
    fixture's CPUs, times how often a busy CPU balances that level
    (1000 / (span weight x busy_factor) per second)."""
    probes = level_probes(levels)
    if len(probes) != len(spans):
        return None
    cpus = spans[-1]
    return sum(p / cpus * 1000 / (BUSY_FACTOR * w) for p, w in zip(probes, spans))


def rate_table(rows: List[ProbeRow]) -> str:
    head = ["fixture", "busy %", "spans", "upstream probes/s/CPU", "probes/s/CPU", "fewer by"]
    body = []
    for r in rows:
        spans = FIXTURE_SPANS.get(r.fixture)
        if not spans or "levels" not in r.fields:
            continue
        ours = busy_rate(r.fields["levels"], spans)
        up = busy_rate(r.fields.get("upstream_levels", ""), spans)
        ratio = up / ours if up is not None and ours else None
        body.append([r.fixture, str(r.busy), "/".join(map(str, spans)),
                     "" if up is None else f"{up:.3f}",
                     "" if ours is None else f"{ours:.3f}", _fmt_ratio(ratio)])
    return "\n".join(render_table(head, body, markdown=True)) if body else ""


def report_lines(rows: List[ProbeRow], calls: List[Dict[str, str]]) -> List[str]:
    """What './schedlab kunit' prints of the series' output: the per-pass table,
    the per-call table and the targets (nothing without 'swb-probes:' lines;
    targets only once the output has the upstream comparison)."""
    table = probe_table(rows)
    if not table:
        return []
    out = [PROBES_HEADING, table]
    rates = rate_table(rows)
    if rates:
        out += [RATES_HEADING, rates]
    calls_table = call_table(calls)
    if calls_table:
        out += [CALLS_HEADING, calls_table]
    if any("upstream_pass_probes" in r.fields for r in rows):
        out.append(TARGETS_HEADING)
        out += [f"    {line}" for line in check_targets(rows)]
    return out
