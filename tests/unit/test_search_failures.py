"""Failures that teach and cost less (issue 43, items 4 and 11): a server lost under load is infeasible,
a screen within its noise of the best is not cut, the memory probe, the stall that must have screened
every value, and the baseline's point as the best answer."""

from __future__ import annotations

import optuna
import pytest

from contracts.results import WatchEvent
from orchestrator.measure.trial import DIED_UNDER_LOAD, TrialOutcome, unfinished
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
