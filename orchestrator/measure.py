"""Measuring one candidate: launch it, run every profile with its repeats under a watcher, tear it down.

Pipeline position: the orchestrator's middle step (config -> launch spec -> server -> load -> records).
Results go to ``candidates/<name>/`` (spec.json, vllm-config.yaml, server.log, run.json and
``<profile>/r<k>/`` from the load runner); a candidate whose results are complete is skipped, which is
what makes resuming a sweep work. A server that dies, or a profile that cannot complete, is evidence in
run.json, not a crash of the sweep.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import httpx

from contracts.errors import GauntletError, HarnessError, sweep_dir_error
from contracts.results import (
    CAPACITY_FILE,
    CandidateRun,
    ProfileSummary,
    WatchEvent,
    profile_dir,
    read_model,
    write_model,
)
from contracts.schema import CandidateConfig, WorkloadConfig
from contracts.verdicts import Decision
from gates.sequential import SequentialPlan
from launch.spec import LaunchSpec
from orchestrator import adaptive
from orchestrator.context import SweepContext
from orchestrator.events import DiscardingPartial, LoadFinished, LoadStarted, Role, SkippedComplete
from orchestrator.journal import utc_now
from orchestrator.seams import backend_of
from orchestrator.session import ServerSession


def server_lost(events: Sequence[WatchEvent]) -> bool:
    """The server died, or a profile could not run against it: the remaining profiles would only fail."""
    return any(e.kind in ("died", "unhealthy") for e in events)


def is_complete(ctx: SweepContext, name: str) -> bool:
    """Results of ``name`` are complete and valid (resume skips it)."""
    run_file = ctx.candidate_dir(name) / "run.json"
    if not run_file.exists():
        return False
    try:
        run = read_model(run_file, CandidateRun)
        if any(e.kind == "harness" for e in run.watch):
            return False  # the load harness failed, not the server: measure again (once the data is fixed)
        if not run.startup.ok or (server_lost(run.watch) and not run.is_baseline):
            # A failed start or a server lost under load is this candidate's result; a baseline lost under
            # load leaves its candidates' evidence partial (incomplete): measure it again.
            return True
        plan = adaptive.plan_for(ctx, "baseline" if run.is_baseline else "candidate")
        done = adaptive.settled_repeats(ctx, name) if plan.adaptive else plan.max_repeats
        if done is None:
            return False  # the adaptive loop never finished: interrupted
        for profile in ctx.cfg.run.profiles:
            for repeat in range(1, min(ctx.repeats_of(profile, done), done) + 1):
                summary = read_model(
                    profile_dir(ctx.dir, name, profile, repeat) / "summary.json", ProfileSummary
                )
                if summary.interrupted:
                    return False
        if ctx.cfg.capacity.profile is not None and not (ctx.candidate_dir(name) / CAPACITY_FILE).exists():
            return False
    except GauntletError:
        return False
    return True


@dataclass
class _Measured:
    """What a candidate's profiles produced so far (written to run.json even when interrupted)."""

    watch: list[WatchEvent] = field(default_factory=list)
    profiles: list[str] = field(default_factory=list)
    free_gpu_gib: list[float] | None = None


def run_candidate(ctx: SweepContext, candidate: CandidateConfig, *, role: Role = "candidate") -> CandidateRun:
    """Launch, measure every profile with repeats, tear down; results into candidates/<name>/."""
    name = candidate.name
    if is_complete(ctx, name):
        ctx.say(f"{name}: complete results found, skipping (resume)")
        ctx.journal.append(SkippedComplete(candidate=name))
        return read_model(ctx.candidate_dir(name) / "run.json", CandidateRun)
    ctx.check_stop()
    out = ctx.candidate_dir(name)
    spec, spec_file = fresh_result_dir(ctx, candidate, out, label=name)
    with ctx.servers.launch(spec, spec_file, out / "server.log", role=role) as session:
        run = CandidateRun(
            candidate=name,
            fingerprint=spec.fingerprint,
            backend=backend_of(spec),
            host=spec.host,
            is_baseline=name == ctx.cfg.baseline.name or role == "baseline",
            phase="baseline" if role == "baseline" else "candidate",
            startup=session.startup,
            probe=None,
            node=ctx.node,
            paired_baseline=ctx.paired_baseline if role == "candidate" else None,
        )
        if not session.ready:
            ctx.say(f"{name}: did not start ({run.startup.kind}): {run.startup.matched_line or '-'}")
            write_model(out / "run.json", run)
            return run
        measured = _Measured()
        try:
            _run_profiles(ctx, session, measured, run, adaptive.plan_for(ctx, role))
            if not server_lost(measured.watch):
                from orchestrator.capacity import run_capacity  # noqa: PLC0415 (it imports this module)

                measured.watch.extend(run_capacity(ctx, session, candidate))
        finally:
            # Torn down before run.json is written, so the record carries the teardown (also on Ctrl-C).
            run = run.model_copy(
                update={
                    "watch": measured.watch,
                    "teardown": session.teardown(),
                    "profiles": measured.profiles,
                    "free_gpu_gib_after_warmup": measured.free_gpu_gib,
                }
            )
            write_model(out / "run.json", run)
    return run


def fresh_result_dir(
    ctx: SweepContext, candidate: CandidateConfig, out: Path, *, label: str
) -> tuple[LaunchSpec, Path]:
    """Discard what a launch left in ``out`` (journalled as ``label``), then write the rendered spec
    (``spec.json``, what the journal points at) and its vLLM config; returns the spec and its file."""
    if out.exists():
        ctx.journal.append(DiscardingPartial(candidate=label))
        shutil.rmtree(out)
    out.mkdir(parents=True)
    spec = ctx.render(candidate)
    spec_file = out / "spec.json"
    spec_file.write_text(spec.to_json())
    (out / "vllm-config.yaml").write_text(spec.config_yaml)
    return spec, spec_file


def _run_profiles(
    ctx: SweepContext, session: ServerSession, measured: _Measured, run: CandidateRun, plan: SequentialPlan
) -> None:
    """Every profile, repeat by repeat, while the plan asks for another repeat (adaptive: while the
    verdict is unsettled, :mod:`gates.sequential`); stops early once the server is lost."""
    run_cfg, name = ctx.cfg.run, session.candidate
    repeat, decision = 0, cast("Decision | None", None)
    while plan.next_repeat(repeat, decision):
        repeat += 1
        for profile in run_cfg.profiles:
            if repeat > ctx.repeats_of(profile, plan.max_repeats):
                continue
            out = profile_dir(ctx.dir, name, profile, repeat)
            events = measure_profile(ctx, session, profile=profile, repeat=repeat, out=out)
            measured.profiles.append(f"{profile}/r{repeat}")
            measured.watch.extend(events)
            if measured.free_gpu_gib is None:
                measured.free_gpu_gib = free_memory(ctx, session.spec)
            if server_lost(events):
                break
        if server_lost(measured.watch):
            ctx.say(f"{name}: the server died under load; remaining profiles skipped")
            return
        if plan.adaptive and repeat >= plan.min_repeats and repeat < plan.max_repeats:
            decision = adaptive.look(
                ctx, run.model_copy(update={"profiles": measured.profiles}), repeat, plan
            )
    if plan.adaptive:
        adaptive.settle(ctx, name, repeat, decision)


def measure_profile(
    ctx: SweepContext,
    session: ServerSession,
    *,
    profile: str,
    repeat: int,
    out: Path,
    workload: WorkloadConfig | None = None,
    load_level: float | None = None,
) -> list[WatchEvent]:
    """Run one profile against a live server while a watcher checks it; returns what the watcher saw.

    A load error (the server vanished mid-profile, /tokenize or /metrics unreachable) is evidence, not a
    crash of the sweep: it is journalled and returned as an ``unhealthy`` event next to whatever the
    watcher saw (``died`` when the process is gone), and the caller moves on. ``workload`` replaces the
    configured profile (the capacity search's load levels: its request counts are final, not scaled).
    """
    spec = session.spec
    name = spec.candidate
    ctx.check_stop()
    ctx.journal.append(LoadStarted(candidate=name, profile=profile, repeat=repeat))
    ctx.say(f"{name}: {profile} r{repeat}")
    failure: str | None = None
    harness: str | None = None
    with session.watching() as watch:
        try:
            ctx.seams.run_profile(
                spec.base_url,
                spec.served_model_name,
                workload or ctx.cfg.workloads[profile],
                candidate=name,
                fingerprint=spec.fingerprint,
                repeat=repeat,
                out_dir=out,
                backend=backend_of(spec),
                host=spec.host,
                time_scale=spec.time_scale,
                scale=ctx.cfg.run.scale if workload is None else 1.0,
                slo=ctx.cfg.slo,
                load_level=load_level,
                stop=watch.stop,
                api_key=spec.api_key(os.environ),
            )
        except HarnessError as exc:
            harness = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        except (GauntletError, httpx.HTTPError, OSError) as exc:
            if (disk := sweep_dir_error(exc, ctx.dir)) is not None:
                raise disk from exc  # the disk failed, not the candidate: stop, do not measure on
            failure = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            ctx.say(f"{name}: {profile} r{repeat} could not complete: {failure}")
        except Exception as exc:
            harness = f"{type(exc).__name__}: {exc}"
    events = watch.events
    if harness is not None:
        failure = f"load harness error (not the server): {harness}"
        ctx.say(f"{name}: {profile} r{repeat}: {failure}; the verdict will be incomplete")
        events.append(WatchEvent(at=utc_now(), kind="harness", detail=f"{profile} r{repeat}: {harness}"))
    elif failure is not None:
        events.append(WatchEvent(at=utc_now(), kind="unhealthy", detail=f"{profile} r{repeat}: {failure}"))
    ctx.journal.append(
        LoadFinished(candidate=name, profile=profile, repeat=repeat, events=len(events), error=failure)
    )
    return events


def free_memory(ctx: SweepContext, spec: LaunchSpec) -> list[float] | None:
    """Free GPU memory per GPU now (after the first profile, i.e. after warmup); None when unknown."""
    try:
        gpus = ctx.seams.gpu_memory(spec)
    except (httpx.HTTPError, GauntletError) as exc:
        ctx.say(f"could not read GPU memory: {exc}")
        return None
    return [g.free_gib for g in gpus] if gpus else None
