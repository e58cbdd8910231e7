"""The gates' statistics: Hodges-Lehmann ratios, the two-stage bootstrap, more repeats.

Medians are the vocabulary's: tests/unit/test_metrics.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gates.bootstrap import RunSample, bootstrap_ratio
from gates.significance import bonferroni
from gates.stats import RatioEstimate, hodges_lehmann_ratio, more_repeats


@pytest.mark.parametrize(
    ("factor", "excludes"),
    [(2.0, True), (0.5, True), (1.0, False), (1.02, False)],
)
def test_hodges_lehmann_ratio_finds_a_known_scale(factor: float, excludes: bool) -> None:
    rng = np.random.default_rng(7)
    base = list(np.exp(rng.normal(0.0, 0.3, 200)))
    cand = [v * factor for v in np.exp(rng.normal(0.0, 0.3, 200))]
    est = hodges_lehmann_ratio(cand, base, confidence=0.95)
    assert est.ratio == pytest.approx(factor, rel=0.08)
    assert est.low < est.ratio < est.high
    assert est.excludes_one is excludes


def test_hodges_lehmann_ranks_censored_values_above_everything() -> None:
    base = [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7]
    cand = [1.0, 1.1, 1.2, 1.3, math.inf, math.inf, math.inf, math.inf]
    est = hodges_lehmann_ratio(cand, base, confidence=0.95)
    assert est.ratio > 1
    assert math.isinf(est.high)
    assert est.p_value is not None and 0 <= est.p_value <= 1


def test_hodges_lehmann_treats_two_censored_values_as_a_tie() -> None:
    est = hodges_lehmann_ratio([math.inf] * 4, [math.inf] * 4, confidence=0.9)
    assert est.ratio == 1.0


def test_hodges_lehmann_interval_is_unbounded_for_tiny_samples() -> None:
    est = hodges_lehmann_ratio([1.0, 2.0], [1.5, 2.5], confidence=0.95)
    assert est.low == 0.0 and math.isinf(est.high)


def test_hodges_lehmann_interval_covers_no_change_about_as_often_as_promised() -> None:
    rng = np.random.default_rng(11)
    covered = 0
    for _ in range(200):
        a, b = rng.lognormal(0, 0.5, 30), rng.lognormal(0, 0.5, 30)
        covered += not hodges_lehmann_ratio(list(a), list(b), confidence=0.9).excludes_one
    assert 0.84 <= covered / 200 <= 0.96


def _runs(values: list[float], n: int = 0, seed: int = 0) -> list[RunSample]:
    rng = np.random.default_rng(seed)
    out = []
    for v in values:
        if n:
            out.append(RunSample(v, np.full(n, 256.0), rng.lognormal(0, 0.2, n)))
        else:
            out.append(RunSample(v))
    return out


@pytest.mark.parametrize(
    ("cand", "base", "ratio", "excludes"),
    [
        ([80.0, 81.0, 79.0], [100.0, 101.0, 99.0], 0.8, True),
        ([100.0, 101.0, 99.0], [100.0, 99.0, 101.0], 1.0, False),
        ([120.0] * 5, [100.0] * 5, 1.2, True),
    ],
)
def test_bootstrap_ratio_over_repeats(
    cand: list[float], base: list[float], ratio: float, excludes: bool
) -> None:
    est = bootstrap_ratio(_runs(cand), _runs(base), confidence=0.95, resamples=1000, seed=3)
    assert est.ratio == pytest.approx(ratio, rel=1e-9)
    assert est.excludes_one is excludes


def test_bootstrap_inner_stage_widens_a_single_repeat() -> None:
    """With one repeat per side, the request stage is all the noise there is: the interval is not a point."""
    est = bootstrap_ratio(
        _runs([100.0], n=64, seed=1), _runs([100.0], n=64, seed=2), confidence=0.95, resamples=1000, seed=3
    )
    assert est.low < 1 < est.high
    assert est.high / est.low > 1.02


def test_bootstrap_is_reproducible_by_seed() -> None:
    args = (_runs([95.0, 97.0], n=16), _runs([100.0, 98.0], n=16, seed=5))
    a = bootstrap_ratio(*args, confidence=0.95, resamples=500, seed=9)
    b = bootstrap_ratio(*args, confidence=0.95, resamples=500, seed=9)
    assert a == b


def test_bootstrap_needs_repeats() -> None:
    with pytest.raises(ValueError, match="at least one repeat"):
        bootstrap_ratio([], _runs([1.0]), confidence=0.95, resamples=10, seed=0)


@pytest.mark.parametrize(
    ("estimate", "expected"),
    [
        (RatioEstimate(0.9, 0.8, 1.02, 0.95, "", 3, 3, 3), 2),  # needs 5 repeats: 2 more
        (RatioEstimate(1.1, 0.99, 1.2, 0.95, "", 3, 3, 3), 1),
        (
            RatioEstimate(0.9, 0.5, 1.6, 0.95, "", 3, 3, 3),
            87,
        ),  # 3 x (log 1.6 - log 0.9)^2 / (log 0.9)^2 = 89.5
        (RatioEstimate(1.0, 0.9, 1.1, 0.95, "", 3, 3, 3), None),  # no effect to settle
        (RatioEstimate(0.99, 0.5, 2.0, 0.95, "", 3, 3, 3), None),  # more than MAX_MORE_REPEATS
        (RatioEstimate(2.0, 0.0, math.inf, 0.95, "", 3, 3, 3), None),  # unbounded interval
    ],
)
def test_more_repeats(estimate: RatioEstimate, expected: int | None) -> None:
    assert more_repeats(estimate) == expected


def test_bonferroni() -> None:
    assert bonferroni(0.95, 5) == pytest.approx(0.99)
    assert bonferroni(0.95, 0) == pytest.approx(0.95)
