"""Worker processes: one measured phase split over ``load.workers`` processes, merged into one run.

Pipeline position: :mod:`load.runner` plans, warms up and scrapes in its own process, then, with
``load.workers: N > 1``, hands the measured requests to :class:`WorkerPool`: request ``i`` goes to worker
``i % N`` and the profile's concurrency is shared out (:func:`split`). Each worker is a spawned process
with its own event loop, raw client and :class:`~load.dispatch.Dispatcher`; it opens its connections,
reports ready, and starts at one absolute ``CLOCK_MONOTONIC`` time the parent chose (the clock is
system-wide on Linux, so one origin serves every process); its collector builds records against the
parent's ``t0_ns``, and the parent merges them (ordered by index, like a one-process run). This is the
one module of the load runner that starts processes.
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import multiprocessing.connection
import os
import signal
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import psutil

from contracts.errors import HarnessError
from contracts.results import ErrorClass, RequestRecord
from contracts.schema import LoadConfig, WorkloadConfig
from load.client import RawStreamClient, default_loop_factory
from load.collect import Collector
from load.dispatch import DeferredWork, Dispatcher
from load.harness import LoopWatch, Stall
from load.plan import Request
from load.spread import SpreadClient
from load.tls import tls_context

#: The parent picks the common start this far ahead of the moment every worker reported ready.
START_AHEAD_NS = 50_000_000
#: Worker counters published for the live line: reads, completed, errors, in flight.
COUNTERS = 4
PUBLISH_EVERY_S = 0.5
READY_TIMEOUT_S = 120.0  # spawning imports the runner: seconds on a loaded machine
JOIN_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class WorkerJob:
    """What one worker process runs: its share of the requests and of the concurrency."""

    index: int
    base_url: str
    headers: dict[str, str]
    load: LoadConfig | None
    workload: WorkloadConfig  # concurrency = this worker's share
    requests: tuple[Request, ...]
    time_scale: float
    t0_ns: int  # the run's origin (the parent's), so every record counts from the same t = 0
    deadline_ns: int  # the profile's time bound, absolute
    servers: tuple[str, ...] = ()  # several API servers: request i to server i mod n (load.spread)


@dataclass
class WorkerResult:
    """What one worker sends back: its records and its own health figures."""

    index: int
    records: list[RequestRecord] = field(default_factory=list)
    chunks_per_read: list[int] = field(default_factory=list)
    cpu_seconds: float = 0.0  # this process, over its measured window
    stop_reason: ErrorClass | None = None
    pacer: str | None = None
    rss_base_bytes: int = 0  # after imports, before any connection
    rss_peak_bytes: int = 0  # at the end: connections, streams and records held
    error: str | None = None  # an exception inside the worker (its traceback)
    stalls: list[Stall] = field(default_factory=list)  # its loop stood still (load.harness.LoopWatch)


def split(requests: Sequence[Request], concurrency: int, workers: int) -> list[tuple[int, list[Request]]]:
    """(concurrency, requests) per worker: request ``i`` to worker ``i % n``, concurrency shared as evenly
    as possible (the first workers get one more); ``n`` is at most the concurrency and the request count,
    so every worker has a slot and something to send."""
    n = max(1, min(workers, concurrency, len(requests)))
    base, extra = divmod(max(1, concurrency), n)
    return [(base + (1 if k < extra else 0), list(requests[k::n])) for k in range(n)]


class WorkerPool:
    """Runs one measured phase over worker processes; the live counters and the merged results."""

    def __init__(self, jobs: Sequence[WorkerJob]) -> None:
        self.jobs = list(jobs)
        context = multiprocessing.get_context("spawn")  # a forked event loop is not safe to reuse
        self.stop_event = context.Event()
        self.counters = context.Array("q", COUNTERS * len(self.jobs), lock=False)
        self._pipes: list[multiprocessing.connection.Connection] = []
        self._procs: list[Any] = []
        for job in self.jobs:
            parent_end, child_end = context.Pipe()
            proc = context.Process(
                target=worker_main,
                args=(job, child_end, self.stop_event, self.counters),
                name=f"gauntlet-load-worker-{job.index}",
                daemon=True,
            )
            proc.start()
            child_end.close()
            self._pipes.append(parent_end)
            self._procs.append(proc)

    def _count(self, offset: int) -> int:
        return sum(self.counters[k * COUNTERS + offset] for k in range(len(self.jobs)))

    def reads_received(self) -> int:
        return self._count(0)

    @property
    def completed(self) -> int:
        return self._count(1)

    @property
    def errors(self) -> int:
        return self._count(2)

    @property
    def inflight(self) -> int:
        return self._count(3)

    async def _recv(self, k: int, timeout_s: float | None) -> Any:
        """The next message of worker ``k``, without blocking the loop; a worker that died is a harness
        error naming it and its exit code."""
        pipe = self._pipes[k]
        try:
            async with asyncio.timeout(timeout_s):
                await _readable(pipe)
            return pipe.recv()
        except (EOFError, OSError, TimeoutError) as exc:
            proc = self._procs[k]
            proc.join(timeout=1.0)
            raise HarnessError(
                f"load worker {k} (pid {proc.pid}) ended without its results (exit code {proc.exitcode}, "
                f"{type(exc).__name__})",
                hint="the machine may be out of memory or processes; try fewer load.workers",
            ) from exc

    async def run(self) -> list[WorkerResult]:
        """Wait for every worker to be connected, start them together (one absolute CLOCK_MONOTONIC
        time, shared by every process on Linux), collect their results."""
        for k in range(len(self.jobs)):
            message = await self._recv(k, READY_TIMEOUT_S)
            if isinstance(message, WorkerResult):  # it failed before it was ready
                self._raise_failed(message)
        start_ns = time.monotonic_ns() + START_AHEAD_NS
        for pipe in self._pipes:
            pipe.send(start_ns)
        results: list[WorkerResult] = [await self._recv(k, None) for k in range(len(self.jobs))]
        for result in results:
            if result.error is not None:
                self._raise_failed(result)
        return results

    def _raise_failed(self, result: WorkerResult) -> None:
        lines = (result.error or "").strip().splitlines()
        raise HarnessError(
            f"load worker {result.index} failed: {lines[-1] if lines else 'no detail'}", evidence=lines[-8:]
        )

    def stop(self) -> None:
        """Tell every worker to stop dispatching and cancel what is in flight (they still report)."""
        self.stop_event.set()

    def close(self) -> None:
        """Join the workers (a grace period after a stop), then kill any left, and close the pipes."""
        self.stop_event.set()
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        for proc in self._procs:
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
        for proc in self._procs:
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5.0)
        for pipe in self._pipes:
            pipe.close()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _readable(pipe: multiprocessing.connection.Connection) -> None:
    """Wait until ``pipe`` has data without blocking the loop; leave it blocking again (the loop's watch
    makes a descriptor non-blocking, and ``recv`` of a large message must wait for all of it)."""
    loop = asyncio.get_running_loop()
    ready = loop.create_future()
    fd = pipe.fileno()
    loop.add_reader(fd, _resolve, ready)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
        os.set_blocking(fd, True)


def merge(results: Sequence[WorkerResult]) -> tuple[list[RequestRecord], list[int], ErrorClass | None]:
    """Records in index order (as one process writes them), every chunks-per-read, the first stop."""
    records = sorted((r for result in results for r in result.records), key=lambda r: r.index)
    per_read = [c for result in results for c in result.chunks_per_read]
    reasons = [result.stop_reason for result in results if result.stop_reason is not None]
    return records, per_read, (reasons[0] if reasons else None)


def rss_per_stream(results: Sequence[WorkerResult], streams: int) -> float | None:
    """Bytes of resident memory each stream added (peak less the idle worker, summed over workers)."""
    if streams <= 0 or not results:
        return None
    grown = sum(max(0, r.rss_peak_bytes - r.rss_base_bytes) for r in results)
    return grown / streams


def worker_main(
    job: WorkerJob,
    pipe: multiprocessing.connection.Connection,
    stop: Any,
    counters: Any,
) -> None:
    """The worker process: its own loop; Ctrl-C reaches the parent, which stops the workers by event."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    result = WorkerResult(index=job.index, rss_base_bytes=psutil.Process().memory_info().rss)
    try:
        with asyncio.Runner(loop_factory=default_loop_factory()) as runner:
            runner.run(_work(job, pipe, stop, counters, result))
    except BaseException:  # everything goes back to the parent, which raises it
        result.error = traceback.format_exc()
    result.rss_peak_bytes = max(result.rss_peak_bytes, psutil.Process().memory_info().rss)
    try:
        pipe.send(result)
    finally:
        pipe.close()


async def _work(job: WorkerJob, pipe: Any, stop: Any, counters: Any, result: WorkerResult) -> None:
    clock = time.monotonic_ns
    collector = Collector(t0_ns=job.t0_ns, time_scale=job.time_scale)
    deferred = DeferredWork()
    tls = tls_context(job.load) if job.base_url.startswith("https:") else None
    stream: RawStreamClient | SpreadClient = (
        SpreadClient([RawStreamClient(url, clock=clock, headers=job.headers, tls=tls) for url in job.servers])
        if job.servers
        else RawStreamClient(job.base_url, clock=clock, headers=job.headers, tls=tls)
    )
    dispatcher = Dispatcher(
        stream,
        job.workload,
        time_scale=job.time_scale,
        clock=clock,
        deadline_ns=job.deadline_ns,
        on_finished=lambda request, scheduled, exchange: deferred.add(
            collector.steps(request, scheduled, exchange)
        ),
        on_stopped=collector.stopped,
    )
    result.pacer = dispatcher.pacer.name if dispatcher.open_loop else None
    watch = LoopWatch(clock, stalls=result.stalls)
    background = [
        asyncio.create_task(dispatcher.watch(stop)),
        asyncio.create_task(deferred.run()),
        asyncio.create_task(_publish(job.index, counters, stream, collector, dispatcher)),
    ]
    try:
        await stream.preconnect(min(dispatcher.concurrency, len(job.requests)))
        pipe.send("ready")
        await _readable(pipe)
        start_ns = pipe.recv()
        gc.collect(1)  # the young generations only, as the runner's window (load.runner)
        gc.disable()
        cpu0 = time.process_time()
        background.append(asyncio.create_task(watch.run()))  # over the measured window only
        try:
            await dispatcher.run_phase(job.requests, start_ns=start_ns)
        finally:
            result.cpu_seconds = time.process_time() - cpu0
            gc.enable()
    finally:
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        deferred.flush()
        dispatcher.pacer.close()
        result.rss_peak_bytes = psutil.Process().memory_info().rss  # before the client lets go
        await stream.aclose()
    result.records = collector.records
    result.chunks_per_read = collector.chunks_per_read
    result.stop_reason = dispatcher.stop_reason
    _store(counters, job.index, stream.reads_received(), collector, 0)


async def _publish(
    index: int, counters: Any, stream: RawStreamClient | SpreadClient, collector: Collector, d: Any
) -> None:
    while True:
        await asyncio.sleep(PUBLISH_EVERY_S)
        _store(counters, index, stream.reads_received(), collector, len(d.inflight))


def _store(counters: Any, index: int, reads: int, collector: Collector, inflight: int) -> None:
    base = index * COUNTERS
    counters[base], counters[base + 1], counters[base + 2] = reads, collector.completed, collector.errors
    counters[base + 3] = inflight


def worker_jobs(
    requests: Sequence[Request],
    workload: WorkloadConfig,
    *,
    workers: int,
    base_url: str,
    headers: dict[str, str],
    load: LoadConfig | None,
    time_scale: float,
    t0_ns: int,
    deadline_ns: int,
    servers: tuple[str, ...] = (),
) -> list[WorkerJob]:
    """The jobs of one measured phase (see :func:`split`)."""
    return [
        WorkerJob(
            index=k,
            base_url=base_url,
            headers=headers,
            load=load,
            workload=replace(workload, concurrency=share),
            requests=tuple(part),
            time_scale=time_scale,
            t0_ns=t0_ns,
            deadline_ns=deadline_ns,
            servers=servers,
        )
        for k, (share, part) in enumerate(split(requests, max(1, workload.concurrency), workers))
    ]
