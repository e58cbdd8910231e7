"""Leftover servers: stop what an earlier run left running, and only what the journal says it started.

Pipeline position: the first step of a sweep, of a restore and of ``stop``. A pid is trusted only when its
start time matches the journal's record (a reused pid belongs to somebody else); a launch that was
announced but whose pid was never recorded (a crash between the two lines) is found by its exact argv and
a start time no earlier than the announcement. A sweep also takes over the retained server a previous
sweep left as the live service: it must be the configured baseline, and is stopped before measuring.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from contracts.errors import SpecError
from contracts.layout import SERVER_LOG
from contracts.ray_backend import RAY_HEAD_MODULE
from launch.spec import HEAD_ADDRESS, LaunchSpec
from launch.tracking import NodeProcess
from orchestrator.ledger.events import Launching, LiveServer, TornDown, Vanished
from orchestrator.ledger.journal import JournalState
from orchestrator.ledger.live import LiveService, sweep_journal
from orchestrator.servers.context import SweepContext
from orchestrator.servers.seams import ProcessInfo
from orchestrator.servers.session import Servers


def read_for_stopping(spec_file: str) -> LaunchSpec:
    """A recorded spec read without trusting it: stopping needs the port, not an intact fingerprint."""
    spec, recorded = LaunchSpec.parse_json(Path(spec_file).read_text(), source=spec_file)
    return replace(spec, fingerprint=recorded)


def runs_now(servers: Servers) -> Callable[[LiveServer], bool]:
    """Whether a recorded server still runs: the same pid and start time, through the supervisor (its spec
    read without trusting it, as for stopping); what :func:`orchestrator.ledger.live.live_service` asks."""

    def alive(server: LiveServer) -> bool:
        try:
            return servers.adopt(server, read_for_stopping(server.spec_file)) is not None
        except (OSError, SpecError):
            return False

    return alive


def find_unrecorded(pending: Launching, processes: Sequence[ProcessInfo]) -> list[tuple[int, float]]:
    """Session leaders started after ``pending`` was announced whose argv is its spec's (pure).

    A pid is only trusted when its argv equals the recorded spec's (the interpreter path aside) and it
    started no earlier than the announcement, so a process gauntlet did not start is never touched.
    """
    try:
        spec = LaunchSpec.read(Path(pending.spec_file))
    except (OSError, SpecError):
        return []
    return [(p.pid, p.create_time) for p in _started(pending, processes) if runs(p.cmdline, spec.argv)]


def find_unrecorded_followers(
    pending: Launching, spec: LaunchSpec, processes: Sequence[ProcessInfo]
) -> list[tuple[int, ProcessInfo]]:
    """The followers of an unrecorded multi-node launch, by node: session leaders started after the
    announcement that run a follower's command, on this machine or behind ``srun`` (a SLURM step)."""
    found = []
    for p in _started(pending, processes):
        for node in range(1, spec.nodes):
            if runs(p.cmdline, spec.node_argv(node), wrapped=True):
                found.append((node, p))
    return found


def _started(pending: Launching, processes: Sequence[ProcessInfo]) -> list[ProcessInfo]:
    return [p for p in processes if p.pid == p.pgid and p.wall_start >= pending.at_epoch - 1.0]


def runs(cmdline: Sequence[str], argv: Sequence[str], *, wrapped: bool = False) -> bool:
    """``cmdline`` runs ``argv``: the same arguments after the program (whose path may differ), the head
    node's address wherever ``argv`` has the placeholder; ``wrapped``: also behind ``srun``'s options; a
    Ray spec's head also behind :mod:`launch.ray_head` (which runs Ray's head, then ``argv``)."""
    tail = tuple(argv[1:])
    behind = wrapped and tuple(cmdline[:1]) == ("srun",)
    behind = behind or tuple(cmdline[1:3]) == ("-m", RAY_HEAD_MODULE)  # a Ray head's (launch.ray_head)
    if len(cmdline) != len(tail) + 1 and not (behind and len(cmdline) > len(tail)):
        return False
    got = tuple(cmdline[len(cmdline) - len(tail) :])
    return all(_same(want, have) for want, have in zip(tail, got, strict=True))


def _same(want: str, have: str) -> bool:
    """One argument: the same, or the same with the head's address where ``want`` has the placeholder
    (the whole item, or a part of it: Ray's ``--address {head_address}:PORT``)."""
    if want in (have, HEAD_ADDRESS):
        return True
    if HEAD_ADDRESS not in want:
        return False
    pattern = r"\S+".join(re.escape(part) for part in want.split(HEAD_ADDRESS))
    return re.fullmatch(pattern, have) is not None


def stop_leftovers(
    servers: Servers, state: JournalState, *, reason: str, retained_reason: str | None = None
) -> int:
    """Stop every server the journal says may still run (announced or recorded); returns how many.

    ``reason`` is said for each (``retained_reason`` for the retained server, when it differs).
    """
    stopped = sum(_stop_unrecorded(servers, pending, reason) for pending in state.pending)
    for live in list(state.live.values()):
        why = retained_reason if live.role == "retained" and retained_reason else reason
        stopped += _stop_recorded(servers, live, why)
    return stopped


def _stop_unrecorded(servers: Servers, pending: Launching, reason: str) -> int:
    """A launch announced without a recorded pid: find it by argv and start time, adopt it, stop it."""
    stopped = 0
    for pid, create_time in find_unrecorded(pending, servers.seams.processes()):
        try:
            spec = LaunchSpec.read(Path(pending.spec_file))
        except (OSError, SpecError):
            continue
        log = Path(pending.spec_file).with_name(SERVER_LOG)
        followers = [
            NodeProcess(node=node, name="", pid=p.pid, pgid=p.pgid, create_time=p.create_time,
                     log_path=str(log.with_name(f"{log.stem}.node{node}{log.suffix}")))
            for node, p in find_unrecorded_followers(pending, spec, servers.seams.processes())
        ]  # fmt: skip
        live = pending.found(pid=pid, create_time=create_time, log_path=str(log), followers=followers)
        session = servers.adopt(live, spec)
        if session is None:
            continue
        servers.journal.append(live)
        servers.seams.say(f"stopping {pending.candidate} (pid {pid}): launched but never recorded ({reason})")
        session.teardown()
        stopped += 1
    servers.journal.append(Vanished(candidate=pending.candidate, fingerprint=pending.fingerprint))
    return stopped


def _stop_recorded(servers: Servers, live: LiveServer, reason: str) -> int:
    """A server the journal recorded: stop it if it still runs (same pid and start time), else note it."""
    try:
        spec = read_for_stopping(live.spec_file)
    except (OSError, SpecError) as exc:
        servers.seams.say(f"cannot read {live.spec_file} ({exc}); pid {live.pid} is left as it is")
        return 0
    session = servers.adopt(live, spec)
    if session is None:
        servers.journal.append(Vanished(candidate=live.candidate, pid=live.pid, fingerprint=live.fingerprint))
        return 0
    servers.seams.say(f"stopping {live.candidate} (pid {live.pid}): {reason}")
    session.teardown()
    return 1


def take_over_live_service(ctx: SweepContext, live: LiveService, *, keep: bool = False) -> None:
    """The live retained server another sweep or rollback left serving (``live``, found from the ledger and
    checked against the configured baseline by :func:`orchestrator.measure.begin.begin`): record, stop.

    With ``keep`` (zero-downtime) it is recorded in this sweep's journal but not stopped: this sweep now
    answers for it, and ``rollback``/``stop`` of this sweep find it.
    """
    server, previous = live.server, live.sweep
    try:
        live_spec = LaunchSpec.read(Path(server.spec_file))
    except (OSError, SpecError) as exc:
        ctx.say(f"cannot read the live server's spec {server.spec_file}: {exc}; leaving pid {server.pid}")
        return
    session = ctx.servers.adopt(server, live_spec)
    if session is None:
        return
    ctx.journal.append(server.adopted(source=str(previous)))  # a retained server: it stays "retained"
    if keep:
        ctx.say(
            f"live service {server.candidate} (pid {server.pid}) recorded and left serving "
            "(zero-downtime: no candidate runs on this host)"
        )
        return
    ctx.say(f"live service {server.candidate} (pid {server.pid}) recorded as the baseline; stopping it")
    session.teardown()
    sweep_journal(previous).append(
        TornDown(candidate=server.candidate, pid=server.pid, fingerprint=server.fingerprint, by=str(ctx.dir))
    )
