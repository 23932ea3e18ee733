"""The kit's family of headline comparisons, Holm-corrected, and the rule
that decides when it has enough rounds."""

import json
from pathlib import Path

import pytest

from schedlab.kit import significance
from schedlab.measuring import stats

METRIC = "stress-ng cpu bogo-ops/s"


def _arm(folder: Path, values_by_workload) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for workload, values in values_by_workload.items():
        for i, v in enumerate(values):
            (folder / f"run-{workload}-{i}.json").write_text(json.dumps({
                "workload": workload, "run": i, "complete": True,
                "metrics": {METRIC: {"value": v, "unit": "ops/s", "kind": "rate",
                                     "higher_is_better": True}}}))
    return folder


def test_stats_give_welch_p_values_and_holm_adjustments():
    # Student's t: t = 2.228 with 10 degrees of freedom is the 5% point.
    assert stats.t_two_sided_p(2.228, 10) == pytest.approx(0.05, abs=1e-4)
    assert stats.t_two_sided_p(12.706, 1) == pytest.approx(0.05, abs=1e-4)
    assert stats.welch_p([1, 2, 3, 4], [3, 4, 5, 6]) == pytest.approx(0.07099, abs=1e-4)
    assert stats.welch_p([1, 1], [1, 1]) == 1.0 and stats.welch_p([1, 1], [2, 2]) == 0.0
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.ci_width_pct([100.0]) == float("inf")


def test_the_correction_drops_a_planted_null_and_keeps_a_planted_real_difference(tmp_path):
    ref = {"stress-100": [100, 101, 99, 100, 101, 99],
           "stress-90": [100, 102, 98, 100, 102, 98],
           "stress-50": [100, 103, 97, 100, 103, 97],
           "stress-25": [100, 101, 99, 100, 101, 99]}
    arm = {"stress-100": [130, 131, 129, 130, 131, 129],        # real: +30%
           # The same machine by chance: alone, p is below 0.05.
           "stress-90": [102, 104, 101, 102, 104, 101],
           "stress-50": [100, 103, 97, 101, 102, 97],
           "stress-25": [100, 101, 99, 100, 100, 100]}
    raw = stats.welch_p(ref["stress-90"], arm["stress-90"])
    assert 0.01 < raw < 0.05
    folders = {"ref": _arm(tmp_path / "ref", ref), "arm": _arm(tmp_path / "arm", arm)}
    tests = {t.workload: t for t in significance.headline_tests(folders, [("ref", "arm")])}
    assert set(tests) == set(ref)
    assert tests["stress-100"].significant and tests["stress-100"].imp > 25
    assert tests["stress-90"].p == pytest.approx(raw)
    assert not tests["stress-90"].significant and tests["stress-90"].p_holm > 0.05
    text = "\n".join(significance.section(list(tests.values())))
    assert "4 headline comparisons" in text and stats.HOLM in text
    assert text.count("| * |") == 1
    assert significance.section([]) == [
        "No headline comparison with finished runs of both arms yet."]


def test_an_interval_too_wide_is_named_widest_first(tmp_path):
    folders = {"a": _arm(tmp_path / "a", {"stress-100": [100, 100.5, 99.5],
                                          "stress-50": [100, 110, 90]}),
               "b": _arm(tmp_path / "b", {"stress-100": [100, 101]})}
    wide = significance.too_wide(folders, 5.0)
    # b has no stress-50 run (as wide as can be), a's spreads 20%, b's two
    # runs of stress-100 give a wide interval; a's stress-100 is narrow.
    assert [(a, w) for a, w, _, _ in wide] == [("b", "stress-50"), ("a", "stress-50"),
                                               ("b", "stress-100")]
    assert wide[0][3] > wide[1][3] > wide[2][3] > 5.0
    folders["b"] = _arm(tmp_path / "b1", {"stress-100": [100, 101], "stress-50": [99, 101]})
    assert significance.too_wide(folders, 1000.0) == []
    # An arm whose runs are all invalid, or which lacks a metric another arm
    # has, does not let the rounds stop.
    folders["c"] = tmp_path / "c"           # nothing finished
    folders["b"] = _arm(tmp_path / "b2", {"stress-100": [100, 100.1, 99.9]})
    wide = significance.too_wide(folders, 100.0)
    assert ("c", "-", significance.NOTHING) in [w[:3] for w in wide]
    assert ("b", "stress-50", "stress-ng cpu bogo-ops/s") in [w[:3] for w in wide]


def test_a_pair_and_its_mirror_are_one_test():
    pairs = [("series", "stock"), ("series", "swb-v7.3"), ("stock", "series"),
             ("series", "swb-v7.3")]
    assert significance.one_way(pairs) == [("series", "swb-v7.3"), ("stock", "series")]


def _schbench(folder: Path, p99, p999) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, (a, b) in enumerate(zip(p99, p999)):
        metrics = {f"schbench {k} {p}": {"value": v, "unit": "us", "kind": "time",
                                         "higher_is_better": False}
                   for k in ("wakeup", "request") for p, v in (("p50", 10), ("p99", a),
                                                               ("p99.9", b))}
        (folder / f"run-schbench-m2-t8-{i}.json").write_text(json.dumps({
            "workload": "schbench-m2-t8", "run": i, "complete": True, "metrics": metrics}))
    return folder


def test_the_throughput_pass_shows_every_percentile_and_stops_on_p99(tmp_path):
    # p99 steady, p99.9 all over the place: the rounds stop on the
    # benchmark's first result (wakeup p99), the report shows and tests
    # every percentile.
    folders = {"ref": _schbench(tmp_path / "ref", [100, 101, 100, 99], [900, 300, 2000, 50]),
               "arm": _schbench(tmp_path / "arm", [90, 91, 90, 89], [100, 2500, 400, 900])}
    assert significance.too_wide(folders, 5.0, results=True) == []
    assert {w[2] for w in significance.too_wide(folders, 5.0)} >= {"schbench wakeup p99.9"}
    tests = significance.headline_tests(folders, [("ref", "arm")], results=True)
    assert {t.metric for t in tests} == {f"schbench {k} {p}" for k in ("wakeup", "request")
                                         for p in ("p50", "p99", "p99.9")}
    assert {t.metric for t in tests if t.significant} == {"schbench wakeup p99",
                                                          "schbench request p99"}
