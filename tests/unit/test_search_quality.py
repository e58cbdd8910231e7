"""The search-quality benchmark's pure parts (benchmarks/search/): the SLO margin, the exact capacity, the
within-5% rule, the summary against the issue's goal and the table."""

from __future__ import annotations

import math

import pytest

from benchmarks.search.scoring import (
    SeedRun,
    exact_capacity,
    render_table,
    slo_margin,
    summarize,
    within,
)
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


def _run(seed: int, true: float | None, launches: int) -> SeedRun:
    point = None if true is None else {"layout": "tp2_dp4", "max_num_seqs": 128}
    return SeedRun(
        seed=seed,
        winner=None if true is None else f"demo_t{seed:03d}",
        winner_point=point,
        estimate=true,
        true_capacity=true,
        launches=launches,
        distinct=launches,
        stopped="budget spent",
    )


@pytest.mark.parametrize(
    ("trues", "launches", "found", "goal"),
    [
        ([216.0] * 9 + [188.0], [14] * 10, 9, True),  # 9/10 within 5%, 14 of 192 launched
        ([216.0] * 8 + [188.0, None], [14] * 10, 8, False),  # 8/10: short of 9
        ([216.0] * 10, [14] * 9 + [49], 10, False),  # one seed launched over 25% of the space
        ([216.0] * 10, [48] * 10, 10, True),  # exactly 25%
    ],
)
def test_summary_against_the_goal(
    trues: list[float | None], launches: list[int], found: int, goal: bool
) -> None:
    runs = [_run(i, t, n) for i, (t, n) in enumerate(zip(trues, launches, strict=True))]
    summary = summarize(runs, best=216.0, space_size=192)
    assert (summary.found, summary.goal_met) == (found, goal)
    assert summary.max_launches == max(launches)


def test_table_rows_and_verdict() -> None:
    runs = [_run(0, 216.0, 14), _run(1, 188.0, 12), _run(2, None, 14)]
    summary = summarize(runs, best=216.0, space_size=192)
    lines = render_table(runs, summary).splitlines()
    assert lines[2].split(" | ")[5:8] == ["100%", "yes", "14 |"]
    assert lines[3].split(" | ")[5:7] == ["87%", "no"]
    assert lines[4].split(" | ")[1:7] == ["-", "-", "-", "-", "-", "no"]
    assert lines[-1].startswith("1/3 winners within 5% of the best capacity (216)")
    assert lines[-1].endswith("goal (>= 90% within 5%, <= 25% of the space launched): not met")


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
