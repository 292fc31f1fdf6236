"""Confidence intervals for the impact metrics: a proportion, and the difference between two groups.

- `wilson`: the Wilson score interval of one proportion (well-behaved for small n and rates near 0 or 1).
- `newcombe_difference`: the difference of two proportions (treated − control) with Newcombe's hybrid score
  interval (his method 10), built from the two Wilson intervals; it stays inside [-1, 1] and has close to nominal
  coverage where the plain Wald interval does not (small groups, rates near 0 or 1 — a 5 % control group is small).
- `mean_interval`: the mean of one group with its t interval (benchmarks).
- `welch_difference`: the difference of two means (treated − control) with Welch's t interval (unequal variances,
  Welch–Satterthwaite degrees of freedom). Counts per session are skewed, so with few sessions it is approximate.

All intervals are 95 % two-sided; None where a group is too small to say anything.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Difference:
    """treated − control, with its 95 % interval (None when a group is too small) and the method used."""

    treated: float | None
    control: float | None
    difference: float | None
    ci_low: float | None
    ci_high: float | None
    method: str


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float | None, float | None]:
    """95 % Wilson score interval for a proportion; (None, None) for n = 0."""
    if n == 0:
        return None, None
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)


def _wilson_exact(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe_difference(treated_successes: int, treated_n: int, control_successes: int, control_n: int) -> Difference:
    """Difference of two proportions with Newcombe's hybrid score interval (method 10)."""
    p1 = treated_successes / treated_n if treated_n else None
    p2 = control_successes / control_n if control_n else None
    if p1 is None or p2 is None:
        return Difference(_r(p1), _r(p2), None, None, None, "newcombe")
    l1, u1 = _wilson_exact(treated_successes, treated_n)
    l2, u2 = _wilson_exact(control_successes, control_n)
    d = p1 - p2
    low = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return Difference(_r(p1), _r(p2), _r(d), _r(max(-1.0, low)), _r(min(1.0, high)), "newcombe")


def welch_difference(treated: Sequence[float], control: Sequence[float]) -> Difference:
    """Difference of two means with Welch's t interval; no interval unless each group has 2+ values."""
    m1 = sum(treated) / len(treated) if treated else None
    m2 = sum(control) / len(control) if control else None
    if m1 is None or m2 is None:
        return Difference(_r(m1), _r(m2), None, None, None, "welch")
    d = m1 - m2
    if len(treated) < 2 or len(control) < 2:
        return Difference(_r(m1), _r(m2), _r(d), None, None, "welch")
    v1 = sum((x - m1) ** 2 for x in treated) / (len(treated) - 1) / len(treated)
    v2 = sum((x - m2) ** 2 for x in control) / (len(control) - 1) / len(control)
    se = math.sqrt(v1 + v2)
    if se == 0:  # both groups constant: the difference is exact as far as the data can tell
        return Difference(_r(m1), _r(m2), _r(d), _r(d), _r(d), "welch")
    df = (v1 + v2) ** 2 / ((v1**2 / (len(treated) - 1) if v1 else 0) + (v2**2 / (len(control) - 1) if v2 else 0))
    half = _t975(df) * se
    return Difference(_r(m1), _r(m2), _r(d), _r(d - half), _r(d + half), "welch")


def mean_interval(values: Sequence[float]) -> tuple[float | None, float | None, float | None]:
    """(mean, 95 % t interval low, high) of one group; no interval below 2 values."""
    if not values:
        return None, None, None
    mean = sum(values) / len(values)
    if len(values) < 2:
        return _r(mean), None, None
    half = _t975(len(values) - 1) * math.sqrt(sum((x - mean) ** 2 for x in values) / (len(values) - 1) / len(values))
    return _r(mean), _r(mean - half), _r(mean + half)


def _t975(df: float) -> float:
    """The 97.5 % quantile of Student's t with `df` degrees of freedom (scipy comes with scikit-learn)."""
    from scipy.stats import t

    return float(t.ppf(0.975, df))


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)
