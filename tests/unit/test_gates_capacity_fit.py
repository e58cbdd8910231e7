"""The capacity gate's interval: a log-margin fit near the boundary with a bootstrap (issue 21), pure."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from contracts.results import CapacityPoint
from gates.capacity import CapacityFit, capacity_fit, fitted_ratio


def points(capacity: float, levels: Sequence[float], noise: list[float] | None = None) -> list[CapacityPoint]:
    shifts = noise or [0.0] * len(levels)
    return [
        CapacityPoint(
            level=level,
            attempt=1,
            summary_file="",
            met=capacity / level * np.exp(shift) >= 1,
            margin=float(capacity / level * np.exp(shift)),
            attainment=1.0,
            goodput_rps=0.0,
            goodput_tps=0.0,
            output_tps=0.0,
            tps_per_user=None,
        )
        for level, shift in zip(levels, shifts, strict=True)
    ]


SEARCH = [8, 16, 32, 64, 128, 91, 108, 99]  # the levels the search tries for a capacity of 100
NOISE = [0.04, -0.06, 0.02, 0.08, -0.03, 0.05, -0.07, 0.01]


@pytest.mark.parametrize(
    ("cand", "base", "ratio", "excludes_one"),
    [
        pytest.param(points(100, SEARCH), points(100, SEARCH), 1.0, False, id="identical_exact"),
        pytest.param(points(100, SEARCH, NOISE), points(100, SEARCH), 1.0, False, id="identical_noisy"),
        pytest.param(points(50, [16, 32, 45, 50, 56, 64]), points(100, SEARCH), 0.5, True, id="half"),
    ],
)
def test_the_fit_finds_where_the_margin_crosses_one(
    cand: list[CapacityPoint], base: list[CapacityPoint], ratio: float, excludes_one: bool
) -> None:
    c, b = capacity_fit(cand, seed=1), capacity_fit(base, seed=2)
    assert c is not None and b is not None
    got, (low, high) = fitted_ratio(c, b, 0.95)
    assert got == pytest.approx(ratio, rel=0.05)
    assert low <= got <= high
    assert (high < 1 or low > 1) is excludes_one


@pytest.mark.parametrize(
    "pts",
    [
        pytest.param(points(100, [8, 16, 300]), id="one_level_near_the_boundary"),
        pytest.param(points(100, [91, 108]), id="two_levels"),
        pytest.param(
            [p.model_copy(update={"margin": 2 - p.margin}) for p in points(100, [80, 95, 105, 120])],
            id="margin_rising_with_load",
        ),
    ],
)
def test_too_little_near_the_boundary_leaves_the_bracket(pts: list[CapacityPoint]) -> None:
    assert capacity_fit(pts, seed=0) is None


def fit(log_capacities: np.ndarray) -> CapacityFit:
    """A side's fit with the given bootstrap replicates (log capacities; inf where a replicate failed)."""
    finite = log_capacities[np.isfinite(log_capacities)]
    return CapacityFit(float(np.exp(np.median(finite))), log_capacities, levels=4, runs=6)


def replicates(log_capacity: float, *, failed: int, seed: int, n: int = 1000) -> np.ndarray:
    """``n`` replicates spread 1% around ``log_capacity``, the first ``failed`` without a fit (inf)."""
    values = log_capacity + np.random.default_rng(seed).normal(0.0, 0.01, n)
    values[:failed] = np.inf
    return values


@pytest.mark.parametrize(
    ("cand_failed", "base_failed", "low", "high"),
    [
        pytest.param(0, 0, (0.45, 0.499), (0.501, 0.55), id="every_replicate_fitted"),
        pytest.param(10, 10, (0.45, 0.499), (0.501, 0.55), id="1pct_unknown_within_the_tails"),
        pytest.param(100, 100, (0.0, 0.0), (np.inf, np.inf), id="10pct_unknown_is_not_a_ratio_of_one"),
        # One side's fit failed: the replicate is unknown at both ends, never that side's best case (issue 42,
        # item 3: a candidate without a fit read as unbounded, which kept the lower end where it was).
        pytest.param(10, 0, (0.45, 0.499), (0.501, 0.55), id="1pct_candidate_unknown_within_the_tails"),
        pytest.param(100, 0, (0.0, 0.0), (np.inf, np.inf), id="10pct_candidate_unknown_at_both_ends"),
        pytest.param(0, 100, (0.0, 0.0), (np.inf, np.inf), id="10pct_baseline_unknown_at_both_ends"),
    ],
)
def test_a_replicate_without_a_fit_widens_the_interval_and_never_reads_as_one(
    cand_failed: int,
    base_failed: int,
    low: tuple[float, float],
    high: tuple[float, float],
) -> None:
    """The true ratio is 0.5; a replicate where either side's margin stopped falling has no ratio: counted
    at both ends, never as 1 (which would cap the upper end at 1 and make a 0.5x loss look decided) and
    never as that side's best case (a candidate without a fit is not an unbounded candidate)."""
    cand = fit(replicates(np.log(50.0), failed=cand_failed, seed=1))
    base = fit(replicates(np.log(100.0), failed=base_failed, seed=2))
    ratio, (got_low, got_high) = fitted_ratio(cand, base, 0.95)
    assert ratio == pytest.approx(0.5, rel=0.01)
    assert low[0] <= got_low <= low[1]
    assert high[0] <= got_high <= high[1]
