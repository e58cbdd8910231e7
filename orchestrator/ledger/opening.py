"""The sweep's opening marker (``<sweep>/opening.json``): whether jobs on other nodes may start anything.

Pipeline position: the orchestrator's ledger, beside the journal. The launching process writes it while
it opens the sweep; ``rollback`` and ``stop`` write ``stopped`` before they signal any job; a job reads it
before it starts and at each checkpoint (:func:`stop_checkpoint`). Why the order matters:
:mod:`orchestrator.app.jobs`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from contracts.layout import OPENING_FILE, SweepPaths
from orchestrator.ledger.journal import utc_now

#: ``stopped``: ``rollback`` or ``stop`` ended the sweep; a job that starts afterwards starts nothing.
OpeningState = Literal["opening", "open", "failed", "stopped"]


@dataclass(frozen=True)
class Opening:
    """What the launching process wrote about opening the sweep."""

    state: OpeningState
    reason: str = ""
    node: str = ""
    at: str = ""


def write_opening(sweep_dir: Path, state: OpeningState, *, node: str, reason: str = "") -> None:
    """Write the opening marker atomically (jobs on other nodes read it from the shared directory)."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    tmp = sweep_dir / f".{OPENING_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps({"state": state, "reason": reason, "node": node, "at": utc_now()}) + "\n")
    os.replace(tmp, SweepPaths(sweep_dir).opening)


def read_opening(sweep_dir: Path) -> Opening | None:
    """The opening marker, or None when there is none (or it cannot be read: then nothing may start)."""
    try:
        data = json.loads(SweepPaths(sweep_dir).opening.read_text())
        return Opening(state=data["state"], reason=data.get("reason", ""), node=data.get("node", ""),
                       at=data.get("at", ""))  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError):
        return None


def why_not_open(sweep_dir: Path) -> str | None:
    """Why a job must not start anything (None when the sweep opened)."""
    opening = read_opening(sweep_dir)
    if opening is None:
        return f"no readable {OPENING_FILE} in {sweep_dir}: the sweep was not opened"
    if opening.state == "failed":
        return f"the sweep did not open: {opening.reason}"
    if opening.state == "stopped":
        return f"the sweep was stopped: {opening.reason}"
    if opening.state != "open":
        return f"the sweep is still {opening.state} (its opening did not finish)"
    return None


class JobInterrupted(KeyboardInterrupt):
    """The scheduler asked the job to stop (SIGTERM): unwinds like Ctrl-C, tearing the server down."""


def stop_checkpoint(sweep_dir: Path) -> Callable[[], None]:
    """A job's checkpoint (before each launch and each profile): the sweep's marker says ``stopped``.

    The scheduler's SIGTERM is the fast path; the marker, written before any job is signalled, is the
    one that cannot be lost. A signal can miss its job (submitit's local controller forwards SIGTERM only
    to the tasks it has started) and an exception raised by a signal handler can be swallowed where it
    lands (a finalizer, an event-loop callback): a CI run saw a job measure on for 12 s after ``stop``.
    From the next checkpoint on, such a job stops as if interrupted.
    """

    def check() -> None:
        opening = read_opening(sweep_dir)
        if opening is not None and opening.state == "stopped":
            raise JobInterrupted(f"the sweep was stopped ({opening.reason or 'stop'}), seen at a checkpoint")

    return check
