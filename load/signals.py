"""Signals that land while the load runner's event loop runs: acted on once the loop has unwound.

Pipeline position: :func:`load.runner.run_profile` runs its loop through :func:`run_cancelling_on_signals`.
A Python signal handler runs wherever the main thread happens to be. One that raises inside a uvloop
transport callback (a stream's ``data_received``) has its exception taken by uvloop as a transport error,
and the signal is lost: a SIGTERMed sweep ran on and exited 0, and a job preempted by submitit's SIGUSR2
(checkpoint, requeue, ``SystemExit``) measured on to the end and was never requeued (a CI run).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

#: submitit's preemption signal (``SUBMITIT_PREEMPT_SIGNAL``, USR2 unless set): checkpoint, requeue, exit.
PREEMPT_SIGNAL = getattr(signal, "SIG" + os.environ.get("SUBMITIT_PREEMPT_SIGNAL", "USR2"), signal.SIGUSR2)
#: The signals whose raising handlers wait for the loop: the sweep's or the scheduler's SIGTERM, and
#: the preemption signal.
DEFERRED = tuple(dict.fromkeys((signal.SIGTERM, PREEMPT_SIGNAL)))


def run_cancelling_on_signals(runner: asyncio.Runner, main: Coroutine[Any, Any, T]) -> T:
    """``runner.run(main)``, with each :data:`DEFERRED` signal treated as asyncio.Runner treats SIGINT:
    the main task is cancelled (every finished record is kept), and once it has unwound the handler that
    was in place runs, outside any callback; if it returns instead of raising, KeyboardInterrupt is
    raised. A second signal calls its handler at once. Only in the main thread, and only for a signal
    with a Python handler (a default action, such as SIGTERM's killing the process, is left as it is).
    """
    if threading.current_thread() is not threading.main_thread():
        return runner.run(main)
    previous = {sig: handler for sig in DEFERRED if callable(handler := signal.getsignal(sig))}
    if not previous:
        return runner.run(main)
    received: list[int] = []
    tasks: list[asyncio.Task[Any]] = []
    loop = runner.get_loop()

    async def tracked() -> T:
        task = asyncio.current_task()
        if task is not None:
            tasks.append(task)
        return await main

    def on_signal(signum: int, frame: Any) -> None:
        received.append(signum)
        if len(received) > 1 or not tasks:
            previous[signal.Signals(signum)](signum, frame)
            return
        loop.call_soon_threadsafe(tasks[0].cancel)

    for sig in previous:
        signal.signal(sig, on_signal)
    try:
        result = runner.run(tracked())
    except asyncio.CancelledError:
        if not received:
            raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if received:  # also when the run swallowed its cancellation and returned
        first = signal.Signals(received[0])
        previous[first](first, None)  # the sweep's KeyboardInterrupt, submitit's requeue and exit
        raise KeyboardInterrupt(f"signal {first.name}")
    return result
