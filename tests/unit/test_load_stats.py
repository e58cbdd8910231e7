"""Percentiles and right-censored medians of the load runner, as tables."""

from __future__ import annotations

import math

import numpy as np
import pytest

from load.stats import censored_median, percentile, stats


@pytest.mark.parametrize(
    ("values", "q", "want"),
    [
        ([], 50, None),
        ([3.0], 99, 3.0),
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
        ([4.0, 1.0, 3.0, 2.0], 0, 1.0),
        ([4.0, 1.0, 3.0, 2.0], 100, 4.0),
        ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0], 90, 9.1),
    ],
)
def test_percentile(values: list[float], q: float, want: float | None) -> None:
    got = percentile(values, q)
    assert got == pytest.approx(want) if want is not None else got is None


@pytest.mark.parametrize("q", [1, 50, 90, 99])
def test_percentile_matches_numpy(q: float) -> None:
    values = [float(v) for v in np.random.default_rng(7).lognormal(size=101)]
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_percentile_rejects_out_of_range() -> None:
    with pytest.raises(ValueError, match="outside 0-100"):
        percentile([1.0], 101)


def test_stats_of_a_sample_and_of_nothing() -> None:
    got = stats([1.0, 2.0, 3.0])
    assert (got.n, got.mean, got.p50, got.min, got.max) == (3, 2.0, 2.0, 1.0, 3.0)
    assert stats([]).p50 is None and stats([]).n == 0


@pytest.mark.parametrize(
    ("values", "n", "censored", "value", "infinite"),
    [
        ([], 0, 0, None, False),
        ([1.0, 2.0, 3.0], 3, 0, 2.0, False),
        ([1.0, None, 3.0], 3, 1, 3.0, False),
        ([None, None, 1.0], 3, 2, None, True),
        ([1.0, 2.0, 3.0, None], 4, 1, 2.5, False),
        ([1.0, 2.0, None, None], 4, 2, None, True),
        ([None], 1, 1, None, True),
        # the case study's answer gate: 3 of 5 answered
        ([40.0, 76.85, 90.0, None, None], 5, 2, 90.0, False),
    ],
)
def test_censored_median(
    values: list[float | None], n: int, censored: int, value: float | None, infinite: bool
) -> None:
    got = censored_median(values)
    assert (got.n, got.censored, got.infinite) == (n, censored, infinite)
    assert got.value_s == value or (value is not None and math.isclose(got.value_s or 0, value))
