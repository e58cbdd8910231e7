"""Non-inferiority of a candidate's accuracy on paired items: the drop's score interval and the set it needs.

Pipeline position: pure functions the ``answer_accuracy`` gate (:mod:`gates.answer_accuracy`) calls on the
items both sides were scored on, and that ``plan`` calls (:mod:`orchestrator.config.accuracy_power`) to
refuse a labelled set too small to ever pass. The drop is the baseline's accuracy minus the candidate's,
paired item by item: only the discordant items (right on one side only) move it. Its interval is Tango's
asymptotic score interval for the difference of paired proportions, which is unconditional (it does not
condition on the number of discordant items, so zero discordant items still give a finite, non-zero
bound) and holds its level near the nominal one in small sets (Fagerland, Lydersen and Laake 2013).

The gate passes only when the interval's upper bound is at or below the tolerance (non-inferiority shown),
fails when its lower bound is above it, and is inconclusive between.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Decision = Literal["pass", "inconclusive", "fail"]

#: How close to -1 and 1 the interval's limits are searched (Tango's statistic is undefined at +-1).
_EDGE = 1e-9


def _statistic(delta: float, lost: int, gained: int, items: int) -> float:
    """Tango's score statistic of the hypothesis "drop = ``delta``": (b - c - n delta) / sqrt(n (2 q + delta
    (1 - delta))), q the maximum-likelihood estimate of P(gained) under that hypothesis (the root of a
    quadratic, Tango 1998, eq. 5)."""
    n = items
    a = 2 * n
    b = -lost - gained + (2 * n - lost + gained) * delta
    c = -gained * delta * (1 - delta)
    q = (math.sqrt(max(0.0, b * b - 4 * a * c)) - b) / (2 * a)
    numerator = lost - gained - n * delta
    variance = n * (2 * q + delta * (1 - delta))
    if variance <= 0:
        return 0.0 if numerator == 0 else math.copysign(math.inf, numerator)
    return numerator / math.sqrt(variance)


def tango_interval(lost: int, gained: int, items: int, confidence: float) -> tuple[float, float]:
    """Tango's asymptotic score interval of the paired drop (baseline's rate - candidate's) at ``confidence``
    (two-sided): every ``delta`` whose score statistic lies within +-z.

    ``lost``: items right for the baseline and wrong for the candidate (Tango's n12); ``gained``: the
    reverse (n21); ``items``: every pair scored. Reference: T. Tango, "Equivalence test and confidence
    interval for the difference in proportions for the paired-sample design", Statistics in Medicine 17
    (1998) 891-908, with the correction in 18 (1999) 3511; the published check is Fagerland, Lydersen and
    Laake, "Statistical Analysis of Contingency Tables" (2017), chapter 8: the Cavo et al. (2012) table
    (59, 6, 16, 80) gives -0.1240 to -0.0054 (tests/unit/test_noninferiority.py). With no discordant item
    the interval is [-z^2 / (n + z^2), z^2 / (n + z^2)].

    >>> [round(x, 4) for x in tango_interval(6, 16, 161, 0.95)]
    [-0.124, -0.0054]
    """
    from scipy.optimize import brentq  # noqa: PLC0415  (scipy on first use)
    from scipy.stats import norm  # noqa: PLC0415  (scipy on first use)

    if items <= 0 or lost < 0 or gained < 0 or lost + gained > items:
        raise ValueError(f"tango_interval needs 0 <= lost + gained <= items >= 1: {lost}+{gained}/{items}")
    z = float(norm.ppf(1 - (1 - confidence) / 2))
    estimate = (lost - gained) / items

    def upper(delta: float) -> float:
        return _statistic(delta, lost, gained, items) + z

    def lower(delta: float) -> float:
        return _statistic(delta, lost, gained, items) - z

    low = -1.0 if estimate == -1 else float(brentq(lower, -1 + _EDGE, 1 - _EDGE, xtol=1e-12))
    high = 1.0 if estimate == 1 else float(brentq(upper, -1 + _EDGE, 1 - _EDGE, xtol=1e-12))
    return low, high


@dataclass(frozen=True)
class PairedDrop:
    """The accuracy drop on paired items (baseline's rate - candidate's) with its Tango score interval."""

    items: int  # items scored on both sides
    lost: int  # right for the baseline, wrong for the candidate
    gained: int  # right for the candidate, wrong for the baseline
    drop: float  # (lost - gained) / items
    interval: tuple[float, float]  # Tango's score interval at ``confidence``, two-sided
    confidence: float


def paired_drop(items: int, lost: int, gained: int, *, confidence: float) -> PairedDrop:
    """The drop and its interval (:func:`tango_interval`).

    >>> d = paired_drop(200, 0, 0, confidence=0.95)
    >>> d.drop, round(d.interval[1], 4)
    (0.0, 0.0188)
    """
    low, high = tango_interval(lost, gained, items, confidence)
    return PairedDrop(items, lost, gained, (lost - gained) / items, (low, high), confidence)


def noninferiority(drop: PairedDrop, tolerance: float) -> Decision:
    """``pass`` when the drop's upper bound is at or below ``tolerance`` (non-inferior), ``fail`` when its
    lower bound is above it (worse than allowed beyond noise), ``inconclusive`` between."""
    low, high = drop.interval
    if low > tolerance:
        return "fail"
    if high <= tolerance + 1e-12:  # a bound computed at the tolerance itself is at it
        return "pass"
    return "inconclusive"


def items_needed(tolerance: float, confidence: float) -> int | None:
    """The fewest paired items with which the best case, a candidate that answers every item as the
    baseline does (no discordant item), passes: its upper bound z^2 / (n + z^2) at or below ``tolerance``,
    so n >= z^2 (1 - tolerance) / tolerance. None when no set can (``tolerance`` <= 0). A candidate that
    loses or gains items needs more.

    >>> items_needed(0.02, 0.95), items_needed(0.05, 0.95), items_needed(0.0, 0.95)
    (189, 73, None)
    """
    from scipy.stats import norm  # noqa: PLC0415  (scipy on first use)

    if tolerance <= 0:
        return None
    z2 = float(norm.ppf(1 - (1 - confidence) / 2)) ** 2
    return max(1, math.ceil(z2 * (1 - tolerance) / tolerance - 1e-9))
