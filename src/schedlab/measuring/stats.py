"""Statistics for base-vs-patched comparisons.

One rule decides significance everywhere: the 95% confidence intervals of
the two means (Student's t, n - 1 degrees of freedom) do not overlap. Times
and counts use the arithmetic mean, rates the harmonic mean (as mmtests'
Amean and Hmean); the coefficient of variation is the sample standard
deviation over the mean, in percent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Sequence

# Two-sided 95% critical values of Student's t by degrees of freedom.
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
        9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131,
        16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086, 25: 2.060, 30: 2.042,
        40: 2.021, 60: 2.000, 120: 1.980}

SIGNIFICANCE_RULE = "non-overlapping 95% confidence intervals of the means (Student's t)"


def t95(dof: int) -> float:
    if dof < 1:
        return math.inf
    if dof in _T95:
        return _T95[dof]
    below = max(k for k in _T95 if k < dof) if dof < 120 else 120
    return _T95[below] if dof < 120 else 1.960


@dataclass
class Summary:
    n: int
    mean: float
    stdev: float
    cv_pct: float
    ci_low: float
    ci_high: float


def amean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def hmean(xs: Sequence[float]) -> float:
    if any(x <= 0 for x in xs):
        return 0.0
    return len(xs) / sum(1.0 / x for x in xs)


def stdev(xs: Sequence[float]) -> float:
    if len(xs) < 2:
        return 0.0
    m = amean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def summarize(xs: Sequence[float], kind: str = "time") -> Summary:
    """Mean (harmonic for kind 'rate'), CV and the 95% CI of the mean."""
    if not xs:
        raise ValueError("no values")
    n = len(xs)
    mean = hmean(xs) if kind == "rate" else amean(xs)
    sd = stdev(xs)
    am = amean(xs)
    cv = 100.0 * sd / am if am else 0.0
    half = t95(n - 1) * sd / math.sqrt(n) if n > 1 else math.inf
    return Summary(n, mean, sd, cv, am - half, am + half)


def pct_change(a: float, b: float) -> Optional[float]:
    """B's change from A, in percent of A."""
    return None if a == 0 else 100.0 * (b - a) / abs(a)


def pct_improvement(a: float, b: float, higher_is_better: Optional[bool]) -> Optional[float]:
    """Positive when B is better than A, whatever the metric's direction;
    None for a metric with no better direction (higher_is_better None)."""
    change = pct_change(a, b)
    if change is None or higher_is_better is None:
        return None
    return change if higher_is_better else -change


def significant(a: Summary, b: Summary) -> bool:
    return a.ci_high < b.ci_low or b.ci_high < a.ci_low


# ------------------------------------------------------------------ p-values

def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified
    Lentz's method)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                    -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log(1.0 - x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, dof: float) -> float:
    """P(|T| >= |t|) for Student's t with DOF degrees of freedom."""
    if dof <= 0 or math.isnan(t):
        return 1.0
    return betainc(dof / 2.0, 0.5, dof / (dof + t * t))


def welch_p(a: Sequence[float], b: Sequence[float]) -> float:
    """The two-sided p-value of Welch's t-test of A's and B's means (1.0
    where either has fewer than two values; 0.0 for two distinct constants)."""
    if len(a) < 2 or len(b) < 2:
        return 1.0
    va, vb = stdev(a) ** 2 / len(a), stdev(b) ** 2 / len(b)
    diff = amean(b) - amean(a)
    if va + vb == 0:
        return 1.0 if diff == 0 else 0.0
    t = diff / math.sqrt(va + vb)
    dof = (va + vb) ** 2 / ((va ** 2 / (len(a) - 1) if va else 0.0)
                            + (vb ** 2 / (len(b) - 1) if vb else 0.0))
    return t_two_sided_p(t, dof)


HOLM = "Holm's step-down correction (family-wise error 5%)"


def holm(pvalues: Sequence[float]) -> List[float]:
    """Holm-adjusted p-values, in the order given: the k-th smallest times
    (m - k + 1), made monotone, at most 1.  A comparison is significant
    after the correction when its adjusted p-value is below 0.05."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    out = [0.0] * m
    running = 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (m - k) * pvalues[i]))
        out[i] = running
    return out


def ci_width_pct(xs: Sequence[float]) -> float:
    """The width of the 95% confidence interval of the mean, in percent of
    the mean (inf with fewer than two values or a mean of zero)."""
    s = summarize(xs)
    am = amean(xs)
    if s.n < 2 or am == 0:
        return math.inf
    return 100.0 * (s.ci_high - s.ci_low) / abs(am)
