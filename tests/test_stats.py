"""Statistics checked against values computed by hand."""

import math

import pytest

from schedlab.measuring import stats


def test_mean_stdev_cv_by_hand():
    xs = [10.0, 12.0, 14.0]
    s = stats.summarize(xs)
    assert s.mean == 12.0
    assert s.stdev == pytest.approx(2.0)            # sqrt((4+0+4)/2)
    assert s.cv_pct == pytest.approx(100 * 2 / 12)  # 16.67 %
    half = 4.303 * 2.0 / math.sqrt(3)               # t(0.975, 2) * s / sqrt(n)
    assert s.ci_low == pytest.approx(12 - half)
    assert s.ci_high == pytest.approx(12 + half)


def test_harmonic_mean_for_rates():
    assert stats.summarize([1.0, 4.0, 4.0], kind="rate").mean == pytest.approx(2.0)
    assert stats.summarize([1.0, 4.0, 4.0], kind="time").mean == pytest.approx(3.0)


def test_pct_improvement_sign_convention():
    assert stats.pct_improvement(100.0, 80.0, higher_is_better=False) == pytest.approx(20.0)
    assert stats.pct_improvement(100.0, 80.0, higher_is_better=True) == pytest.approx(-20.0)
    assert stats.pct_improvement(0.0, 1.0, True) is None


def test_significance_is_non_overlap_of_intervals():
    a = stats.summarize([10.0, 10.1, 9.9, 10.0, 10.0])
    b = stats.summarize([12.0, 12.1, 11.9, 12.0, 12.0])
    c = stats.summarize([10.05, 10.2, 9.8, 10.1, 9.9])
    assert stats.significant(a, b)
    assert not stats.significant(a, c)


def test_single_value_is_never_significant():
    assert not stats.significant(stats.summarize([1.0]), stats.summarize([100.0]))


def test_t_table_interpolates_down():
    assert stats.t95(4) == 2.776
    assert stats.t95(22) == 2.086   # the next smaller tabulated dof (20): conservative
    assert stats.t95(500) == 1.960
