"""The search's run loop: the next point to launch, asked of Optuna, until a rule stops it; then the winner.

Pipeline position: inside the sweep, between its opening (the baseline measured) and its close (restore,
validate, judge, report). The sweeper (:mod:`orchestrator.app.sweeper`) runs :class:`SearchRun` instead of
the jobs of the command line. :meth:`SearchRun.next_point` asks the study (:mod:`.study`) until it draws a
point to launch: a point pruned before anything starts (:mod:`.prune`), or asked again, is told and
recorded there and launches nothing. The points it gathers go out as a batch (:mod:`.batch`: one job each,
``search.parallel`` side by side). The loop ends on :func:`~orchestrator.search.rules.stop_reason` or an
exhausted space, its trials' share of the budget spent (:mod:`.budget`: the confirmations' launches are
kept). Then :meth:`SearchRun.confirm`: the best ``search.confirm_top`` distinct feasible points
(:func:`~orchestrator.search.confirm.finalists`) are written as candidate files (``search/winner.yaml``,
then ``search/<name>.yaml``) and measured again together, each as an ordinary candidate against the
baseline, charged to the same budget; while the gates KEEP none of them and the budget lasts, the
runner-up is confirmed next, one at a time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contracts.files import read_model
from contracts.layout import SweepPaths
from contracts.pipeline import gpus_held
from contracts.results import CapacityResult
from contracts.schema import GauntletConfig
from contracts.search import Space
from contracts.trials import SearchRecord, TrialRecord, Winner, read_search, write_search
from orchestrator.measure.trial import TrialOutcome
from orchestrator.search.batch import Batch, LaunchBatch, LaunchJob, Pending, Seams, key
from orchestrator.search.budget import confirmation_room, each_confirmation
from orchestrator.search.confirm import NO_BETTER, finalists, tradeoff
from orchestrator.search.coverage import cover_point, untried
from orchestrator.search.lines import baseline_best_line, launched_line, runner_up_line, winner_line
from orchestrator.search.memory import MemoryCheck, ceilings, memory_refusal, next_probe, within_ceiling
from orchestrator.search.nodes import NodeBaselines, confirmation_launched
from orchestrator.search.point import (
    Point,
    baseline_point,
    candidate_at,
    changed_fields,
    point_overrides,
)
from orchestrator.search.prune import FlagCheck, Pruned, declared_size, point_refusal, prune
from orchestrator.search.reuse import opening_outcome
from orchestrator.search.rules import (
    EXHAUSTED_AFTER,
    best_trial,
    is_baseline,
    stall_reason,
    stop_reason,
    winner_yaml,
)
from orchestrator.search.shared import new_sweep_id
from orchestrator.search.storage import storage_url
from orchestrator.search.study import Asked, SearchStudy, directions
from orchestrator.servers.shield import interrupts_held


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
        fingerprint: dict[str, str] | None = None,
        memory_check: MemoryCheck | None = None,
        nodes: NodeBaselines | None = None,
    ) -> None:
        assert cfg.search is not None
        #: What the study's trials measure (orchestrator.search.shared); None: not compared.
        self.fingerprint = fingerprint
        self.cfg, self.search, self.dir = cfg, cfg.search, sweep_dir
        self.baseline_option = baseline_option
        self.pruned: Pruned = prune(space, cfg, flag_check)
        self.launch_job, self.say, self.clock = launch_job, say, clock
        self.launch_batch = launch_batch
        #: doctor's memory-fit estimate of a point's candidate (None: not estimated on this host).
        self.memory_check = memory_check
        #: Trial numbers recorded (a resumed study numbers on); points asked in a row that launched nothing.
        self.done: set[int] = set()
        self.idle = 0
        #: The baseline's own point, when the space holds it: asked first (None: not a point of the space).
        self.baseline = baseline_point(self.pruned.space, cfg.baseline)
        #: The node baselines a trial may measure first, paid with it (None: trials measured here).
        self.nodes = nodes
        #: The distinct feasible points left to confirm, best first (set at the search's end).
        self.queue: list[TrialRecord] = []

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

    def overrides(self, point: Point, name: str) -> list[str]:
        """A point's job: the baseline's candidate file with the point's fields, named ``name``."""
        layouts = self.pruned.space.layouts
        return point_overrides(
            point, layouts, self.cfg.baseline, baseline_option=self.baseline_option, name=name
        )

    def refusal(self, point: Point) -> str | None:
        """Why ``point`` cannot start (pruned, or a point of a space too large to prune whose encoding
        fails), or None."""
        why = self.pruned.refusal(point)
        if why is None and self.pruned.valid is None:  # not enumerated: its encoding and placement here
            why = point_refusal(self.cfg, self.pruned.space, point, None)
        return why

    def baseline_outcome(self) -> TrialOutcome | None:
        """The baseline's point as the sweep's opening measured it, when that is the trial's measurement
        (:func:`orchestrator.search.reuse.opening_outcome`); None otherwise (the point is launched as any
        other)."""
        path = SweepPaths(self.dir).candidate(self.cfg.baseline.name).capacity
        base = self.cfg.baseline
        gpus = gpus_held(base.tensor_parallel_size, base.data_parallel_size, base.extra_args)
        return opening_outcome(self.search, path, self.level()[0], gpus)

    def run(self) -> list[TrialRecord]:
        """Search until a rule stops it; the distinct feasible points worth a confirmation, best first
        (:meth:`confirm` measures them)."""
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
        record.space_size = declared_size(self.pruned)
        record.pruned, record.baseline, record.stopped = self.pruned.pruned, base, ""
        record.sweep_id = record.sweep_id or new_sweep_id()  # a resume keeps its own
        url = storage_url(search, self.dir)
        noise = self.cfg.capacity.noise  # the screen's run-to-run noise: a screen within it is not cut
        study = SearchStudy(
            search, self.pruned.space, url, sweep=record.sweep_id, fingerprint=self.fingerprint, noise=noise
        )
        write_search(self.dir, record)  # the sweep's id kept before its first trial is asked
        if record.trials or study.interrupted:
            self.say(f"search: resuming study {search.name} ({len(record.trials)} trial(s) recorded)")
        self.done = {t.number for t in record.trials}
        self._record_interrupted(record, study)
        seams = Seams(self.launch_job, self.launch_batch, self.say, self.clock, self.overrides)
        batch = Batch(search, study, record, seams, level=level, time_scale=self.cfg.host.time_scale)
        if self.baseline is not None:  # asked first: what every point is judged against
            batch.baseline = key(self.baseline)
            study.enqueue({d.name: self.baseline[d.name] for d in self.pruned.space.dimensions})
        if (previous := study.previous_winner()) is not None:  # a shared study's best: measured here too
            study.enqueue_again(previous)
        #: Trials measured at once (search.parallel; 1: one after the other).
        width = max(1, search.parallel) if self.launch_batch is not None else 1
        while True:
            step = self.next_point(study, record, batch)
            if isinstance(step, Pending):
                batch.pending.append(step)
                if len(batch.pending) < width:
                    continue
            elif not batch.pending:
                break
            # a full batch, or one the budget (or the space) holds no further trial for: measured, then
            # the budget it did not spend (a node's baseline reused) may pay for the next trial
            batch.flush()
            write_search(self.dir, record)
        record.stopped = step
        if search.pareto:
            front = study.pareto()
            record.pareto = [t.number for t in record.trials if t.number in front]
        return self._finish(record, step)

    def next_point(self, study: SearchStudy, record: SearchRecord, batch: Batch) -> Pending | str:
        """The next point to launch, or why the search stops. A point that launches nothing (pruned, asked
        again, the baseline's measured by the opening, or the twin of one in flight) is told and recorded
        here, and the study asked again."""
        space = self.pruned.space
        while (reason := self._stop(record, batch, len(gaps := untried(space, record.trials)))) is None:
            if self.idle >= EXHAUSTED_AFTER:
                return f"the space is exhausted: {EXHAUSTED_AFTER} points asked in a row launched nothing"
            self._steer(study, record, batch, gaps)
            asked = ask_tagged(study, self.say)
            if asked.number in self.done:  # a resumed study numbers on; a record entry is never overwritten
                continue
            point = {**space.fixed, **asked.params}
            pending = Pending(asked, point, f"{self.search.name}_t{asked.number:03d}")
            refused = self.refusal(point) or memory_refusal(point, ceilings(record.trials))
            if refused is None and self.memory_check is not None:
                refused = self.memory_check(candidate_at(self.cfg.baseline, point, space.layouts, "point"))
            if refused is not None:
                batch.told(pending, TrialOutcome(state="infeasible", why=f"pruned before start: {refused}"))
            elif (earlier := batch.earlier(point)) is not None:
                batch.reuse(pending, earlier)
            elif key(point) == batch.baseline and (measured := self.baseline_outcome()) is not None:
                batch.told(pending, measured, baseline=True)
            elif batch.in_flight(point):
                batch.echoes.append(pending)  # a point of the batch in flight: its result, after it
            else:
                self.idle = 0
                return pending
            self.idle += 1
            write_search(self.dir, record)
        return reason

    def _stop(self, record: SearchRecord, batch: Batch, gaps: int) -> str | None:
        """Why the search stops before its next trial: :func:`~orchestrator.search.rules.stop_reason`, the
        next trial paid for before it starts with the node baseline it may need, beside the launches the
        batch already filling has reserved (:mod:`.nodes`)."""
        filling = len(batch.pending)
        due = self.nodes.due if self.nodes is not None else (lambda _n: 0)
        held = filling + due(filling)
        need = filling + 1 + due(filling + 1) - held
        return stop_reason(record, self.search, gaps, need=need, held=held, each=self._each())

    def _each(self) -> int:
        """The launches one confirmation costs, paid before it starts (:func:`.budget.each_confirmation`:
        its own, the baseline's interleaved block after it, its node's baseline when it may need one): the
        count the opening line states (:func:`.lines.opening_line`)."""
        return each_confirmation(self.cfg.run.interleave, self.nodes)

    def _steer(
        self, study: SearchStudy, record: SearchRecord, batch: Batch, gaps: list[tuple[str, Any]]
    ) -> None:
        """Ask a point of the search's own before the sampler's, when one is due: a layout's start probe
        (:func:`~orchestrator.search.memory.next_probe`), or, when the search would stall with a value of a
        list untried, the best point with that value (:mod:`.coverage`)."""
        space = self.pruned.space
        names = [d.name for d in space.dimensions]
        probe = next_probe(space, record.trials, self.cfg.baseline, [p.point for p in batch.pending])
        if probe is None and gaps and stall_reason(record, self.search) is not None:
            best = best_trial(record, self._changes)
            base = best.params if best is not None else self.baseline
            if base is not None:
                field, value = gaps[0]
                probe = within_ceiling(cover_point(base, field, value), ceilings(record.trials))
        if probe is not None:
            study.enqueue({name: probe[name] for name in names if name in probe})

    def _record_interrupted(self, record: SearchRecord, study: SearchStudy) -> None:
        """The trials the sweep stopped during: a launch spent (when it started), nothing learnt."""
        for number, params in study.interrupted:
            if number in self.done:
                continue
            name = f"{self.search.name}_t{number:03d}"
            launched = SweepPaths(self.dir).trial(name).spec.exists()
            item = TrialRecord(
                number=number,
                name=name,
                params={**self.pruned.space.fixed, **params},
                state="failed",
                why="interrupted: the sweep stopped during this trial",
                fidelity="start" if launched else "none",
                launches=1 if launched else 0,
            )
            record.trials.append(item)
            record.launches += item.launches
            self.done.add(number)

    def ranked(self, record: SearchRecord) -> list[TrialRecord]:
        """The points worth a confirmation, best first (:func:`~orchestrator.search.confirm.finalists` with
        the gates' ``min_gain``): the sweep's and the search benchmark's one ranking."""
        return finalists(record, None, self._changes, self.cfg.gates.min_gain)

    def _finish(self, record: SearchRecord, reason: str) -> list[TrialRecord]:
        """The search's end: its line, the trade-off found, and the points worth a confirmation, best first
        (empty: nothing was measured fully and met every constraint, or the best is the baseline's own
        configuration, which is said and never confirmed against itself)."""
        self.say(launched_line(record.distinct_launched, record.space_size, reason))
        self.queue = self.ranked(record)
        maximize = directions(self.search)[0] == "maximize"
        record.tradeoff = tradeoff(record, self.queue, self.cfg.gates, maximize)
        write_search(self.dir, record)
        if not self.queue:
            feasible = record.model_copy(update={"trials": [t for t in record.trials if not t.broken]})
            best = best_trial(feasible, self._changes)
            if best is not None and is_baseline(best, self._changes):  # nothing to confirm against itself
                record.best_is_baseline, record.best_trial = True, best.number
                write_search(self.dir, record)
                self.say(baseline_best_line(record))
            else:
                self.say(
                    f"{NO_BETTER}: no trial was measured fully and met every constraint: nothing to confirm"
                )
        return list(self.queue)

    def confirm(self, verdicts: Callable[[list[str]], dict[str, str]]) -> None:
        """Confirm the finalists inside the budget: the best ``search.confirm_top`` together, then, while
        the gates KEEP none of those confirmed (``verdicts``: the gates' decision on each named candidate
        as stored so far; a name it cannot judge counts as no KEEP), the runner-up, one at a time. Each
        confirmation is an ordinary candidate's job (``launch_job`` without a ticket), paid before it
        starts (its launch, the baseline's interleaved block after it, its node's baseline: ``_each``) and
        charged what it launched and its GPUs x its wall time to the search's budget."""
        record = read_search(self.dir)
        if record is None or not self.queue:
            return
        record.finalists = []
        size = max(1, self.search.confirm_top)
        while self.queue and (room := confirmation_room(record, self.search, self._each())) > 0:
            if record.finalists:  # a round after no KEEP: the runner-up
                decided = verdicts([w.name for w in record.finalists])
                if any(decided.get(w.name) == "keep" for w in record.finalists):
                    break
                self.say(runner_up_line(record.finalists, decided, self.queue[0]))
            round_ = self.queue[: min(size if not record.finalists else 1, room)]
            self.queue = self.queue[len(round_) :]
            for best in round_:
                self._confirm_one(record, best)
        if self.queue and not confirmation_room(record, self.search, self._each()):
            left = ", ".join(t.name for t in self.queue[:3]) + (" ..." if len(self.queue) > 3 else "")
            self.say(f"search: the budget is spent; not confirmed: {left}")
        if not record.finalists and self.queue:
            self.say(
                f"search: the budget ({self.search.max_launches} launches) holds no confirmation: raise "
                f"search.max_launches to confirm {self.queue[0].name}"
            )

    def _confirm_one(self, record: SearchRecord, best: TrialRecord) -> None:
        """Write ``best``'s candidate file, record it as a finalist, launch its confirmation, charge it."""
        paths = SweepPaths(self.dir)
        path = paths.winner if not record.finalists else paths.finalist(best.name)
        path.write_text(
            winner_yaml(self.search, best, self.baseline_option, self.pruned.space.layouts, self.cfg.baseline)
        )
        finalist = Winner(
            name=best.name,
            trial=best.number,
            params=best.params,
            estimate=best.values or [],
            yaml_file=path.relative_to(self.dir).as_posix(),
            at_least=best.at_least,
        )
        record.finalists.append(finalist)
        record.winner = record.finalists[0]
        write_search(self.dir, record)
        self.say(winner_line(best, finalist.yaml_file))
        # Paid before it starts: what it may launch is on the record while it runs (an interrupted
        # confirmation stays charged), then what it did launch.
        paid = self._each()
        record.launches += paid
        record.confirm_launches += paid
        write_search(self.dir, record)
        start, since = self.clock(), time.time()
        self.launch_job(self.overrides(best.params, best.name), None)
        gpus = _gpus(self.cfg, best.params, self.pruned.space.layouts)
        launched = confirmation_launched(self.dir, self.cfg.baseline.name, best.name, since)
        record.launches += launched - paid
        record.confirm_launches += launched - paid
        record.gpu_hours += gpus * (self.clock() - start) * self.cfg.host.time_scale / 3600
        write_search(self.dir, record)


def ask_tagged(study: SearchStudy, say: Callable[[str], None]) -> Asked:
    """The study's next trial, asked and tagged with this sweep's id as one step: Ctrl-C, SIGTERM or a
    request that arrives between the two acts after them, as a teardown's does. Before, one there left a
    RUNNING trial without the tag, which no resume of this sweep recognised as its own (the PostgreSQL
    resume test, on a loaded machine)."""
    with interrupts_held(say, "tagging the trial just asked with this sweep's id"):
        return study.ask()


def _gpus(cfg: GauntletConfig, point: Point, layouts: dict[str, dict[str, Any]]) -> int:
    """The GPUs a point's candidate holds (TP x DP)."""
    try:
        candidate = candidate_at(cfg.baseline, point, layouts, "point")
    except ValueError:
        candidate = cfg.baseline
    return gpus_held(candidate.tensor_parallel_size, candidate.data_parallel_size, candidate.extra_args)
