"""The search-quality benchmark's pure parts (benchmarks/search/): the SLO margin, the exact capacity, the
within-5% rule and the brute force's table (the goals: test_search_quality_goals.py)."""

from __future__ import annotations

import math

import pytest

from benchmarks.search.scoring import exact_capacity, slo_margin, within
from benchmarks.search.surface import Truth, best_by_dimension, best_points
from contracts.schema import SloConfig

INTERACTIVE = SloConfig(name="interactive", percentile=99, ttft_s=1.0, tpot_s=0.015)


@pytest.mark.parametrize(
    ("ttft", "tpot", "e2e", "slo", "expected"),
    [
        # the worst metric decides: TTFT holds (2x), TPOT fails (p99 of 0.01 and 0.02 is 0.0199)
        ([0.5, 0.5], [0.01, 0.02], [1.0, 1.0], INTERACTIVE, 0.015 / 0.0199),
        ([0.25] * 10, [0.005] * 10, [9.0] * 10, INTERACTIVE, 3.0),
        # one request of two never started: p99 is infinite, the run cannot hold
        ([0.1, math.inf], [0.01, 0.01], [1.0, 1.0], INTERACTIVE, 0.0),
        # p99 of 100 values interpolates between the 99th and the 100th: one slow request out of 100
        # moves it only 1% of the way
        ([0.5] * 99 + [10.5], [0.001] * 100, [1.0] * 100, INTERACTIVE, 1.0 / 0.6),
        # an unset threshold is not checked; e2e is when set
        ([5.0], [1.0], [2.0], SloConfig(e2e_s=4.0), 2.0),
        # nothing set: nothing can fail
        ([5.0], [1.0], [2.0], SloConfig(), math.inf),
        # a one-token answer has TPOT 0: that metric cannot fail
        ([0.5], [0.0], [0.5], INTERACTIVE, 2.0),
    ],
)
def test_slo_margin(
    ttft: list[float], tpot: list[float], e2e: list[float], slo: SloConfig, expected: float
) -> None:
    assert slo_margin(ttft, tpot, e2e, slo) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("true", "min_level", "max_level", "expected"),
    [
        (37, 2, 512, 37),
        (2, 2, 512, 2),  # only the lowest level holds
        (1, 2, 512, 0),  # even the lowest level fails
        (512, 2, 512, 512),  # holds at the top: reported at the bound
        (1000, 2, 512, 512),
        (300, 2, 512, 300),  # between the last doubling (256) and the bound
        (511, 2, 512, 511),
        (168, 8, 512, 168),
    ],
)
def test_exact_capacity_finds_the_last_level_that_holds(
    true: int, min_level: int, max_level: int, expected: int
) -> None:
    asked: list[int] = []

    def holds(level: int) -> bool:
        asked.append(level)
        return level <= true

    assert exact_capacity(holds, min_level, max_level) == expected
    assert all(min_level <= level <= max_level for level in asked)
    assert len(asked) <= 2 * math.ceil(math.log2(max_level)) + 2  # doubling, then bisection


@pytest.mark.parametrize(
    ("value", "best", "expected"),
    [
        (216, 216, True),
        (205.2, 216, True),  # exactly 95%
        (205, 216, False),
        (300, 216, True),  # above the best cannot happen with the truth, but is within
        (None, 216, False),  # no winner
        (0.0, 216, False),
    ],
)
def test_within_five_percent(value: float | None, best: float, expected: bool) -> None:
    assert within(value, best) is expected


def test_best_points_are_those_within_five_percent_best_first() -> None:
    truth = Truth(
        setting="s",
        space="x",
        points=[
            {"point": {"k": 7}, "capacity": 168, "why": None},
            {"point": {"k": 3}, "capacity": 216, "why": None},
            {"point": {"k": 5}, "capacity": 206, "why": None},
            {"point": {"k": 9}, "capacity": None, "why": "out-of-memory"},
        ],
    )
    assert truth.best == 216
    assert [row["point"]["k"] for row in best_points(truth)] == [3, 5]
    assert truth.capacity_of({"k": 9}) is None
    with pytest.raises(KeyError, match="is not in the brute force"):
        truth.capacity_of({"k": 1})


def test_best_by_dimension_reads_the_surface_one_field_at_a_time() -> None:
    rows = [
        ({"layout": "tp2_dp4", "k": 3}, 216),
        ({"layout": "tp2_dp4", "k": 7}, 168),
        ({"layout": "tp8_dp1", "k": 3}, 3),
        ({"layout": "tp8_dp1", "k": 7}, None),  # refused at startup
        ({"layout": "tp4_dp2", "k": 7}, None),
    ]
    truth = Truth("s", "x", [{"point": p, "capacity": c, "why": None} for p, c in rows])
    assert best_by_dimension(truth) == {
        "layout": {"tp2_dp4": 216.0, "tp8_dp1": 3.0, "tp4_dp2": None},
        "k": {"3": 216.0, "7": 168.0},
    }
