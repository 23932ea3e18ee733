import math

from schedlab.measuring import equivalence as eq


def _runs(workload, values, metric="stress-ng cpu bogo-ops/s", unit="ops/s", hib=True,
          kind="rate"):
    return [{"workload": workload, "complete": True,
             "metrics": {metric: {"value": v, "unit": unit, "kind": kind,
                                  "higher_is_better": hib}}} for v in values]


def test_margin_is_the_half_width_of_a_difference():
    a = _runs("stress-100", [100, 110, 90, 100])
    b = _runs("stress-100", [100, 110, 90, 100])
    m = eq.margins(a, b)[("stress-100", "stress-ng cpu bogo-ops/s")]
    sd = math.sqrt(200 / 3)
    # t95 with 6 degrees of freedom is 2.447; the harmonic mean is the reference
    hm = 4 / sum(1 / v for v in (100, 110, 90, 100))
    assert math.isclose(m.margin_pct, 100 * 2.447 * math.sqrt(2 * sd ** 2 / 4) / hm,
                        rel_tol=1e-3)
    assert m.aa_pct == 0 and m.n == 4
    # half the margin needs four times the runs
    assert m.runs_for(m.margin_pct / 2) == 16


def test_verdicts_and_replica():
    m = eq.Margin("w", "x", "s", 4, 1.0, 10.0)
    assert eq.verdict(5.0, m) == "inside" and eq.verdict(-10.0, m) == "inside"
    assert eq.verdict(-10.5, m) == "worse" and eq.verdict(12.0, m) == "better"
    assert eq.verdict(None, m) == "n/a"
    arms = [("base", "base", ()), ("d", "patched", ()), ("aa", "base", ()),
            ("aa2", "base", ())]
    assert eq.find_replica(arms) == "aa"
    assert eq.find_replica([("base", "base", ()), ("k", "base", (("x", "1"),))]) is None


def test_table_marks_what_leaves_the_margin():
    runs = {"base": _runs("s", [100, 101, 99, 100]), "aa": _runs("s", [100, 100, 101, 99]),
            "d": _runs("s", [100, 100, 100, 101]), "x4": _runs("s", [80, 81, 79, 80])}
    text = eq.table(runs, ("base", "aa"), [("base", "aa"), ("base", "d"), ("d", "x4")],
                    markdown=False)
    assert "A/A: 1 metrics, 4 runs per arm" in text
    d_part = text.split("d against base:")[1].split("x4 against d:")[0]
    assert "inside" in d_part
    assert "worse" in text.split("x4 against d:")[1]
    assert "aa against base" not in text
    # newidle counts are shown without a verdict
    runs = {k: v + _runs("s", [5, 5, 6, 5], "sched_balance_rq newidle calls", "calls", False,
                         "count") for k, v in runs.items()}
    text = eq.table(runs, ("base", "aa"), [("d", "x4")], markdown=False)
    assert "sched_balance_rq newidle calls" in text
