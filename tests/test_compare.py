"""compare: refusal of mixed settings, statistics per metric, table text."""

import json
from pathlib import Path

import pytest

from schedlab.core.util import LabError
from schedlab.measuring import compare as c

SETTING = {"topology": "smt4", "config": "probe", "probe_tool": "bpftrace", "arch": "x86_64"}


def write_runs(folder, values, metric="hackbench time", kind="time", hib=False, **over):
    folder.mkdir()
    for i, v in enumerate(values):
        run = {"label": folder.name, "workload": "hackbench-process", "complete": True,
               "setting": dict(SETTING, **over),
               "metrics": {metric: {"value": v, "unit": "s", "kind": kind,
                                    "higher_is_better": hib}}}
        (folder / f"run-hackbench-process-{i}.json").write_text(json.dumps(run))
    return c.load_runs(folder)


def test_rows_and_significance(tmp_path):
    a = write_runs(tmp_path / "base", [10.0, 10.1, 9.9, 10.0, 10.0])
    b = write_runs(tmp_path / "patched", [8.0, 8.1, 7.9, 8.0, 8.0])
    c.check_comparable(a, b)
    (row,) = c.rows(a, b)
    assert row.a.mean == pytest.approx(10.0) and row.b.mean == pytest.approx(8.0)
    assert row.imp == pytest.approx(20.0)          # a lower time is better
    assert row.sig


def test_a_metric_with_no_better_direction(tmp_path):
    """A share that says how in step the balances run: the plain change, in
    parentheses and explained, never called better or worse."""
    kw = dict(metric="group reads sums could serve (MC)", kind="count", hib=None)
    a = write_runs(tmp_path / "base", [10.0, 10.1, 9.9, 10.0], **kw)
    b = write_runs(tmp_path / "patched", [8.0, 8.1, 7.9, 8.0], **kw)
    (row,) = c.rows(a, b)
    assert row.neutral and row.imp == pytest.approx(-20.0) and row.sig
    text = c.table([row], "base", "patched")
    assert "(-20.00%)" in text and c.NEUTRAL_NOTE in text
    summary = c.headline_summary([row], [row], "patched")
    assert "-20.0% on patched, neither better nor worse" in summary
    assert "worse on" not in summary
    plain = c.rows(write_runs(tmp_path / "a2", [10.0, 10.1]), write_runs(tmp_path / "b2", [8.0, 8.1]))
    assert c.NEUTRAL_NOTE not in c.table(plain, "a2", "b2")


def test_table_text_and_markdown(tmp_path):
    a = write_runs(tmp_path / "base", [10.0, 10.1, 9.9])
    b = write_runs(tmp_path / "patched", [10.0, 10.2, 9.8])
    rs = c.rows(a, b)
    text = c.table(rs, "base", "patched")
    assert text.splitlines()[0].split() == ["workload", "metric", "base", "mean", "CV%",
                                            "patched", "mean", "CV%", "pct", "imp", "sig"]
    assert "hackbench-process  hackbench time (s)" in text
    assert ("+0.00%" in text or "-0.00%" in text) and "significant" in text
    md = c.table(rs, "base", "patched", markdown=True).splitlines()
    assert md[0] == "| workload | metric | base mean | CV% | patched mean | CV% | pct imp | sig |"
    assert md[2].startswith("| hackbench-process | hackbench time (s) | 10.0 | 1.00 |")
    each = c.table(rs, "base", "patched", markdown=True, each=True).splitlines()
    assert each[0].endswith("| sig | base runs | patched runs |")
    assert each[2].endswith("| 10.0 10.1 9.900 | 10.0 10.2 9.800 |")


def test_mixed_settings_are_refused(tmp_path):
    a = write_runs(tmp_path / "base", [1.0, 2.0])
    b = write_runs(tmp_path / "patched", [1.0, 2.0], topology="smt8")
    with pytest.raises(LabError, match="topology"):
        c.check_comparable(a, b)
    d = write_runs(tmp_path / "other", [1.0], probe_tool="funclatency-bpfcc")
    with pytest.raises(LabError, match="probe_tool"):
        c.check_comparable(a, d)


def test_incomplete_runs_do_not_count(tmp_path):
    write_runs(tmp_path / "base", [10.0, 10.0])
    for f in (tmp_path / "base").glob("*.json"):
        run = json.loads(f.read_text())
        run["complete"] = False
        f.write_text(json.dumps(run))
    b = write_runs(tmp_path / "patched", [8.0, 8.0])
    assert c.rows(c.load_runs(tmp_path / "base"), b) == []


def test_missing_results(tmp_path):
    with pytest.raises(LabError, match="no results"):
        c.load_runs(tmp_path / "nope")


def test_sweep_table_one_row_per_workload_and_arm():
    def runs(busy, ops, ni, ns, complete=True):
        return [{"workload": "stress-100", "complete": complete, "metrics": {
            "cpu busy": {"value": busy, "unit": "%", "kind": "time"},
            "stress-ng cpu bogo-ops/s": {"value": ops, "unit": "ops/s", "kind": "rate"},
            "sched_balance_rq newidle calls": {"value": ni, "unit": "calls", "kind": "count"},
            "sched_balance_rq newidle total time": {"value": ns, "unit": "ns",
                                                    "kind": "time"}}}]
    text = c.sweep_table([("default", runs(99.0, 500.0, 120.0, 3e6)),
                          ("never", runs(98.0, 510.0, 0.0, 0.0)
                           + runs(1, 1, 1, 1, complete=False))])
    lines = text.splitlines()
    assert lines[0].startswith("| workload | arm | cpu busy %")
    assert "avg_idle" not in lines[0]          # no arm has that probe
    assert "| stress-100 | default | 99.0 (0.0) | stress-ng cpu bogo-ops/s: 500.0 (0.0) " \
           "ops/s | 120.0 (0.0) | 3.000 (0.0) |" in lines
    # Incomplete runs do not count; a zero mean prints as 0.
    assert "| stress-100 | never | 98.0 (0.0) | stress-ng cpu bogo-ops/s: 510.0 (0.0) " \
           "ops/s | 0 (0.0) | 0 (0.0) |" in lines


# The metrics of the default plan's probes (swb, lb, migrate, latency), with
# the direction and kind the records give them.
DEFAULT_METRICS = {
    "idle_cpu probes per should_we_balance call": ("probes", "count", False),
    "idle_cpu probes in should_we_balance per s": ("probes/s", "count", False),
    "should_we_balance calls per s": ("calls/s", "count", False),
    "sched_balance_rq newidle calls per s": ("calls/s", "count", False),
    "sched_balance_rq busy calls per s": ("calls/s", "count", False),
    "sched_balance_rq newidle total time": ("ns", "time", False),
    "should_we_balance mean time (funclatency)": ("ns", "time", False),
    "migrations per s": ("events/s", "count", False),
    "cpu busy": ("%", "time", False),
}
RESULTS = {"stress-100": ("stress-ng cpu bogo-ops/s", "ops/s", "rate", True),
           "stress-50": ("stress-ng cpu bogo-ops/s", "ops/s", "rate", True),
           "hackbench-process": ("hackbench time", "s", "time", False)}


def default_plan_runs(folder, scale, accel="tcg-single"):
    """Three runs of each default workload with every default metric; the
    patched side (SCALE != 1) changes the idle-state probes per call only."""
    folder.mkdir()
    for w, (result, unit, kind, hib) in RESULTS.items():
        for i in range(3):
            metrics = {name: {"value": 100.0 + i, "unit": u, "kind": k, "higher_is_better": h}
                       for name, (u, k, h) in DEFAULT_METRICS.items()}
            metrics["idle_cpu probes per should_we_balance call"]["value"] = (2.0 + i / 100) \
                * scale
            metrics[result] = {"value": 50.0 + i, "unit": unit, "kind": kind,
                               "higher_is_better": hib}
            run = {"label": folder.name, "workload": w, "complete": True, "accel": accel,
                   "setting": dict(SETTING, accel=accel), "metrics": metrics}
            (folder / f"run-{w}-{i}.json").write_text(json.dumps(run))
    return c.load_runs(folder)


def test_the_headline_is_ten_rows_at_most_picked_by_meaning(tmp_path):
    a = default_plan_runs(tmp_path / "base", 1.0)
    b = default_plan_runs(tmp_path / "patched", 0.7)
    rs = c.rows(a, b)
    assert len(rs) == 30
    shown = c.headline(rs)
    assert len(shown) == 9 <= c.HEADLINE_MAX
    # per workload: idle-state probes per call, calls per second, its own result
    assert [(r.workload, r.metric) for r in shown[:3]] == [
        ("hackbench-process", "idle_cpu probes per should_we_balance call"),
        ("hackbench-process", "should_we_balance calls per s"),
        ("hackbench-process", "hackbench time")]
    assert {r.metric for r in shown} == {"idle_cpu probes per should_we_balance call",
                                         "should_we_balance calls per s", "hackbench time",
                                         "stress-ng cpu bogo-ops/s"}
    assert c.select(rs, c.HEADLINE) == shown
    # Each significant change is marked and named under the table.
    text = c.compare_and_plot(tmp_path / "base", tmp_path / "patched", False, None,
                              c.HEADLINE)
    lines = text.splitlines()
    marked = [ln for ln in lines if ln.rstrip().endswith("*")]
    assert len(marked) == 3 and all("idle_cpu probes per should_we_balance call" in ln
                                    for ln in marked)
    assert ("headline: 9 of 30 metrics (idle-state probes per call, calls per second, "
            "each workload's result); significant ('*'):") in lines
    assert "  stress-50 idle_cpu probes per should_we_balance call: +30.0%, better on " \
           "patched" in lines
    # The wall-clock times of short functions are left out, and the text says so.
    assert "funclatency" not in "\n".join(lines[:12])
    assert "not in it: 6 wall-clock times of short functions under TCG" in text
    assert "--accel icount" in text


def test_full_table_marks_tcg_wallclock_rows(tmp_path):
    a = default_plan_runs(tmp_path / "base", 1.0)
    b = default_plan_runs(tmp_path / "patched", 0.7)
    text = c.table(c.rows(a, b), "base", "patched")
    marked = [ln for ln in text.splitlines() if "†" in ln and "|" not in ln]
    assert any("should_we_balance mean time (funclatency) (ns) †" in ln for ln in marked)
    assert any("sched_balance_rq newidle total time (ns) †" in ln for ln in marked)
    assert "measures how the host schedules the vCPUs" in text
    # icount's nanoseconds are instructions: no mark, no note
    i_a = default_plan_runs(tmp_path / "ib", 1.0, accel="icount")
    i_b = default_plan_runs(tmp_path / "ip", 0.7, accel="icount")
    assert "†" not in c.table(c.rows(i_a, i_b), "base", "patched")
    # the sweep table's newidle balance time column too
    sweep = c.sweep_table([("base", a), ("patched", b)])
    assert "newidle balance time (ms) †" in sweep.splitlines()[0]
    assert "--accel icount" in sweep


def test_headline_of_other_probes_and_the_fallback(tmp_path):
    def row(w, metric, unit="calls"):
        s = c.stats.summarize([1.0, 2.0])
        return c.Row(w, metric, unit, s, s, 0.0, False)
    # lb-reads' per-level reads: the first meaning that has rows
    rs = [row("stress-100", "runqueue reads per busy balance (MC)"),
          row("stress-100", "runqueue reads per busy balance (PKG)"),
          row("stress-100", "group statistics computed, busy (MC)")]
    assert [r.metric for r in c.headline(rs)] == [
        "runqueue reads per busy balance (MC)", "runqueue reads per busy balance (PKG)"]
    # lb-share's per-level share beside the workload's result (the kit's pass)
    rs = [row("stress-100", "stress-ng cpu bogo-ops/s"),
          row("stress-100", "group reads sums could serve (MC)", "%"),
          row("stress-100", "group reads in busy balances (MC)", "reads")]
    assert [r.metric for r in c.headline(rs)] == [
        "stress-ng cpu bogo-ops/s", "group reads sums could serve (MC)"]
    # a meaning that does not fit whole is left out, with the ones after it
    many = [row(f"w{i}", "stress-ng cpu bogo-ops/s") for i in range(8)]
    many += [row(f"w{i}", "sched_balance_rq newidle calls per s") for i in range(8)]
    many += [row("w0", "cpu busy", "%")]
    assert {r.metric for r in c.headline(many)} == {"stress-ng cpu bogo-ops/s"}
    # nothing any meaning names: the first flagged rows
    flagged = [row("w", f"busy balances with a same-pass child balance ({d})", "%")
               for d in ("SMT", "MC")]
    assert c.headline(flagged + [row("w", "not flagged")]) == flagged[::-1]   # MC, SMT


def test_default_plots_go_under_work(tmp_path, monkeypatch):
    from schedlab.measuring import results as resmod
    monkeypatch.setattr(resmod, "work_dir", lambda: tmp_path / "work")
    assert c.default_plots(Path("/x/results/a"), Path("b")) == \
        tmp_path / "work/results/a-vs-b-plots"


def test_every_headline_meaning_names_metrics_the_records_make():
    import re as _re

    from schedlab.measuring import probes as probemod
    from schedlab.measuring import workloads as workmod
    names = [m.name for m in probemod.catalogue()] + [
        r for w in workmod.all_results() for r in w.results]
    names += [f"{m.name} (MC)" for m in probemod.catalogue() if m.per_domain]
    for m in c.HEADLINE_MEANINGS:
        hits = [n for n in names if _re.search(m.pattern, n)]
        assert hits and all(_re.match(c.HEADLINE, n) for n in hits), m
