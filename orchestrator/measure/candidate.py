"""Measuring one candidate: launch it, run every profile with its repeats under a watcher, tear it down.

Pipeline position: the orchestrator's middle step (config -> launch spec -> server -> load -> records).
Results go to ``candidates/<name>/`` (spec.json, vllm-config.yaml, candidate.yaml, server.log, run.json and
``<profile>/r<k>/`` from the load runner); a candidate whose results are complete is skipped, which is
what makes resuming a sweep work. A server that dies, or a profile that cannot complete, is evidence in
run.json, not a crash of the sweep.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from contracts.candidate_file import write_candidate_record
from contracts.files import read_model
from contracts.layout import LaunchPaths
from contracts.results import CandidateRun, DoctorReport, StartupRecord
from contracts.schema import CandidateConfig
from contracts.sweepdir import Results, load_results
from contracts.verdicts import Decision
from gates.confirm import Disagreement, to_confirm
from gates.sequential import SequentialPlan
from orchestrator.ledger.events import Role
from orchestrator.measure import adaptive
from orchestrator.measure.capacity import run_capacity
from orchestrator.measure.launch import (
    Launch,
    RunLabels,
    launch_complete,
    launch_state,
    measured_launch,
    refused_launch,
    skip_complete,
)
from orchestrator.measure.lm_eval_runs import run_lm_eval_profiles, unfinished_profiles
from orchestrator.measure.profile import LOST, free_memory, server_lost
from orchestrator.servers.context import SweepContext


def is_complete(ctx: SweepContext, name: str, state: Results | None = None) -> bool:
    """Results of ``name`` are complete and valid (resume skips it). ``state``: what its directory held,
    when the caller read it already (:func:`~orchestrator.measure.launch.launch_state`); else it is read."""
    if state is None:
        state = launch_state(ctx, ctx.candidate_dir(name), name)
    return _complete(ctx, name, state)


def _complete(ctx: SweepContext, name: str, state: Results | None) -> bool:
    """The candidate ``name`` whose directory held ``state`` (read once, :func:`launch_state`) is complete."""

    def expected(run: CandidateRun, state: Results) -> list[tuple[str, int]] | None:
        plan = adaptive.plan_for(ctx, "baseline" if run.is_baseline else "candidate")
        done = adaptive.settled_repeats(ctx, name) if plan.adaptive else plan.max_repeats
        if done is None:
            return None  # the adaptive loop never finished: interrupted
        if ctx.cfg.capacity.profile is not None and state.capacity is None:
            return None
        if unfinished_profiles(ctx.cfg.lm_eval, ctx.candidate_dir(name)):
            return None  # interrupted while lm-eval ran: its scores would be missing from the verdict
        if not plan.adaptive and _to_confirm(ctx, state, done):
            return None  # interrupted before its confirmation runs: measured again
        return [
            (profile, repeat)
            for profile in ctx.cfg.run.profiles
            for repeat in range(1, min(ctx.repeats_of(profile, done), done) + 1)
        ]

    return launch_complete(state, expected)


def run_candidate(
    ctx: SweepContext, candidate: CandidateConfig, *, role: Role = "candidate", state: Results | None = None
) -> CandidateRun:
    """Launch, measure every profile with repeats, tear down; results into candidates/<name>/. ``state``:
    what its directory held, when the caller read it already; else it is read here, once."""
    name = candidate.name
    out = ctx.candidate_dir(name)
    if state is None:
        state = launch_state(ctx, out, name)  # what resume judges: read once
    if state is not None and _complete(ctx, name, state):
        return skip_complete(ctx, state, label=name, journal_as=name)
    ctx.check_stop()
    labels = RunLabels(
        is_baseline=name == ctx.cfg.baseline.name or role == "baseline",
        phase="baseline" if role == "baseline" else "candidate",
        node=ctx.node,
        paired_baseline=ctx.paired_baseline if role == "candidate" else None,
    )
    spec = ctx.render(candidate)
    refused = doctor_refusal(ctx, name)
    if refused is not None:  # doctor found why it cannot start: recorded as a failed start, never launched
        run = refused_launch(ctx, spec, out, labels=labels, startup=refused, discard_as=name)
        ctx.say(f"{name}: {refused.matched_line} ({refused.kind})")
        return run
    with measured_launch(ctx, spec, out, role=role, labels=labels, discard_as=name) as launch:
        write_candidate_record(LaunchPaths(out).candidate_config, candidate)  # what `promote` writes back
        if not launch.ready:
            startup = launch.run.startup
            ctx.say(f"{name}: did not start ({startup.kind}): {startup.matched_line or '-'}")
        else:
            _run_profiles(ctx, launch, adaptive.plan_for(ctx, role))
            if not launch.lost:
                launch.watch.extend(run_capacity(ctx, launch.session, candidate))
            if not launch.lost:
                run_lm_eval_profiles(ctx, launch.session, out)
    return launch.recorded


#: The startup-failure class a doctor problem stands for (what the launch would have been refused with).
DOCTOR_KINDS = {"flags": "bad-args", "spec": "bad-args", "memory": "out-of-memory"}


def doctor_refusal(ctx: SweepContext, name: str) -> StartupRecord | None:
    """The failed start the sweep's ``doctor.json`` predicts for ``name`` (None: none, or no doctor ran)."""
    path = ctx.paths.doctor
    if not path.exists():
        return None
    problems = read_model(path, DoctorReport).for_candidate(name)
    if not problems:
        return None
    return StartupRecord(
        ok=False,
        kind=DOCTOR_KINDS.get(problems[0].check, "incompatible"),
        matched_line=f"doctor (not launched): {problems[0].check}: {problems[0].message}",
        evidence=[p.line() for p in problems],
    )


def _run_profiles(ctx: SweepContext, launch: Launch, plan: SequentialPlan) -> None:
    """Every profile, repeat by repeat, while the plan asks for another repeat (adaptive: while the
    verdict is unsettled, :mod:`gates.sequential`); stops early once the server is lost."""
    run_cfg, name = ctx.cfg.run, launch.session.candidate
    repeat, decision, more = 0, cast("Decision | None", None), True
    while more and plan.next_repeat(repeat, decision):
        repeat += 1
        for profile in run_cfg.profiles:
            if repeat > ctx.repeats_of(profile, plan.max_repeats):
                continue
            events = launch.measure(profile, repeat)
            if launch.free_gpu_gib is None:
                launch.free_gpu_gib = free_memory(ctx, launch.session.spec)
            if server_lost(events):
                break
        if launch.lost:
            kinds = ", ".join(sorted({e.kind for e in launch.watch if e.kind in LOST}))
            ctx.say(f"{name}: the server was lost under load ({kinds}); remaining profiles skipped")
            return
        if plan.adaptive and repeat >= plan.min_repeats and repeat < plan.max_repeats:
            decision, more = adaptive.look(ctx, launch, repeat, plan)
    if repeat >= plan.max_repeats:
        # Every repeat ran (fixed repeats, or an adaptive loop to its last look): the profiles whose runs
        # disagree get confirmation runs (a loop that stopped earlier was settled by its runs).
        _confirm(ctx, launch, repeat)
    if plan.adaptive and not launch.lost:
        adaptive.settle(ctx, name, repeat, decision)


def _to_confirm(ctx: SweepContext, results: Results, repeats: int) -> list[Disagreement]:
    """The launch's profiles in ``results`` that want a confirmation run (:func:`gates.confirm.to_confirm`);
    not those with their own ``repeats`` (the answer gate's fixed prompt set: its one run is the design)."""
    extra = ctx.cfg.run.confirm_runs
    if not extra:
        return []
    profiles = [p for p in ctx.cfg.run.profiles if ctx.cfg.workloads[p].repeats is None]
    return to_confirm(results, profiles, repeats=repeats, extra=extra)


def _confirm(ctx: SweepContext, launch: Launch, repeats: int) -> None:
    """Confirmation runs after a launch's ``repeats`` fixed repeats (:mod:`gates.confirm`): one more run
    of each profile whose runs disagree beyond 2x, or whose slow outlier run set aside leaves fewer than
    ``repeats``; again, up to ``run.confirm_runs`` more runs per profile. The gates read them all."""
    name = launch.session.candidate
    while not launch.lost and (todo := _to_confirm(ctx, _measured(ctx, launch.out, name), repeats)):
        for found in todo:
            ctx.say(
                f"{name}: {found.message()}: confirmation run {len(found.values) - repeats + 1} of at most "
                f"{ctx.cfg.run.confirm_runs}"
            )
            if server_lost(launch.measure(found.profile, found.next_repeat)):
                ctx.say(f"{name}: the server was lost under load during a confirmation run")
                return


def _measured(ctx: SweepContext, out: Path, name: str) -> Results:
    """The runs measured so far into ``out`` (read again after each round of confirmation runs)."""
    return load_results(ctx.dir, out.relative_to(ctx.dir).as_posix(), name)
