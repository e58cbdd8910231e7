"""Interrupts wait while a server is being torn down: Ctrl-C, SIGTERM or a ``stop`` request act after it.

Pipeline position: used by :meth:`orchestrator.servers.session.ServerSession.teardown` around "tearing
down, teardown, torn down". An exception raised by a signal handler in the middle of a teardown leaves it
half done: the server may outlive its SIGTERM with no SIGKILL to follow, and the journal has no
``torn_down`` line (a CI run lost one that way: the scheduler's SIGTERM landed in a job's teardown). A
teardown is bounded (grace period, SIGKILL, port and GPU waits), so the interrupt is held until it ends and
then delivered to the handler that was in place, once: the first is said when it arrives, later ones
during the same teardown add nothing (one interrupt unwinds). SIGKILL still ends everything at once.

Python runs signal handlers in the main thread only, so only a teardown in the main thread is shielded.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from orchestrator.ledger.requests import REQUEST_SIGNAL

#: What a teardown holds back: Ctrl-C, the scheduler's (or a user's) SIGTERM, `stop`/`rollback`'s request.
SHIELDED = (signal.SIGINT, signal.SIGTERM, REQUEST_SIGNAL)


@contextmanager
def interrupts_held(say: Callable[[str], None], what: str) -> Iterator[None]:
    """Hold :data:`SHIELDED` signals while the block runs (``what`` says what it does), then deliver the
    first one that arrived to the handler it would have reached."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[tuple[int, FrameType | None]] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        if not held:
            say(f"{signal.Signals(signum).name}: {what} first; the interrupt follows once it is done")
        held.append((signum, frame))

    previous = {sig: signal.signal(sig, hold) for sig in SHIELDED}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if held:
            signum, frame = held[0]
            deliver(previous[signal.Signals(signum)], signum, frame)


def deliver(handler: object, signum: int, frame: FrameType | None) -> None:
    """Call ``handler`` (what :func:`signal.getsignal` returned) for ``signum`` as the signal would have."""
    if callable(handler):
        handler(signum, frame)
    elif handler == signal.SIG_DFL:  # e.g. SIGTERM's default: end the process, as it would have
        os.kill(os.getpid(), signum)
