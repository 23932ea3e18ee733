"""The cost model: published latencies by CPU family, the VM's counts per
call over levels, and the prediction (measuring/costmodel.py)."""

import pytest

from schedlab.core.util import LabError
from schedlab.measuring import costmodel as cm


def _m(v, unit="lines"):
    return {"value": v, "unit": unit}


def _run(workload="stress-100", **levels):
    """A run's lines metrics: LEVEL=(calls, smt, llc, insns)."""
    m = {}
    for lv, (calls, smt, llc, insns) in levels.items():
        for tag in (lv, f"{lv}, busy"):
            m[f"should_we_balance calls (lines) ({tag})"] = _m(calls, "calls")
            for d, v in (("smt", smt), ("llc", llc), ("xllc", 0), ("node", 0)):
                m[f"should_we_balance lines moved per call at distance {d}, mean ({tag})"] = \
                    _m(v if tag == lv else 99)
            m[f"should_we_balance instructions per call (lines), mean ({tag})"] = _m(insns)
    return {"workload": workload, "metrics": m}


def test_model_names_find_their_family():
    assert cm.family_of("AMD EPYC 9654 96-Core Processor").name == "AMD EPYC Zen 4 (Genoa)"
    assert cm.family_of("AMD EPYC 9754 128-Core Processor").name.endswith("(Bergamo)")
    assert cm.family_of("AMD EPYC 9575F 64-Core Processor").name.endswith("(Turin)")
    assert cm.family_of("Intel(R) Xeon(R) Platinum 8480+").name.endswith("Sapphire Rapids")
    power = cm.family_of("POWER10 (architected), altivec supported")
    assert power.name == "IBM POWER10" and power.ns == {}
    assert cm.family_of("QEMU TCG CPU version 2.5+") is None
    assert cm.family_of("Intel(R) Xeon(R) Platinum 8592+") is None      # Emerald Rapids
    # Every figure names a source the docs list, and is a range low to high.
    for f in cm.FAMILIES:
        for fig in f.ns.values():
            assert fig.source in cm.SOURCES and 0 < fig.low <= fig.high


def test_the_counts_weigh_each_level_by_its_calls_and_skip_the_idle_splits():
    c = cm.counts(_run(MC=(300, 1.0, 0.5, 100), SMT=(100, 0.0, 0.0, 300)))
    assert c.calls == 400
    assert c.moved == {"smt": 0.75, "llc": 0.375, "xllc": 0.0, "node": 0.0}
    assert c.insns == 150
    with pytest.raises(LabError, match="no calls of should_we_balance"):
        cm.counts({"workload": "w", "metrics": {}})


def test_the_prediction_prices_what_it_has_figures_for_and_names_the_rest():
    c = cm.Counts({"smt": 2.0, "llc": 1.0, "xllc": 0.0, "node": 0.5}, 300.0, 10)
    zen4 = cm.family_of("AMD EPYC 9274F 24-Core Processor")
    p = cm.predict(c, zen4)
    assert (p.low, p.high) == (100 + 2 * 9 + 22 + 0.5 * 193, 100 + 2 * 9 + 24 + 0.5 * 202)
    assert p.unpriced == {} and p.text() == "236-243 ns"
    spr = cm.predict(c, cm.family_of("Intel(R) Xeon(R) Gold 6430"))
    assert spr.unpriced == {"smt": 2.0}
    assert spr.text() == "228-250 ns + unpriced lines (2.00 at smt)"
    # A difference keeps the unpriced lines; a range under 1 ns is one value,
    # and bounds that cross come out in order.
    less = cm.Counts({"smt": 0.5, "llc": 0.0, "xllc": 0.0, "node": 0.5}, 150.0, 10)
    gap = spr.minus(cm.predict(less, cm.family_of("Intel(R) Xeon(R) Gold 6430")))
    assert gap.text() == "109-131 ns + unpriced lines (1.50 at smt)"
    assert cm.Prediction(48.49, 48.56, {}).text() == "48 ns"
    assert cm.Prediction(5.0, 2.0, {}).text() == "2-5 ns"


def test_the_committed_vm_counts_are_there_and_the_series_moves_fewer_lines():
    counts = cm.model_counts()
    for w in ("stress-100", "hackbench-process"):
        v73, series = counts["v7.3"][w], counts["series"][w]
        assert sum(v73.moved.values()) > sum(series.moved.values()) > 0
        assert v73.insns > series.insns > 0
