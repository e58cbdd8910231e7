"""A Hydra job that a launcher runs in its own process, maybe on another node: one candidate, paired.

Pipeline position: the orchestrator's sweep, on the job side of ``hydra/launcher=submitit_slurm`` (or
``submitit_local``, or any launcher that runs jobs outside the launching process). The launching process
opened the sweep (:mod:`orchestrator.measure.begin`) and wrote the opening marker; a job here

1. starts nothing unless the marker says the sweep opened (a remote job has no memory of the opening),
2. takes its node (on a simulated cluster: a node slot, its own simulator and port),
3. writes its own journal (``journals/<node>-<job>.jsonl``), every line naming node and job,
4. measures the retained configuration on its node (``<baseline>@<node>``, reused by later jobs on the
   node while recent and not drifted) and then its candidate, which records that pairing for the gates,
   and then (``run.interleave``) the retained configuration again: a block of the node's baseline, so
   a node measures baseline, candidate, baseline, candidate, ... and its drift is checked within it,
5. turns the scheduler's SIGTERM (SLURM time limit or ``scancel``, submitit's local controller) into an
   interrupt, so its server is torn down within the grace period and its journal says so; a resubmitted
   job resumes (complete results are skipped, partial ones measured again).

Opening marker (``<sweep>/opening.json``)::

    {"state": "opening" | "open" | "failed" | "stopped", "reason": ..., "node": ..., "at": ...}

``rollback`` and ``stop`` write ``stopped`` *before* they signal the jobs, and a job installs its SIGTERM
handler *before* it reads the marker, so a job is either interrupted or sees the sweep stopped: none
slips through while it starts (submitit itself ignores SIGTERM until the job's handler is in place).
A job also reads the marker before each launch and each profile (:func:`stop_checkpoint`), so one whose
signal was lost stops there.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import FrameType

from contracts.errors import GauntletError
from contracts.files import read_model
from contracts.layout import RUN_FILE
from contracts.results import CapacityResult
from contracts.schema import GauntletConfig
from contracts.sweepdir import Results, with_blocks
from gates.drift import evaluate_node_drift
from load.signals import PREEMPT_SIGNAL
from orchestrator.ledger.events import JobFinished, JobStarted
from orchestrator.ledger.nodes import SIM_SPEED_VARIABLE, Place, acquire_slot
from orchestrator.ledger.opening import JobInterrupted, stop_checkpoint, why_not_open
from orchestrator.measure.candidate import is_complete, run_candidate
from orchestrator.measure.interleave import measure_block
from orchestrator.measure.launch import launch_state
from orchestrator.measure.trial import TrialOutcome, measure_trial
from orchestrator.search.study import TrialTicket, reporter
from orchestrator.servers.context import SweepContext
from orchestrator.servers.seams import Seams, say_stderr


class Unwinding:
    """Whether the job is already unwinding: one interrupt starts the teardown, later ones must not stop it.

    ``stop`` writes the marker and then signals, so a job can see the marker at a checkpoint and get the
    forwarded SIGTERM a moment later, inside its server's teardown: a second raise there skipped the
    teardown's end (its ``torn_down`` line, in a CI run) and could leave the server up.
    """

    def __init__(self) -> None:
        self.started: str | None = None
        self.exiting: int | str | None = None  # submitit's requeue exit, raised once already

    def preempted(self, exc: SystemExit) -> None:
        """The preemption handler raised ``exc`` (submitit checkpointed and requeued the job): remembered,
        so a raise swallowed where it landed still ends the job at its next checkpoint."""
        self.exiting = exc.code if exc.code is not None else 0
        raise exc

    def interrupt(self, why: str) -> None:
        """Raise :class:`JobInterrupted` once; after that, say it and let the teardown finish."""
        if self.started is not None:
            say_stderr(f"{why}: already stopping ({self.started}); the teardown goes on")
            return
        self.started = why
        raise JobInterrupted(why)

    def guard(self, check: Callable[[], None]) -> Callable[[], None]:
        """``check`` (a stop checkpoint) that counts its raise as the start of the unwinding.

        A checkpoint reached after an interrupt means that raise was swallowed where it landed (a
        finalizer, an event-loop callback): the job unwinds here.
        """

        def guarded() -> None:
            if self.exiting is not None:
                raise SystemExit(self.exiting)
            if self.started is not None:
                raise JobInterrupted(f"{self.started}, seen at a checkpoint")
            try:
                check()
            except KeyboardInterrupt as exc:
                self.started = str(exc) or "interrupted"
                raise

        return guarded


@contextmanager
def scheduler_signals() -> Iterator[Unwinding]:
    """SIGTERM raises :class:`JobInterrupted` while the job runs, once; submitit's preemption handler
    (SIGUSR2: checkpoint, requeue, ``SystemExit``) is kept, and its exit remembered by the unwinding."""
    unwinding = Unwinding()

    def interrupt(signum: int, frame: FrameType | None) -> None:
        unwinding.interrupt(f"signal {signal.Signals(signum).name} from the scheduler")

    previous = signal.signal(signal.SIGTERM, interrupt)
    requeue = signal.getsignal(PREEMPT_SIGNAL)
    if callable(requeue):  # submitit's, in a job it runs; none elsewhere
        signal.signal(PREEMPT_SIGNAL, _remembering(requeue, unwinding))
    try:
        yield unwinding
    finally:
        signal.signal(signal.SIGTERM, previous)
        if callable(requeue):
            signal.signal(PREEMPT_SIGNAL, requeue)


def _remembering(
    requeue: Callable[[int, FrameType | None], object], unwinding: Unwinding
) -> Callable[[int, FrameType | None], None]:
    """``requeue`` (submitit's preemption handler), its ``SystemExit`` remembered by ``unwinding``."""

    def preempt(signum: int, frame: FrameType | None) -> None:
        try:
            requeue(signum, frame)
        except SystemExit as exc:
            unwinding.preempted(exc)

    return preempt


def run_job(
    cfg: GauntletConfig,
    sweep_dir: Path,
    place: Place,
    seams: Seams,
    *,
    job_num: int = 0,
    ticket: TrialTicket | None = None,
) -> str | TrialOutcome:
    """Measure the job's candidate on its node, paired with the baseline measured there; says the outcome.
    With ``ticket`` the job is a search's trial (:func:`run_trial`): it returns the trial's outcome."""
    with scheduler_signals() as unwinding:  # first: a cancel from now on interrupts, the marker the rest
        reason = why_not_open(sweep_dir)
        if reason is not None:
            seams.say(f"{cfg.candidate.name}: not run: {reason}")
            if ticket is not None:
                return TrialOutcome(state="failed", why=f"not run: {reason}")
            return f"not run: {reason}"
        slot = None
        if cfg.run.simulated_nodes:
            slot = acquire_slot(
                sweep_dir,
                cfg.run.simulated_nodes,
                prefer=job_num,
                on_wait=lambda: seams.say(f"{cfg.candidate.name}: waiting for a free simulated node"),
            )
            speeds = cfg.run.simulated_node_speeds
            os.environ[SIM_SPEED_VARIABLE] = str(speeds[slot.index] if slot.index < len(speeds) else 1.0)
            place = replace(place, node=slot.name)
            cfg = replace(cfg, service=replace(cfg.service, port=cfg.service.port + 1 + slot.index))
        try:
            return _run_on_node(cfg, sweep_dir, place, seams, unwinding, ticket=ticket)
        finally:
            if slot is not None:
                slot.release()


def _run_on_node(
    cfg: GauntletConfig,
    sweep_dir: Path,
    place: Place,
    seams: Seams,
    unwinding: Unwinding,
    *,
    ticket: TrialTicket | None,
) -> str | TrialOutcome:
    ctx = replace(
        SweepContext.open(cfg, sweep_dir, seams, place=place),
        node=place.node,
        checkpoint=unwinding.guard(stop_checkpoint(sweep_dir)),
    )
    name = cfg.candidate.name
    ctx.journal.append(JobStarted(candidate=name, executor=place.executor, port=cfg.service.port))
    try:
        outcome = _measure(ctx, place) if ticket is None else run_trial(ctx, place, ticket)
    except KeyboardInterrupt as exc:
        ctx.journal.append(JobFinished(candidate=name, outcome=f"interrupted: {exc or 'SIGINT'}"))
        raise
    except SystemExit as exc:  # submitit's SIGUSR2 handler: checkpointed and requeued, then exits
        ctx.journal.append(JobFinished(candidate=name, outcome=f"interrupted: requeued (exit {exc.code})"))
        raise
    if unwinding.exiting is not None:  # preempted, its exit swallowed after the last checkpoint
        ctx.journal.append(
            JobFinished(candidate=name, outcome=f"interrupted: requeued (exit {unwinding.exiting})")
        )
        raise SystemExit(unwinding.exiting)
    said = outcome if isinstance(outcome, str) else f"trial {outcome.state}: {outcome.why}"
    ctx.journal.append(JobFinished(candidate=name, outcome=said))
    return outcome


def _measure(ctx: SweepContext, place: Place) -> str:
    cfg = ctx.cfg
    base = node_baseline(ctx, place.node)
    if cfg.candidate.name == cfg.baseline.name:
        return f"baseline measured on {place.node} ({base})"
    paired = replace(ctx, paired_baseline=base)
    run = run_candidate(paired, cfg.candidate)
    where = f"on {place.node}, paired with {base}"
    if not run.startup.ok:
        return f"did not start ({run.startup.kind}) {where}"
    if cfg.run.interleave:  # ABA on the node: the baseline again (it also opens the node's next job)
        measure_block(ctx, replace(cfg.baseline, name=base), after=cfg.candidate.name)
        where += " (and its block after it)"
    return f"measured {where}"


def run_trial(ctx: SweepContext, place: Place, ticket: TrialTicket) -> TrialOutcome:
    """A search's trial on its node, paired as a sweep's candidate is: the node's baseline first (reused
    while recent, as :func:`node_baseline` says), then the trial's one launch, screened at the load that
    baseline sustains on this node (its capacity; ``search.load_level`` or the ticket's level when set or
    unmeasured), its ``run.json`` naming the pairing. Estimates are this node's: the winner's confirmation,
    paired on its own node, is what decides."""
    cfg = ctx.cfg
    assert cfg.search is not None
    started, opened = time.monotonic(), time.time()
    base = node_baseline(ctx, place.node)
    run_file = ctx.paths.candidate(base).run_file
    measured = run_file.exists() and run_file.stat().st_mtime >= opened  # not a reused one
    base_gpu_s = (
        (time.monotonic() - started) * cfg.baseline.tensor_parallel_size * cfg.baseline.data_parallel_size
    )
    level = ticket.level
    capacity = ctx.paths.candidate(base).capacity
    if cfg.search.load_level is None and capacity.exists():
        level = read_model(capacity, CapacityResult).capacity or level
    paired = replace(ctx, paired_baseline=base)
    outcome = measure_trial(paired, cfg.candidate, search=cfg.search, level=level, report=reporter(ticket))
    outcome.why = f"{outcome.why} (on {place.node}, paired with {base})".strip()
    if measured:  # the node's baseline, measured for this trial: charged to the search's budget with it
        outcome.baseline_launches, outcome.baseline_gpu_s = 1, round(base_gpu_s, 3)
    return outcome


def _block_runs(ctx: SweepContext, name: str) -> list[Path]:
    return list(ctx.paths.candidate(name).blocks.glob(f"*/{RUN_FILE}"))


def _node_drift(ctx: SweepContext, base: Results) -> str | None:
    """Why the node's baseline may not be reused: its later blocks drifted from its opening repeats
    (:func:`gates.drift.evaluate_node_drift`); None when they did not, or there is no block yet."""
    if not base.blocks:
        return None
    drift = evaluate_node_drift(ctx.cfg.gates, base)
    return f"drift on this node ({drift.message})" if drift.status == "fail" else None


def node_baseline(ctx: SweepContext, node: str) -> str:
    """Measure the retained configuration on ``node`` unless a recent complete measurement exists there
    (same fingerprint, younger than ``run.node_baseline_max_age_s``, and no drift in its later blocks)."""
    cfg = ctx.cfg
    name = f"{cfg.baseline.name}@{node}"
    run_file = ctx.paths.candidate(name).run_file
    state = launch_state(ctx, ctx.candidate_dir(name), name)  # what resume judges: read once
    if state is not None and state.run is not None and is_complete(ctx, name, state):
        age = time.time() - max(p.stat().st_mtime for p in [run_file, *_block_runs(ctx, name)])
        fingerprint = ctx.render(replace(cfg.baseline, name=name)).fingerprint
        recorded = state.run
        drift = _node_drift(ctx, with_blocks(ctx.dir, state))
        if age <= cfg.run.node_baseline_max_age_s and recorded.fingerprint == fingerprint and drift is None:
            ctx.say(f"{name}: reusing the baseline measured on this node {age:.0f} s ago")
            return name
        why = drift or f"measured {age:.0f} s ago or with another spec"
        ctx.say(f"{name}: {why}: measuring it again")
        shutil.rmtree(ctx.candidate_dir(name))
        state = None  # gone: nothing to read
    run = run_candidate(ctx, replace(cfg.baseline, name=name), role="baseline", state=state)
    if not run.startup.ok:
        raise GauntletError(
            f"the baseline did not start on {node} ({run.startup.kind}): its candidates cannot be compared",
            hint=f"see {ctx.paths.candidate(name).server_log}",
        )
    return name
