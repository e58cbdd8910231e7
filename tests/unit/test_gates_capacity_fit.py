"""The capacity gate's interval: a log-margin fit near the boundary with a bootstrap (issue 21), pure."""

from __future__ import annotations

import numpy as np
import pytest

from contracts.results import CapacityPoint
from gates.capacity import capacity_fit, fitted_ratio


def points(capacity: float, levels: list[float], noise: list[float] | None = None) -> list[CapacityPoint]:
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
