"""The capacity margin with each request's own lateness added back (issue 42, item 3): a run's SLO summary
holds its margin with every request's own send lateness added back to the latencies counted from the send
(``load.goodput.late_margin``), the capacity search records it, and the capacity gate decides on it; a
run whose opening burst alone was late is no longer undecidable, a run whose slow requests were the late
ones still is, and a summary without it falls back to the run's p99 lag added to every request."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from contracts.results import CapacityPoint, CapacityResult, RequestRecord, SloSummary
from contracts.schema import SloConfig
from gates.verdict import decide
from load.goodput import slo_summary
from load.summary import client_health
from orchestrator.measure.capacity import _point
from orchestrator.measure.capacity_search import search
from tests.unit.capacity_fixtures import CFG, DEMO, side
from tests.unit.capacity_fixtures import judge as judge_capacity
from tests.unit.fakes import summary
from tests.unit.test_capacity_lag import COMPAT, NO_LATENCY_GAIN, W

N = 100  # requests per run
TURN = 0.0003  # a closed loop's turnaround lateness (s)


def rec(
    i: int,
    ttft: float | None,
    late: float,
    *,
    end: float | None = None,
    visible: float | None = -1.0,
    tokens: int = 2,
) -> RequestRecord:
    """Request ``i``: scheduled at ``i`` ms, sent ``late`` s after it; ``ttft`` None: it failed."""
    ok = ttft is not None
    return RequestRecord(
        index=i,
        warmup=False,
        target_prompt_tokens=100,
        target_output_tokens=tokens,
        scheduled_s=i / 1000,
        sent_s=i / 1000 + late,
        ttft_s=ttft,
        first_visible_s=(ttft if visible == -1.0 else visible) if ok else None,
        end_s=(end if end is not None else (ttft or 0.0) + 0.1) if ok else None,
        completion_tokens=tokens if ok else None,
        finish_reason="length" if ok else None,
        error=None if ok else "timeout",
    )


def run(
    ttfts: Sequence[float | None], lateness: Sequence[float], *, end: float | None = None
) -> list[RequestRecord]:
    return [rec(i, t, d, end=end) for i, (t, d) in enumerate(zip(ttfts, lateness, strict=True))]


#: 90 fast requests then the 10 slowest (they hold the p99: 0.98 s)
SLOW_LAST = [0.1] * 90 + [0.98] * 10
BURST = [0.05] * 50 + [TURN] * 50  # the opening burst late, the loop's turnarounds on time
TAIL = [TURN] * 90 + [0.05] * 10  # the slow requests are the late ones
TTFT = SloConfig(name="s", percentile=99, ttft_s=1.0)


@pytest.mark.parametrize(
    ("records", "slo", "expected"),
    [
        # The burst was 50 ms late, the slow requests left on time: the p99 moves by their 0.3 ms (the p99
        # rule: 1 / (0.98 + 0.05) = 0.971, below 1).
        pytest.param(run(SLOW_LAST, BURST), TTFT, 1 / (0.98 + TURN), id="burst_late"),
        # Every request 50 ms late: as the p99 rule.
        pytest.param(run(SLOW_LAST, [0.05] * N), TTFT, 1 / 1.03, id="evenly_late"),
        # The slowest requests are the late ones (one burst in prefill waves): their lateness counts.
        pytest.param(run(SLOW_LAST, TAIL), TTFT, 1 / 1.03, id="the_slow_ones_late"),
        # Nothing late of its own: nothing stored, the capacity search falls back to the p99 rule.
        pytest.param(run(SLOW_LAST, [0.0] * N), TTFT, None, id="on_schedule"),
        # 5 of 100 failed: the p99 is infinite whatever the lateness, no margin.
        pytest.param(run([0.5] * 95 + [None] * 5, BURST), TTFT, 0.0, id="failed_beyond_the_p99"),
        # One failed of 200 (+inf, the last): the p99 falls on the burst's, 0.5 + 0.05.
        pytest.param(run([0.5] * 199 + [None], [0.05] * 100 + [TURN] * 100), TTFT, 1 / 0.55, id="one_failed"),
        # 3 of 100 censored (no visible answer): first_visible's p99 infinite, no margin.
        pytest.param(
            run([0.5] * 97, [TURN] * 97) + [rec(97 + k, 0.5, 0.05, visible=None) for k in range(3)],
            SloConfig(name="s", percentile=99, first_visible_s=1.0),
            0.0,
            id="censored",
        ),
        # TPOT does not count from the send: 0.02 / 0.019 stays the margin, the TTFT's moves under it.
        pytest.param(
            run([0.5] * N, [0.05] * N, end=0.5 + 0.019),
            SloConfig(name="s", percentile=99, ttft_s=1.0, tpot_s=0.02),
            0.02 / 0.019,
            id="tpot_unchanged",
        ),
        # End to end counts from the send: 10 / (9 + 0.5).
        pytest.param(
            run([0.5] * N, [0.5] * N, end=9.0),
            SloConfig(name="s", percentile=99, e2e_s=10.0),
            10 / 9.5,
            id="e2e",
        ),
    ],
)
def test_the_margin_with_each_requests_own_lateness(
    records: list[RequestRecord], slo: SloConfig, expected: float | None
) -> None:
    """Before: a run's SLO summary had no margin with its requests' own lateness."""
    got = slo_summary(records, slo, duration_s=10.0)
    if expected is None:
        assert got.margin_lag_undone is None
    else:
        assert got.margin_lag_undone is not None and got.margin_lag_undone <= got.margin
        assert got.margin_lag_undone == pytest.approx(expected, rel=1e-9)


def slo_of(margin: float, undone: float | None) -> SloSummary:
    return SloSummary(
        name="s",
        percentile=99,
        thresholds={"ttft": 1.0},
        observed={"ttft": 1 / margin},
        met=margin >= 1,
        margin=margin,
        good_requests=1,
        attainment=1.0,
        goodput_rps=1.0,
        goodput_tps=1.0,
        margin_lag_undone=undone,
    )


@pytest.mark.parametrize(
    ("undone", "lag", "expected"),
    [
        (1.015, 0.05, 1.015),  # the summary's own figure
        (None, 0.05, 1 / (1 / 1.02 + 0.05)),  # an older summary: the p99 lag added to every request
        (None, 0.0, 1.02),  # an older summary, no lag: the margin
    ],
)
def test_a_capacity_point_records_the_summarys_own_figure(
    undone: float | None, lag: float, expected: float
) -> None:
    """Before: every point added the run's p99 lag to its margin, whatever its requests' own lateness."""
    base = summary("c", "decode_heavy", 1, "sha256:" + "0" * 64)
    late = base.model_copy(
        update={
            "slo": slo_of(1.02, undone),
            "client": base.client.model_copy(update={"dispatch_lag_p99_s": lag}),
        }
    )
    point = _point(late, 64, 1, "capacity/c64/a1/summary.json")
    assert (point.client_lag_s, point.margin) == (lag, 1.02)
    assert point.margin_lag_undone == pytest.approx(expected)


def searched_late(capacity: float, lateness: Sequence[float]) -> CapacityResult:
    """The search on a server whose SLO margin at level ``x`` is ``capacity / x`` (times the wobble ``W``),
    each run's records measured by the real load-runner reductions: the slowest 10 of ``N`` requests at
    the run's TTFT p99 (1 s / margin), the rest at half of it, each request late by ``lateness``."""
    points: list[CapacityPoint] = []

    def probe(level: float, attempt: int) -> float:
        margin = capacity / level * math.exp(W[len(points) % len(W)])
        p99 = 1.0 / margin
        records = run([p99 / 2] * 90 + [p99] * 10, lateness)
        health = client_health(records, chunks_per_read=[], cpu_seconds=0.0, wall_seconds=1.0, time_scale=1.0)
        base = summary("c", "decode_heavy", attempt, "sha256:" + "0" * 64)
        measured = base.model_copy(
            update={"slo": slo_summary(records, TTFT, duration_s=10.0), "client": health}
        )
        points.append(_point(measured, level, attempt, f"capacity/c{level:g}/a{attempt}/summary.json"))
        return points[-1].margin

    found = search(probe, DEMO)
    return found.record(
        points,
        candidate="c",
        profile="decode_heavy",
        slo="interactive",
        slo_text="TTFT p99 <= 1 s",
        resolution=DEMO.resolution,
        gpus=8,
    )


ON_TIME = [0.0] * N
BURST_80 = [0.08] * 50 + [TURN] * 50
TAIL_80 = [TURN] * 90 + [0.08] * 10


@pytest.mark.parametrize(
    ("cand", "base", "decision", "gap"),
    [
        # A 13% gain, the client on time: kept.
        pytest.param(113, ON_TIME, "keep", False, id="on_time"),
        # The same gain where each run's opening burst left up to 80 ms late and the slow requests on
        # time: the p99 rule read "the client's 80 ms could have made it" (incomplete); kept.
        pytest.param(113, BURST_80, "keep", False, id="only_the_burst_late"),
        # Where the slow requests were the late ones, their 80 ms could have made it: still undecidable.
        pytest.param(113, TAIL_80, "incomplete", True, id="the_slow_ones_late"),
        # Every request 80 ms late: as before.
        pytest.param(113, [0.08] * N, "incomplete", True, id="evenly_late"),
        # A 9% loss whose every run's burst was late: across the 10% tolerance by the p99 rule, now a
        # capacity within tolerance (no gain: neutral).
        pytest.param(91, BURST_80, "neutral", False, id="loss_burst_late"),
    ],
)
def test_the_capacity_gate_decides_on_each_requests_own_lateness(
    cand: float, base: Sequence[float], decision: str, *, gap: bool
) -> None:
    """Before: the capacity gate added each run's p99 lag to its margin, so a run whose opening burst
    alone was late left the comparison undecidable (``client_lag``, incomplete)."""
    gate = judge_capacity(side("c", searched_late(cand, base)), side("b", searched_late(100, ON_TIME)))
    assert (gate.comparisons[0].undecidable == "client_lag") is gap, gate.message
    verdict = decide("c", "b", [COMPAT, gate, NO_LATENCY_GAIN], CFG)
    assert verdict.decision == decision, verdict.reason
