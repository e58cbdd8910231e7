"""Begin a sweep on its directory: pre-flight checks, the retained spec recorded, the live service taken over.

Pipeline position: the sweep's first measured step, called by the controller
(:mod:`orchestrator.app.controller`) before any candidate is launched; not to be confused with
:mod:`orchestrator.ledger.opening`, the marker the sweep's jobs read. :func:`begin` runs ``doctor``'s checks
(:func:`preflight`, written to ``doctor.json``), checks a resumed sweep's recorded retained spec and the live
service an earlier sweep left (found from the port's ledger, :mod:`orchestrator.ledger.live`) against the
configured baseline, all before its first journal line; then it stops what an interrupted run of this sweep
left, records the retained spec once (:func:`record_retained`), keeps the copy beside the port's lock,
points ``<sweeps>/latest`` here, takes the live service over, and probes the host. A refused opening leaves
``latest``, the journals, the copy and the live service as they were. The files it writes are named in
:mod:`contracts.layout`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from contracts.errors import PreflightError, SpecError
from contracts.files import write_model
from contracts.layout import LaunchPaths, point_latest
from contracts.results import DoctorReport
from contracts.schema import CandidateConfig
from launch.preflight import diagnose
from launch.spec import LaunchSpec, diff_specs
from orchestrator.ledger.events import RetainedRecorded, SweepStarted
from orchestrator.ledger.live import LiveService, live_service, live_service_mismatch
from orchestrator.ledger.offsite import keep_offsite
from orchestrator.servers.context import SweepContext
from orchestrator.servers.leftovers import runs_now, stop_leftovers, take_over_live_service


def begin(
    ctx: SweepContext,
    *,
    sweeps: Path | None = None,
    keep_live: bool = False,
    candidates: Sequence[CandidateConfig] = (),
    baseline_file: str = "the baseline's candidate file",
) -> None:
    """Check the host and ``candidates`` (doctor) and the live service against the configured baseline,
    then record the retained spec, point ``<sweeps>/latest`` here and stop the live retained server an
    earlier sweep left (:func:`orchestrator.ledger.live.live_service`: the port's ledger, then ``latest``),
    and probe the host.

    Every refusal comes before the first journal line: a refused or failed opening leaves ``latest``, the
    journal, the copy beside the port's lock and the live service as they were. With ``keep_live``
    (zero-downtime: every candidate runs on another node) the live retained server is not stopped: it is
    recorded and its fingerprint checked, and it keeps serving throughout. ``baseline_file``: the file the
    user selected as the baseline, which a refusal names.
    """
    ctx.dir.mkdir(parents=True, exist_ok=True)
    preflight(ctx, candidates)
    spec = ctx.render(ctx.cfg.baseline)
    check_retained(ctx, spec)
    check_not_promoted(ctx)
    live = found_live_service(ctx, sweeps)
    if live is not None and (mismatch := live_service_mismatch(live, spec, baseline_file)) is not None:
        # a configuration problem found before anything is touched, as the doctor finds it (exit 4); exit
        # 7 is the journal's and rollback's
        raise PreflightError(
            f"{mismatch.message}; nothing was started or stopped, the live service keeps serving",
            evidence=mismatch.differences,
            hint=mismatch.hint,
        )
    state = ctx.journal.replay()
    ctx.journal.append(SweepStarted(phase="begin", resumed=state.events > 0))
    if keep_live:
        state = replace(state, live={p: s for p, s in state.live.items() if s.role != "retained"})
    stop_leftovers(
        ctx.servers,
        state,
        reason="left running by an interrupted run of this sweep",
        retained_reason="the live retained service; it is measured as the baseline",
    )
    record_retained(ctx, spec)
    try:  # what rollback needs, outside the sweep directory (a deleted directory strands nothing)
        keep_offsite(ctx.journal, ctx.dir, ctx.cfg.service.port)
    except OSError as exc:
        ctx.say(f"could not keep a copy of the retained configuration outside {ctx.dir}: {exc}")
    if sweeps is not None:  # this sweep answers for the service from here on
        point_latest(sweeps, ctx.dir)
    if live is not None:
        take_over_live_service(ctx, live, keep=keep_live)
    probe = ctx.seams.host_probe(ctx.cfg.host.kind)
    write_model(ctx.paths.host, probe)


def found_live_service(ctx: SweepContext, sweeps: Path | None) -> LiveService | None:
    """The live retained server on the service's port that another sweep (or its rollback) left, and still
    runs (same pid and start time, through the sweep's supervisor); this sweep's own is a leftover."""
    live = live_service(ctx.cfg.service.port, runs_now(ctx.servers), sweeps_dir=sweeps)
    return None if live is None or live.sweep.resolve() == ctx.dir.resolve() else live


def preflight(ctx: SweepContext, candidates: Sequence[CandidateConfig]) -> DoctorReport | None:
    """The doctor's checks before anything is stopped, written to ``doctor.json``.

    A problem of the host or of the retained baseline fails every candidate: :class:`PreflightError`, and
    the live service is left as it is. A single candidate's problem is said here; the candidate is then
    recorded INCOMPATIBLE without a launch (:func:`orchestrator.measure.candidate.run_candidate`).
    """
    if ctx.seams.doctor_probes is None:
        return None
    report = diagnose(ctx.cfg, [ctx.cfg.baseline, *candidates], ctx.seams.doctor_probes(), live_service=False)
    write_model(ctx.paths.doctor, report)
    blocking = report.blocking(ctx.cfg.baseline.name)
    if blocking:
        raise PreflightError(
            f"doctor: {len(blocking)} problem(s) would fail every candidate; nothing was started or stopped",
            evidence=[p.line() for p in blocking],
            hint="fix them (python -m orchestrator doctor [the same overrides] checks again), then re-run",
        )
    for problem in report.problems:
        ctx.say(f"{problem.line()}: recorded INCOMPATIBLE, not launched")
    return report


def check_retained(ctx: SweepContext, spec: LaunchSpec) -> None:
    """A resumed sweep must be configured with the retained spec it recorded: refused before anything."""
    path = ctx.retained_spec_path
    if not path.exists():
        return
    recorded = LaunchSpec.read(path)
    if recorded.fingerprint != spec.fingerprint:
        raise SpecError(
            "this sweep directory recorded a different retained configuration "
            f"({recorded.fingerprint}) than the one configured now ({spec.fingerprint})",
            evidence=diff_specs(recorded, spec),
            hint="resume with the same configuration, or start a new sweep directory",
        )


def check_not_promoted(ctx: SweepContext) -> None:
    """A sweep that promoted a candidate is finished: its verdicts compare its candidates with a baseline
    that is no longer its retained configuration, so resuming it is refused before anything."""
    state = ctx.journal.replay()
    if state.retained_candidate_file is None:
        return
    file = Path(state.retained_candidate_file)
    raise SpecError(
        f"this sweep directory promoted {state.retained_candidate} ({state.retained_fingerprint}) to its "
        "retained configuration: it is finished, and a resume would measure against another baseline",
        hint=f"start a new sweep directory; its baseline is the promoted candidate: "
        f"-cd {file.parent.parent} candidate@baseline={file.stem}",
    )


def record_retained(ctx: SweepContext, spec: LaunchSpec) -> None:
    """Write the retained spec once; a resumed sweep must be configured with the same one."""
    path = ctx.retained_spec_path
    if path.exists():
        check_retained(ctx, spec)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(spec.to_json())
    LaunchPaths(path.parent).vllm_config.write_text(spec.config_yaml)
    ctx.journal.append(
        RetainedRecorded(candidate=spec.candidate, fingerprint=spec.fingerprint, spec_file=str(path))
    )
