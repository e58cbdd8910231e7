"""``status`` and the sweep's last lines: what gauntlet has running for a sweep, and the sweep's state.

Pipeline position: outside the sweep (``status``) and at its end (:func:`what_runs`, the sweep's last
lines, :mod:`orchestrator.app.controller`), reading the journal or, when the sweep directory lost it, the copy
beside the port's lock (:mod:`.locate`). A recorded server is looked up in the process table (same pid and
start time) and asked ``/health``; the state is settled (validated), restored but not yet validated, stopped
by the user, a sweep running, a promotion interrupted, or not settled (:data:`STATES`). What runs and what
the gates recommend are said apart (:mod:`.recommend`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from contracts.errors import GauntletError, SpecError
from launch.spec import LaunchSpec
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
    Validated,
    ValidationFailed,
)
from orchestrator.ledger.journal import JournalState, RemoteJob
from orchestrator.ledger.live import LiveService
from orchestrator.ledger.lock import Holder, SweepLock, running_sweep
from orchestrator.ledger.requests import STOPPED_BY_USER
from orchestrator.recovery.locate import acting_sweep, live_elsewhere, readable_journal, sweep_port
from orchestrator.recovery.node_status import job_nodes, where_it_runs
from orchestrator.recovery.recommend import recommendation, recommendation_lines
from orchestrator.servers.leftovers import read_for_stopping
from orchestrator.servers.seams import Seams
from orchestrator.servers.session import Servers


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
    elsewhere = live_elsewhere(sweep_dir, seams)
    if elsewhere is not None:  # a sweep refused at its opening: the live service was left as it was
        why += (
            f"; the live service on port {elsewhere.server.port}, {elsewhere.describe()}, runs as it was "
            f"(`python -m orchestrator status {elsewhere.sweep}`)"
        )
    return [*lines, why]


def _who(live: LiveServer) -> str:
    return "retained server" if live.role == "retained" else f"{live.role} server {live.candidate}"


def _describe(live: LiveServer, where: str, *, healthy: bool) -> str:
    state = "live" if healthy else "alive but NOT answering /health"
    what = f", configuration {live.candidate}" if live.role == "retained" else ""
    return f"{_who(live)} {state}: pid {live.pid} at {where} (fingerprint {live.fingerprint}){what}"


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
    "promotion_interrupted": (
        "a promotion was interrupted: the retained configuration is still the previous one; "
        "`python -m orchestrator rollback` restores it",
        False,
    ),
    "running": ("a sweep is running on this directory; `stop` or `rollback` ends it", False),
    "live_elsewhere": (
        "nothing this sweep started runs; the live service on its port is another sweep's (named above)",
        False,
    ),
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
    if state.promoting is not None:
        return "promotion_interrupted"
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
    if holder is None and state.promoting is not None:
        holder = _running_promote(sweep_dir)
    word = sweep_state(events, state, lines, running=holder is not None)
    elsewhere = None if holder is not None else live_elsewhere(sweep_dir, seams)
    if elsewhere is not None and word == "not_settled" and not any(ln.alive for ln in lines):
        word = "live_elsewhere"
    text, ok = STATES[word]
    if holder is not None:
        text = f"a sweep is running on this directory (pid {holder.pid}); `stop` or `rollback` ends it"
        if holder.role == "promote" and state.promoting is not None:
            text = f"a promotion of {state.promoting.candidate} is running (pid {holder.pid}); wait for it"
    if word == "promotion_interrupted" and state.promoting is not None:
        text = (
            f"the promotion of {state.promoting.candidate} (begun {state.promoting.at}) was interrupted: "
            f"the retained configuration is still {state.retained_candidate or 'the recorded one'}; "
            f"`python -m orchestrator rollback {sweep_dir}` restores it"
        )
    recommendations = recommendation_lines(sweep_dir, state)
    if elsewhere is not None and word == "live_elsewhere":
        text = (
            f"nothing this sweep started runs; the live service on port {elsewhere.server.port} is "
            f"{elsewhere.describe()}: `python -m orchestrator status {elsewhere.sweep}` says its state"
        )
    if as_json:
        facts = status_facts(sweep_dir, state, lines, warnings, jobs, settled=word == "settled")
        facts.update(state=word, state_text=text, exit_code=0 if ok else 1)
        facts["live_service"] = None if elsewhere is None else _elsewhere_facts(elsewhere, servers)
        facts.update(_retained_facts(sweep_dir, state))
        out.write(json.dumps(facts, indent=2) + "\n")
        return 0 if ok else 1
    out.write(f"sweep: {sweep_dir}\n")
    out.write(f"retained configuration: {state.retained_fingerprint or '(none recorded)'}{_named(state)}\n")
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
        out.writelines(f"{node}\n" for node in where_it_runs(live, seams))
    if elsewhere is not None:
        out.write(f"live service on port {elsewhere.server.port}: {_elsewhere_line(elsewhere, servers)}\n")
    for warning in warnings:
        out.write(f"warning: {warning}\n")
    for pending in state.pending:
        out.write(f"  {pending.candidate:<20} launch announced at {pending.at} without a recorded pid\n")
    for job in jobs:
        state_word = "finished" if job.finished else "running or interrupted"
        nodes = [] if job.finished else job_nodes(job.live, seams)
        checked = "checked on its nodes:" if nodes else "(not checked from here)"
        out.write(
            f"  job {job.job} on {job.node} ({job.executor or 'unknown executor'}): {state_word}, "
            f"{len(job.live)} server(s) per its journal {checked}\n"
        )
        out.writelines(f"{node}\n" for node in nodes)
    for advice in recommendations:
        out.write(f"{advice}\n")
    out.write(f"state: {text}\n")
    return 0 if ok else 1


def _named(state: JournalState) -> str:
    """The retained configuration's name, and whether a promotion made it the retained one."""
    if state.retained_candidate is None:
        return ""
    how = ", promoted" if state.retained_candidate_file is not None else ""
    return f" ({state.retained_candidate}{how})"


def _retained_facts(sweep_dir: Path, state: JournalState) -> dict[str, object]:
    """``status --json``: the retained configuration's name and candidate file (a promotion's), the
    gates' recommendation and whether it is adopted, an interrupted promotion."""
    rec = recommendation(sweep_dir, state)
    return {
        "retained_candidate": state.retained_candidate,
        "retained_candidate_file": state.retained_candidate_file,
        "recommended": None if rec is None else {"candidate": rec.name, "promoted": rec.promoted},
        "promoting": None if state.promoting is None else state.promoting.candidate,
    }


def _elsewhere_healthy(live: LiveService, servers: Servers) -> bool:
    try:
        session = servers.adopt(live.server, read_for_stopping(live.server.spec_file))
    except (OSError, SpecError):
        return False
    return session is not None and servers.seams.supervisor.health(session.running) == 200


def _elsewhere_line(live: LiveService, servers: Servers) -> str:
    health = "healthy" if _elsewhere_healthy(live, servers) else "alive, NOT healthy"
    return f"{live.describe()}, {health}, {live.server.fingerprint} (not this sweep's)"


def _elsewhere_facts(live: LiveService, servers: Servers) -> dict[str, object]:
    return {
        "sweep": str(live.sweep),
        "candidate": live.server.candidate,
        "pid": live.server.pid,
        "port": live.server.port,
        "fingerprint": live.server.fingerprint,
        "healthy": _elsewhere_healthy(live, servers),
    }


def _running_sweep(sweep_dir: Path) -> Holder | None:
    """The sweep of ``sweep_dir`` that holds its port's lock now (None: none runs, or it is unknown)."""
    port = sweep_port(sweep_dir)
    return None if port is None else running_sweep(sweep_dir, port)


def _running_promote(sweep_dir: Path) -> Holder | None:
    """The ``promote`` of ``sweep_dir`` that holds its port's lock now (None: none does)."""
    port = sweep_port(sweep_dir)
    if port is None:
        return None
    lock = SweepLock.for_port(port)
    holder = lock.try_acquire(sweep_dir, role="status")
    if holder is None:
        lock.release()
        return None
    return holder if holder.owns(sweep_dir) and holder.role == "promote" else None


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


def main_status(args: list[str], seams_factory: Callable[[], Seams], *, as_json: bool = False) -> int:
    try:
        seams = seams_factory()
        sweep_dir = acting_sweep(args[0] if args else None, seams, command="status")
        return status(sweep_dir, seams, as_json=as_json)
    except GauntletError as exc:
        print(f"gauntlet status: {exc}", file=sys.stderr)
        return exc.exit_code
