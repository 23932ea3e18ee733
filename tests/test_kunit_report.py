"""The series' KUnit output: probe and call lines, their tables, the targets.

Consoles captured from lab runs: kunit-console-2x12x8.txt from before the
comparison with upstream, kunit-console-2x12x8-upstream.txt with it (the
series at patch 3: the 90% and 50% busy targets are still missed there).
"""

from pathlib import Path

from schedlab.series import kunit_report as r

DATA = Path(__file__).parent / "data"
CONSOLE = (DATA / "kunit-console-2x12x8.txt").read_text()
UPSTREAM = (DATA / "kunit-console-2x12x8-upstream.txt").read_text()


def test_probe_lines_from_real_console():
    rows = r.parse_probe_lines(CONSOLE)
    assert len(rows) == 24
    smt8 = {row.busy: row for row in rows if row.fixture == "smt8-2x12x8"}
    assert sorted(smt8) == [0, 50, 90, 100]
    assert smt8[100].fields["pass_probes"] == "4032"
    assert smt8[100].fields["levels"] == "SMT:192,MC:1536,NUMA:2304"


def test_probe_table_markdown():
    table = r.probe_table(r.parse_probe_lines(CONSOLE)).splitlines()
    assert table[0] == ("| fixture | busy % | upstream probes/pass | probes/pass | fewer by | "
                        "calls/pass | max probes/call (upstream) | per level (upstream) |")
    # util.render_table's alignment: two label columns, then numbers.
    assert table[1] == "|---|---|---:|---:|---:|---:|---:|---:|"
    # A console from before the upstream comparison: its columns stay empty.
    assert "| smt8-2x12x8 | 100 |  | 4032 |  | 408 | 96 | SMT:192 MC:1536 NUMA:2304 |" in table
    assert len(table) == 2 + 24
    assert r.probe_table([]) == ""


def test_probe_table_with_upstream_comparison():
    table = r.probe_table(r.parse_probe_lines(UPSTREAM)).splitlines()
    assert ("| smt8-2x12x8 | 100 | 4032 | 574 | 7.02x | 408 | 96 (96) | "
            "SMT:0 MC:360 NUMA:214 (SMT:192 MC:1536 NUMA:2304) |") in table
    assert ("| numa-ring-4x4x2 | 0 | 136 | 104 | 1.31x | 84 | 2 (2) | "
            "SMT:0 MC:64 NUMA:32 NUMA:8 (SMT:32 MC:64 NUMA:32 NUMA:8) |") in table


def test_call_lines_and_table_from_real_console():
    lines = r.parse_call_lines(UPSTREAM)
    assert [c["fixture"] for c in lines] == ["smt2-x86-2x16x2", "smt4-2x12x4", "smt8-2x12x8",
                                            "power10-1x6x8-smt4", "multi-llc-2x4x4x2",
                                            "numa-ring-4x4x2"]
    table = r.call_table(lines).splitlines()
    assert table[0] == ("| fixture | patterns | calls | upstream probes/call | probes/call | "
                        "fewer by | max/call (upstream) | stale env->idle probes/call (max) |")
    assert table[1] == "|---|---|---:|---:|---:|---:|---:|---:|"
    assert table[4] == ("| smt8-2x12x8 | 8006 | 4611456 | 15.42 | 6.11 | 2.52x | 98 (98) | "
                        "15.43 (99) |")


def test_call_table_numbers():
    console = ("[  9.1]     # swb_decides_as_upstream: swb-calls: fixture=smt8-2x12x8 "
               "patterns=8006 calls=4611456 probes=15650372 upstream_probes=71119054 "
               "max_call_probes=96 upstream_max_call_probes=98 stale_probes=29022102 "
               "stale_max_call_probes=97\n")
    lines = r.parse_call_lines(console)
    assert lines[0]["fixture"] == "smt8-2x12x8" and lines[0]["calls"] == "4611456"
    table = r.call_table(lines).splitlines()
    assert table[2] == ("| smt8-2x12x8 | 8006 | 4611456 | 15.42 | 3.39 | 4.54x | 96 (98) | "
                        "6.29 (97) |")
    assert r.call_table([]) == "" and r.call_table([{"fixture": "x"}]) == ""


def _row(fixture, busy, ours, up):
    return r.ProbeRow(fixture, busy, {"pass_probes": str(ours), "upstream_pass_probes": str(up)})


def test_probe_ratio_and_targets():
    assert r.probe_ratio(_row("f", 100, 500, 4000)) == 8.0
    assert r.probe_ratio(_row("f", 0, 0, 0)) == 1.0
    assert r.probe_ratio(_row("f", 0, 0, 5)) == float("inf")
    assert r.probe_ratio(r.ProbeRow("f", 0, {"pass_probes": "3"})) is None
    rows = [_row("smt8-2x12x8", 100, 600, 4032), _row("smt8-2x12x8", 90, 1000, 3222),
            _row("smt8-2x12x8", 50, 1300, 1860), _row("smt4-2x12x4", 100, 300, 1632),
            _row("smt2-x86-2x16x2", 100, 200, 1216), _row("numa-ring-4x4x2", 0, 130, 128)]
    lines = r.check_targets(rows)
    assert "smt8-2x12x8 100% busy: 6.72x fewer probes per pass, target >= 6x: met" in lines
    assert "smt8-2x12x8 90% busy: 3.22x fewer probes per pass, target >= 3.5x: MISSED" in lines
    assert "smt8-2x12x8 50% busy: 1.43x fewer probes per pass, target >= 1.5x: MISSED" in lines
    assert any("numa-ring-4x4x2 0% busy: 130 probes per pass, more than upstream's 128"
               in line for line in lines)
    assert all("MISSED" not in line for line in r.check_targets(rows[:1] + [
        _row("smt8-2x12x8", 90, 900, 3222), _row("smt8-2x12x8", 50, 1000, 1860),
        _row("smt4-2x12x4", 100, 300, 1632), _row("smt2-x86-2x16x2", 100, 200, 1216)]))
    assert all("MISSED" in line for line in r.check_targets([]))


def test_targets_on_real_console():
    assert r.check_targets(r.parse_probe_lines(UPSTREAM)) == [
        "smt8-2x12x8 100% busy: 7.02x fewer probes per pass, target >= 6x: met",
        "smt8-2x12x8 90% busy: 2.38x fewer probes per pass, target >= 3.5x: MISSED",
        "smt8-2x12x8 50% busy: 1.30x fewer probes per pass, target >= 1.5x: MISSED",
        "smt4-2x12x4 100% busy: 5.71x fewer probes per pass, target >= 4x: met",
        "smt2-x86-2x16x2 100% busy: 6.40x fewer probes per pass, target >= 4x: met"]


def test_report_lines():
    out = r.report_lines(r.parse_probe_lines(UPSTREAM), r.parse_call_lines(UPSTREAM))
    assert [out[0], out[2], out[4], out[6]] == [r.PROBES_HEADING, r.RATES_HEADING,
                                               r.CALLS_HEADING, r.TARGETS_HEADING]
    assert "issue" not in r.TARGETS_HEADING and "v7.3" in r.TARGETS_HEADING
    assert out[7] == "    smt8-2x12x8 100% busy: 7.02x fewer probes per pass, target >= 6x: met"
    assert len(out) == 7 + len(r.PROBE_TARGETS)
    # Before the upstream comparison: the table alone, no targets.
    old = r.report_lines(r.parse_probe_lines(CONSOLE), r.parse_call_lines(CONSOLE))
    assert old[0] == r.PROBES_HEADING and r.TARGETS_HEADING not in old
    assert r.report_lines([], r.parse_call_lines(UPSTREAM)) == []


def test_busy_rate_weights_each_level_by_its_interval():
    from schedlab.series import kunit_report as kr

    # 2 CPUs per SMT core, 64 CPUs: SMT balanced every 2*16 ms, NUMA every 64*16 ms.
    assert kr.busy_rate("SMT:64,MC:0,NUMA:64", (2, 32, 64)) == \
        64 / 64 * 1000 / 32 + 64 / 64 * 1000 / 1024
    assert kr.busy_rate("SMT:1,MC:2", (2, 32, 64)) is None      # levels and spans disagree
    assert set(kr.FIXTURE_SPANS) >= {"smt8-2x12x8", "smt4-2x12x4", "smt2-x86-2x16x2"}


READS = """\
[    9.1]     # lb_stats_reads_timeline: lb-stats-reads: fixture=smt8-2x12x8 busy=100 level=SMT balances=9495 upstream=75960 patched=75960 saved_pct=0
[    9.1]     # lb_stats_reads_timeline: lb-stats-reads: fixture=smt8-2x12x8 busy=100 level=MC balances=96 upstream=9216 patched=1256 saved_pct=86
[    9.1]     # lb_stats_reads_timeline: lb-stats-reads: fixture=smt8-2x12x8 busy=100 level=above-lowest upstream=9984 patched=1832 saved_pct=81
[    9.2]     # lb_stats_reads_timeline: lb-stats-reads: fixture=smt8-2x12x8 busy=90 level=above-lowest upstream=3840 patched=2000 saved_pct=47
"""


def test_read_lines_table_and_targets():
    lines = r.parse_read_lines(READS)
    assert [f["level"] for f in lines] == ["SMT", "MC", "above-lowest", "above-lowest"]
    table = r.reads_table(lines).splitlines()
    assert table[0] == ("| fixture | busy % | level | busy balances | upstream reads | reads "
                        "| saved |")
    assert "86%" in table[3] and "MC" in table[3]
    targets = r.check_read_targets(lines)
    assert targets[0] == ("smt8-2x12x8 100% busy: 82% of the reads above the lowest level "
                          "saved, target >= 50%: met")
    assert targets[1].endswith("target >= 50%: MISSED")
    assert r.reads_report_lines([]) == []
    assert r.check_read_targets([])[0].endswith("(MISSED)")


def test_read_lines_with_writes_add_a_column():
    line = READS.splitlines()[1] + " leaving=2304 writes=288"
    table = r.reads_table(r.parse_read_lines(line + "\n" + READS.splitlines()[2])).splitlines()
    assert table[0].endswith("| sums written / balances leaving them |")
    assert table[2].endswith("| 288 / 2304 |")
    assert table[3].endswith("|  |")


def test_reference_counts_fill_the_upstream_columns():
    """The suite prints this kernel's counts only; a reference run (the KUnit
    series alone: v7.3's code) fills the upstream columns, row by row, and
    only where both ran the same patterns; then the targets are checked."""
    ours = ("swb-probes: fixture=smt8-2x12x8 busy=100 patterns=16 pass_probes=574 "
            "pass_calls=400 max_call_probes=96 levels=SMT:0,MC:192,NUMA:382\n"
            "swb-probes: fixture=smt8-2x12x8 busy=90 patterns=16 pass_probes=626 "
            "pass_calls=500 max_call_probes=96 levels=SMT:0,MC:300,NUMA:326\n"
            "swb-calls: fixture=smt8-2x12x8 patterns=2006 calls=100 probes=300 "
            "max_call_probes=96 stale_probes=310 stale_max_call_probes=97\n")
    ref = ("swb-probes: fixture=smt8-2x12x8 busy=100 patterns=16 pass_probes=4032 "
           "pass_calls=400 max_call_probes=98 levels=SMT:192,MC:1536,NUMA:2304\n"
           "swb-probes: fixture=smt8-2x12x8 busy=90 patterns=8 pass_probes=3222 "
           "pass_calls=500 max_call_probes=98 levels=SMT:192,MC:1000,NUMA:2030\n"
           "swb-calls: fixture=smt8-2x12x8 patterns=2006 calls=100 probes=1500 "
           "max_call_probes=98 stale_probes=1500 stale_max_call_probes=98\n")
    rows, calls = r.merge_reference(r.parse_probe_lines(ours), r.parse_call_lines(ours),
                                    r.parse_probe_lines(ref), r.parse_call_lines(ref))
    assert rows[0].fields["upstream_pass_probes"] == "4032"
    assert rows[0].fields["upstream_levels"] == "SMT:192,MC:1536,NUMA:2304"
    assert "upstream_pass_probes" not in rows[1].fields       # 8 patterns, not 16
    assert calls[0]["upstream_probes"] == "1500"
    table = r.call_table(calls).splitlines()
    assert "| 15.00 | 3.00 | 5.00x | 96 (98) |" in table[2]
    lines = r.report_lines(rows, calls)
    assert any("smt8-2x12x8 100% busy: 7.02x fewer probes per pass, target >= 6x: met" in ln
               for ln in lines)
    assert any("smt8-2x12x8 90% busy: no upstream comparison in the output (MISSED)" in ln
               for ln in lines)
    # Without a reference: this kernel's counts, no targets.
    alone = r.report_lines(r.parse_probe_lines(ours), r.parse_call_lines(ours))
    assert alone and not any("target" in ln for ln in alone)
    assert "|  | 3.00 |  | 96 |" in r.call_table(r.parse_call_lines(ours)).splitlines()[2]
