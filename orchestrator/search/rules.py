"""The search's rules (pure): when it stops, which trial is confirmed, the winner's candidate file.

Pipeline position: asked by the run loop (:mod:`.loop`) after each trial and at its end. The search stops
when its budget (launches, GPU-hours) is spent or the best estimate stalls (:func:`stop_reason`; a space
that keeps giving points that launch nothing is exhausted after :data:`EXHAUSTED_AFTER` of them). Its best
point (:func:`best_trial`) is written as a candidate file (``search/winner.yaml``, :func:`winner_yaml`: the
point's encoding, :mod:`.point`) and measured again as an ordinary candidate against the baseline.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import yaml

from contracts.metrics import fmt_estimate
from contracts.schema import CandidateConfig
from contracts.search import SearchConfig
from contracts.trials import SearchRecord, TrialRecord
from orchestrator.measure.trial import TrialOutcome
from orchestrator.search.budget import trials_budget_spent
from orchestrator.search.point import as_file_fields, encode

#: How many points in a row the sampler may ask that launch nothing before the space counts as exhausted.
EXHAUSTED_AFTER = 64


def stop_reason(
    record: SearchRecord,
    search: SearchConfig,
    untried: int = 0,
    *,
    need: int = 1,
    held: int = 0,
    each: int = 1,
) -> str | None:
    """Why the search's trials stop now (their budget spent: the budget less what the confirmations keep,
    cannot pay for the next trial, ``need`` launches with its node's baseline, beside the ``held`` launches
    of a batch still filling, ``each`` launches kept per confirmation, :mod:`.budget`; improvement
    stalled), or None to go on. A stall waits while
    ``untried`` values of the space's lists have no trial yet (:mod:`.coverage`: the loop asks them)."""
    if (spent := trials_budget_spent(record, search, need, held, each)) is not None:  # paid before it starts
        return spent
    stalled = stall_reason(record, search)
    return stalled if stalled is not None and untried == 0 else None


def stall_reason(record: SearchRecord, search: SearchConfig) -> str | None:
    """Why the best estimate has stalled, or None (a Pareto search never stalls: it stops on its budget)."""
    if search.pareto:
        return None
    # Only a trial measured fully could have improved the best estimate: a point that did not start, a
    # screen the pruner stopped and a point asked again say nothing about a stall (the baseline's point,
    # measured by the sweep's opening, is the first best estimate).
    since, best = 0, None
    sign = objective_sign(record)
    for trial in record.trials:
        if trial.same_as is not None or trial.state != "complete" or not trial.values:
            continue
        value = trial.values[0]
        if best is None or sign * (value - best) > abs(best) * search.min_improvement:
            best, since = value, 0
        else:
            since += 1
    if best is not None and since >= search.stall_trials:
        return (
            f"improvement stalled: {since} trials measured fully without a "
            f"{search.min_improvement:.0%} better estimate"
        )
    return None


def ranked_trials(record: SearchRecord) -> list[TrialRecord]:
    """The trials a best point is chosen from: measured fully, not a repeat of a measured point, and on
    the Pareto front when there is one."""
    full = [t for t in record.trials if t.state == "complete" and t.values and t.same_as is None]
    return [t for t in full if t.number in record.pareto] if record.pareto else full


def best_trial(
    record: SearchRecord, changes: Callable[[TrialRecord], int] | None = None
) -> TrialRecord | None:
    """The best point: the highest first objective among fully measured trials (on the Pareto front when
    there is one), the baseline's own point among them; None when no trial was measured fully. Two points
    at the capacity ceiling (both held the SLO at max_level: ``at_least``) are told apart by their SLO
    margin there, then their attainment (:func:`ceiling_key`). Equal estimates (a capacity search answers
    on its grid of levels, so points near the optimum often tie) go to the point that changes the fewest
    of the baseline's settings (``changes``; the baseline's point changes none), then to the earliest
    trial: a setting that bought nothing the search could see is not a change to confirm. When the best
    is the baseline's configuration (:func:`is_baseline`) there is nothing to confirm."""
    full = ranked_trials(record)
    fewest = changes or (lambda _t: 0)
    sign = objective_sign(record)
    return max(
        full,
        key=lambda t: (sign * (t.values or [0.0])[0], t.at_least, *ceiling_key(t), -fewest(t), -t.number),
        default=None,
    )


def objective_sign(record: SearchRecord) -> float:
    """+1 where the first objective is maximised, -1 where minimised ($/Mtok): "better" either way."""
    return -1.0 if record.directions and record.directions[0] == "minimize" else 1.0


def ceiling_key(trial: TrialRecord) -> tuple[float, float]:
    """What breaks a tie at the capacity ceiling (the SLO held at max_level: no higher level was tried):
    the SLO margin there, then the attainment; nothing (0, 0) below the ceiling, where the capacity
    search's grid, not a margin, is the measurement."""
    if not trial.at_least:
        return 0.0, 0.0
    return (trial.margin or 0.0), (trial.attainment or 0.0)


def is_baseline(trial: TrialRecord, changes: Callable[[TrialRecord], int] | None = None) -> bool:
    """Whether a trial's point is the baseline's configuration (its own point, or one that changes none of
    its settings): confirming it would measure the configuration against itself."""
    return trial.baseline or (changes is not None and changes(trial) == 0)


def trial_record(
    number: int, name: str, point: dict[str, Any], outcome: TrialOutcome, wall_s: float
) -> TrialRecord:
    return TrialRecord(
        number=number,
        name=name,
        params=point,
        state=outcome.state,
        why=outcome.why,
        fidelity=outcome.fidelity,
        values=outcome.values,
        screen=outcome.screen,
        launches=outcome.launches,
        wall_s=round(wall_s, 3),
        at_least=outcome.at_least,
        startup=outcome.startup,
        margin=outcome.margin,
        attainment=outcome.attainment,
        constraints=dict(outcome.constraints),
    )


def winner_yaml(
    search: SearchConfig,
    trial: TrialRecord,
    baseline_option: str,
    layouts: Mapping[str, Mapping[str, Any]],
    baseline: CandidateConfig,
) -> str:
    """The winner as a candidate file for conf/candidate/: the baseline's file with the point's fields
    (the point's encoding, :func:`orchestrator.search.point.encode`, as a file's fields)."""
    fields: dict[str, Any] = {
        "name": trial.name,
        "description": f"search {search.name}, trial {trial.number}",
        **as_file_fields(encode(trial.params, layouts, baseline)),
    }
    estimate = fmt_estimate(trial.values, at_least=trial.at_least)
    head = (
        f"# The best point of search {search.name} (trial {trial.number}; the search's estimate: "
        f"{estimate}),\n# measured again against the baseline as an ordinary candidate. "
        "Drop it into conf/candidate/.\n"
    )
    body = yaml.safe_dump({"defaults": [baseline_option, "_self_"], **fields}, sort_keys=False)
    return head + body
