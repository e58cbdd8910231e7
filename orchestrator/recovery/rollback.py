"""``rollback``, ``stop`` and ``status``: act on what the journal says gauntlet left running.

Pipeline position: outside the sweep, reading the sweep directory (journal, recorded specs, composed
config) or, when it is gone, the copy kept beside the port's lock (:mod:`orchestrator.ledger.offsite`). All
three trust a pid only when its start time matches the journal's record, so a process gauntlet did not
start is never touched.

One owner of a sweep's servers at a time: ``rollback`` and ``stop`` take the port's lock while they act.
When the sweep of the directory still runs (it holds the lock), they do not touch a server: they ask the
sweep (:mod:`orchestrator.ledger.requests`: a request beside the lock, SIGUSR1 to its pid; scheduler jobs
through the opening marker and their scheduler first), wait until it has unwound and released the lock,
take the lock, and then report what the sweep did, finishing what it left undone.

- ``rollback`` stops every server gauntlet started that is still running, restores the retained
  configuration from its recorded spec after checking the fingerprint, waits for ready and runs the
  recovery validation, into its own ``rollbacks/<stamp>/`` (the sweep's ``recovery/`` is never
  touched: judging gives the same verdicts before and after). Running it twice leaves one healthy retained
  server. A running sweep asked to roll back restores and validates itself.
- ``stop`` stops every server gauntlet started, the retained one included, and restores nothing (the
  newcomer's exit; ``rollback`` brings the retained configuration back). Running it twice is a no-op.
- ``status`` says what is running, whether it is healthy, and the sweep's state: settled (validated),
  restored but not yet validated, stopped by the user, a sweep running, or not settled.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from contracts.errors import GauntletError, RollbackError, SpecError, SweepDirError, SweepLockedError
from contracts.layout import (
    DEFAULT_SWEEPS_DIR,
    JOURNAL_FILE,
    OPENING_FILE,
    journal_file,
    latest_sweep,
    rollback_dir,
)
from contracts.results import RecoveryValidation
from contracts.schema import GauntletConfig, read_sweep_config
from launch.spec import LaunchSpec
from orchestrator.config.validate import Sources, validate
from orchestrator.ledger import offsite
from orchestrator.ledger.events import (
    Adopted,
    Event,
    LiveServer,
    Restored,
    RollbackRequested,
    Started,
    StopFinished,
    StopRequested,
    SweepFinished,
    TornDown,
    Validated,
    ValidationFailed,
)
from orchestrator.ledger.journal import Journal, JournalState, RemoteJob
from orchestrator.ledger.lock import Holder, SweepLock, running_sweep
from orchestrator.ledger.nodes import launching_place
from orchestrator.ledger.requests import STOPPED_BY_USER, Action, clear_request, signal_holder, write_request
from orchestrator.recovery.restore import healthy_retained, restore, validate_running
from orchestrator.servers.context import SweepContext
from orchestrator.servers.leftovers import read_for_stopping, stop_leftovers
from orchestrator.servers.seams import Seams
from orchestrator.servers.session import Servers


def resolve_sweep_dir(arg: str | None, sweeps_dir: Path | None = None) -> Path:
    """The sweep directory given, or the latest one."""
    if arg:
        path = Path(arg)
        if not journal_file(path).exists() and offsite.find_offsite(path) is None:
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


#: How long ``stop`` and ``rollback`` wait for a running sweep to unwind and release the port's lock
#: (a rollback waits for the sweep's own restore and validation).
STOP_WAIT_S = 600.0
ROLLBACK_WAIT_S = 3600.0


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
    ctx.journal.append(RollbackRequested(live=len(state.live)))
    cancel_remote_jobs(ctx.journal, sweep_dir, seams)
    keep = healthy_retained(ctx.servers, state)
    others = [s for s in state.live.values() if keep is None or s.pid != keep.pid]
    target = new_rollback_dir(sweep_dir)
    seams.say(f"this rollback's evidence: {target}")
    if keep is not None and not others and not state.pending:
        seams.say(
            f"the retained configuration is already the one healthy server (pid {keep.pid}); validating it"
        )
        return validate_running(ctx, keep, target, state.retained_fingerprint or "")
    return restore(ctx, reason="rollback", out=target)


def new_rollback_dir(sweep_dir: Path, now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> Path:
    """``rollbacks/<stamp>/`` for this rollback: a new directory, never one an earlier rollback wrote."""
    stamp = now().strftime("%Y%m%dT%H%M%SZ")
    target, n = rollback_dir(sweep_dir, stamp), 1
    while target.exists():
        n += 1
        target = rollback_dir(sweep_dir, f"{stamp}-{n}")
    return target


def stop(sweep_dir: Path, seams: Seams, *, out: TextIO = sys.stdout, wait_s: float = STOP_WAIT_S) -> int:
    """Stop every server gauntlet started for this sweep, the retained one included; restore nothing.

    A running sweep of ``sweep_dir`` is asked to stop (it tears down what it started and restores nothing);
    whatever is left afterwards is stopped here. Returns how many servers were stopped (by the sweep and
    here; 0 when nothing was running: running it twice is a no-op).
    """
    reinstate_if_lost(sweep_dir, seams)
    with acting_on(sweep_dir, sweep_port(sweep_dir), "stop", seams, wait_s=wait_s) as act:
        servers = Servers(Journal.of_sweep(sweep_dir, launching_place()), seams)
        offsite.attach(servers.journal, sweep_dir)
        state = servers.journal.replay()
        if act.holder is None:
            servers.journal.append(StopRequested(live=len(state.live)))
            cancel_remote_jobs(servers.journal, sweep_dir, seams)
        here = stop_leftovers(servers, state, reason="stop requested (nothing is restored)")
        by_sweep = act.torn_down_by_sweep() if act.holder is not None else []
        servers.journal.append(StopFinished(stopped=here + len(by_sweep)))
    if act.holder is not None:
        names = ", ".join(by_sweep) or "nothing was running"
        out.write(
            f"stopped: the running sweep (pid {act.holder.pid}) unwound at once and stopped {len(by_sweep)} "
            f"server(s) it started ({names}); nothing was restored"
            + (f"; {here} more stopped here" if here else "")
            + f".\n  nothing gauntlet started for {sweep_dir} is running now; "
            f"`python -m orchestrator rollback {sweep_dir}` brings the retained configuration back\n"
        )
    elif here:
        out.write(
            f"stopped {here} server(s) gauntlet started for {sweep_dir}; nothing it started is running "
            f"now.\n  `python -m orchestrator rollback {sweep_dir}` brings the retained configuration back\n"
        )
    else:
        out.write(f"nothing to stop: no server gauntlet started for {sweep_dir} is running\n")
    return here + len(by_sweep)


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


def sweep_port(sweep_dir: Path) -> int | None:
    """The sweep's service port: its config, else its recorded servers' (None when nothing says); a
    deleted sweep directory's from the copy beside the lock."""
    try:
        return read_sweep_config(sweep_dir).service.port
    except (GauntletError, OSError, ValueError):
        pass
    state = readable_journal(sweep_dir).replay()
    ports = [live.port for live in state.live.values()] + [p.port for p in state.pending]
    return ports[0] if ports else None


def load_for_acting(sweep_dir: Path, seams: Seams) -> GauntletConfig:
    """The sweep's configuration, after :func:`reinstate_if_lost`."""
    reinstate_if_lost(sweep_dir, seams)
    return load_sweep_config(sweep_dir)


def reinstate_if_lost(sweep_dir: Path, seams: Seams) -> None:
    """A sweep directory that is gone (or lost its journal or config) is put back from the copy kept
    beside the port's lock."""
    if offsite.needs_reinstating(sweep_dir):
        kept = offsite.find_offsite(sweep_dir)
        if kept is not None:
            back = offsite.reinstate(kept, sweep_dir)
            seams.say(
                f"{sweep_dir} lost {', '.join(back) or 'its records'}: put back from the copy kept in "
                f"{kept.folder}"
            )


@dataclass
class Acting:
    """``stop`` or ``rollback`` holding the port's lock; ``holder``: the running sweep it asked first."""

    sweep_dir: Path
    lock: SweepLock | None
    holder: Holder | None
    #: The journal's events before the request (what the sweep did is what follows).
    mark: int = 0

    def _after(self) -> Sequence[Event]:
        return Journal.of_sweep(self.sweep_dir, launching_place()).events()[self.mark :]

    def torn_down_by_sweep(self) -> list[str]:
        """The servers the sweep tore down after the request (candidate names)."""
        return [e.candidate for e in self._after() if isinstance(e, TornDown)]

    def sweep_validated(self, seams: Seams) -> RecoveryValidation | None:
        """The sweep's retained server, when it is the one healthy server and its validation passed (the
        sweep's restore after the request, or the one it had just finished when the request came)."""
        journal = Journal.of_sweep(self.sweep_dir, launching_place())
        state = journal.replay()
        live = list(state.live.values())
        if len(live) != 1 or live[0].role != "retained" or state.pending:
            return None
        (server,) = live
        passed = validated_since_start(journal.node_events(), server.pid)
        healthy = healthy_retained(Servers(journal, seams), state)
        if passed is None or healthy is None or healthy.pid != server.pid:
            return None
        return RecoveryValidation(
            ok=True,
            candidate=server.candidate,
            fingerprint=server.fingerprint,
            recorded_fingerprint=state.retained_fingerprint or "",
            pid=server.pid,
            reason=passed.reason,
        )


def validated_since_start(events: Sequence[Event], pid: int) -> Validated | None:
    """The validation that passed for the server ``pid`` since it started or was adopted (None: none did,
    or a later one failed) (pure)."""
    verdict: Validated | None = None
    for event in events:
        if isinstance(event, Started | Adopted) and event.pid == pid:
            verdict = None
        elif isinstance(event, Validated) and event.pid == pid:
            verdict = event
        elif isinstance(event, ValidationFailed) and event.pid in (pid, None):
            verdict = None
    return verdict


@contextmanager
def acting_on(
    sweep_dir: Path, port: int | None, action: Action, seams: Seams, *, wait_s: float
) -> Iterator[Acting]:
    """Hold the port's lock while acting on ``sweep_dir``; a running sweep of it is asked to unwind first.

    The request is written, scheduler jobs are stopped (marker, then cancel), then the sweep's pid is
    signalled, and the lock is awaited; another sweep (or another ``stop``/``rollback``) holding the port
    is refused, naming it. Without a known port (no config, nothing recorded) there is no lock to take.
    """
    if port is None:
        yield Acting(sweep_dir, None, None)
        return
    lock = SweepLock.for_port(port)
    holder = lock.try_acquire(sweep_dir, role=action)
    act = Acting(sweep_dir, lock, holder)
    if holder is not None:
        if not holder.owns(sweep_dir) or holder.role != "sweep":
            raise port_refusal(port, holder, sweep_dir, action)
        journal = Journal.of_sweep(sweep_dir, launching_place())
        offsite.attach(journal, sweep_dir)
        act.mark = len(journal.events())
        live = len(journal.replay().live)
        journal.append(RollbackRequested(live=live) if action == "rollback" else StopRequested(live=live))
        write_request(lock.path, action, sweep_dir)
        cancel_remote_jobs(journal, sweep_dir, seams)
        seams.say(f"the sweep of {sweep_dir} is running (pid {holder.pid}): asking it to {action}, waiting")
        if holder.pid is not None:
            signal_holder(holder.pid)
        still = lock.wait_acquire(sweep_dir, role=action, timeout_s=wait_s)
        if still is not None:
            raise SweepLockedError(
                f"the sweep of {sweep_dir} (pid {holder.pid}) did not unwind within {wait_s:.0f} s",
                holder=holder.sweep_dir,
                hint=f"see its output; Ctrl-C or `kill {holder.pid}` interrupts it (it then restores)",
            )
        clear_request(lock.path)
    try:
        yield act
    finally:
        lock.release()


def port_refusal(port: int, holder: Holder, sweep_dir: Path, action: Action) -> SweepLockedError:
    """Why ``action`` on ``sweep_dir`` cannot take the port's lock from ``holder`` (pure): another
    ``stop``/``rollback`` of the same sweep is waited for; another sweep's holder is named."""
    pid = holder.pid or "?"
    if holder.owns(sweep_dir):
        return SweepLockedError(
            f"another {holder.role} (pid {pid}) of this sweep is running; wait for it",
            holder=holder.sweep_dir,
            hint=f"run `python -m orchestrator {action} {sweep_dir}` again once it has finished "
            f"(it holds service port {port})",
        )
    who = "the sweep" if holder.role == "sweep" else f"a `{holder.role}`"
    return SweepLockedError(
        f"service port {port} is held by {who} of {holder.sweep_dir or '?'} (pid {pid}), not by {sweep_dir}",
        holder=holder.sweep_dir,
        hint=f"`{action}` acts on the sweep that owns the port; wait for it, or run `python -m "
        f"orchestrator {action} {holder.sweep_dir}`",
    )


def readable_journal(sweep_dir: Path) -> Journal:
    """The sweep's journal, or the mirror kept beside the port's lock when the sweep directory lost it
    (deleted mid-sweep: the restore then journals there, :mod:`orchestrator.ledger.offsite`)."""
    journal = Journal.of_sweep(sweep_dir, launching_place())
    if journal.path.exists():
        return journal
    kept = offsite.find_offsite(sweep_dir)
    return journal if kept is None else Journal(kept.journal, place=launching_place())


def what_runs(sweep_dir: Path, seams: Seams) -> list[str]:
    """What runs now of the servers gauntlet started for this sweep, as the sweep's last lines (where, and
    how to stop it): each server the journal (or its copy beside the lock) names is looked up in the
    process table (same pid and start time) and asked ``/health``; a recorded server that is gone is said
    to be gone, never "live". When nothing runs, the journal's last act says why (a user's ``stop``, or
    ``run.retained_after_sweep=stop``)."""
    journal = readable_journal(sweep_dir)
    servers = Servers(journal, seams)
    state = journal.replay()
    how = f"stop it with `make stop SWEEP={sweep_dir}` or `python -m orchestrator stop {sweep_dir}`"
    running: list[str] = []
    gone: list[LiveServer] = []
    unknown: list[str] = []
    for live in state.live.values():
        try:
            spec = read_for_stopping(live.spec_file)
        except (OSError, SpecError) as exc:  # nothing says which process it would be: neither claimed
            unknown.append(f"{_who(live)} (pid {live.pid}): whether it runs is unknown ({exc})")
            continue
        session = servers.adopt(live, spec)
        if session is None:
            gone.append(live)
            continue
        healthy = seams.supervisor.health(session.running) == 200
        running.append(f"{_describe(live, spec.base_url, healthy=healthy)}; {how}")
    lines = [*running, *unknown, *(_gone(live, sweep_dir) for live in gone)]
    if running or unknown:
        return lines
    last = _last_act(journal.node_events())
    if isinstance(last, SweepFinished) and last.retained == "stopped" and last.reason != STOPPED_BY_USER:
        why = "retained server stopped (run.retained_after_sweep=stop): nothing left running"
    elif isinstance(last, StopFinished | StopRequested) or (
        isinstance(last, SweepFinished) and last.reason == STOPPED_BY_USER
    ):
        why = "stopped by the user: nothing gauntlet started for this sweep is running"
    else:
        why = "nothing gauntlet started for this sweep is running"
    return [*lines, why]


def _who(live: LiveServer) -> str:
    return "retained server" if live.role == "retained" else f"{live.role} server {live.candidate}"


def _describe(live: LiveServer, where: str, *, healthy: bool) -> str:
    state = "live" if healthy else "alive but NOT answering /health"
    return f"{_who(live)} {state}: pid {live.pid} at {where} (fingerprint {live.fingerprint})"


def _gone(live: LiveServer, sweep_dir: Path) -> str:
    fix = f"; `python -m orchestrator rollback {sweep_dir}` restores it" if live.role == "retained" else ""
    return f"{_who(live)} (pid {live.pid}) is gone: no such process runs{fix}"


@dataclass(frozen=True)
class StatusLine:
    """One server the journal says gauntlet started."""

    live: LiveServer
    alive: bool
    healthy: bool
    retained: bool


#: ``status``'s states: (word in ``--json``, what the text says, whether it exits 0).
STATES: dict[str, tuple[str, bool]] = {
    "settled": ("the retained configuration is the one healthy server, validated", True),
    "restored_not_validated": (
        "restored, not yet validated: the retained server runs but its validation never passed; "
        "`python -m orchestrator rollback` validates it",
        False,
    ),
    "validation_failed": (
        "restored, validation FAILED; `python -m orchestrator rollback` restores and validates again",
        False,
    ),
    "stopped_by_user": (
        "stopped by the user: nothing gauntlet started is running, nothing was restored; "
        "`python -m orchestrator rollback` brings the retained configuration back",
        True,
    ),
    "stopped_by_setting": (
        "stopped (run.retained_after_sweep=stop) after the retained configuration was validated: "
        "nothing gauntlet started is running",
        True,
    ),
    "running": ("a sweep is running on this directory; `stop` or `rollback` ends it", False),
    "not_settled": (
        "not settled; `python -m orchestrator rollback` restores the retained configuration",
        False,
    ),
}


def sweep_state(
    events: Sequence[Event], state: JournalState, lines: Sequence[StatusLine], *, running: bool
) -> str:
    """Which of :data:`STATES` the journal and the servers found say (pure)."""
    if running:
        return "running"
    alive = [ln for ln in lines if ln.alive]
    if not alive and not state.pending:
        last = _last_act(events)
        if isinstance(last, StopFinished | StopRequested):
            return "stopped_by_user"
        if isinstance(last, SweepFinished) and last.retained == "stopped":
            return "stopped_by_user" if last.reason == STOPPED_BY_USER else "stopped_by_setting"
        return "not_settled"
    if len(alive) != 1 or state.pending or not alive[0].retained or not alive[0].healthy:
        return "not_settled"
    pid = alive[0].live.pid
    verdict = None
    for event in events:  # the last word on this server since it started or was adopted
        if isinstance(event, Started | Adopted) and event.pid == pid:
            verdict = None
        elif isinstance(event, Validated) and event.pid == pid:
            verdict = "settled"
        elif isinstance(event, ValidationFailed) and event.pid in (pid, None):
            verdict = "validation_failed"
    if verdict is None:
        return "restored_not_validated"
    return verdict


def _last_act(events: Sequence[Event]) -> Event | None:
    """The last event that says how the sweep's servers ended up (a stop, a finish, a start)."""
    acts = (StopRequested, StopFinished, SweepFinished, Started, Adopted, Restored, RollbackRequested)
    return next((e for e in reversed(events) if isinstance(e, acts)), None)


def status(sweep_dir: Path, seams: Seams, *, out: TextIO | None = None, as_json: bool = False) -> int:
    """Print what gauntlet has running and the sweep's state (:data:`STATES`); 0 when settled (validated)
    or stopped on purpose. ``as_json``: the same facts as one JSON object (:func:`status_facts`)."""
    out = out if out is not None else sys.stdout
    journal = readable_journal(sweep_dir)  # a deleted sweep directory: the copy beside the lock
    servers = Servers(journal, seams)
    events = journal.node_events()
    state = journal.replay()
    warnings: list[str] = []
    lines = [_status_line(servers, state, live, warnings) for live in state.live.values()]
    jobs = servers.journal.remote_jobs()
    holder = None if state.finished else _running_sweep(sweep_dir)  # a finished sweep runs no more
    word = sweep_state(events, state, lines, running=holder is not None)
    text, ok = STATES[word]
    if holder is not None:
        text = f"a sweep is running on this directory (pid {holder.pid}); `stop` or `rollback` ends it"
    if as_json:
        facts = status_facts(sweep_dir, state, lines, warnings, jobs, settled=word == "settled")
        facts.update(state=word, state_text=text, exit_code=0 if ok else 1)
        out.write(json.dumps(facts, indent=2) + "\n")
        return 0 if ok else 1
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
    out.write(f"state: {text}\n")
    return 0 if ok else 1


def _running_sweep(sweep_dir: Path) -> Holder | None:
    """The sweep of ``sweep_dir`` that holds its port's lock now (None: none runs, or it is unknown)."""
    port = sweep_port(sweep_dir)
    return None if port is None else running_sweep(sweep_dir, port)


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
