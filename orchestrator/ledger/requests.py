"""A request to a running sweep: ``stop`` or ``rollback`` asks the sweep that owns the port to unwind.

Pipeline position: the orchestrator's ledger, beside the port's lock (:mod:`orchestrator.ledger.lock`).
One process owns a sweep's servers at a time. When ``stop DIR`` or ``rollback DIR`` finds the port's lock
held by the sweep of DIR, it does not touch a server itself; it

1. writes the request (``<lock dir>/port-<port>.request.json``: action, sweep directory, its own pid)
   atomically, *then*
2. sends the lock holder's pid :data:`REQUEST_SIGNAL` (SIGUSR1; the pid is trusted only while the lock is
   held, and the holder wrote it), and
3. waits for the lock (:meth:`~orchestrator.ledger.lock.SweepLock.wait_acquire`), then acts under it.

The sweep's handler (:class:`orchestrator.app.controller.SweepController`) reads the request and, while it
measures, raises :class:`SweepRequested` (a ``KeyboardInterrupt``: it unwinds like Ctrl-C, tearing down the
server it holds) and remembers it for its checkpoints (a raise can be swallowed where it lands); while it
restores, it only remembers it and honours it once the restore ended, so nothing ever races the sweep's own
restore. ``stop``: the sweep restores nothing and stops every server it started; ``rollback``: the sweep
restores and validates the retained configuration, as after Ctrl-C. A signal without a readable request is
a ``rollback`` (the safe reading: the service comes back). SIGUSR1 was chosen because SIGTERM and SIGINT
already mean "interrupt and restore" to the sweep and to schedulers.
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from orchestrator.ledger.journal import utc_now

#: What ``stop`` or ``rollback`` asks of the running sweep.
Action = Literal["stop", "rollback"]
#: The signal that tells the sweep a request is waiting.
REQUEST_SIGNAL = signal.SIGUSR1
#: The reason a sweep ended by ``stop`` journals in ``sweep_finished`` (``status``: "stopped by the user").
STOPPED_BY_USER = "stopped by the user"


@dataclass(frozen=True)
class Request:
    """One request: what to do, for which sweep, and who asked."""

    action: Action
    sweep_dir: str
    pid: int
    at: str = ""

    def describe(self) -> str:
        return f"`{self.action}` (pid {self.pid}) asked the sweep to stop"


class SweepRequested(KeyboardInterrupt):
    """The running sweep was asked to ``stop`` or ``rollback``: it unwinds like Ctrl-C."""

    def __init__(self, request: Request) -> None:
        super().__init__(f"{request.action} requested by pid {request.pid}")
        self.request = request


def request_file(lock_path: Path) -> Path:
    """``port-<port>.request.json`` beside the port's lock file ``port-<port>.lock``."""
    return lock_path.with_suffix(".request.json")


def write_request(lock_path: Path, action: Action, sweep_dir: Path) -> Request:
    """Write the request atomically (before the signal: the sweep reads it in its handler)."""
    request = Request(action=action, sweep_dir=str(sweep_dir.resolve()), pid=os.getpid(), at=utc_now())
    path = request_file(lock_path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(request.__dict__) + "\n")
    os.replace(tmp, path)
    return request


def read_request(lock_path: Path, sweep_dir: Path | None = None) -> Request:
    """The request waiting beside the lock; a ``rollback`` when none is readable (or it is not for
    ``sweep_dir``)."""
    try:
        data = json.loads(request_file(lock_path).read_text())
        request = Request(
            action="stop" if data["action"] == "stop" else "rollback",
            sweep_dir=str(data["sweep_dir"]),
            pid=int(data["pid"]),
            at=str(data.get("at", "")),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return Request(action="rollback", sweep_dir=str(sweep_dir or ""), pid=0)
    if sweep_dir is not None and request.sweep_dir != str(sweep_dir.resolve()):
        return Request(action="rollback", sweep_dir=str(sweep_dir.resolve()), pid=request.pid, at=request.at)
    return request


def clear_request(lock_path: Path) -> None:
    """Remove a request once it was acted on (the next sweep on the port must not read it)."""
    request_file(lock_path).unlink(missing_ok=True)


def signal_holder(pid: int) -> bool:
    """Send :data:`REQUEST_SIGNAL` to the lock's holder; False when that process is gone."""
    try:
        os.kill(pid, REQUEST_SIGNAL)
    except ProcessLookupError:
        return False
    return True
