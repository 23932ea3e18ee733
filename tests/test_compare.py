"""compare: refusal of mixed settings, statistics per metric, table text."""

import json

import pytest

from schedlab import compare as c
from schedlab.util import LabError

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
