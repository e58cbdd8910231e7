"""Taking a sweep's servers over from a running sweep: the port's lock, the request, the wait.

Pipeline position: outside the sweep, under :mod:`.rollback` and :mod:`.stop`. One owner of a sweep's
servers at a time: ``rollback`` and ``stop`` take the port's lock while they act (:func:`acting_on`). When
the sweep of the directory still runs (it holds the lock), they do not touch a server: they ask the sweep
(:mod:`orchestrator.ledger.requests`: a request beside the lock, SIGUSR1 to its pid; scheduler jobs through
the opening marker and their scheduler first, :func:`cancel_remote_jobs`), wait until it has unwound and
released the lock, take the lock, and then report what the sweep did (:class:`Acting`), finishing what it
left undone.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from contracts.errors import SweepLockedError
from contracts.layout import SweepPaths
from contracts.results import RecoveryValidation
from orchestrator.ledger import offsite
from orchestrator.ledger.events import (
    Adopted,
    Event,
    RollbackRequested,
    Started,
    StopRequested,
    TornDown,
    Validated,
    ValidationFailed,
)
from orchestrator.ledger.journal import Journal, RemoteJob
from orchestrator.ledger.lock import Holder, SweepLock
from orchestrator.ledger.nodes import launching_place
from orchestrator.ledger.requests import Action, clear_request, signal_holder, write_request
from orchestrator.recovery.restore import healthy_retained
from orchestrator.servers.seams import Seams
from orchestrator.servers.session import Servers

#: How long ``stop`` and ``rollback`` wait for a running sweep to unwind and release the port's lock
#: (a rollback waits for the sweep's own restore and validation).
STOP_WAIT_S = 600.0

ROLLBACK_WAIT_S = 3600.0


def cancel_remote_jobs(journal: Journal, sweep_dir: Path, seams: Seams) -> list[RemoteJob]:
    """Cancel this sweep's unfinished scheduler jobs through their scheduler; their pids are not ours.

    The jobs are those whose journals were written on other nodes, and every job the submitit plugin
    submitted that has not returned (one still queued has no journal yet). Returns the jobs asked to
    stop; each job's own signal handler tears its server down.
    """
    from orchestrator.ledger.opening import write_opening  # noqa: PLC0415
    from orchestrator.servers.scheduler import submitted_jobs  # noqa: PLC0415

    if SweepPaths(sweep_dir).opening.exists():  # first: a job that starts from now on starts nothing
        write_opening(sweep_dir, "stopped", node=launching_place().node, reason="rollback or stop requested")
    by_id = {job.job: job for job in journal.remote_jobs() if not job.finished}
    for job in submitted_jobs(sweep_dir):
        by_id.setdefault(job.job, job)
    for job in by_id.values():
        servers = f" ({len(job.live)} server(s) per {job.journal.name})" if job.live else ""
        seams.say(f"{seams.cancel_job(job, sweep_dir)}{servers}")
    return list(by_id.values())


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


def port_refusal(port: int, holder: Holder, sweep_dir: Path, action: str) -> SweepLockedError:
    """Why ``action`` (``stop``, ``rollback``, ``promote``) on ``sweep_dir`` cannot take the port's lock from
    ``holder`` (pure): another ``stop``/``rollback``/``promote`` of the same sweep is waited for; another
    sweep's holder is named."""
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
