"""Capacity and the load client's lag (issue 42, item 2): each capacity run records the client's p99 dispatch
lag and the SLO margin with it added back; a deciding level the lag could move across 1 leaves the
capacity comparison undecidable, a ``client_lag`` gap (INCOMPLETE), as the other gates treat the lag."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contracts.files import read_model, write_model
from contracts.layout import CAPACITY_FILE
from contracts.results import CapacityResult, ClientHealth, ProfileSummary, SloSummary
from contracts.schema import WorkloadConfig
from contracts.verdicts import GateResult
from gates.verdict import decide
from load.goodput import margin_lag_undone
from orchestrator.measure.candidate import run_candidate
from orchestrator.servers.context import SweepContext
from tests.unit.capacity_fixtures import CFG, searched, side
from tests.unit.capacity_fixtures import judge as judge_capacity
from tests.unit.composed import load
from tests.unit.fakes import FakeSupervisor, fake_seams
from tests.unit.test_capacity_sweep import OVERRIDES, CapacityLoad

W = (0.03, -0.02, 0.01, -0.04, 0.02, 0.0, -0.01, 0.04)


def slo(observed: dict[str, float | None], thresholds: dict[str, float]) -> SloSummary:
    margins = [thresholds[m] / v if v else 0.0 for m, v in observed.items()]
    return SloSummary(
        name="s",
        percentile=99,
        thresholds=thresholds,
        observed=observed,
        met=min(margins) >= 1,
        margin=min(margins),
        good_requests=1,
        attainment=1.0,
        goodput_rps=1.0,
        goodput_tps=1.0,
    )


@pytest.mark.parametrize(
    ("observed", "thresholds", "lag", "expected"),
    [
        ({"ttft": 0.5}, {"ttft": 1.0}, 0.0, 2.0),  # no lag: the margin as measured
        ({"ttft": 0.98}, {"ttft": 1.0}, 0.03, 1 / 1.01),  # held by 2%, 30 ms late: it could have failed
        ({"e2e": 9.0}, {"e2e": 10.0}, 0.5, 10 / 9.5),  # end to end counts from the send too
        ({"tpot": 0.05}, {"tpot": 0.1}, 0.5, 2.0),  # time per token does not: unchanged
        ({"ttft": 0.5, "tpot": 0.09}, {"ttft": 1.0, "tpot": 0.1}, 0.2, 0.1 / 0.09),  # still TPOT's
        ({"ttft": None}, {"ttft": 1.0}, 0.01, 0.0),  # too many failed: no margin at all
    ],
)
def test_the_margin_with_the_clients_lag_added_back(
    observed: dict[str, float | None], thresholds: dict[str, float], lag: float, expected: float
) -> None:
    assert margin_lag_undone(slo(observed, thresholds), lag) == pytest.approx(expected)


class LateCapacityLoad(CapacityLoad):
    """The fake server of the capacity search, measured by a client ``LAG`` s late at p99."""

    LAG = 0.05

    def __call__(
        self, base_url: str, served_model: str, workload: WorkloadConfig, **kw: Any
    ) -> ProfileSummary:
        result = super().__call__(base_url, served_model, workload, **kw)
        client = ClientHealth(
            dispatch_lag_p50_s=self.LAG / 2,
            dispatch_lag_p99_s=self.LAG,
            dispatch_lag_max_s=self.LAG,
            chunks_per_read_p99=1.0,
            client_cpu_percent=1.0,
            saturated=False,
        )
        result = result.model_copy(update={"client": client})
        write_model(kw["out_dir"] / "summary.json", result)
        return result


@pytest.mark.parametrize(("lag", "recorded"), [(0.0, 0.0), (0.05, 0.05)])
def test_every_capacity_point_records_the_clients_lag(tmp_path: Path, lag: float, recorded: float) -> None:
    """Before: a capacity point had no lag, and its margin no lag-free bound."""
    cfg, _ = load(OVERRIDES)
    fake = LateCapacityLoad()
    fake.LAG = lag
    ctx = SweepContext.open(cfg, tmp_path / "sweep", fake_seams(FakeSupervisor(), fake, []))
    run_candidate(ctx, ctx.cfg.baseline, role="baseline")
    result = read_model(ctx.candidate_dir("baseline") / CAPACITY_FILE, CapacityResult)
    assert result.points and all(p.client_lag_s == recorded for p in result.points)
    for p in result.points:  # the fake's TTFT threshold is 2 s, observed 2 s / margin
        assert p.margin_lag_undone == pytest.approx(min(p.margin, 2.0 / (2.0 / p.margin + lag)), rel=1e-6)


COMPAT = GateResult(gate="compatibility", role="requirement", status="pass", message="started")
NO_LATENCY_GAIN = GateResult(gate="latency_gain", role="gain", status="fail", message="no latency gain")


@pytest.mark.parametrize(
    ("cand", "base", "status", "decision", "gap"),
    [
        # No lag recorded: decided as before.
        pytest.param(searched(91, wobble=W), searched(100, wobble=W), "pass", "neutral", False, id="no_lag"),
        # 50 ms late against a 1 s TTFT: the candidate's deciding level (91, margin 1.00) reads 0.95 with
        # the lag added back, and its capacity could be 0.86x the baseline's: across the 10% tolerance.
        pytest.param(
            searched(91, wobble=W, lag_s=0.05),
            searched(100, wobble=W),
            "inconclusive",
            "incomplete",
            True,
            id="across_the_tolerance",
        ),
        # A lag that moves nothing across a limit: 0.12x is a loss whatever the client did.
        pytest.param(
            searched(12, wobble=W, lag_s=0.05),
            searched(100, wobble=W),
            "fail",
            "reject",
            False,
            id="far_below",
        ),
        # A 13% gain the client's 80 ms could have made: undecidable, never a keep.
        pytest.param(
            searched(113, wobble=W, lag_s=0.08),
            searched(100, wobble=W),
            "inconclusive",
            "incomplete",
            True,
            id="gain_within_the_lag",
        ),
        # A 1 ms lag: the gain stands.
        pytest.param(
            searched(125, wobble=W, lag_s=0.001),
            searched(100, wobble=W),
            "pass",
            "keep",
            False,
            id="small_lag",
        ),
    ],
)
def test_a_deciding_level_the_lag_could_move_across_one_is_a_client_lag_gap(
    cand: CapacityResult, base: CapacityResult, status: str, decision: str, *, gap: bool
) -> None:
    gate = judge_capacity(side("c", cand), side("b", base))
    assert gate.status == status, gate.message
    assert (gate.comparisons[0].undecidable == "client_lag") is gap
    verdict = decide("c", "b", [COMPAT, gate, NO_LATENCY_GAIN], CFG)
    assert verdict.decision == decision, verdict.reason
    lag_gaps = [g for g in verdict.missing if g.kind == "client_lag"]
    assert [g.file for g in lag_gaps] == (["decode_heavy/capacity"] if gap else [])
    if gap:
        assert "the ratio lies anywhere in" in gate.message and "a less loaded client" in gate.message
