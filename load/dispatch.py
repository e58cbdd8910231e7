"""The hot path of a profile run: send the plan's requests on schedule and stop promptly when told.

Pipeline position: :func:`load.runner.run_profile` gives the :class:`Dispatcher` each phase's
:class:`~load.plan.Request` list (warmup, then measured). Closed loop: ``concurrency`` slots, each sends its
next request when its previous one ended. Open loop: Poisson arrivals, at most ``concurrency`` in flight.
Each finished :class:`~load.client.Exchange` goes to ``on_finished`` untouched (the collector parses it
later, a step at a time, through :class:`DeferredWork`), so the next request of a slot leaves before its
predecessor is parsed. A stop (the orchestrator's event, the profile's time bound) cancels what is in flight;
each cancelled request is reported to ``on_stopped`` with the reason.

Nothing here parses, records or writes; per request it does a clock read, a task, a send and a callback.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from contracts.results import ErrorClass
from contracts.schema import WorkloadConfig
from load.client import Begun, Exchange, RawStreamClient, StreamClient
from load.pacing import Pacer, make_pacer
from load.plan import Request
from load.sources import replays_offsets
from load.spread import SpreadClient

CHAT_PATH = "/v1/chat/completions"
STOP_POLL_S = 0.05

#: (request, scheduled monotonic ns, the exchange): a request that got an answer, however bad.
Finished = Callable[[Request, int, Exchange], None]
#: (request, scheduled ns, ns when it was handed to the client, why): a request cancelled by a stop.
Stopped = Callable[[Request, int, int, ErrorClass], None]

_DONE = object()


class StopFlag(Protocol):
    """The orchestrator's stop event: a ``threading.Event``, or a ``multiprocessing`` one in a worker."""

    def is_set(self) -> bool: ...


class Dispatcher:
    """Sends requests for one profile run; one per run, used for its warmup and its measured phase."""

    def __init__(
        self,
        stream: StreamClient,
        workload: WorkloadConfig,
        *,
        time_scale: float,
        clock: Callable[[], int],
        deadline_ns: int,
        on_finished: Finished,
        on_stopped: Stopped,
        pacer: Pacer | None = None,
    ) -> None:
        self.stream = stream
        self.open_loop = workload.mode == "open" or replays_offsets(workload)
        self.concurrency = max(1, workload.concurrency)
        self.request_timeout_s = workload.request_timeout_s
        self.time_scale = time_scale
        self.clock = clock
        self.deadline_ns = deadline_ns
        self.on_finished = on_finished
        self.on_stopped = on_stopped
        self.stopping = asyncio.Event()
        #: Set by a stop from outside (the orchestrator's event: Ctrl-C, a dead or hung server), not by the
        #: time bound: the run's other steps (planning, scrapes) are then abandoned too.
        self.cancelled = asyncio.Event()
        self.stop_reason: ErrorClass | None = None  # set by the first stop
        self.inflight: set[asyncio.Task[Any]] = set()
        #: Open loop: waits for each arrival's absolute time (timerfd on Linux, else sleep-then-spin).
        self.pacer = pacer if pacer is not None else make_pacer(clock)

    async def run_phase(self, requests: Sequence[Request], *, start_ns: int | None = None) -> None:
        """Send ``requests`` (closed or open loop) and wait for all of them, or for a stop.

        ``start_ns``: the phase's t = 0 (monotonic ns; default now). Worker processes share one, so their
        arrivals keep one schedule; the phase waits for it when it lies ahead.
        """
        if start_ns is None:
            start_ns = self.clock()
        elif start_ns > self.clock():
            await self.pacer.until(start_ns)
        if self.open_loop:
            await self._open_loop(requests, start_ns)
            return
        queue = iter(requests)
        opening = list(itertools.islice(queue, min(self.concurrency, len(requests))))
        if self.stopping.is_set() or self.check_deadline():
            return
        begun = [self._begin(request) for request in opening]  # the wave leaves in one pass, no yield
        workers = [
            asyncio.create_task(self._worker(itertools.chain([request], queue), start_ns, first))
            for request, first in zip(opening, begun, strict=True)
        ]
        await _gather_owned(workers)

    def _begin(self, request: Request) -> tuple[Begun, int] | None:
        """Write ``request`` now if its client can without yielding (:meth:`RawStreamClient.begin`): the
        opening wave of a closed loop (128 decode requests at once) leaves in about 1 ms instead of a
        task's turn each (23 µs a request, 1.8 ms late at the median). With the time it was handed over."""
        stream = self._client(request)
        if not isinstance(stream, RawStreamClient):
            return None
        called = self.clock()
        return stream.begin(CHAT_PATH, request.body), called

    async def _worker(
        self, queue: Iterator[Request], start_ns: int, first: tuple[Begun, int] | None = None
    ) -> None:
        """Closed loop: send the next request as soon as this slot's previous one ended (the first one
        maybe already written: ``first``)."""
        scheduled = start_ns
        for request in queue:
            if first is None and (self.stopping.is_set() or self.check_deadline()):
                return
            task = asyncio.create_task(self._request(request, scheduled, first))
            first = None
            self.inflight.add(task)
            try:
                exchange = await task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
                return  # the request was stopped by the watcher; it reported itself
            finally:
                self.inflight.discard(task)
            self.on_finished(request, scheduled, exchange)
            scheduled = exchange.end_ns if exchange.end_ns is not None else self.clock()

    async def _open_loop(self, requests: Sequence[Request], start_ns: int) -> None:
        """Open loop: Poisson arrivals; at most ``concurrency`` in flight (a late send shows as lag)."""
        slots = asyncio.Semaphore(self.concurrency)
        tasks: list[asyncio.Task[Any]] = []

        async def one(request: Request, scheduled: int) -> None:
            try:
                exchange = await self._request(request, scheduled)
                self.on_finished(request, scheduled, exchange)
            finally:
                slots.release()

        for request in requests:
            # Arrivals are in host seconds (rate is per host second); wall time runs time_scale x faster.
            scheduled = start_ns + round((request.arrival_s or 0.0) / self.time_scale * 1e9)
            if scheduled > self.clock():
                await self.pacer.until(scheduled)  # absolute: lateness never accumulates
            if self.stopping.is_set() or self.check_deadline():
                break
            await slots.acquire()
            task = asyncio.create_task(one(request, scheduled))
            self.inflight.add(task)
            task.add_done_callback(self.inflight.discard)
            tasks.append(task)
        await _gather_owned(tasks)

    def _client(self, request: Request) -> StreamClient:
        if isinstance(self.stream, SpreadClient):
            return self.stream.for_request(request.index)
        return self.stream

    async def _request(
        self, request: Request, scheduled: int, begun: tuple[Begun, int] | None = None
    ) -> Exchange:
        called = self.clock() if begun is None else begun[1]
        remaining = (self.deadline_ns - called) / 1e9
        timeout = max(0.001, min(self.request_timeout_s, remaining))
        try:
            stream = self._client(request)
            if begun is not None and isinstance(stream, RawStreamClient):
                return await stream.post_begun(begun[0], timeout_s=timeout)
            return await stream.post_stream(CHAT_PATH, request.body, timeout_s=timeout)
        except asyncio.CancelledError:
            self.on_stopped(request, scheduled, called, self.stop_reason or "cancelled")
            raise

    def check_deadline(self) -> bool:
        """Past the profile's time bound: stop now (the watcher may not have polled yet)."""
        if self.clock() < self.deadline_ns:
            return False
        self.stop("timeout")
        return True

    def stop(self, reason: ErrorClass) -> None:
        """Stop dispatching and cancel everything in flight (the first reason wins)."""
        if self.stopping.is_set():
            return
        self.stop_reason = reason
        self.stopping.set()
        if reason == "cancelled":
            self.cancelled.set()
        self.pacer.interrupt()
        for task in list(self.inflight):
            task.cancel()

    async def watch(self, stop: StopFlag) -> None:
        """Poll the orchestrator's stop event and the time bound; stop everything in flight."""
        while not self.stopping.is_set():
            if stop.is_set():
                self.stop("cancelled")
            elif self.clock() >= self.deadline_ns:
                self.stop("timeout")
            else:
                await asyncio.sleep(STOP_POLL_S)


class DeferredWork:
    """Work kept off the hot path: run a step at a time, after whatever sends and reads are ready.

    Each item is an iterator whose every ``next`` is a bounded piece of work (parsing 64 body pieces of a
    finished stream, say), so a 1,000-chunk stream never holds the event loop for long.
    """

    def __init__(self) -> None:
        self._pending: deque[Iterator[None]] = deque()
        self._ready = asyncio.Event()

    def add(self, steps: Iterator[None]) -> None:
        self._pending.append(steps)
        self._ready.set()

    async def run(self) -> None:
        """Runs until cancelled: one step, then back to the loop."""
        while True:
            await self._ready.wait()
            self._ready.clear()
            while self._pending:
                await asyncio.sleep(0)
                if next(self._pending[0], _DONE) is _DONE:
                    self._pending.popleft()

    def flush(self) -> None:
        """Finish everything pending now (end of a phase, or after an interrupt)."""
        while self._pending:
            for _ in self._pending.popleft():
                pass


async def _gather_owned(tasks: Sequence[asyncio.Task[Any]]) -> None:
    """Wait for tasks this run started; their cancellation by the watcher is not an error."""
    results = await asyncio.gather(*tasks, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
            raise result
