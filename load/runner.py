"""Run one load profile against one server and write its records, summary and metrics.

Pipeline position: the sweep calls :func:`run_profile` once per (candidate, profile, repeat) while the
server is up; it writes ``records.jsonl``, ``summary.json`` and ``metrics.json`` into ``out_dir`` (see
:mod:`contracts.results`), which the gates and the report read. It owns its event loop
(``asyncio.Runner`` inside), so it is called from synchronous code, any number of times per process.

Phases: plan (:mod:`load.prompts`, :mod:`load.plan`) → scrape ``/metrics`` → warmup (not counted) →
scrape → measured window (:mod:`load.dispatch`: closed loop or Poisson arrivals; ``/metrics`` every
second; live progress) → scrape → collect (:mod:`load.collect`) → write (:mod:`load.write`). A stop event
(Ctrl-C in the orchestrator), the profile's time bound, or a KeyboardInterrupt stops it promptly; every
finished record is still written, and the summary says ``interrupted``. Example::

    summary = run_profile("http://127.0.0.1:8000", "tiny-random", workloads["short"], candidate="baseline",
                          fingerprint=spec.fingerprint, repeat=0, out_dir=Path("out/short/r0"),
                          backend="vllm", host="cpu")
"""

from __future__ import annotations

import asyncio
import gc
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

import httpx
import psutil

from contracts.errors import HarnessError
from contracts.http_tls import default_verify
from contracts.paths import CONF_DIR
from contracts.results import LoadSettings, ProfileSummary, RequestRecord
from contracts.schema import LoadConfig, SloConfig, WorkloadConfig
from load.client import (
    Exchange,
    HttpxStreamClient,
    LoopFactory,
    RawStreamClient,
    StreamClient,
    check_headers,
    default_loop_factory,
)
from load.collect import Collector, RunInfo, summarize_run
from load.dispatch import DeferredWork, Dispatcher, StopFlag
from load.harness import LoopWatch, harness_fault
from load.plan import Plan, Request
from load.progress import LiveRate, Progress
from load.prompts import prepare_plan
from load.scrape import Scraper
from load.signals import run_cancelling_on_signals
from load.spread import SpreadClient, spread_clients
from load.tls import tls_context
from load.workers import WorkerJob, WorkerPool, WorkerResult, merge, rss_per_stream, worker_jobs
from load.write import write_results

DEFAULT_PROMPTS_DIR = CONF_DIR / "workload"
PROGRESS_EVERY_S = 0.5
AUX_TIMEOUT_S = 30.0  # /tokenize, /v1/models

T = TypeVar("T")


def run_profile(
    base_url: str,
    served_model: str,
    workload: WorkloadConfig,
    *,
    candidate: str,
    fingerprint: str,
    repeat: int,
    out_dir: Path,
    backend: Literal["vllm", "sim"],
    host: str,
    time_scale: float = 1.0,
    scale: float = 1.0,
    salt: str | None = None,
    slo: SloConfig | None = None,
    load_level: float | None = None,
    progress: bool = True,
    stop: threading.Event | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    prompts_dir: Path = DEFAULT_PROMPTS_DIR,
    clock: Callable[[], int] = time.monotonic_ns,
    cpu_clock: Callable[[], float] = time.process_time,
    loop_factory: LoopFactory | None = None,
    api_key: str | None = None,
    load: LoadConfig | None = None,
    on_window: Callable[[Literal["start", "end"]], None] | None = None,
    servers: Sequence[str] = (),
) -> ProfileSummary:
    """Run ``workload`` against the server at ``base_url``; write and return its summary.

    ``transport`` replaces the network for every call (tests pass ``httpx.MockTransport``); otherwise
    streams go through the raw asyncio client. ``salt`` prefixes every request's ``cache_salt``
    (default: fresh random). ``api_key`` is sent as a Bearer token on every request (a server started
    with ``--api-key``); it is held in memory only, never written. ``slo`` adds attainment and goodput to
    the summary (:mod:`load.goodput`); ``load_level`` records the rate or concurrency a capacity search ran
    at. ``load`` (``cfg.load``) says how the client runs: ``workers`` processes for the measured
    requests, the send-lateness bound that flags a run ``late``, and the TLS files of an ``https://``
    base URL. ``on_window`` is called with ``"start"`` just before the measured window and ``"end"`` just
    after it (the sweep reads the GPUs' energy there). ``servers`` (the head's ``base_url`` first) spreads
    the requests over a candidate's API servers, one per node or rank (:mod:`load.spread`). Raises
    :class:`~contracts.errors.LoadError` when the profile cannot run at all; request failures are
    recorded, never raised.
    """
    base_url = base_url.rstrip("/")
    info = RunInfo(
        candidate=candidate,
        profile=workload.name,
        repeat=repeat,
        fingerprint=fingerprint,
        backend=backend,
        host=host,
        time_scale=time_scale,
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        base_url=base_url,
        servers=tuple(url.rstrip("/") for url in servers) if len(servers) > 1 else (),
    )
    run_salt = salt if salt is not None else new_salt()
    run = _Run(info, workload, out_dir, progress=progress, clock=clock, cpu_clock=cpu_clock)
    run.load = load
    run.settings = LoadSettings(
        base_url=base_url,
        served_model=served_model,
        salt=run_salt,
        scale=scale,
        time_scale=time_scale,
        prompts_dir=str(prompts_dir),
        workload=workload,
        load=load,
    )
    run.slo, run.load_level, run.on_window = slo, load_level, on_window
    main = run.main(
        served_model,
        scale=scale,
        salt=run_salt,
        stop=stop if stop is not None else threading.Event(),
        transport=transport,
        prompts_dir=prompts_dir,
        headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
    )
    factory = loop_factory if loop_factory is not None else (None if transport else default_loop_factory())
    try:
        with asyncio.Runner(loop_factory=factory) as runner:
            run_cancelling_on_signals(runner, main)
    except (KeyboardInterrupt, SystemExit):  # SystemExit: submitit preempted the job (load.signals)
        run.interrupted = True
        run.finish()
        raise
    summary = run.finish()
    if run.fault is not None:  # written, and said in its notes; the sweep records a harness fault
        raise run.fault
    return summary


class _Stopped(Exception):
    """The stop event came while the run waited on a step other than requests: the run ends here."""


def _rss() -> int:
    """This process's resident memory, bytes."""
    return int(psutil.Process().memory_info().rss)


def new_salt() -> str:
    """A fresh run salt: no request of this run shares prefix-cache blocks with any other run's."""
    return f"gauntlet-{secrets.token_hex(8)}"


class _Run:
    """One run's wiring: the plan, the dispatcher, the collector, the scraper; then one summary, written."""

    def __init__(
        self,
        info: RunInfo,
        workload: WorkloadConfig,
        out_dir: Path,
        *,
        progress: bool,
        clock: Callable[[], int],
        cpu_clock: Callable[[], float],
    ) -> None:
        self.info, self.workload, self.out_dir = info, workload, out_dir
        self.progress, self.clock, self.cpu_clock = progress, clock, cpu_clock
        self.t0_ns = 0  # the profile's t = 0 (monotonic ns), taken when the loop starts
        self.collector = Collector(t0_ns=self.t0_ns, time_scale=info.time_scale)
        self.deferred = DeferredWork()
        self.plan = Plan(requests=())
        self.scraper: Scraper | None = None
        self.dispatcher: Dispatcher | None = None
        self.interrupted = False
        self.window_ns: tuple[int, int] | None = None
        self.cpu_s = 0.0
        self._summary: ProfileSummary | None = None
        #: What the runner was asked to run, recorded in the summary (salt included).
        self.settings: LoadSettings | None = None
        self.slo: SloConfig | None = None
        self.load_level: float | None = None
        self.load: LoadConfig | None = None  # workers, lateness bound, TLS
        self.headers: dict[str, str] = {}
        self.worker_results: list[WorkerResult] = []
        self.rss_per_stream: float | None = None
        self.pool: WorkerPool | None = None
        #: The loop's heartbeat over the measured window (a pause of this process: load.harness).
        self.loop_watch = LoopWatch(clock)
        #: What makes the finished run a harness fault (a paused client, requests it could not send).
        self.fault: HarnessError | None = None
        #: Called at the measured window's start and end (run_profile's ``on_window``).
        self.on_window: Callable[[Literal["start", "end"]], None] | None = None

    async def main(
        self,
        served_model: str,
        *,
        scale: float,
        salt: str,
        stop: threading.Event,
        transport: httpx.AsyncBaseTransport | None,
        prompts_dir: Path,
        headers: dict[str, str],
    ) -> None:
        """Plan, warm up, measure; ``stop`` (the orchestrator's) and the time bound end it early."""
        self.t0_ns = self.collector.t0_ns = self.clock()
        self.headers = headers
        check_headers(headers)  # before any request: a line break is the harness's input, not the server
        base_url = self.info.base_url
        tls = tls_context(self.load) if base_url.startswith("https:") and transport is None else None
        aux = httpx.AsyncClient(
            base_url=base_url,
            transport=transport,
            timeout=AUX_TIMEOUT_S,
            headers=headers,
            verify=tls if tls is not None else default_verify(),
        )
        spread = (  # one API server per node or rank: request i to server i mod n, /metrics summed
            spread_clients(self.info.servers, transport=transport, clock=self.clock, headers=headers, tls=tls)
            if self.info.servers
            else None
        )
        stream: StreamClient = (
            spread.stream
            if spread is not None
            else HttpxStreamClient(base_url, transport=transport, clock=self.clock, headers=headers)
            if transport is not None
            else RawStreamClient(base_url, clock=self.clock, headers=headers, tls=tls)
        )
        raw = (
            None
            if transport is not None or spread is not None
            else RawStreamClient(base_url, clock=self.clock, headers=headers, tls=tls)
        )
        scraper = self.scraper = spread.scraper if spread is not None else Scraper(aux, raw, self.clock)
        dispatcher = self.dispatcher = Dispatcher(
            stream,
            self.workload,
            time_scale=self.info.time_scale,
            clock=self.clock,
            deadline_ns=self.t0_ns + round(self.workload.time_limit_s * 1e9),
            on_finished=self._finished,
            on_stopped=self.collector.stopped,
        )
        background = [
            asyncio.create_task(dispatcher.watch(stop)),
            asyncio.create_task(self.deferred.run()),
        ]
        unless = self._unless_stopped
        try:
            self.plan = await unless(
                prepare_plan(
                    aux,
                    self.workload,
                    served_model=served_model,
                    scale=scale,
                    run_salt=salt,
                    prompts_dir=prompts_dir,
                )
            )
            await unless(scraper.scrape("before_warmup"))
            if self.plan.warmup and not dispatcher.stopping.is_set():
                await self._phase(self.plan.warmup)
            if dispatcher.stopping.is_set():
                return
            await unless(scraper.scrape("before"))
            measured = self.plan.measured
            if self._workers(measured) > 1:
                await self._measure(stream, measured, stop)
            else:
                if isinstance(stream, RawStreamClient | SpreadClient):
                    await unless(stream.preconnect(min(dispatcher.concurrency, len(measured))))
                await self._measure(stream, measured, None)
            if not stop.is_set():
                await unless(scraper.scrape("after"))
        except _Stopped:
            return  # stopped while planning, scraping or connecting: nothing more is asked of the server
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            self.deferred.flush()
            dispatcher.pacer.close()
            await stream.aclose()
            if raw is not None:
                await raw.aclose()
            if spread is not None:
                await spread.scraper.aclose()
            await aux.aclose()

    async def _unless_stopped(self, step: Awaitable[T]) -> T:
        """Await ``step`` unless a stop from outside comes first (the watcher found the server dead or hung,
        Ctrl-C): then it is cancelled at once rather than left to its own timeout (30 s for /tokenize, 5 s
        for /metrics). The profile's time bound does not abandon these steps (the last scrape still runs)."""
        assert self.dispatcher is not None
        cancelled = self.dispatcher.cancelled
        work = asyncio.ensure_future(step)
        stopped = asyncio.ensure_future(cancelled.wait())
        try:
            await asyncio.wait({work, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            if not work.done():
                work.cancel()
            await asyncio.gather(work, stopped, return_exceptions=True)
        if work.cancelled():
            raise _Stopped
        return work.result()

    def _finished(self, request: Request, scheduled_ns: int, exchange: Exchange) -> None:
        """Parse later, in bounded steps between the loop's other work."""
        self.deferred.add(self.collector.steps(request, scheduled_ns, exchange))

    async def _phase(self, requests: Sequence[Request]) -> None:
        assert self.dispatcher is not None
        await self.dispatcher.run_phase(requests)
        self.deferred.flush()

    def _workers(self, measured: Sequence[Request]) -> int:
        """Worker processes for the measured phase: load.workers, over real sockets only."""
        if self.load is None or self.load.workers <= 1 or not measured:
            return 1
        assert self.dispatcher is not None
        return self.load.workers if isinstance(self.dispatcher.stream, RawStreamClient) else 1

    async def _measure(
        self, stream: StreamClient, measured: Sequence[Request], stop: StopFlag | None
    ) -> None:
        """The measured window: in this process, or (``stop`` given) over worker processes."""
        assert self.scraper is not None
        label = f"{self.info.candidate}/{self.workload.name}"
        progress = Progress(label, len(measured), enabled=self.progress)
        progress.start()
        background = [asyncio.create_task(self.scraper.every_second(self.workload.time_limit_s))]
        if stop is None:  # the requests go out from this process: its own heartbeat
            background.append(asyncio.create_task(self.loop_watch.run()))
        else:  # from worker processes, each with its heartbeat
            self.pool = WorkerPool(self._jobs(measured))
            background.append(asyncio.create_task(self._forward_stop(stop)))
        if self.progress:
            background.append(asyncio.create_task(self._progress_loop(progress, stream)))
        gc_was_enabled = gc.isenabled()
        # A full collection over a large heap would stall every stream at once: none in the window. Before
        # it, the young generations only (the recent garbage): a full one walks every object the sweep's
        # imports made, 0.1 s of CPU per window on this machine, dozens of windows per sweep.
        gc.collect(1)
        gc.disable()
        cpu0 = self.cpu_clock()
        rss0 = _rss()
        if self.on_window is not None:
            self.on_window("start")
        start = self.clock()
        try:
            if self.pool is not None:
                start = await self._phase_workers(self.pool)
            else:
                await self._phase(measured)
        finally:
            end = self.clock()
            if self.on_window is not None:
                self.on_window("end")
            self.cpu_s = self.cpu_clock() - cpu0
            streams = min(max(1, self.workload.concurrency), len(measured))
            self.rss_per_stream = max(0, _rss() - rss0) / streams if streams else None
            if self.worker_results:
                self.cpu_s = sum(r.cpu_seconds for r in self.worker_results)
                self.rss_per_stream = rss_per_stream(self.worker_results, streams)
            if self.pool is not None:
                self.pool.close()
            self.window_ns = (start, end)
            if gc_was_enabled:
                gc.enable()
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            progress.stop(self._final_line(progress))

    def _jobs(self, measured: Sequence[Request]) -> list[WorkerJob]:
        assert self.dispatcher is not None and self.load is not None
        return worker_jobs(
            measured,
            self.workload,
            workers=self.load.workers,
            base_url=self.info.base_url,
            servers=self.info.servers,
            headers=self.headers,
            load=self.load,
            time_scale=self.info.time_scale,
            t0_ns=self.t0_ns,
            deadline_ns=self.dispatcher.deadline_ns,
        )

    async def _phase_workers(self, pool: WorkerPool) -> int:
        """Run the measured phase in the workers; their records join this run's. Returns the start."""
        results = await pool.run()
        self.worker_results = results
        records, per_read, reason = merge(results)
        self.collector.records.extend(records)
        self.collector.chunks_per_read.extend(per_read)
        self.collector.completed += sum(1 for r in records if r.ok)
        self.collector.errors += sum(1 for r in records if not r.ok)
        self.collector.output_tokens += sum(r.completion_tokens or 0 for r in records if r.ok)
        assert self.dispatcher is not None
        if reason is not None and self.dispatcher.stop_reason is None:
            self.dispatcher.stop_reason = reason
        return self._first_sent_ns(records)

    def _first_sent_ns(self, records: Sequence[RequestRecord]) -> int:
        if not records:
            return self.clock()
        first = min(r.sent_s for r in records)
        return self.t0_ns + round(first / self.info.time_scale * 1e9)

    async def _forward_stop(self, stop: StopFlag) -> None:
        """The orchestrator's stop and the time bound reach the workers through their shared event."""
        assert self.dispatcher is not None and self.pool is not None
        while not (stop.is_set() or self.dispatcher.stopping.is_set()):
            await asyncio.sleep(0.05)
        self.pool.stop()

    async def _progress_loop(self, progress: Progress, stream: StreamClient) -> None:
        """Twice a second: counts, and output tokens/s from the reads so far (no parsing on the way)."""
        assert self.dispatcher is not None
        pool = self.pool
        counts: Any = pool if pool is not None else stream
        rate = LiveRate(time_scale=self.info.time_scale)
        rate.update(self.clock() / 1e9, counts.reads_received(), None)
        collector = self.collector
        for _ in range(int(self.workload.time_limit_s / PROGRESS_EVERY_S) + 2):
            await asyncio.sleep(PROGRESS_EVERY_S)
            tok_s = rate.update(self.clock() / 1e9, counts.reads_received(), collector.tokens_per_read)
            if pool is not None:
                progress.update(pool.completed, pool.errors, pool.inflight, tok_s, "measure")
                continue
            progress.update(
                collector.completed, collector.errors, len(self.dispatcher.inflight), tok_s, "measure"
            )

    def _final_line(self, progress: Progress) -> str:
        """The measured window's output tokens/s, from the usage of the completed requests."""
        assert self.window_ns is not None
        start, end = self.window_ns
        seconds = (end - start) / 1e9 * self.info.time_scale
        tok_s = self.collector.output_tokens / seconds if seconds > 0 else None
        return progress.line(self.collector.completed, self.collector.errors, 0, tok_s, "done")

    def _harness_fault(self) -> HarnessError | None:
        """A pause of a process that sent the measured requests, or requests the client could not send."""
        if self.worker_results:
            return harness_fault(
                self.collector.records,
                [r.stalls for r in self.worker_results],
                t0_ns=self.t0_ns,
                time_scale=self.info.time_scale,
                split=[r.records for r in self.worker_results],
            )
        stalls, scale = [self.loop_watch.stalls], self.info.time_scale
        return harness_fault(self.collector.records, stalls, t0_ns=self.t0_ns, time_scale=scale)

    def _pacer_name(self) -> str | None:
        if self.dispatcher is None or not self.dispatcher.open_loop:
            return None
        named = {r.pacer for r in self.worker_results if r.pacer}
        return named.pop() if len(named) == 1 else self.dispatcher.pacer.name

    def finish(self) -> ProfileSummary:
        """Summarize what was collected and write it (once; also after an interrupt)."""
        if self._summary is not None:
            return self._summary
        self.deferred.flush()
        notes = list(self.plan.notes)
        self.fault = self._harness_fault()
        if self.fault is not None:
            notes.append(f"harness fault, not the server: {self.fault.message}")
        stop_reason = self.dispatcher.stop_reason if self.dispatcher is not None else None
        if stop_reason == "timeout":
            notes.append(f"stopped by the profile's time bound ({self.workload.time_limit_s:g} s)")
        result = summarize_run(
            self.info,
            self.collector.records,
            t0_ns=self.t0_ns,
            planned=len(self.plan.measured),
            chunks_per_read=self.collector.chunks_per_read,
            cpu_seconds=self.cpu_s,
            window_ns=self.window_ns or (self.t0_ns, self.clock()),
            scrapes=self.scraper.scrapes if self.scraper is not None else [],
            scrape_errors=self.scraper.errors if self.scraper is not None else [],
            notes=notes,
            interrupted=self.interrupted or stop_reason is not None,
            time_bound=stop_reason == "timeout" and not self.interrupted,
            settings=self.settings,
            slo=self.slo,
            load_level=self.load_level,
            lateness_bound_s=self.load.max_send_lateness_s if self.load is not None else None,
            pacer=self._pacer_name(),
            worker_cpu_seconds=[r.cpu_seconds for r in self.worker_results],
            rss_per_stream_bytes=self.rss_per_stream,
        )
        write_results(self.out_dir, result)
        self._summary = result.summary
        return result.summary
