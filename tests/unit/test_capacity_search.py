"""The capacity search's core (bracketing, bisection, noise repeats) and its answer against brute force.

The brute-force check drives the simulator's engine in virtual time (launch.sim.replay), so it is exact
and fast: every concurrency from 2 to 200 is measured, and the search must land within its resolution.
"""

from __future__ import annotations

from functools import cache
from statistics import median

import pytest

from contracts.results import RequestRecord
from contracts.schema import SloConfig
from launch.sim.replay import ReplayRequest, replay_closed_loop
from load.goodput import slo_summary
from orchestrator.measure.capacity_search import SearchSettings, midpoint, resolved, search
from tests.unit.test_sim_calibration import _profile, engine


def threshold_probe(capacity: float):  # type: ignore[no-untyped-def]
    return lambda level, attempt: capacity / level


@pytest.mark.parametrize(
    ("capacity", "integer", "start"),
    [(100, True, 8), (100, True, 500), (7.3, False, 1), (7.3, False, 50), (3, True, 32), (511, True, 8)],
)
def test_search_brackets_the_true_capacity_within_resolution(
    capacity: float, integer: bool, start: float
) -> None:
    settings = SearchSettings(start=start, integer=integer, resolution=0.1, max_points=20, max_level=512)
    result = search(threshold_probe(capacity), settings)
    assert result.low is not None and result.high is not None
    assert result.low <= capacity < result.high
    assert resolved(result.low, result.high, settings)
    assert all(held == (level <= capacity) for level, held in result.decided.items())


def test_search_reports_bounds_it_could_not_leave() -> None:
    top = search(threshold_probe(10_000), SearchSettings(start=8, integer=True, max_level=64))
    assert (top.low, top.high) == (64, None)
    bottom = search(threshold_probe(0.5), SearchSettings(start=8, integer=True, min_level=1))
    assert (bottom.low, bottom.high) == (None, 1)


def test_a_level_within_noise_is_repeated_and_the_median_decides() -> None:
    margins = {(91.0, 1): 1.05, (91.0, 2): 0.8, (91.0, 3): 0.9}
    calls: list[tuple[float, int]] = []

    def probe(level: float, attempt: int) -> float:
        calls.append((level, attempt))
        return margins.get((level, attempt), 100 / level)

    settings = SearchSettings(start=64, integer=True, noise=0.1, max_repeats=3, resolution=0.5)
    result = search(probe, settings)
    assert [c for c in calls if c[0] == 91.0] == [(91.0, 1), (91.0, 2), (91.0, 3)]
    assert result.decided[91.0] is False  # median 0.9
    assert result.margins[128.0] == [100 / 128]  # clear, and not at the boundary: measured once
    assert result.runs == len(calls)


def test_the_boundarys_two_levels_are_repeated_for_the_fit_and_nothing_else() -> None:
    """Step 4 (issue 21): the final bracket's levels get max_repeats runs each, every other level one
    (a noiseless probe: no level falls in the noise band except the boundary's own)."""
    calls: list[tuple[float, int]] = []

    def probe(level: float, attempt: int) -> float:
        calls.append((level, attempt))
        return 100 / level

    settings = SearchSettings(start=8, integer=True, noise=0.01, max_repeats=3)
    result = search(probe, settings)
    assert (result.low, result.high) == (99.0, 108.0)
    assert len(result.margins[99.0]) == len(result.margins[108.0]) == 3
    assert all(len(m) == 1 for level, m in result.margins.items() if level not in (99.0, 108.0))
    assert result.reversed_calls == []
    assert result.runs == len(calls) == len(result.order) + 4
    # without noise (noise 0: the probe is declared exact) nothing is repeated
    exact = search(threshold_probe(100), SearchSettings(start=8, integer=True, noise=0))
    assert exact.runs == len(exact.order)


def test_a_lucky_call_at_the_boundary_is_reversed_by_its_repeats_and_the_bracket_reopens() -> None:
    """True capacity 100; level 99's first run read 1.15 (outside the noise band: decided held at once),
    its repeats 0.85: the median fails it, the bracket re-opens below it and the search ends on
    decisions that agree with every level's median."""
    lucky = {(99.0, 1): 1.15, (99.0, 2): 0.85, (99.0, 3): 0.85}

    def probe(level: float, attempt: int) -> float:
        return lucky.get((level, attempt), 100 / level)

    result = search(probe, SearchSettings(start=8, integer=True, noise=0.1, max_repeats=3))
    assert result.reversed_calls == [99.0]
    assert result.decided[99.0] is False
    assert (result.low, result.high) == (91.0, 99.0)
    assert all((median(m) >= 1) == result.decided[level] for level, m in result.margins.items())
    assert len(result.margins[91.0]) == 3  # the new boundary's held level has its repeats too


def test_a_level_is_never_measured_twice_outside_noise_and_the_budget_holds() -> None:
    calls: list[float] = []

    def probe(level: float, attempt: int) -> float:
        calls.append(level)
        return 37 / level

    result = search(probe, SearchSettings(start=8, integer=True, max_points=5, resolution=0.01, noise=0))
    assert len(calls) == len(set(calls)) == 5
    assert result.stopped_by_budget


@pytest.mark.parametrize(
    ("low", "high", "integer", "mid"), [(64, 128, True, 91), (90, 92, True, 91), (1.0, 4.0, False, 2.0)]
)
def test_midpoint_is_geometric_and_strictly_inside(
    low: float, high: float, integer: bool, mid: float
) -> None:
    assert midpoint(low, high, SearchSettings(integer=integer)) == pytest.approx(mid)


# ------------------------------------------------------------------------------- brute force on the sim

SLO = SloConfig(name="interactive", percentile=99, ttft_s=1.0, tpot_s=0.015)


@cache
def replay_margin(candidate: str, concurrency: int) -> float:
    """One wave of `concurrency` decode-heavy requests (256 in, 256 out), judged against the SLO."""
    reqs = [ReplayRequest(256, 256, 256, True, f"{candidate}-{concurrency}-{i}") for i in range(concurrency)]
    result = replay_closed_loop(_profile(), engine(candidate), reqs, concurrency)
    records = [
        RequestRecord(
            index=r.index,
            warmup=False,
            target_prompt_tokens=256,
            target_output_tokens=256,
            scheduled_s=r.sent,
            sent_s=r.sent,
            ttft_s=r.ttft,
            first_visible_s=r.first_visible,
            end_s=r.end,
            prompt_tokens=256,
            completion_tokens=r.completion_tokens,
            finish_reason=r.finish_reason,
        )
        for r in result.records
    ]
    return slo_summary(records, SLO, duration_s=result.duration).margin


@pytest.mark.parametrize("candidate", ["baseline", "tp4_dp2"])
def test_search_matches_a_brute_force_sweep_within_its_resolution(candidate: str) -> None:
    levels = range(2, 201)
    brute = max(c for c in levels if replay_margin(candidate, c) >= 1)
    settings = SearchSettings(start=32, min_level=2, max_level=200, integer=True, resolution=0.1, noise=0)
    found = search(lambda level, attempt: replay_margin(candidate, int(level)), settings)
    assert found.low is not None and found.high is not None
    # Within the stated resolution of the brute-force answer, measuring a fraction of the levels.
    assert abs(found.low - brute) <= max(1, settings.resolution * brute)
    assert found.runs <= 12 < len(levels)


def test_tp4_dp2_capacity_is_far_below_the_baselines_on_the_sim() -> None:
    settings = SearchSettings(start=32, min_level=2, max_level=200, integer=True, resolution=0.1, noise=0)
    base = search(lambda level, attempt: replay_margin("baseline", int(level)), settings)
    tp4 = search(lambda level, attempt: replay_margin("tp4_dp2", int(level)), settings)
    assert base.low is not None and tp4.low is not None
    assert tp4.low / base.low < 0.3
    # The replay runs in virtual time: the brackets are exact (169-179 against 16-17 concurrent requests).
    assert (base.low, base.high, tp4.low, tp4.high) == (169, 179, 16, 17)
