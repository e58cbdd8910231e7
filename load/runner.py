"""Run one load profile against one server and write its records, summary and metrics.

Pipeline position: the sweep calls :func:`run_profile` once per (candidate, profile, repeat) while the
server is up; it writes ``records.jsonl``, ``summary.json`` and ``metrics.json`` into ``out_dir`` (see
:mod:`contracts.results`), which the gates and the report read. It owns its event loop
(``asyncio.run`` inside), so it is called from synchronous code, any number of times per process.

Phases: plan → calibrate prompts with the server's ``/tokenize`` → scrape ``/metrics`` → warmup (not
counted) → scrape → measured window (closed loop or Poisson arrivals; ``/metrics`` every second; live
progress) → scrape. A stop event (Ctrl-C in the orchestrator), the profile's time bound, or a
KeyboardInterrupt stops it promptly; every finished record is still written, and the summary says
``interrupted``. Example::

    summary = run_profile("http://127.0.0.1:8000", "tiny-random", workloads["short"], candidate="baseline",
                          fingerprint=spec.fingerprint, repeat=0, out_dir=Path("out/short/r0"),
                          backend="vllm", host="cpu")
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import httpx

from contracts.paths import CONF_DIR
from contracts.results import ErrorClass, ProfileSummary, RequestRecord, write_jsonl, write_model
from contracts.schema import WorkloadConfig
from load.client import Exchange, HttpxStreamClient, RawStreamClient, StreamClient
from load.metrics import (
    GENERATION_TOKENS,
    MetricsLog,
    filter_scrape,
    parse_scrape,
    quick_value,
    server_metrics,
)
from load.progress import Progress
from load.sse import EventParser, StreamOutcome, http_error_outcome
from load.summary import client_health, make_record, summarize
from load.workload import (
    BuiltPrompt,
    PlannedRequest,
    PromptBuilder,
    gather_limited,
    load_prompts,
    make_salt,
    messages_for,
    plan_requests,
    tokenizer_fingerprint,
)

DEFAULT_PROMPTS_DIR = CONF_DIR / "workload"
CHAT_PATH = "/v1/chat/completions"
SCRAPE_EVERY_S = 1.0
PROGRESS_EVERY_S = 0.5
STOP_POLL_S = 0.05
AUX_TIMEOUT_S = 30.0  # /tokenize, /v1/models
SCRAPE_TIMEOUT_S = 5.0
_PROBE_TEXT = "The quick brown fox jumps over the lazy dog."

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


_DONE = object()


def _default_loop_factory() -> LoopFactory | None:
    """uvloop when it is installed (less work per socket read), else asyncio's own loop."""
    try:
        import uvloop  # noqa: PLC0415 - optional accelerator
    except ImportError:
        return None
    return uvloop.new_event_loop


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
    progress: bool = True,
    stop: threading.Event | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    prompts_dir: Path = DEFAULT_PROMPTS_DIR,
    clock: Callable[[], int] = time.monotonic_ns,
    cpu_clock: Callable[[], float] = time.process_time,
    loop_factory: LoopFactory | None = None,
) -> ProfileSummary:
    """Run ``workload`` against the server at ``base_url``; write and return its summary.

    ``transport`` replaces the network for every call (tests pass ``httpx.MockTransport``); otherwise
    streams go through the raw asyncio client. ``salt`` prefixes every request's ``cache_salt``
    (default: fresh random). Raises :class:`~contracts.errors.LoadError` when the profile cannot run
    at all; request failures are recorded, never raised.
    """
    run = _ProfileRun(
        base_url=base_url.rstrip("/"),
        served_model=served_model,
        workload=workload,
        candidate=candidate,
        fingerprint=fingerprint,
        repeat=repeat,
        out_dir=out_dir,
        backend=backend,
        host=host,
        time_scale=time_scale,
        scale=scale,
        salt=salt if salt is not None else f"gauntlet-{secrets.token_hex(8)}",
        progress=progress,
        stop=stop if stop is not None else threading.Event(),
        transport=transport,
        prompts_dir=prompts_dir,
        clock=clock,
        cpu_clock=cpu_clock,
    )
    factory = loop_factory if loop_factory is not None else (None if transport else _default_loop_factory())
    try:
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(run.main())
    except KeyboardInterrupt:
        run.interrupted = True
        run.finalize()
        raise
    return run.finalize()


@dataclass
class _ProfileRun:
    base_url: str
    served_model: str
    workload: WorkloadConfig
    candidate: str
    fingerprint: str
    repeat: int
    out_dir: Path
    backend: Literal["vllm", "sim"]
    host: str
    time_scale: float
    scale: float
    salt: str
    progress: bool
    stop: threading.Event
    transport: httpx.AsyncBaseTransport | None
    prompts_dir: Path
    clock: Callable[[], int]
    cpu_clock: Callable[[], float]

    started_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    t0_ns: int = 0
    records: list[RequestRecord] = field(default_factory=list)
    chunks_per_read: list[int] = field(default_factory=list)
    scrapes: list[tuple[int, str, str]] = field(default_factory=list)  # (ns, phase, filtered text)
    scrape_errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False
    planned_measured: int = 0
    window_ns: tuple[int, int] | None = None
    measure_start_ns: int = 0
    cpu_s: float = 0.0
    _finalized: ProfileSummary | None = None

    # Loop-side state (set in main).
    _stopping: asyncio.Event | None = None
    _stop_reason: ErrorClass = "cancelled"
    _inflight: set[asyncio.Task[Any]] = field(default_factory=set)
    _bodies: dict[int, bytes] = field(default_factory=dict)
    _targets: dict[int, int] = field(default_factory=dict)
    _pending: deque[Iterator[None]] = field(default_factory=deque)
    _pending_ready: asyncio.Event | None = None
    _metrics_ok: bool = True
    _raw: RawStreamClient | None = None
    _completed: int = 0
    _errors: int = 0
    _tokens_done: int = 0

    # ---- setup -------------------------------------------------------------------------------------

    async def main(self) -> None:
        self.t0_ns = self.clock()
        self._stopping = asyncio.Event()
        aux = httpx.AsyncClient(base_url=self.base_url, transport=self.transport, timeout=AUX_TIMEOUT_S)
        stream: StreamClient = (
            HttpxStreamClient(self.base_url, transport=self.transport, clock=self.clock)
            if self.transport is not None
            else RawStreamClient(self.base_url, clock=self.clock)
        )
        self._pending_ready = asyncio.Event()
        self._raw = RawStreamClient(self.base_url, clock=self.clock) if self.transport is None else None
        watcher = asyncio.create_task(self._watch_stop())
        drainer = asyncio.create_task(self._drain())
        try:
            planned = await self._prepare(aux)
            warmup = [p for p in planned if p.warmup]
            measured = [p for p in planned if not p.warmup]
            self.planned_measured = len(measured)
            await self._scrape(aux, "before_warmup")
            if warmup and not self._stopping.is_set():
                await self._phase(stream, warmup)
            if self._stopping.is_set():
                return
            await self._scrape(aux, "before")
            if isinstance(stream, RawStreamClient):
                await stream.preconnect(min(self._concurrency(), len(measured)))
            await self._measure(stream, aux, measured)
            if not self.stop.is_set():
                await self._scrape(aux, "after")
        finally:
            watcher.cancel()
            drainer.cancel()
            await asyncio.gather(watcher, drainer, return_exceptions=True)
            self._flush()
            await stream.aclose()
            if self._raw is not None:
                await self._raw.aclose()
            await aux.aclose()

    def _concurrency(self) -> int:
        return max(1, self.workload.concurrency)

    async def _prepare(self, aux: httpx.AsyncClient) -> list[PlannedRequest]:
        fixed = load_prompts(self.workload, self.prompts_dir)
        planned = plan_requests(self.workload, scale=self.scale, prompts=fixed)
        max_model_len = await self._max_model_len(aux)
        counter = _TokenCounter(aux, self.served_model)
        probe = await counter.probe(_PROBE_TEXT)
        builder = PromptBuilder(count=counter.count, seed=self.workload.seed, tokenizer_id=probe)

        async def build(p: PlannedRequest) -> BuiltPrompt:
            if p.fixed_prompt is not None:
                return BuiltPrompt(p.fixed_prompt, await counter.count(p.fixed_prompt))
            return await builder.build(p.index, p.target_prompt_tokens)

        built = await gather_limited([build(p) for p in planned])
        self.notes.extend(builder.notes + counter.notes)
        clipped = 0
        for p, prompt in zip(planned, built, strict=True):
            target = p.target_prompt_tokens if p.fixed_prompt is None else (prompt.counted or 0)
            max_tokens = p.max_tokens
            if max_model_len is not None:
                room = max_model_len - (prompt.counted or target)
                if max_tokens > room:
                    max_tokens = max(1, room)
                    clipped += 1
            self._targets[p.index] = target
            self._bodies[p.index] = self._body(p, prompt.text, max_tokens)
        if clipped:
            self.notes.append(
                f"max_tokens of {clipped} requests clipped to fit max_model_len {max_model_len}"
            )
        return [
            PlannedRequest(
                index=p.index,
                warmup=p.warmup,
                target_prompt_tokens=self._targets[p.index],
                max_tokens=json.loads(self._bodies[p.index])["max_tokens"],
                arrival_s=p.arrival_s,
                fixed_prompt=p.fixed_prompt,
            )
            for p in planned
        ]

    def _body(self, p: PlannedRequest, prompt: str, max_tokens: int) -> bytes:
        body: dict[str, Any] = {
            "model": self.served_model,
            "messages": messages_for(prompt),
            "max_tokens": max_tokens,
            "temperature": self.workload.temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
            "cache_salt": make_salt(self.salt, p.index),
        }
        if self.workload.ignore_eos:
            body["ignore_eos"] = True
            body["min_tokens"] = max_tokens
        if self.workload.temperature > 0:
            body["seed"] = self.workload.seed * 100_003 + p.index
        return json.dumps(body, separators=(",", ":")).encode()

    async def _max_model_len(self, aux: httpx.AsyncClient) -> int | None:
        try:
            response = await aux.get("/v1/models")
            response.raise_for_status()
            models = response.json().get("data", [])
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            self.notes.append(f"/v1/models unreadable ({type(exc).__name__}): max_tokens not checked")
            return None
        for model in models:
            if isinstance(model, dict) and model.get("id") == self.served_model:
                value = model.get("max_model_len")
                return value if isinstance(value, int) else None
        self.notes.append(f"/v1/models does not list {self.served_model!r}")
        return None

    # ---- phases ------------------------------------------------------------------------------------

    async def _phase(self, stream: StreamClient, requests: Sequence[PlannedRequest]) -> None:
        start_ns = self.clock()
        if self.workload.mode == "open":
            await self._open_loop(stream, requests, start_ns)
        else:
            queue = iter(requests)
            workers = [
                asyncio.create_task(self._worker(stream, queue, start_ns))
                for _ in range(min(self._concurrency(), len(requests)))
            ]
            await _gather_owned(workers)
        self._flush()

    async def _measure(
        self, stream: StreamClient, aux: httpx.AsyncClient, measured: Sequence[PlannedRequest]
    ) -> None:
        live = _Live(Progress(f"{self.candidate}/{self.workload.name}", len(measured), enabled=self.progress))
        live.progress.start()
        background = [asyncio.create_task(self._scrape_loop(aux))]
        if self.progress:
            background.append(asyncio.create_task(self._progress_loop(live)))
        gc_was_enabled = gc.isenabled()
        gc.collect()
        gc.disable()  # a full collection over a large heap would stall every stream at once
        cpu0 = self.cpu_clock()
        start = self.measure_start_ns = self.clock()
        try:
            await self._phase(stream, measured)
        finally:
            end = self.clock()
            self.cpu_s = self.cpu_clock() - cpu0
            self.window_ns = (start, end)
            if gc_was_enabled:
                gc.enable()
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            live.progress.stop(live.final(self))

    async def _worker(self, stream: StreamClient, queue: Iterator[PlannedRequest], start_ns: int) -> None:
        """Closed loop: send the next request as soon as this slot's previous one ended."""
        assert self._stopping is not None
        scheduled = start_ns
        for request in queue:
            if self._stopping.is_set() or self._check_deadline():
                return
            task = asyncio.create_task(self._request(stream, request, scheduled))
            self._inflight.add(task)
            try:
                exchange = await task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
                return  # the request was stopped by the watcher; it recorded itself
            finally:
                self._inflight.discard(task)
            self._enqueue(request, scheduled, exchange)
            scheduled = exchange.end_ns if exchange.end_ns is not None else self.clock()

    async def _open_loop(
        self, stream: StreamClient, requests: Sequence[PlannedRequest], start_ns: int
    ) -> None:
        """Open loop: Poisson arrivals; at most ``concurrency`` in flight (a late send shows as lag)."""
        assert self._stopping is not None
        slots = asyncio.Semaphore(self._concurrency())
        tasks: list[asyncio.Task[Any]] = []

        async def one(request: PlannedRequest, scheduled: int) -> None:
            try:
                exchange = await self._request(stream, request, scheduled)
                self._enqueue(request, scheduled, exchange)
            finally:
                slots.release()

        for request in requests:
            # Arrivals are in host seconds (rate is per host second); wall time runs time_scale x faster.
            scheduled = start_ns + round((request.arrival_s or 0.0) / self.time_scale * 1e9)
            delay = (scheduled - self.clock()) / 1e9
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), delay)
            if self._stopping.is_set() or self._check_deadline():
                break
            await slots.acquire()
            task = asyncio.create_task(one(request, scheduled))
            self._inflight.add(task)
            task.add_done_callback(self._inflight.discard)
            tasks.append(task)
        await _gather_owned(tasks)

    async def _request(self, stream: StreamClient, request: PlannedRequest, scheduled: int) -> Exchange:
        called = self.clock()
        remaining = (self._deadline_ns() - called) / 1e9
        timeout = max(0.001, min(self.workload.request_timeout_s, remaining))
        try:
            exchange = await stream.post_stream(CHAT_PATH, self._bodies[request.index], timeout_s=timeout)
        except asyncio.CancelledError:
            self._record_stopped(request, scheduled, called)
            raise
        return exchange

    def _check_deadline(self) -> bool:
        """Past the profile's time bound: stop now (the watcher may not have polled yet)."""
        if self.clock() < self._deadline_ns():
            return False
        self._stop("timeout")
        return True

    def _stop(self, reason: ErrorClass) -> None:
        assert self._stopping is not None
        if self._stopping.is_set():
            return
        self._stop_reason = reason
        if reason == "timeout":
            self.notes.append(f"stopped by the profile's time bound ({self.workload.time_limit_s:g} s)")
        self.interrupted = True
        self._stopping.set()
        for task in list(self._inflight):
            task.cancel()

    def _deadline_ns(self) -> int:
        return self.t0_ns + round(self.workload.time_limit_s * 1e9)

    # ---- records -----------------------------------------------------------------------------------

    def _enqueue(self, request: PlannedRequest, scheduled: int, exchange: Exchange) -> None:
        """Parse later, in bounded steps between the loop's other work (see :meth:`_drain`)."""
        self._pending.append(self._finish_steps(request, scheduled, exchange))
        if self._pending_ready is not None:
            self._pending_ready.set()

    async def _drain(self) -> None:
        """Parse finished streams a step at a time, after whatever sends and reads are ready."""
        assert self._pending_ready is not None
        while True:
            await self._pending_ready.wait()
            self._pending_ready.clear()
            while self._pending:
                await asyncio.sleep(0)
                if next(self._pending[0], _DONE) is _DONE:
                    self._pending.popleft()

    def _flush(self) -> None:
        """Finish every pending parse now (end of a phase, or after an interrupt)."""
        while self._pending:
            for _ in self._pending.popleft():
                pass

    def _finish_steps(self, request: PlannedRequest, scheduled: int, exchange: Exchange) -> Iterator[None]:
        yield from exchange.decode_steps()
        transport_error: ErrorClass | None = None
        if exchange.ending in ("timeout", "connect", "cancelled"):
            transport_error = exchange.ending
        if exchange.status is None and transport_error is None:
            outcome = StreamOutcome(
                error="malformed" if exchange.body or exchange.ending == "complete" else "connect",
                error_detail=exchange.detail or "no HTTP status line in the response",
            )
        elif exchange.status is not None and exchange.status >= 400:
            outcome = http_error_outcome(exchange.status, exchange.body)
        else:
            parser = EventParser(exchange.body, complete=exchange.complete, transport_error=transport_error)
            yield from parser.steps()
            outcome = parser.out
            if transport_error is not None or (outcome.error == "truncated" and exchange.detail):
                outcome.error_detail = exchange.detail or outcome.error_detail
        self._add(request, scheduled, exchange.sent_ns, outcome, exchange.status)

    def _record_stopped(self, request: PlannedRequest, scheduled: int, sent_ns: int) -> None:
        reason = self._stop_reason
        detail = "stopped by the profile's time bound" if reason == "timeout" else "the run was interrupted"
        self._add(request, scheduled, sent_ns, StreamOutcome(error=reason, error_detail=detail), None)

    def _add(
        self,
        request: PlannedRequest,
        scheduled: int,
        sent_ns: int,
        outcome: StreamOutcome,
        status: int | None,
    ) -> None:
        record = make_record(
            index=request.index,
            warmup=request.warmup,
            target_prompt_tokens=request.target_prompt_tokens,
            target_output_tokens=request.max_tokens,
            t0_ns=self.t0_ns,
            scheduled_ns=scheduled,
            sent_ns=sent_ns,
            outcome=outcome,
            http_status=status,
            time_scale=self.time_scale,
        )
        self.records.append(record)
        if not request.warmup:
            self.chunks_per_read.extend(outcome.chunks_per_read)
            if record.ok:
                self._completed += 1
                self._tokens_done += record.completion_tokens or 0
            else:
                self._errors += 1

    # ---- background tasks --------------------------------------------------------------------------

    async def _watch_stop(self) -> None:
        """Poll the orchestrator's stop event and the time bound; stop everything in flight."""
        assert self._stopping is not None
        while not self._stopping.is_set():
            if self.stop.is_set():
                self._stop("cancelled")
            elif self.clock() >= self._deadline_ns():
                self._stop("timeout")
            else:
                await asyncio.sleep(STOP_POLL_S)

    async def _scrape(self, aux: httpx.AsyncClient, phase: str) -> None:
        if not self._metrics_ok:
            return
        at = self.clock()
        status, text, error = await self._get_metrics(aux)
        if error is not None:
            self.scrape_errors.append(f"{phase}: {error}")
            return
        if status != 200:
            self.scrape_errors.append(f"{phase}: HTTP {status}")
            if status in (404, 405) and not self.scrapes:
                self._metrics_ok = False  # this server has no /metrics: stop asking
            return
        self.scrapes.append((at, phase, filter_scrape(text)))

    async def _get_metrics(self, aux: httpx.AsyncClient) -> tuple[int | None, str, str | None]:
        """(status, text, transport error); the raw client when streaming raw, so a scrape is cheap."""
        if self._raw is not None:
            exchange = await self._raw.get("/metrics", timeout_s=SCRAPE_TIMEOUT_S)
            if exchange.ending != "complete" or exchange.status is None:
                return None, "", f"{exchange.ending}: {exchange.detail}"
            return (
                exchange.status,
                b"".join(piece for _, piece in exchange.body).decode("utf-8", "replace"),
                None,
            )
        try:
            response = await aux.get("/metrics", timeout=SCRAPE_TIMEOUT_S)
        except httpx.HTTPError as exc:
            return None, "", f"{type(exc).__name__}: {exc}"
        return response.status_code, response.text, None

    async def _scrape_loop(self, aux: httpx.AsyncClient) -> None:
        for _ in range(int(self.workload.time_limit_s / SCRAPE_EVERY_S) + 2):
            await asyncio.sleep(SCRAPE_EVERY_S)
            await self._scrape(aux, "during")

    async def _progress_loop(self, live: _Live) -> None:
        for _ in range(int(self.workload.time_limit_s / PROGRESS_EVERY_S) + 2):
            await asyncio.sleep(PROGRESS_EVERY_S)
            live.progress.update(
                self._completed, self._errors, len(self._inflight), live.tok_s(self), "measure"
            )

    # ---- results -----------------------------------------------------------------------------------

    def finalize(self) -> ProfileSummary:
        if self._finalized is not None:
            return self._finalized
        self._flush()
        records = sorted(self.records, key=lambda r: r.index)
        figures = summarize(records, planned=self.planned_measured or sum(1 for r in records if not r.warmup))
        start, end = self.window_ns or (self.t0_ns, self.clock())
        health = client_health(
            records,
            chunks_per_read=self.chunks_per_read,
            cpu_seconds=self.cpu_s,
            wall_seconds=(end - start) / 1e9,
            time_scale=self.time_scale,
        )
        scrapes = [
            parse_scrape(text, t_s=(ns - self.t0_ns) / 1e9 * self.time_scale, phase=phase)
            for ns, phase, text in self.scrapes
        ]
        measured = [r for r in records if not r.warmup]
        server = server_metrics(
            scrapes,
            client_prompt_tokens=sum(r.prompt_tokens or 0 for r in measured),
            client_output_tokens=sum(r.completion_tokens or 0 for r in measured),
            client_failed=figures.failed,
        )
        if server is None and self.scrape_errors:
            self.notes.append(f"/metrics unavailable: {self.scrape_errors[0]}")
        summary = ProfileSummary(
            candidate=self.candidate,
            profile=self.workload.name,
            repeat=self.repeat,
            fingerprint=self.fingerprint,
            backend=self.backend,
            host=self.host,
            time_scale=self.time_scale,
            started_at=self.started_at,
            duration_s=figures.duration_s,
            num_requests=figures.num_requests,
            completed=figures.completed,
            failed=figures.failed,
            errors=figures.errors,
            prompt_tokens=figures.prompt_tokens,
            output_tokens=figures.output_tokens,
            prompt_tps=figures.prompt_tps,
            output_tps=figures.output_tps,
            ttft=figures.ttft,
            first_visible=figures.first_visible,
            first_visible_censored=figures.first_visible_censored,
            itl=figures.itl,
            e2e=figures.e2e,
            client=health,
            server=server,
            interrupted=self.interrupted,
            prompt_mismatches=figures.prompt_mismatches,
            notes=self.notes + figures.notes,
        )
        write_jsonl(self.out_dir / "records.jsonl", records)
        write_model(
            self.out_dir / "metrics.json",
            MetricsLog(
                base_url=self.base_url,
                t0_monotonic_ns=self.t0_ns,
                time_scale=self.time_scale,
                scrapes=scrapes,
                errors=self.scrape_errors,
            ),
        )
        write_model(self.out_dir / "summary.json", summary)
        self._finalized = summary
        return summary


async def _gather_owned(tasks: Sequence[asyncio.Task[Any]]) -> None:
    """Wait for tasks this run started; their cancellation by the watcher is not an error."""
    results = await asyncio.gather(*tasks, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
            raise result


@dataclass
class _Live:
    """The progress display plus what it needs to compute live tokens/s."""

    progress: Progress

    def tok_s(self, run: _ProfileRun) -> float | None:
        during = [(ns, text) for ns, phase, text in run.scrapes[-2:] if phase in ("before", "during")]
        if len(during) == 2:
            (a_ns, a), (b_ns, b) = during
            va, vb = quick_value(a, GENERATION_TOKENS), quick_value(b, GENERATION_TOKENS)
            if va is not None and vb is not None and b_ns > a_ns:
                return (vb - va) / ((b_ns - a_ns) / 1e9) / run.time_scale
        if run.measure_start_ns and run._tokens_done:
            elapsed = (run.clock() - run.measure_start_ns) / 1e9
            return run._tokens_done / elapsed / run.time_scale if elapsed > 0 else None
        return None

    def final(self, run: _ProfileRun) -> str:
        return self.progress.line(run._completed, run._errors, 0, None, "done")


class _TokenCounter:
    """``POST /tokenize`` with the chat template applied (falls back to the bare prompt form)."""

    def __init__(self, aux: httpx.AsyncClient, model: str) -> None:
        self.aux = aux
        self.model = model
        self.form: Literal["messages", "prompt", "none"] = "messages"
        self.notes: list[str] = []

    async def _call(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        try:
            response = await self.aux.post("/tokenize", json=payload)
        except httpx.HTTPError:
            return None
        if response.status_code != 200:
            return None
        try:
            data = response.json()
        except ValueError:
            return None
        return data if isinstance(data, dict) and isinstance(data.get("count"), int) else None

    async def _tokenize(self, text: str) -> dict[str, Any] | None:
        if self.form == "messages":
            data = await self._call(
                {"model": self.model, "messages": messages_for(text), "add_generation_prompt": True}
            )
            if data is not None:
                return data
            self.form = "prompt"
            self.notes.append("/tokenize has no chat form here: the chat template is not in the count")
        if self.form == "prompt":
            data = await self._call({"model": self.model, "prompt": text})
            if data is not None:
                return data
            self.form = "none"
        return None

    async def probe(self, text: str) -> str:
        data = await self._tokenize(text)
        if data is None:
            return ""
        tokens = data.get("tokens")
        ids = tokens if isinstance(tokens, list) else [data["count"]]
        return f"{self.model}:{self.form}:{tokenizer_fingerprint(ids)}"

    async def count(self, text: str) -> int | None:
        data = await self._tokenize(text)
        return None if data is None else int(data["count"])
