"""Failures that teach and cost less (issue 43, items 4 and 11): a server lost under load is infeasible,
a screen within its noise of the best is not cut, the memory probe, the stall that must have screened
every value, and the baseline's point as the best answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest

from contracts.results import CapacityPoint, CapacityResult, WatchEvent, write_model
from contracts.search import SearchConfig
from contracts.trials import SearchRecord, TrialRecord
from orchestrator.measure.trial import DIED_UNDER_LOAD, TrialOutcome, unfinished
from orchestrator.search.reuse import opening_outcome
from orchestrator.search.rules import best_trial, is_baseline
from orchestrator.search.screen_rule import screen_outranked
from orchestrator.search.study import make_pruner

pytestmark = pytest.mark.unit


def _event(kind: str, detail: str = "x") -> WatchEvent:
    return WatchEvent(at="2026-12-06T10:00:00Z", kind=kind, detail=detail)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kinds", "state"),
    [
        # the server started, then died (OOM-killed: exit -9), hung or turned unhealthy under load: the
        # point is infeasible, a constraint the sampler learns, never launched again
        (["died"], "infeasible"),
        (["hung"], "infeasible"),
        (["unhealthy"], "infeasible"),
        (["recovered", "died"], "infeasible"),
        # the load runner's own fault, or a run that only lacked its SLO figure, says nothing of the point
        (["harness"], "failed"),
        ([], "failed"),
        (["restarted", "recovered"], "failed"),
    ],
)
def test_a_server_lost_under_load_is_infeasible_and_a_harness_fault_is_not(
    kinds: list[str], state: str
) -> None:
    events = [_event(k, "exit code -9 (SIGKILL: out of memory)") for k in kinds]
    outcome = unfinished(TrialOutcome(state="running", fidelity="screen", launches=1), events, "the screen")
    assert outcome.state == state
    if state == "infeasible":
        assert outcome.why.startswith(DIED_UNDER_LOAD) and "SIGKILL" in outcome.why
    else:
        assert outcome.why == "the screen did not complete"
    assert outcome.launches == 1 and outcome.fidelity == "screen"  # what it spent and reached stays


@pytest.mark.parametrize(
    ("screen", "others", "noise", "cut"),
    [
        (94.0, [100.0, 90.0], 0.1, False),  # 94% of the best: within a 10% noise, not cut
        (91.0, [100.0], 0.1, False),  # 91 x 1.1 = 100.1 >= 100
        (90.0, [100.0], 0.1, True),  # 90 x 1.1 = 99 < 100: beyond noise below
        (94.0, [100.0], 0.0, True),  # no noise: the halving rule's word stands
        (50.0, [], 0.1, False),  # nothing to be below
        (100.0, [100.0], 0.1, False),
    ],
)
def test_a_screen_is_cut_only_beyond_its_noise_below_the_best(
    screen: float, others: list[float], noise: float, cut: bool
) -> None:
    assert screen_outranked(screen, others, noise) is cut


@pytest.mark.parametrize(
    ("pruner", "screens", "last", "noise", "pruned"),
    [
        # successive halving (reduction 3) alone would cut 94 (not in the best third of its rung); with
        # the screen's 10% noise it goes on to the full measurement
        ("successive_halving", [100.0, 99.0, 98.0, 97.0, 96.0, 95.0], 94.0, 0.1, False),
        ("successive_halving", [100.0, 99.0, 98.0, 97.0, 96.0, 95.0], 94.0, 0.0, True),
        ("successive_halving", [100.0, 99.0, 98.0, 97.0, 96.0, 95.0], 80.0, 0.1, True),
        ("hyperband", [100.0, 99.0, 98.0, 97.0, 96.0, 95.0], 94.0, 0.1, False),
    ],
)
def test_the_pruner_does_not_cut_a_point_within_the_screens_noise_of_the_best(
    pruner: str, screens: list[float], last: float, noise: float, pruned: bool
) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", pruner=make_pruner(pruner, 3, noise))
    dist = {"x": optuna.distributions.FloatDistribution(0.0, 1.0)}
    for value in screens:
        trial = study.ask(dist)
        trial.report(value, 1)
        trial.should_prune()  # the halving rule records each screen's rung when asked, as a trial's job does
        study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    trial = study.ask(dist)
    trial.report(last, 1)
    assert trial.should_prune() is pruned


# ---------------------------------------------------------------- the baseline's point as the best answer


def _opening(path: Path, capacity: float, high: float | None, runs: list[tuple[float, float, float]]) -> None:
    """A baseline's capacity.json: ``runs`` (level, margin, goodput tok/s) at output 2x the goodput."""
    points = [
        CapacityPoint(
            level=level,
            attempt=1,
            summary_file="x",
            met=margin >= 1,
            margin=margin,
            attainment=0.99,
            goodput_rps=1.0,
            goodput_tps=goodput,
            output_tps=2 * goodput,
            tps_per_user=None,
        )
        for level, margin, goodput in runs
    ]
    result = CapacityResult(
        candidate="baseline",
        profile="decode_heavy",
        mode="concurrency",
        unit="concurrent",
        slo="interactive",
        slo_text="",
        capacity=capacity,
        low=capacity,
        high=high,
        resolution=0.1,
        gpus=8,
        points=points,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    write_model(path, result)


@pytest.mark.parametrize(
    ("search", "level", "expected"),
    [
        # capacity: the opening's capacity search is the trial's full measurement, with its margin there
        (SearchConfig(objective="capacity"), 64.0, ([64.0], False, 1.25)),
        # goodput / tokens/s per GPU at the screen level: the opening's runs at that level (two: 800, 1000)
        (SearchConfig(objective="goodput"), 64.0, ([900.0], False, None)),
        (SearchConfig(objective="tps_per_gpu"), 64.0, ([225.0], False, None)),
        # a load level the opening's capacity search never ran: launched
        (SearchConfig(objective="goodput", load_level=50.0), 50.0, None),
        # a Pareto search: launched (its serial run's reuse is not implemented)
        (SearchConfig(objective="capacity", pareto=True), 64.0, None),
    ],
)
def test_the_baselines_point_reuses_the_openings_runs_where_they_measured_the_same(
    tmp_path: Path,
    search: SearchConfig,
    level: float,
    expected: tuple[list[float], bool, float | None] | None,
) -> None:
    path = tmp_path / "capacity.json"
    _opening(path, 64.0, 70.0, [(32.0, 2.0, 400.0), (64.0, 1.2, 800.0), (64.0, 1.3, 1000.0), (70.0, 0.9, 1)])
    outcome = opening_outcome(search, path, level, gpus=8)
    if expected is None:
        assert outcome is None
        return
    assert outcome is not None and outcome.launches == 0 and outcome.fidelity == "full"
    assert (outcome.values, outcome.at_least, outcome.margin) == expected
    assert "sweep's opening" in outcome.why


def _full(number: int, value: float, **kw: Any) -> TrialRecord:
    return TrialRecord(
        number=number,
        name=f"s_t{number:03d}",
        params={"k": number},
        state="complete",
        fidelity="full",
        values=[value],
        launches=0 if kw.get("baseline") else 1,
        **kw,
    )


@pytest.mark.parametrize(
    ("trials", "best", "baseline_best"),
    [
        # the baseline's point (trial 0) measures best: the current configuration is the answer
        ([_full(0, 120, baseline=True), _full(1, 100), _full(2, 110)], 0, True),
        # a point better than the baseline's is the one to confirm
        ([_full(0, 100, baseline=True), _full(1, 120)], 1, False),
        # a tie with the baseline below the ceiling: the point changes settings for nothing seen
        ([_full(0, 100, baseline=True), _full(1, 100)], 0, True),
        # a tie at the ceiling (both held the SLO at max_level): the larger SLO margin there wins...
        (
            [
                _full(0, 512, baseline=True, at_least=True, margin=1.0, attainment=1.0),
                _full(1, 512, at_least=True, margin=3.69, attainment=1.0),
            ],
            1,
            False,
        ),
        (
            [
                _full(0, 512, baseline=True, at_least=True, margin=3.69, attainment=1.0),
                _full(1, 512, at_least=True, margin=1.0, attainment=1.0),
            ],
            0,
            True,
        ),
        # ...then the attainment
        (
            [
                _full(0, 512, baseline=True, at_least=True, margin=2.0, attainment=0.97),
                _full(1, 512, at_least=True, margin=2.0, attainment=0.995),
            ],
            1,
            False,
        ),
        # a point that changes none of the baseline's settings is the baseline's configuration
        ([_full(1, 100), _full(2, 120)], 2, True),
    ],
)
def test_the_best_point_breaks_a_ceiling_tie_on_margin_and_may_be_the_baseline(
    trials: list[TrialRecord], best: int, baseline_best: bool
) -> None:
    record = SearchRecord(
        name="s", objective="capacity", directions=["maximize"], space_size=9, trials=trials
    )

    def changes(t: TrialRecord) -> int:
        return 0 if t.baseline or (t.number == 2 and t.values == [120]) else 1

    found = best_trial(record, changes)
    assert found is not None and found.number == best
    assert is_baseline(found, changes) is baseline_best
