"""The search (conf/search/, docs/search.md): Optuna asks for points, the sweep measures them as jobs.

Pipeline position: inside the sweep, between its opening (the baseline measured) and its close (restore,
validate, judge, report). The sweeper (:mod:`orchestrator.app.sweeper`) runs :class:`SearchRun` instead of
the jobs of the command line: each trial Optuna asks for is a point of the space, a candidate (the
baseline with the point's fields) launched as one job through Hydra's launcher and measured by
:func:`orchestrator.measure.trial.measure_trial`; a point pruned before anything starts, or asked again,
launches nothing. The search stops when its budget (launches, GPU-hours) is spent or the best estimate
stalls (:func:`stop_reason`). Its best point is written as a candidate file (``search/winner.yaml``) and
measured again as an ordinary candidate against the baseline; the gates' verdict on it, not the search's
estimate, decides (:func:`confirmation_lines`). Trials live in Optuna's RDB storage (``search/study.db``
by default): a resumed sweep reopens the study and goes on where it stopped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import optuna
import yaml

from contracts.layout import SweepPaths
from contracts.metrics import fmt_estimate
from contracts.results import CapacityResult, read_model
from contracts.schema import GauntletConfig
from contracts.search import SearchConfig, Space
from contracts.trials import Confirmation, SearchRecord, TrialRecord, Winner, read_search, write_search
from contracts.verdicts import SweepVerdict, decision_label
from orchestrator.config.secrets import revealed
from orchestrator.config.space import (
    FlagCheck,
    Pruned,
    candidate_at,
    changed_fields,
    point_overrides,
    prune,
)
from orchestrator.measure.trial import TrialOutcome, measured_capacity

#: How many points in a row the sampler may ask that launch nothing before the space counts as exhausted.
EXHAUSTED_AFTER = 64
#: The objective value an infeasible point is told (maximised objectives; a minimised one gets the largest).
WORST_MAX, WORST_MIN = 0.0, 1e12


@dataclass(frozen=True)
class TrialTicket:
    """What a trial's job needs to report to the pruner: the study's storage and the trial, the level."""

    storage: str
    study: str
    trial_id: int
    level: float
    pareto: bool
    #: The study's pruner (a loaded study gets Optuna's default pruner unless it is given again).
    pruner: str
    reduction_factor: int


def storage_url(search: SearchConfig, sweep_dir: Path) -> str:
    """``search.storage``, or the SQLite file in the sweep directory (``search/study.db``)."""
    if search.storage:
        return search.storage
    path = SweepPaths(sweep_dir).study
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path.resolve()}"


def directions(search: SearchConfig) -> list[Literal["maximize", "minimize"]]:
    return ["maximize", "minimize"] if search.pareto else ["maximize"]


def open_study(search: SearchConfig, storage: str) -> tuple[optuna.Study, list[optuna.trial.FrozenTrial]]:
    """Create the study, or load it (a resumed sweep); a trial a crash left running is marked failed and
    returned with the study."""
    sampler: optuna.samplers.BaseSampler
    if search.sampler == "random":
        sampler = optuna.samplers.RandomSampler(seed=search.seed)
    else:
        # Each trial sets its constraint (Trial.set_constraint: > 0 infeasible), which TPE learns from.
        sampler = optuna.samplers.TPESampler(seed=search.seed, n_startup_trials=search.startup_trials)
    pruner = make_pruner(search.pruner, search.reduction_factor)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        storage=revealed(storage),  # a URL's password put back only here, in memory
        study_name=search.name,
        directions=directions(search),
        sampler=sampler,
        pruner=pruner,
        load_if_exists=True,
    )
    left = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    for trial in left:
        study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
    return study, left


def make_pruner(name: str, reduction_factor: int) -> optuna.pruners.BasePruner:
    """The multi-fidelity rule: the screen (step 1) promotes a point to the full measurement (step 2)."""
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(
            min_resource=1, max_resource=2, reduction_factor=reduction_factor
        )
    if name == "successive_halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=reduction_factor)
    return optuna.pruners.NopPruner()


def distributions(space: Space) -> dict[str, optuna.distributions.BaseDistribution]:
    """Optuna's distribution of each dimension: a categorical of its values, or a float interval."""
    out: dict[str, optuna.distributions.BaseDistribution] = {}
    for dim in space.dimensions:
        if dim.finite:
            out[dim.name] = optuna.distributions.CategoricalDistribution(list(dim.values))
        else:
            assert dim.low is not None and dim.high is not None
            out[dim.name] = optuna.distributions.FloatDistribution(dim.low, dim.high, log=dim.log)
    return out


def reporter(ticket: TrialTicket) -> Callable[[int, float], bool]:
    """The pruner's question for a trial's job: report (step, value), then whether to stop here."""
    pruner = make_pruner(ticket.pruner, ticket.reduction_factor)
    study = optuna.load_study(study_name=ticket.study, storage=revealed(ticket.storage), pruner=pruner)
    trial = optuna.trial.Trial(study, ticket.trial_id)

    def report(step: int, value: float) -> bool:
        if ticket.pareto:
            return False  # Optuna prunes single objectives only
        trial.report(value, step)
        return trial.should_prune()

    return report


# ---------------------------------------------------------------- the rules (pure)


def stop_reason(record: SearchRecord, search: SearchConfig) -> str | None:
    """Why the search stops now (budget spent, improvement stalled), or None to go on."""
    if record.launches >= search.max_launches:
        return f"budget spent: {record.launches} of {search.max_launches} launches"
    if search.max_gpu_hours is not None and record.gpu_hours >= search.max_gpu_hours:
        return f"budget spent: {record.gpu_hours:.3g} of {search.max_gpu_hours:g} GPU-hours"
    if search.pareto:
        return None
    # Only a trial measured fully could have improved the best estimate: a point that did not start, a
    # screen the pruner stopped and a point asked again say nothing about a stall.
    since, best = 0, None
    for trial in record.trials:
        if trial.launches == 0 or trial.state != "complete" or not trial.values:
            continue
        value = trial.values[0]
        if best is None or value > best * (1 + search.min_improvement):
            best, since = value, 0
        else:
            since += 1
    if best is not None and since >= search.stall_trials:
        return (
            f"improvement stalled: {since} trials measured fully without a "
            f"{search.min_improvement:.0%} better estimate"
        )
    return None


def opening_line(search: SearchConfig, space: Space) -> str:
    """What a search sweep opens with: the search, its space's size and budget (not a sweep of one job)."""
    size = f"{space.size} configurations" if space.size is not None else "a continuous space"
    budget = f"{search.max_launches} launches"
    if search.max_gpu_hours is not None:
        budget += f" or {search.max_gpu_hours:g} GPU-hours"
    return (
        f"search {search.name} over {size} (budget: {budget}; stalled after {search.stall_trials} trials "
        "measured fully without a better estimate), its winner then confirmed against the baseline,"
    )


def best_trial(
    record: SearchRecord, changes: Callable[[TrialRecord], int] | None = None
) -> TrialRecord | None:
    """The trial to confirm: the highest first objective among fully measured trials (on the Pareto front
    when there is one); None when no trial was measured fully. Equal estimates (a capacity search answers
    on its grid of levels, so points near the optimum often tie) go to the point that changes the fewest of
    the baseline's settings (``changes``), then to the earliest trial: a setting that bought nothing the
    search could see is not a change to confirm."""
    full = [t for t in record.trials if t.state == "complete" and t.values and t.same_as is None]
    if record.pareto:
        full = [t for t in full if t.number in record.pareto]
    fewest = changes or (lambda _t: 0)
    return max(full, key=lambda t: ((t.values or [0.0])[0], t.at_least, -fewest(t), -t.number), default=None)


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
    )


def winner_yaml(
    search: SearchConfig, trial: TrialRecord, baseline_option: str, layouts: dict[str, Any]
) -> str:
    """The winner as a candidate file for conf/candidate/: the baseline's file with the point's fields."""
    fields: dict[str, Any] = {
        "name": trial.name,
        "description": f"search {search.name}, trial {trial.number}",
    }
    spec: dict[str, Any] = {}
    for key, value in trial.params.items():
        if key == "layout":
            fields.update(layouts[str(value)])
        elif key.startswith("speculative."):
            spec[key.split(".", 1)[1]] = value
        else:
            fields[key] = value
    if spec.get("method") == "off":
        fields["speculative"] = None
    elif spec:
        fields["speculative"] = spec
    estimate = fmt_estimate(trial.values, at_least=trial.at_least)
    head = (
        f"# The best point of search {search.name} (trial {trial.number}; the search's estimate: "
        f"{estimate}),\n# measured again against the baseline as an ordinary candidate. "
        "Drop it into conf/candidate/.\n"
    )
    body = yaml.safe_dump({"defaults": [baseline_option, "_self_"], **fields}, sort_keys=False)
    return head + body


# ---------------------------------------------------------------- the loop


#: Launches one job: its overrides and (for a trial) its ticket; returns the job's return value.
LaunchJob = Callable[[list[str], TrialTicket | None], Any]
#: Launches several trials' jobs at once (search.parallel > 1: a launcher that runs jobs side by side);
#: returns each job's return value, in order (an exception object for a job that failed).
LaunchBatch = Callable[[list[tuple[list[str], TrialTicket]]], list[Any]]
#: A trial asked and not yet measured: Optuna's trial, its point, its name.
Pending = tuple[optuna.trial.Trial, dict[str, Any], str]


class SearchRun:
    """One search inside a sweep: ask, measure as a job, tell, until the budget or the stall rule stops it;
    then the winner's overrides (its confirmation is the sweep's next job)."""

    def __init__(
        self,
        cfg: GauntletConfig,
        sweep_dir: Path,
        *,
        baseline_option: str,
        space: Space,
        flag_check: FlagCheck | None,
        launch_job: LaunchJob,
        say: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
        launch_batch: LaunchBatch | None = None,
    ) -> None:
        assert cfg.search is not None
        self.cfg, self.search, self.dir = cfg, cfg.search, sweep_dir
        self.baseline_option = baseline_option
        self.pruned: Pruned = prune(space, cfg, flag_check)
        self.launch_job, self.say, self.clock = launch_job, say, clock
        self.launch_batch = launch_batch

    def _changes(self, trial: TrialRecord) -> int:
        """How many of the baseline's settings the trial's point changes (the tie-break of best_trial)."""
        base = self.cfg.baseline
        try:
            point = candidate_at(base, trial.params, self.pruned.space.layouts, base.name)
        except ValueError:
            return len(trial.params)
        return len(changed_fields(base, point))

    def level(self) -> tuple[float, float | None]:
        """The screen's load level (search.load_level, else the baseline's capacity, else capacity.start)
        and the baseline's capacity when it was measured."""
        path = SweepPaths(self.dir).candidate(self.cfg.baseline.name).capacity
        base = read_model(path, CapacityResult).capacity if path.exists() else None
        if self.search.load_level is not None:
            return self.search.load_level, base
        return (base if base else self.cfg.capacity.start), base

    def run(self) -> list[str] | None:
        search = self.search
        level, base = self.level()
        record = read_search(self.dir) or SearchRecord(
            name=search.name,
            objective=search.objective,
            directions=directions(search),
            space_size=self.pruned.space.size,
            max_launches=search.max_launches,
            max_gpu_hours=search.max_gpu_hours,
        )
        record.space_size = _size(self.pruned)
        record.pruned, record.baseline, record.stopped = self.pruned.pruned, base, ""
        storage = storage_url(search, self.dir)
        study, interrupted = open_study(search, storage)
        dists = distributions(self.pruned.space)
        if record.trials or interrupted:
            self.say(f"search: resuming study {search.name} ({len(record.trials)} trial(s) recorded)")
        done = {t.number for t in record.trials}
        for left in interrupted:  # the sweep stopped during it: a launch spent, nothing learnt
            if left.number in done:
                continue
            name = f"{search.name}_t{left.number:03d}"
            launched = SweepPaths(self.dir).trial(name).spec.exists()
            item = TrialRecord(
                number=left.number,
                name=name,
                params={**self.pruned.space.fixed, **left.params},
                state="failed",
                why="interrupted: the sweep stopped during this trial",
                fidelity="start" if launched else "none",
                launches=1 if launched else 0,
            )
            record.trials.append(item)
            record.launches += item.launches
            done.add(left.number)
        seen = {_key(t.params): t for t in record.trials if t.same_as is None and t.state != "failed"}
        idle = 0
        #: Trials measured at once (search.parallel; 1: one after the other), and those asked meanwhile.
        width = max(1, search.parallel) if self.launch_batch is not None else 1
        pending: list[Pending] = []
        echoes: list[Pending] = []
        while (reason := stop_reason(record, search)) is None:
            if idle >= EXHAUSTED_AFTER:
                reason = f"the space is exhausted: {EXHAUSTED_AFTER} points asked in a row launched nothing"
                break
            trial = study.ask(dists)
            if trial.number in done:  # a resumed study numbers on; a record entry is never overwritten
                continue
            point = {**self.pruned.space.fixed, **trial.params}
            name = f"{search.name}_t{trial.number:03d}"
            refused = self.pruned.refusal(point)
            if refused is not None:
                outcome = TrialOutcome(state="infeasible", why=f"pruned before start: {refused}")
                self._tell(study, trial, outcome)
                record.trials.append(trial_record(trial.number, name, point, outcome, 0.0))
                idle += 1
            elif (earlier := seen.get(_key(point))) is not None:
                self._reuse(study, record, (trial, point, name), earlier)
                idle += 1
            elif any(_key(p) == _key(point) for _, p, _ in pending):
                echoes.append((trial, point, name))  # a point of the batch in flight: its result, after it
                idle += 1
            else:
                idle = 0
                pending.append((trial, point, name))
                room = search.max_launches - record.launches  # a batch never launches past the budget
                if len(pending) < min(width, room):
                    continue
                self._flush(study, record, pending, echoes, seen, storage=storage, level=level)
            write_search(self.dir, record)
        if pending:  # the space ran out of new points while a batch was filling
            self._flush(study, record, pending, echoes, seen, storage=storage, level=level)
        record.stopped = reason
        if search.pareto:
            record.pareto = [
                t.number for t in study.best_trials if t.number in {x.number for x in record.trials}
            ]
        best = best_trial(record, self._changes)
        size = record.space_size
        of = f"{size}" if size is not None else "a continuous space of"
        self.say(f"search: launched {record.distinct_launched} of {of} configurations ({reason})")
        if best is None:
            write_search(self.dir, record)
            self.say("search: no trial was measured fully: nothing to confirm, the baseline stays")
            return None
        paths = SweepPaths(self.dir)
        paths.winner.write_text(winner_yaml(search, best, self.baseline_option, self.pruned.space.layouts))
        record.winner = Winner(
            name=best.name,
            trial=best.number,
            params=best.params,
            estimate=best.values or [],
            yaml_file=paths.winner.relative_to(self.dir).as_posix(),
            at_least=best.at_least,
        )
        write_search(self.dir, record)
        self.say(
            f"search: best point {best.name} (estimate {_values(best)}): measured again against the baseline "
            f"({paths.winner.relative_to(self.dir).as_posix()})"
        )
        return point_overrides(
            best.params, self.pruned.space.layouts, baseline_option=self.baseline_option, name=best.name
        )

    def _reuse(self, study: optuna.Study, record: SearchRecord, asked: Pending, earlier: TrialRecord) -> None:
        """Tell and record a point asked again: the earlier trial's result, nothing launched."""
        trial, point, name = asked
        outcome = TrialOutcome(
            state=earlier.state,
            why=f"same point as trial {earlier.number}" + (f": {earlier.why}" if earlier.why else ""),
            fidelity=earlier.fidelity,
            values=earlier.values,
            screen=earlier.screen,
            at_least=earlier.at_least,
        )
        self._tell(study, trial, outcome, reused=True)
        item = trial_record(trial.number, name, point, outcome, 0.0)
        item.same_as = earlier.number
        record.trials.append(item)

    def _flush(
        self,
        study: optuna.Study,
        record: SearchRecord,
        pending: list[Pending],
        echoes: list[Pending],
        seen: dict[str, TrialRecord],
        *,
        storage: str,
        level: float,
    ) -> None:
        """Measure the pending trials (side by side when there are several), tell and record each, then the
        points asked again meanwhile; both lists are emptied."""
        for (trial, point, name), (outcome, wall) in zip(
            pending, self._measure(pending, storage, level), strict=True
        ):
            self._tell(study, trial, outcome)
            item = trial_record(trial.number, name, point, outcome, wall)
            item.gpu_hours = outcome.gpus * wall * self.cfg.host.time_scale / 3600
            record.trials.append(item)
            record.launches += outcome.launches
            record.gpu_hours += item.gpu_hours
            seen[_key(point)] = item
            self.say(_trial_line(item, self.search))
        for asked in echoes:
            self._reuse(study, record, asked, seen[_key(asked[1])])
        record.trials.sort(key=lambda t: t.number)
        pending.clear()
        echoes.clear()

    def _measure(self, batch: list[Pending], storage: str, level: float) -> list[tuple[TrialOutcome, float]]:
        """Each trial's outcome and wall seconds (a batch's trials share its wall time: they ran together)."""
        search = self.search
        jobs = []
        for trial, point, name in batch:
            overrides = point_overrides(
                point, self.pruned.space.layouts, baseline_option=self.baseline_option, name=name
            )
            ticket = TrialTicket(
                storage,
                search.name,
                trial._trial_id,
                level,
                search.pareto,
                search.pruner,
                search.reduction_factor,
            )
            jobs.append((overrides, ticket))
        start = self.clock()
        returned: list[Any]
        if self.launch_batch is not None and len(jobs) > 1:
            try:
                returned = self.launch_batch(jobs)
            except Exception as exc:  # the launcher itself failed: every trial of the batch failed
                returned = [exc] * len(jobs)
        else:
            returned = []
            for overrides, ticket in jobs:
                try:
                    returned.append(self.launch_job(overrides, ticket))
                except Exception as exc:  # a job that failed is a failed trial, never the sweep's end
                    returned.append(exc)
        wall = self.clock() - start
        return [(_outcome(value), wall) for value in returned]

    def _tell(
        self, study: optuna.Study, trial: optuna.trial.Trial, outcome: TrialOutcome, *, reused: bool = False
    ) -> None:
        """Tell Optuna what a trial found (``reused``: an earlier trial's, whose screen is reported here:
        a measured trial's job reported its own)."""
        state = optuna.trial.TrialState
        trial.set_constraint("starts", 1.0 if outcome.state == "infeasible" else 0.0)
        if outcome.state == "complete" and outcome.values:
            study.tell(trial, outcome.values)
        elif outcome.state == "pruned":
            if reused and outcome.screen is not None and not self.search.pareto:
                trial.report(outcome.screen, 1)
            study.tell(trial, state=state.PRUNED)
        elif outcome.state == "infeasible":
            worst = [WORST_MAX, WORST_MIN][: len(directions(self.search))]
            study.tell(trial, worst)
        else:
            study.tell(trial, state=state.FAIL)


def _outcome(value: Any) -> TrialOutcome:
    """A job's return value as a trial's outcome: a job that raised, or returned anything else, failed."""
    if isinstance(value, TrialOutcome):
        return value
    if isinstance(value, BaseException):
        return TrialOutcome(state="failed", why=f"{type(value).__name__}: {value}"[:300], launches=1)
    return TrialOutcome(state="failed", why=f"the job returned {value!r}"[:300], launches=1)


def _key(point: dict[str, Any]) -> str:
    return json.dumps(point, sort_keys=True, default=str)


def _size(pruned: Pruned) -> int | None:
    """Points of the space as declared: those left, and those the removed layouts stood for."""
    size = pruned.space.size
    return None if size is None else size + _layout_pruned(pruned)


def _layout_pruned(pruned: Pruned) -> int:
    """Points the removed layouts stood for (the space as declared counts them)."""
    others = 1
    for dim in pruned.space.dimensions:
        if dim.name != "layout":
            others *= len(dim.values) if dim.finite else 1
    return others * sum(1 for p in pruned.pruned if list(p.params) == ["layout"])


def _values(trial: TrialRecord) -> str:
    return fmt_estimate(trial.values, at_least=trial.at_least)


def _trial_line(trial: TrialRecord, search: SearchConfig) -> str:
    objective = f"{search.objective}, serial e2e s" if search.pareto else search.objective
    what = f"{objective} estimate {_values(trial)}" if trial.values else trial.why
    return f"search: trial {trial.number} {trial.name}: {trial.state} at {trial.fidelity} ({what})"


def confirmation_lines(sweep_dir: Path, verdicts: SweepVerdict) -> list[str]:
    """After the judge: the winner's verdict (the confirmation's, not the search's estimate), recorded in
    trials.json; only a KEEP is the recommendation."""
    record = read_search(sweep_dir)
    if record is None or record.winner is None:
        return []
    name = record.winner.name
    verdict = next((v for v in verdicts.verdicts if v.candidate == name), None)
    if verdict is None:
        record.confirmation = Confirmation(decision="incomplete", reason="the confirmation was not measured")
        write_search(sweep_dir, record)
        return [f"search: winner {name}: INCOMPLETE (its confirmation was not measured)"]
    capacity, at_least = measured_capacity(SweepPaths(sweep_dir).candidate(name).capacity)
    record.confirmation = Confirmation(
        decision=verdict.decision, reason=verdict.reason, capacity=capacity, at_least=at_least
    )
    write_search(sweep_dir, record)
    label = decision_label(verdict.decision)
    measured = f", confirmation's capacity {fmt_estimate([capacity], at_least=at_least)}" if capacity else ""
    advice = (
        f"recommended: {record.winner.yaml_file}"
        if verdict.decision == "keep"
        else "not recommended: only a KEEP is; the baseline stays"
    )
    estimate = fmt_estimate(record.winner.estimate, at_least=record.winner.at_least)
    return [f"search: winner {name}: {label} (search's estimate {estimate}{measured}; {advice})"]
