"""A search's record, ``search/trials.json``: every trial, the budget spent, the winner, its confirmation.

Pipeline position: a shared contract between the sweep's search (:mod:`orchestrator.search`, the one
writer) and the report, which reads it and decides nothing. Validated on write and read. A trial's
figure is the search's *estimate*; the verdict on the winner is the confirmation's (:class:`Confirmation`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from contracts.files import read_model, write_model
from contracts.layout import SweepPaths
from contracts.metrics import fmt_estimate

TrialState = Literal["complete", "pruned", "infeasible", "failed", "running"]
#: How far a trial was measured: nothing (pruned before it started), its start, the screening probe,
#: the full capacity search.
Fidelity = Literal["none", "start", "screen", "full"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PrunedPoint(_Model):
    """A point (or a whole value) ruled out before anything started, and why."""

    params: dict[str, Any]
    why: str


class TrialRecord(_Model):
    """One trial: its point, what happened, how far it was measured, its estimate and what it cost."""

    number: int
    name: str
    params: dict[str, Any]
    state: TrialState
    why: str = ""
    fidelity: Fidelity = "none"
    #: The objective value(s) the trial reached: an estimate (a screen's, or one capacity search's).
    values: list[float] | None = None
    #: The screening probe's estimate (level x SLO margin at the screen level).
    screen: float | None = None
    launches: int = 0
    wall_s: float = 0.0
    #: Its charge to the budget: GPUs x its own host seconds, plus its node baseline's (search/budget.py).
    gpu_hours: float = 0.0
    #: Launches of its node's baseline measured first for it (a parallel search), charged with it.
    baseline_launches: int = 0
    #: The same point as this earlier trial: its result reused, nothing launched.
    same_as: int | None = None
    #: The first value is a floor: the capacity search held the SLO at every level it tried ("≥ 16").
    at_least: bool = False
    #: The baseline's own point, asked first: its result is the sweep's opening measurement of the
    #: baseline when there is one (nothing launched); never the winner (it would be confirmed against itself).
    baseline: bool = False
    #: The startup class of a point that did not start ("out-of-memory", ...; launch.failures), else "".
    startup: str = ""
    #: At the capacity found: the SLO margin and attainment (what breaks a tie at the capacity ceiling).
    margin: float | None = None
    attainment: float | None = None
    #: Each gated requirement ruled on at the trial's screen (orchestrator.measure.trial_constraints), by
    #: name ("serial latency", "prefill_10k TTFT"): its violation size, the one figure Optuna's
    #: ``set_constraint`` is told, the console, trials.json and the report show: > 0 broken by that
    #: fraction beyond the gates' limit (+0.12: 12% beyond), <= 0 met. Empty: no requirement was ruled on
    #: (a point that did not start, a record written before constraints; the report then shades only the
    #: points that did not start).
    constraints: dict[str, float] = {}

    @property
    def broken(self) -> list[str]:
        """The requirements this trial's screen broke (a violation above 0), in recorded order."""
        return [name for name, violation in self.constraints.items() if violation > 0]


class Confirmation(_Model):
    """A finalist measured again as an ordinary candidate: the gates' verdict on it."""

    decision: str
    #: The finalist confirmed (empty in records written before several were: the winner).
    name: str = ""
    reason: str = ""
    #: Its capacity measured on the fresh launch (None: not measured, or not a capacity objective).
    capacity: float | None = None
    at_least: bool = False  # that capacity is a floor: the SLO held at every level the search tried


class Winner(_Model):
    """The search's best point, as a candidate; its estimate is the trial's, not a verdict."""

    name: str
    trial: int
    params: dict[str, Any]
    estimate: list[float]
    yaml_file: str
    at_least: bool = False  # the estimate's first value is a floor (TrialRecord.at_least)


class Tradeoff(_Model):
    """What the search found when no confirmed point is a KEEP (or to say what a KEEP cost): the best
    estimate and the gated requirements it breaks, the best point that met every one, what to relax."""

    #: The trial with the best estimate among those whose screen broke a constraint (None: none was
    #: better than the best feasible point), its estimate and its broken constraints (name -> size).
    best_name: str | None = None
    best_estimate: float | None = None
    best_broken: dict[str, float] = {}
    #: The best trial that met every constraint (the first finalist), its estimate and its ratio to the
    #: baseline's figure (None: no baseline figure, or not the capacity objective).
    feasible_name: str | None = None
    feasible_estimate: float | None = None
    feasible_gain: float | None = None
    #: What a user could relax to take the best estimate: one sentence per gate setting.
    relax: list[str] = []


class SearchRecord(_Model):
    """``search/trials.json``: the space, every trial, the budget spent, the winner and its confirmation."""

    name: str
    objective: str
    directions: list[Literal["maximize", "minimize"]]
    space_size: int | None
    pruned: list[PrunedPoint] = []
    trials: list[TrialRecord] = []
    launches: int = 0
    max_launches: int = 0
    gpu_hours: float = 0.0
    max_gpu_hours: float | None = None
    #: Why the search stopped (budget spent, stalled, space exhausted); empty while it runs.
    stopped: str = ""
    #: The baseline's figure the screen was set from (its capacity at the SLO), when known.
    baseline: float | None = None
    winner: Winner | None = None
    #: Multi-objective: the trial numbers on the Pareto front.
    pareto: list[int] = []
    #: The best point found is the baseline's own configuration: nothing confirmed, nothing to change.
    best_is_baseline: bool = False
    #: That best point's trial (None: not recorded, an older record).
    best_trial: int | None = None
    confirmation: Confirmation | None = None
    #: The distinct feasible points confirmed, in the order they were (best estimate first: the first
    #: search.confirm_top together, then each runner-up after no KEEP); ``winner`` is the first. Empty in
    #: records written before several were confirmed.
    finalists: list[Winner] = []
    #: Each finalist's confirmation after the judge, in the finalists' order (``confirmation``: the
    #: recommended one's, else the first's).
    confirmations: list[Confirmation] = []
    #: Launches (and GPU-hours) of the confirmations, counted in ``launches`` and ``gpu_hours`` too: the
    #: budget holds the search's trials and its confirmations.
    confirm_launches: int = 0
    #: The recommendation: the best confirmed KEEP's name; None: no finalist was a KEEP.
    recommended: str | None = None
    #: The trade-off the search found (orchestrator.search.confirm), written at the search's end.
    tradeoff: Tradeoff | None = None
    #: This sweep's id in its study: each trial it asks is tagged with it, so a resume fails only the
    #: trials this sweep left running (a shared study's other sweeps run their own); "" before the study.
    sweep_id: str = ""

    @property
    def distinct_launched(self) -> int:
        """Configurations launched (a trial that reused an earlier one's point launched nothing)."""
        return sum(1 for t in self.trials if t.launches > 0)


def best_keep(finalists: Sequence[Winner], decisions: Mapping[str, str], retained: str) -> Winner | None:
    """The recommendation: the finalist the gates retain (``retained``, ``verdicts.json``'s: their best
    KEEP under load, by loaded output tokens/s) when it is a finalist they KEEP (``decisions``: name ->
    decision); None otherwise. One rule: the search's console, the report, ``status``, ``promote`` and
    ``run.promote_keep`` all name the gates' retained configuration, so two KEEPs are never told apart
    two ways."""
    return next((w for w in finalists if w.name == retained and decisions.get(w.name) == "keep"), None)


def current_best_words(record: SearchRecord) -> str:
    """What the search says when its best point is the baseline's configuration (``best_is_baseline``):
    the console's last search line (``search: ...``) and the report's sentence, in the same words.

    >>> r = SearchRecord(name="s", objective="capacity", directions=["maximize"], space_size=2, best_trial=0,
    ...     trials=[TrialRecord(number=0, name="s_t000", params={}, state="complete", values=[120.0])])
    >>> current_best_words(r)[45:]
    '(estimate 120, trial 0): nothing to confirm, the baseline stays'
    """
    best = next((t for t in record.trials if t.number == record.best_trial), None)
    where = (
        f" (estimate {fmt_estimate(best.values, at_least=best.at_least)}, trial {best.number})"
        if best
        else ""
    )
    return f"your current configuration is the best found{where}: nothing to confirm, the baseline stays"


def read_search(sweep: Path) -> SearchRecord | None:
    """The sweep's search record, validated; None when the sweep ran no search."""
    path = SweepPaths(sweep).trials
    return read_model(path, SearchRecord) if path.exists() else None


def write_search(sweep: Path, record: SearchRecord) -> None:
    """Write ``search/trials.json`` (validated, atomically)."""
    path = SweepPaths(sweep).trials
    path.parent.mkdir(parents=True, exist_ok=True)
    write_model(path, record)
