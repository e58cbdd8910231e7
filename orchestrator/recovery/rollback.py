"""``rollback``: make the retained configuration the one healthy server, validated under load.

Pipeline position: outside the sweep, beside :mod:`.stop` and :mod:`.status`, acting on what the journal
says gauntlet left running (the sweep found by :mod:`.locate`; a running sweep asked first, under the port's
lock, by :mod:`.handover`). All three trust a pid only when its start time matches the journal's record, so
a process gauntlet did not start is never touched.

``rollback`` stops every server gauntlet started that is still running, restores the retained configuration
from its recorded spec after checking the fingerprint, waits for ready and runs the recovery validation
(:mod:`.restore`), into its own ``rollbacks/<stamp>/`` (the sweep's ``recovery/`` is never touched: judging
gives the same verdicts before and after). Running it twice leaves one healthy retained server. A running
sweep asked to roll back restores and validates itself.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from contracts.errors import GauntletError, PortInUseError, RollbackError, SweepDirError, exit_code_for
from contracts.layout import latest_link, point_latest, previous_latest, rollback_dir
from contracts.results import RecoveryValidation
from contracts.schema import GauntletConfig
from orchestrator.ledger import offsite
from orchestrator.ledger.events import RollbackRequested
from orchestrator.ledger.journal import Journal
from orchestrator.ledger.live import LiveService, sweep_journal
from orchestrator.ledger.nodes import launching_place
from orchestrator.recovery.drain import wait_released
from orchestrator.recovery.handover import ROLLBACK_WAIT_S, acting_on, cancel_remote_jobs
from orchestrator.recovery.interrupted import interrupted_lines, sigterm_interrupts
from orchestrator.recovery.locate import acting_sweep, live_elsewhere, load_for_acting
from orchestrator.recovery.restore import as_retained, healthy_retained, restore, validate_running
from orchestrator.servers.context import SweepContext
from orchestrator.servers.leftovers import runs_now
from orchestrator.servers.seams import Seams


def rollback(
    sweep_dir: Path, seams: Seams, *, out: TextIO = sys.stdout, wait_s: float = ROLLBACK_WAIT_S
) -> RecoveryValidation:
    """Make the retained configuration the one healthy server, validated under load.

    A running sweep of ``sweep_dir`` is asked to restore and validate itself; otherwise (or when it could
    not) the restore happens here, into ``rollbacks/<stamp>/``.
    """
    cfg = load_for_acting(sweep_dir, seams)
    with acting_on(sweep_dir, cfg.service.port, "rollback", seams, wait_s=wait_s) as act:
        if act.holder is not None:
            done = act.sweep_validated(seams)
            if done is not None:
                out.write(
                    f"rollback OK: the running sweep (pid {act.holder.pid}) unwound; the retained "
                    f"configuration it restored is the one healthy server, validated: {done.candidate} "
                    f"{done.fingerprint} pid {done.pid}\n  {done.reason}\n"
                )
                return done
            seams.say("the sweep ended without a validated retained server: restoring it here")
        try:
            result = _rollback_here(sweep_dir, cfg, seams)
        except SweepDirError as exc:  # the rollback's own evidence did not fit: no sweep is stopping here
            raise SweepDirError(
                f"{exc.cause}; the rollback stops here, its validation unfinished "
                f"(`python -m orchestrator status {sweep_dir}` says what runs)",
                cause=exc.cause,
                hint=exc.hint,
            ) from exc
    if result.ok and act.holder is None:
        answer_for_the_service(sweep_dir, cfg.service.port, seams)
    verdict = "OK" if result.ok else "FAILED"
    out.write(
        f"rollback {verdict}: {result.candidate} {result.fingerprint} pid {result.pid}\n  {result.reason}\n"
    )
    return result


def _rollback_here(sweep_dir: Path, cfg: GauntletConfig, seams: Seams) -> RecoveryValidation:
    """The rollback itself, under the port's lock: into its own ``rollbacks/<stamp>/``."""
    ctx = SweepContext.open(cfg, sweep_dir, seams)
    offsite.attach(ctx.journal, sweep_dir)
    state = ctx.journal.replay()
    runs = runs_now(ctx.servers)
    if not state.pending and not any(runs(s) for s in state.live.values()):  # whose is the port, then?
        live = live_elsewhere(sweep_dir, seams, cfg.service.port)
        if live is not None:  # refused before this sweep's journal or its jobs are touched
            raise held_by_live_service(sweep_dir, cfg.service.port, live, state.retained_fingerprint)
    ctx.journal.append(RollbackRequested(live=len(state.live)))
    cancelled = cancel_remote_jobs(ctx.journal, sweep_dir, seams)
    keep = healthy_retained(ctx.servers, state)
    if cancelled and keep is None:  # the old jobs' servers must be gone before the restore takes the port
        rpc = [cfg.host.rpc_port] if cfg.host.nodes > 1 else []
        ports = sorted({cfg.service.port, *rpc, *(s.port for job in cancelled for s in job.live)})
        slurm = [job.job for job in cancelled if job.executor == "slurm"]
        wait_released(slurm, ports, queued=seams.jobs_queued, port_taken=seams.port_taken, say=seams.say,
                      sweep_dir=str(sweep_dir))  # fmt: skip
    others = [s for s in state.live.values() if keep is None or s.pid != keep.pid]
    target = new_rollback_dir(sweep_dir)
    seams.say(f"this rollback's evidence: {target}")
    if state.promoting is not None:
        seams.say(
            f"a promotion of {state.promoting.candidate} was interrupted (begun {state.promoting.at}): the "
            f"retained configuration is still {state.retained_candidate or 'the one recorded'}, restored here"
        )
    if keep is not None and not others and not state.pending:
        seams.say(
            f"the retained configuration is already the one healthy server (pid {keep.pid}); validating it"
        )
        return validate_running(as_retained(ctx, state), keep, target, state.retained_fingerprint or "")
    return restore(ctx, reason="rollback", out=target)


def held_by_live_service(
    sweep_dir: Path, port: int, live: LiveService, retained: str | None
) -> PortInUseError:
    """``rollback`` of a sweep none of whose servers runs, while gauntlet's live service on its port is
    another sweep's (pure): refused before anything is stopped or started, naming that sweep."""
    same = live.server.fingerprint == retained
    what = (
        "the same retained configuration this sweep recorded"
        if same
        else f"{live.server.fingerprint}, not this sweep's retained {retained or '(none recorded)'}"
    )
    instead = (
        ""
        if same
        else f"; to serve this sweep's retained configuration instead, stop the live service first with "
        f"`python -m orchestrator stop {live.sweep}` (nothing serves until this one is restored)"
    )
    return PortInUseError(
        f"service port {port} is held by gauntlet's live service, {live.describe()}, which runs {what}; "
        f"nothing of {sweep_dir} runs, and nothing was stopped or started",
        hint=f"`python -m orchestrator status {live.sweep}` says its state and `python -m orchestrator "
        f"rollback {live.sweep}` validates it{instead}",
    )


def answer_for_the_service(sweep_dir: Path, port: int, seams: Seams) -> None:
    """After this sweep's retained server was validated as the live service: the ledger says so again.
    ``<sweeps>/latest`` (beside the sweep) that points to a sweep with no server of its own running is
    moved here, and the copy beside the port's lock that names another sweep is made this one's."""
    sweeps = sweep_dir.parent
    latest = previous_latest(sweeps)
    if latest is not None and latest.resolve() != sweep_dir.resolve():
        try:
            idle = not sweep_journal(latest).replay().live
        except (GauntletError, OSError):
            idle = False
        if idle:
            point_latest(sweeps, sweep_dir)
            seams.say(
                f"{latest_link(sweeps)} pointed to {latest}, which runs no server; it points to "
                f"{sweep_dir} again, whose retained server is the live service"
            )
    kept = offsite.port_offsite(port)
    if kept is None or Path(kept.sweep_dir) != sweep_dir.resolve():
        try:
            offsite.keep_offsite(Journal.of_sweep(sweep_dir, launching_place()), sweep_dir, port)
        except OSError as exc:
            seams.say(f"could not keep a copy of the retained configuration beside the port's lock: {exc}")


def new_rollback_dir(sweep_dir: Path, now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> Path:
    """``rollbacks/<stamp>/`` for this rollback: a new directory, never one an earlier rollback wrote."""
    stamp = now().strftime("%Y%m%dT%H%M%SZ")
    target, n = rollback_dir(sweep_dir, stamp), 1
    while target.exists():
        n += 1
        target = rollback_dir(sweep_dir, f"{stamp}-{n}")
    return target


def main_rollback(args: list[str], seams_factory: Callable[[], Seams]) -> int:
    sweep_dir: Path | None = None
    try:
        seams = seams_factory()
        sweep_dir = acting_sweep(args[0] if args else None, seams, command="rollback")
        with sigterm_interrupts():  # SIGTERM unwinds as Ctrl-C does, then says what it left
            result = rollback(sweep_dir, seams)
    except GauntletError as exc:
        print(f"gauntlet rollback: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        if sweep_dir is not None:
            print("\n".join(interrupted_lines("rollback", sweep_dir, seams, exc)), file=sys.stderr)
        return exit_code_for(exc)
    return 0 if result.ok else RollbackError.exit_code
