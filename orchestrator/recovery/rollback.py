"""``rollback``, ``stop`` and ``status``: act on what the journal says gauntlet left running.

Pipeline position: outside the sweep, reading only the sweep directory (journal, recorded specs, composed
config). All three trust a pid only when its start time matches the journal's record, so a process
gauntlet did not start is never touched.

- ``rollback`` stops every server gauntlet started that is still running, restores the retained
  configuration from its recorded spec after checking the fingerprint, waits for ready and runs the
  recovery validation. Running it twice leaves one healthy retained server.
- ``stop`` stops every server gauntlet started, the retained one included, and restores nothing (the
  newcomer's exit; ``rollback`` brings the retained configuration back). Running it twice is a no-op.
- ``status`` says what is running and whether it is healthy.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from contracts.errors import GauntletError, RollbackError, SpecError
from contracts.layout import (
    DEFAULT_SWEEPS_DIR,
    JOURNAL_FILE,
    OPENING_FILE,
    RUN_FILE,
    journal_file,
    latest_sweep,
    recovery_dir,
)
from contracts.results import CandidateRun, RecoveryValidation, read_model
from contracts.schema import GauntletConfig, read_sweep_config
from launch.spec import LaunchSpec
from orchestrator.config.validate import Sources, validate
from orchestrator.ledger.events import LiveServer, RollbackRequested, StopFinished, StopRequested
from orchestrator.ledger.journal import Journal, JournalState, RemoteJob
from orchestrator.ledger.nodes import launching_place
from orchestrator.measure.launch import Launch
from orchestrator.recovery.restore import healthy_retained, restore, validate_retained
from orchestrator.servers.context import SweepContext
from orchestrator.servers.leftovers import read_for_stopping, stop_leftovers
from orchestrator.servers.seams import Seams
from orchestrator.servers.session import Servers


def resolve_sweep_dir(arg: str | None, sweeps_dir: Path | None = None) -> Path:
    """The sweep directory given, or the latest one."""
    if arg:
        path = Path(arg)
        if not journal_file(path).exists():
            raise RollbackError(
                f"{path}: no {JOURNAL_FILE} here", hint="pass a sweep directory made by gauntlet"
            )
        return path
    sweeps = sweeps_dir if sweeps_dir is not None else Path(DEFAULT_SWEEPS_DIR)
    return latest_sweep(
        sweeps, error=RollbackError, hint="pass the sweep directory: rollback|stop|status DIR"
    )


def load_sweep_config(sweep_dir: Path) -> GauntletConfig:
    """The composed configuration a sweep recorded (config.yaml), typed and validated as at the start."""
    cfg = read_sweep_config(sweep_dir)
    validate(cfg, Sources())
    return cfg


def rollback(sweep_dir: Path, seams: Seams, *, out: TextIO = sys.stdout) -> RecoveryValidation:
    """Make the retained configuration the one healthy server, validated under load."""
    ctx = SweepContext.open(load_sweep_config(sweep_dir), sweep_dir, seams)
    state = ctx.journal.replay()
    ctx.journal.append(RollbackRequested(live=len(state.live)))
    cancel_remote_jobs(ctx.journal, sweep_dir, seams)
    keep = healthy_retained(ctx.servers, state)
    others = [s for s in state.live.values() if keep is None or s.pid != keep.pid]
    recovery = recovery_dir(sweep_dir)
    if keep is not None and not others and not state.pending and (recovery / RUN_FILE).exists():
        seams.say(
            f"the retained configuration is already the one healthy server (pid {keep.pid}); validating it"
        )
        launch = Launch(ctx, keep, recovery, read_model(recovery / RUN_FILE, CandidateRun))
        result = validate_retained(ctx, launch, state.retained_fingerprint or "")
    else:
        result = restore(ctx, reason="rollback")
    verdict = "OK" if result.ok else "FAILED"
    out.write(
        f"rollback {verdict}: {result.candidate} {result.fingerprint} pid {result.pid}\n  {result.reason}\n"
    )
    return result


def cancel_remote_jobs(journal: Journal, sweep_dir: Path, seams: Seams) -> int:
    """Cancel this sweep's unfinished scheduler jobs through their scheduler; their pids are not ours.

    The jobs are those whose journals were written on other nodes, and every job the submitit plugin
    submitted that has not returned (one still queued has no journal yet). Returns how many were asked
    to stop; each job's own signal handler tears its server down.
    """
    from orchestrator.ledger.opening import write_opening  # noqa: PLC0415
    from orchestrator.servers.scheduler import submitted_jobs  # noqa: PLC0415

    if (sweep_dir / OPENING_FILE).exists():  # first: a job that starts from now on starts nothing
        write_opening(sweep_dir, "stopped", node=launching_place().node, reason="rollback or stop requested")
    by_id = {job.job: job for job in journal.remote_jobs() if not job.finished}
    for job in submitted_jobs(sweep_dir):
        by_id.setdefault(job.job, job)
    for job in by_id.values():
        servers = f" ({len(job.live)} server(s) per {job.journal.name})" if job.live else ""
        seams.say(f"{seams.cancel_job(job, sweep_dir)}{servers}")
    return len(by_id)


def stop(sweep_dir: Path, seams: Seams, *, out: TextIO = sys.stdout) -> int:
    """Stop every server gauntlet started for this sweep, the retained one included; restore nothing.

    Returns how many it stopped (0 when nothing was running: running it twice is a no-op).
    """
    servers = Servers(Journal.of_sweep(sweep_dir, launching_place()), seams)
    state = servers.journal.replay()
    servers.journal.append(StopRequested(live=len(state.live)))
    cancel_remote_jobs(servers.journal, sweep_dir, seams)
    stopped = stop_leftovers(servers, state, reason="stop requested (nothing is restored)")
    servers.journal.append(StopFinished(stopped=stopped))
    if stopped:
        out.write(
            f"stopped {stopped} server(s) gauntlet started for {sweep_dir}; nothing it started is running "
            f"now.\n  `python -m orchestrator rollback {sweep_dir}` brings the retained configuration back\n"
        )
    else:
        out.write(f"nothing to stop: no server gauntlet started for {sweep_dir} is running\n")
    return stopped


def what_runs(sweep_dir: Path, *, stopped_by_setting: bool = False) -> list[str]:
    """What the journal says is running, as the sweep's last lines (where, and how to stop it)."""
    state = Journal.of_sweep(sweep_dir, launching_place()).replay()
    if not state.live:
        if stopped_by_setting:
            return ["retained server stopped (run.retained_after_sweep=stop): nothing left running"]
        return ["nothing gauntlet started for this sweep is running"]
    how = f"stop it with `make stop SWEEP={sweep_dir}` or `python -m orchestrator stop {sweep_dir}`"
    return [f"{_describe(live)}; {how}" for live in state.live.values()]


def _describe(live: LiveServer) -> str:
    who = "retained server" if live.role == "retained" else f"{live.role} server {live.candidate}"
    try:
        where = read_for_stopping(live.spec_file).base_url
    except (OSError, SpecError):
        where = f"port {live.port}"
    return f"{who} live: pid {live.pid} at {where} (fingerprint {live.fingerprint})"


@dataclass(frozen=True)
class StatusLine:
    """One server the journal says gauntlet started."""

    live: LiveServer
    alive: bool
    healthy: bool
    retained: bool


def status(sweep_dir: Path, seams: Seams, *, out: TextIO | None = None, as_json: bool = False) -> int:
    """Print what gauntlet has running; 0 when exactly one healthy retained server runs and nothing else.
    ``as_json``: the same facts as one JSON object (:func:`status_facts`)."""
    out = out if out is not None else sys.stdout
    servers = Servers(Journal.of_sweep(sweep_dir, launching_place()), seams)
    state = servers.journal.replay()
    warnings: list[str] = []
    lines = [_status_line(servers, state, live, warnings) for live in state.live.values()]
    jobs = servers.journal.remote_jobs()
    running = [ln for ln in lines if ln.alive]
    good = len(running) == 1 and running[0].retained and running[0].healthy and not state.pending
    settled = good and state.last_event not in ("restoring", "launching", "load_started")
    if as_json:
        facts = status_facts(sweep_dir, state, lines, warnings, jobs, settled=settled)
        out.write(json.dumps(facts, indent=2) + "\n")
        return 0 if good else 1
    out.write(f"sweep: {sweep_dir}\n")
    out.write(f"retained configuration: {state.retained_fingerprint or '(none recorded)'}\n")
    if not lines:
        out.write("nothing gauntlet started is running\n")
    for line in lines:
        live = line.live
        tag = "retained" if line.retained else live.role
        health = "healthy" if line.healthy else ("alive, NOT healthy" if line.alive else "gone")
        out.write(
            f"  {live.candidate:<20} {tag:<9} pid {live.pid:<7} port {live.port:<5} {health:<18} "
            f"{live.fingerprint}\n"
        )
    for warning in warnings:
        out.write(f"warning: {warning}\n")
    for pending in state.pending:
        out.write(f"  {pending.candidate:<20} launch announced at {pending.at} without a recorded pid\n")
    for job in jobs:
        state_word = "finished" if job.finished else "running or interrupted"
        out.write(
            f"  job {job.job} on {job.node} ({job.executor or 'unknown executor'}): {state_word}, "
            f"{len(job.live)} server(s) per its journal (not checked from here)\n"
        )
    if not settled:
        out.write(
            "state: not settled; `python -m orchestrator rollback` restores the retained configuration\n"
        )
    else:
        out.write("state: the retained configuration is the one healthy server\n")
    return 0 if good else 1


def status_facts(
    sweep_dir: Path,
    state: JournalState,
    lines: list[StatusLine],
    warnings: list[str],
    jobs: list[RemoteJob],
    *,
    settled: bool,
) -> dict[str, object]:
    """``status --json``: what the text says, as data (servers, pending launches, remote jobs, state)."""
    return {
        "sweep": str(sweep_dir),
        "retained_fingerprint": state.retained_fingerprint,
        "servers": [
            {
                "candidate": ln.live.candidate,
                "role": "retained" if ln.retained else ln.live.role,
                "pid": ln.live.pid,
                "port": ln.live.port,
                "fingerprint": ln.live.fingerprint,
                "alive": ln.alive,
                "healthy": ln.healthy,
                "retained": ln.retained,
            }
            for ln in lines
        ],
        "pending": [{"candidate": p.candidate, "announced_at": p.at} for p in state.pending],
        "jobs": [
            {
                "job": job.job,
                "node": job.node,
                "executor": job.executor,
                "finished": job.finished,
                "servers": len(job.live),
            }
            for job in jobs
        ],
        "warnings": warnings,
        "last_event": state.last_event,
        "settled": settled,
    }


def _status_line(servers: Servers, state: JournalState, live: LiveServer, warnings: list[str]) -> StatusLine:
    try:
        spec = read_for_stopping(live.spec_file)
    except (OSError, SpecError) as exc:
        warnings.append(f"cannot read {live.spec_file}: {exc}")
        return StatusLine(live, False, False, False)
    try:
        LaunchSpec.read(Path(live.spec_file))
    except SpecError as exc:
        warnings.append(f"{exc.message}: a rollback from this sweep will refuse to restore it")
    session = servers.adopt(live, spec)
    healthy = session is not None and servers.seams.supervisor.health(session.running) == 200
    retained = live.role == "retained" and live.fingerprint == state.retained_fingerprint
    return StatusLine(live, session is not None, healthy, retained)


def main_rollback(args: list[str], seams_factory: Callable[[], Seams]) -> int:
    try:
        sweep_dir = resolve_sweep_dir(args[0] if args else None)
        result = rollback(sweep_dir, seams_factory())
    except GauntletError as exc:
        print(f"gauntlet rollback: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0 if result.ok else RollbackError.exit_code


def main_stop(args: list[str], seams_factory: Callable[[], Seams]) -> int:
    try:
        stop(resolve_sweep_dir(args[0] if args else None), seams_factory())
    except GauntletError as exc:
        print(f"gauntlet stop: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


def main_status(args: list[str], seams_factory: Callable[[], Seams], *, as_json: bool = False) -> int:
    try:
        sweep_dir = resolve_sweep_dir(args[0] if args else None)
        return status(sweep_dir, seams_factory(), as_json=as_json)
    except GauntletError as exc:
        print(f"gauntlet status: {exc}", file=sys.stderr)
        return exc.exit_code
