"""The cost model's tables for two lines-probe result sets
(measuring/costtable.py, `./schedlab compare A B --model`)."""

import json

import pytest

from schedlab.core.util import LabError
from schedlab.measuring import costmodel as cm
from schedlab.measuring import costtable as ct


def _m(v, unit="lines"):
    return {"value": v, "unit": unit}


def _run(workload, **levels):
    """A run's lines metrics: LEVEL=(calls, {distance: lines}, insns);
    a level's name may carry its split, as 'NUMA_idle' for 'NUMA, idle'."""
    m = {}
    for name, (calls, moved, insns) in levels.items():
        lv = name.replace("_", ", ")
        m[f"should_we_balance calls (lines) ({lv})"] = _m(calls, "calls")
        for d in ("smt", "llc", "xllc", "node"):
            m[f"should_we_balance lines moved per call at distance {d}, mean ({lv})"] = \
                _m(moved.get(d, 0.0))
        m[f"should_we_balance instructions per call (lines), mean ({lv})"] = _m(insns)
    return {"workload": workload, "metrics": m}


def _set(folder, *runs):
    folder.mkdir()
    for i, r in enumerate(runs):
        (folder / f"run-{r['workload']}-{i}.json").write_text(json.dumps(r))
    return folder


def test_other_llc_moves_the_llc_lines_to_another_llc_only_where_the_family_has_one():
    c = cm.Counts({"smt": 1.0, "llc": 2.0, "xllc": 0.5, "node": 0.0}, 300.0, 4)
    assert ct.other_llc(c).moved == {"smt": 1.0, "llc": 0.0, "xllc": 2.5, "node": 0.0}
    genoa = cm.family_of("AMD EPYC 9274F 24-Core Processor")
    spr = cm.family_of("Intel(R) Xeon(R) Gold 6430")
    assert ct.spread_for(c, genoa, True).moved["xllc"] == 2.5
    assert ct.spread_for(c, genoa, False) is c
    assert ct.spread_for(c, spr, True) is c          # one LLC a socket: its figure stands
    assert ct.cell(cm.predict(c, spr)) == "218-262 + 1.00 smt + 0.50 xllc"


def test_the_table_has_each_level_and_split_in_domain_order_and_prices_both_sets(tmp_path):
    a = _set(tmp_path / "base",
             _run("stress-100", SMT=(100, {"smt": 1.0}, 90), NUMA=(10, {"llc": 8.0}, 900),
                  NUMA_idle=(6, {"llc": 10.0}, 1200), MC=(50, {"smt": 2.0}, 300)),
             _run("stress-100", SMT=(100, {"smt": 1.0}, 90), NUMA=(10, {"llc": 6.0}, 900),
                  MC=(50, {"smt": 2.0}, 300)))
    b = _set(tmp_path / "topic",
             _run("stress-100", SMT=(100, {}, 30), NUMA=(10, {"llc": 4.0}, 300),
                  MC=(50, {"smt": 1.0}, 90)))
    out = ct.model_table(a, b, markdown=True)
    rows = [ln.split(" | ") for ln in out.splitlines() if ln.startswith("| stress-100")]
    counts, prices = rows[:5], rows[5:]
    assert [r[1] for r in counts] == ["all", "SMT", "MC", "NUMA", "NUMA, idle"]
    # NUMA: each run's mean, averaged: (8 + 6) / 2 lines at llc; the idle
    # split is in one run of A and none of B.
    assert counts[3][5] == "7.000 / 4.000"
    assert counts[4][2:6] == ["6.0 / -", "1 of 2 / -", "0.000 / -", "10.000 / -"]
    assert counts[3][3] == "2 of 2 / 1 of 1"
    # Genoa prices NUMA's llc lines at 22-24 ns, instructions at 3 GHz.
    genoa = [i for i, f in enumerate(f for f in cm.FAMILIES if f.ns)
             if f.name.endswith("(Genoa)")][0] + 2
    assert prices[3][genoa] == f"{300 + 7 * 22:.0f}-{300 + 7 * 24:.0f} / " \
                               f"{100 + 4 * 22:.0f}-{100 + 4 * 24:.0f}"
    assert prices[4][genoa].endswith(" / -")
    assert "IBM POWER10" in out and "--other-llc" not in out and "levels differ" not in out
    spread = ct.model_table(a, b, spread=True, markdown=True)
    numa = [ln.split(" | ") for ln in spread.splitlines()
            if ln.startswith("| stress-100 | NUMA |")][1]
    assert numa[genoa] == f"{300 + 7 * 97:.0f}-{300 + 7 * 104:.0f} / " \
                          f"{100 + 4 * 97:.0f}-{100 + 4 * 104:.0f}"
    assert "--other-llc" in spread


def test_sets_without_lines_metrics_or_a_common_workload_are_refused(tmp_path):
    plain = _set(tmp_path / "plain", {"workload": "stress-100", "metrics": {}})
    with pytest.raises(LabError, match="no lines metrics of should_we_balance"):
        ct.model_table(plain, plain)
    a = _set(tmp_path / "a", _run("stress-100", MC=(5, {}, 10)))
    b = _set(tmp_path / "b", _run("hackbench-process", MC=(5, {}, 10)))
    with pytest.raises(LabError, match="no workload in common"):
        ct.model_table(a, b)


def test_a_level_or_function_in_one_set_only_is_shown_and_said(tmp_path):
    a = _set(tmp_path / "smt8", _run("stress-100", SMT=(10, {"smt": 1.0}, 90)))
    b = _set(tmp_path / "smt8-64", _run("stress-100", SMT=(10, {}, 30),
                                        NUMA=(5, {"llc": 4.0}, 300)))
    out = ct.model_table(a, b)
    numa = [ln for ln in out.splitlines() if ln.startswith("stress-100") and " NUMA " in ln]
    assert numa and all(" - / " in ln for ln in numa)
    assert "levels differ (smt8: SMT; smt8-64: SMT NUMA)" in out
    only_b = _set(tmp_path / "other", {"workload": "stress-100", "metrics": {}})
    with pytest.raises(LabError, match="no lines metrics of should_we_balance in other"):
        ct.model_table(a, only_b)
    # A run with calls but a metric missing names the set and the workload.
    broken = _run("stress-100", SMT=(10, {}, 30))
    del broken["metrics"]["should_we_balance instructions per call (lines), mean (SMT)"]
    with pytest.raises(LabError, match="broken, stress-100: .* no metric"):
        ct.model_table(a, _set(tmp_path / "broken", broken))
