"""``rollback`` and ``promote`` interrupted by SIGTERM or Ctrl-C: unwound as Ctrl-C, then said.

Pipeline position: around the two commands that launch a server outside a sweep
(:func:`orchestrator.recovery.rollback.main_rollback`, :func:`orchestrator.recovery.promote.main_promote`).
SIGTERM's default ends the process where it stands: no handler runs, nothing is said, and a server the
command launched runs on (the journal names it, so ``status``, ``stop`` and the next ``rollback`` find it,
but the command itself never said what it left). Here SIGTERM raises :class:`KeyboardInterrupt`, as in a
sweep (:mod:`orchestrator.app.entry`), so both unwind as after Ctrl-C: a server still starting is torn down
(its session's rule), a restored retained server stays up unvalidated (the restore's rule: it is the live
service), and a promotion restores the previous retained configuration (:mod:`.promote`). Then the command
says what runs now (:func:`orchestrator.recovery.status.what_runs`) and how to finish, and exits 130.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from contracts.errors import GauntletError
from orchestrator.recovery.status import what_runs
from orchestrator.servers.seams import Seams


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """While the block runs, SIGTERM raises :class:`KeyboardInterrupt` (main thread only: Python runs
    signal handlers there); the previous handler is put back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupted_lines(command: str, sweep_dir: Path, seams: Seams, exc: KeyboardInterrupt) -> list[str]:
    """What an interrupted ``command`` says: that it stopped, what runs now, and how to finish."""
    why = str(exc) or "Ctrl-C"
    try:
        runs = what_runs(sweep_dir, seams)
    except (GauntletError, OSError) as err:
        runs = [f"what runs cannot be read ({err}): `python -m orchestrator status {sweep_dir}` says it"]
    return [
        f"gauntlet {command}: interrupted ({why}) before it finished; what runs now:",
        *(f"  {line}" for line in runs),
        f"  `python -m orchestrator status {sweep_dir}` says whether it is validated; "
        f"`python -m orchestrator rollback {sweep_dir}` makes the retained configuration the one healthy "
        "server, validated",
    ]
