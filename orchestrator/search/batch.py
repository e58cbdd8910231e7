"""A batch of trials flushed: launched (side by side when there are several), told to Optuna, recorded.

Pipeline position: the second half of the run loop (:mod:`.loop` asks for the next point; here the points
it gathered are measured). Each trial is a job the sweep's launcher runs (``LaunchJob``, or ``LaunchBatch``
for ``search.parallel`` > 1), measured by :func:`orchestrator.measure.trial.measure_trial` in that job; a
job that raised, or returned anything but a :class:`~orchestrator.measure.trial.TrialOutcome`, is a failed
trial, never the sweep's end. A point asked again (:attr:`Batch.seen`), or asked while its twin is in flight
(:attr:`Batch.echoes`), takes the earlier trial's result and launches nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from contracts.search import SearchConfig
from contracts.trials import SearchRecord, TrialRecord
from orchestrator.measure.trial import TrialOutcome
from orchestrator.search.budget import trial_cost
from orchestrator.search.lines import trial_line
from orchestrator.search.point import Point
from orchestrator.search.rules import trial_record
from orchestrator.search.study import Asked, SearchStudy, TrialTicket

#: Launches one job: its overrides and (for a trial) its ticket; returns the job's return value.
LaunchJob = Callable[[list[str], TrialTicket | None], Any]
#: Launches several trials' jobs at once (search.parallel > 1: a launcher that runs jobs side by side);
#: returns each job's return value, in order (an exception object for a job that failed).
LaunchBatch = Callable[[list[tuple[list[str], TrialTicket]]], list[Any]]


@dataclass(frozen=True)
class Pending:
    """A trial asked and not yet measured: Optuna's trial, its point, its name."""

    asked: Asked
    point: Point
    name: str


@dataclass
class Seams:
    """How a batch's jobs are launched and timed, and where its lines go."""

    launch_job: LaunchJob
    launch_batch: LaunchBatch | None
    say: Callable[[str], None]
    clock: Callable[[], float]
    #: A point's job overrides, given its name (the point's encoding, :mod:`.point`).
    overrides: Callable[[Point, str], list[str]]


class Batch:
    """The trials waiting for their launch (``pending``), the points asked again meanwhile (``echoes``),
    and the points measured so far (``seen``: a point asked again takes its result)."""

    def __init__(
        self,
        search: SearchConfig,
        study: SearchStudy,
        record: SearchRecord,
        seams: Seams,
        *,
        level: float,
        time_scale: float,
    ) -> None:
        self.search, self.study, self.record, self.seams = search, study, record, seams
        self.level, self.time_scale = level, time_scale
        self.pending: list[Pending] = []
        self.echoes: list[Pending] = []
        #: The baseline's own point (:func:`orchestrator.search.point.baseline_point`), as a key, or None.
        self.baseline: str | None = None
        self.seen = {key(t.params): t for t in record.trials if t.same_as is None and t.state != "failed"}

    def earlier(self, point: Point) -> TrialRecord | None:
        """The trial that measured ``point`` already, or None."""
        return self.seen.get(key(point))

    def in_flight(self, point: Point) -> bool:
        return any(key(p.point) == key(point) for p in self.pending)

    def told(self, asked: Pending, outcome: TrialOutcome, *, baseline: bool = False) -> TrialRecord:
        """Tell and record a point that launches nothing (pruned before start, or the baseline's point
        measured by the sweep's opening)."""
        self.study.tell(asked.asked, outcome)
        item = trial_record(asked.asked.number, asked.name, asked.point, outcome, 0.0)
        item.baseline = baseline
        self.record.trials.append(item)
        if baseline:
            self.seen[key(asked.point)] = item
            self.seams.say(trial_line(item, self.search))
        return item

    def reuse(self, asked: Pending, earlier: TrialRecord) -> None:
        """Tell and record a point asked again: the earlier trial's result, nothing launched."""
        outcome = TrialOutcome(
            state=earlier.state,
            why=f"same point as trial {earlier.number}" + (f": {earlier.why}" if earlier.why else ""),
            fidelity=earlier.fidelity,
            values=earlier.values,
            screen=earlier.screen,
            at_least=earlier.at_least,
            constraints=dict(earlier.constraints),
        )
        self.study.tell(asked.asked, outcome, reused=True)
        item = trial_record(asked.asked.number, asked.name, asked.point, outcome, 0.0)
        item.same_as = earlier.number
        self.record.trials.append(item)

    def flush(self) -> None:
        """Measure the pending trials (side by side when there are several), tell and record each, then
        the points asked again meanwhile; both lists are emptied."""
        record = self.record
        for pending, (outcome, wall) in zip(self.pending, self._measure(), strict=True):
            self.study.tell(pending.asked, outcome)
            item = trial_record(pending.asked.number, pending.name, pending.point, outcome, wall)
            cost = trial_cost(outcome, wall, self.time_scale)  # its own share, its node baseline's too
            item.gpu_hours, item.baseline_launches = cost.gpu_hours, outcome.baseline_launches
            item.baseline = key(pending.point) == self.baseline
            record.trials.append(item)
            record.launches += cost.launches
            record.gpu_hours += item.gpu_hours
            self.seen[key(pending.point)] = item
            self.seams.say(trial_line(item, self.search))
        for echo in self.echoes:
            self.reuse(echo, self.seen[key(echo.point)])
        record.trials.sort(key=lambda t: t.number)
        self.pending.clear()
        self.echoes.clear()

    def _measure(self) -> list[tuple[TrialOutcome, float]]:
        """Each trial's outcome and wall seconds (a batch's trials share its wall time: they ran together)."""
        seams = self.seams
        jobs = [
            (seams.overrides(p.point, p.name), self.study.ticket(p.asked, self.level)) for p in self.pending
        ]
        start = seams.clock()
        returned: list[Any]
        if seams.launch_batch is not None and len(jobs) > 1:
            try:
                returned = seams.launch_batch(jobs)
            except Exception as exc:  # the launcher itself failed: every trial of the batch failed
                returned = [exc] * len(jobs)
        else:
            returned = []
            for overrides, ticket in jobs:
                try:
                    returned.append(seams.launch_job(overrides, ticket))
                except Exception as exc:  # a job that failed is a failed trial, never the sweep's end
                    returned.append(exc)
        wall = seams.clock() - start
        return [(outcome_of(value), wall) for value in returned]


def outcome_of(value: Any) -> TrialOutcome:
    """A job's return value as a trial's outcome: a job that raised, or returned anything else, failed."""
    if isinstance(value, TrialOutcome):
        return value
    if isinstance(value, BaseException):
        return TrialOutcome(state="failed", why=f"{type(value).__name__}: {value}"[:300], launches=1)
    return TrialOutcome(state="failed", why=f"the job returned {value!r}"[:300], launches=1)


def key(point: Point) -> str:
    """A point as a key: two points are the same when their fields and values are."""
    return json.dumps(point, sort_keys=True, default=str)
