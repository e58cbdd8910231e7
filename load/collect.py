"""Finished streams → request records → the run's summary and metrics log (pure).

Pipeline position: the dispatcher (:mod:`load.dispatch`) hands every finished exchange to
:meth:`Collector.steps`, which decodes and parses it a bounded step at a time (:mod:`load.sse`) and keeps
its :class:`~contracts.results.RequestRecord`; after the run :func:`summarize_run` reduces the records
(:mod:`load.summary`), the client's health and the server's scrapes (:mod:`load.metrics`) to the
:class:`~contracts.results.ProfileSummary` and :class:`~load.metrics.MetricsLog` that
:func:`load.write.write_results` writes. No clock, socket or file here: every case is a table test.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from contracts.results import ErrorClass, LoadSettings, ProfileSummary, RequestRecord
from contracts.schema import SloConfig
from load.client import Exchange
from load.goodput import slo_summary, tpot_stats
from load.metrics import MetricsLog, parse_scrape, server_metrics
from load.plan import Request
from load.sse import EventParser, StreamOutcome, http_error_outcome
from load.summary import Figures, client_health, make_record, summarize

#: A scrape as taken during the run: (monotonic ns, phase, the filtered /metrics text).
RawScrape = tuple[int, str, str]


def outcome_steps(exchange: Exchange, *, keep_text: bool = False) -> Generator[None, None, StreamOutcome]:
    """Decode and parse one exchange in bounded steps; the outcome is the generator's return value
    (``keep_text``: with the visible answer's text)."""
    yield from exchange.decode_steps()
    transport_error: ErrorClass | None = None
    if exchange.ending in ("timeout", "connect", "client", "cancelled"):
        transport_error = exchange.ending
    if exchange.status is None and transport_error is None:
        return StreamOutcome(
            error="malformed" if exchange.body or exchange.ending == "complete" else "connect",
            error_detail=exchange.detail or "no HTTP status line in the response",
        )
    if exchange.status is not None and exchange.status >= 400:
        return http_error_outcome(exchange.status, exchange.body)
    parser = EventParser(
        exchange.body, complete=exchange.complete, transport_error=transport_error, keep_text=keep_text
    )
    yield from parser.steps()
    outcome = parser.out
    if transport_error is not None or (outcome.error == "truncated" and exchange.detail):
        outcome.error_detail = exchange.detail or outcome.error_detail
    return outcome


def stopped_outcome(reason: ErrorClass) -> StreamOutcome:
    """A request cancelled in flight by a stop: ``timeout`` (the time bound) or ``cancelled``."""
    detail = "stopped by the profile's time bound" if reason == "timeout" else "the run was interrupted"
    return StreamOutcome(error=reason, error_detail=detail)


@dataclass
class Collector:
    """Records of one run as they finish, and the running counts the live progress line shows."""

    t0_ns: int
    time_scale: float
    records: list[RequestRecord] = field(default_factory=list)
    chunks_per_read: list[int] = field(default_factory=list)  # measured requests only
    completed: int = 0
    errors: int = 0
    output_tokens: int = 0  # usage of the completed measured requests
    _calibration: list[int] = field(default_factory=lambda: [0, 0])  # (usage tokens, reads) of those

    def steps(self, request: Request, scheduled_ns: int, exchange: Exchange) -> Iterator[None]:
        """Parse ``exchange`` a step at a time, then keep its record."""
        outcome = yield from outcome_steps(exchange, keep_text=request.keep_text)
        self.add(request, scheduled_ns, exchange.sent_ns, outcome, exchange.status, reads=exchange.reads)

    def stopped(self, request: Request, scheduled_ns: int, sent_ns: int, reason: ErrorClass) -> None:
        self.add(request, scheduled_ns, sent_ns, stopped_outcome(reason), None)

    def add(
        self,
        request: Request,
        scheduled_ns: int,
        sent_ns: int,
        outcome: StreamOutcome,
        status: int | None,
        *,
        reads: int = 0,
    ) -> RequestRecord:
        record = make_record(
            index=request.index,
            warmup=request.warmup,
            target_prompt_tokens=request.target_prompt_tokens,
            target_output_tokens=request.max_tokens,
            t0_ns=self.t0_ns,
            scheduled_ns=scheduled_ns,
            sent_ns=sent_ns,
            outcome=outcome,
            http_status=status,
            time_scale=self.time_scale,
        )
        self.records.append(record)
        if not request.warmup:
            self.chunks_per_read.extend(outcome.chunks_per_read)
            if record.ok:
                self.completed += 1
                self.output_tokens += record.completion_tokens or 0
                if record.completion_tokens and reads:
                    self._calibration[0] += record.completion_tokens
                    self._calibration[1] += reads
            else:
                self.errors += 1
        return record

    @property
    def tokens_per_read(self) -> float | None:
        """Output tokens per socket read of the completed measured streams (None before the first)."""
        tokens, reads = self._calibration
        return tokens / reads if reads else None


@dataclass(frozen=True)
class RunInfo:
    """Who ran what, where: the identity fields of a summary (same names) and its metrics log."""

    candidate: str
    profile: str
    repeat: int
    fingerprint: str
    backend: Literal["vllm", "sim"]
    host: str
    time_scale: float
    started_at: str  # ISO 8601, UTC
    base_url: str
    #: Every API server the requests were spread over (load.spread; the head's first), or none: one server.
    servers: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunResult:
    """Everything one run writes."""

    records: list[RequestRecord]
    summary: ProfileSummary
    metrics: MetricsLog


def summarize_run(
    info: RunInfo,
    records: Sequence[RequestRecord],
    *,
    t0_ns: int,
    planned: int,
    chunks_per_read: Sequence[int],
    cpu_seconds: float,
    window_ns: tuple[int, int],
    scrapes: Sequence[RawScrape],
    scrape_errors: Sequence[str],
    notes: Sequence[str],
    interrupted: bool,
    time_bound: bool = False,
    settings: LoadSettings | None = None,
    slo: SloConfig | None = None,
    load_level: float | None = None,
    lateness_bound_s: float | None = None,
    pacer: str | None = None,
    worker_cpu_seconds: Sequence[float] = (),
    rss_per_stream_bytes: float | None = None,
) -> RunResult:
    """Records sorted by index; the summary's figures, client health and server deltas; the scrape log.

    ``t0_ns`` is the profile's t = 0 (CLOCK_MONOTONIC) that scrape times count from. ``planned`` is the
    number of measured requests the plan held (0: unknown, count the records). ``notes`` are the run's
    own (plan, stop), ahead of the ``/metrics`` note and those of the figures; ``time_bound``: the profile's
    time bound stopped the run (not a stop from outside). ``slo`` (the service's
    SLO) adds attainment and goodput; ``load_level`` marks a capacity search's run. ``lateness_bound_s``,
    ``pacer``, ``worker_cpu_seconds`` and ``rss_per_stream_bytes`` go to the client's health
    (:func:`load.summary.client_health`).
    """
    ordered = sorted(records, key=lambda r: r.index)
    measured = [r for r in ordered if not r.warmup]
    figures = summarize(ordered, planned=planned or len(measured))
    start, end = window_ns
    health = client_health(
        ordered,
        chunks_per_read=chunks_per_read,
        cpu_seconds=cpu_seconds,
        wall_seconds=(end - start) / 1e9,
        time_scale=info.time_scale,
        lateness_bound_s=lateness_bound_s,
        pacer=pacer,
        worker_cpu_seconds=worker_cpu_seconds,
        rss_per_stream_bytes=rss_per_stream_bytes,
    )
    parsed = [
        parse_scrape(text, t_s=(ns - t0_ns) / 1e9 * info.time_scale, phase=phase)
        for ns, phase, text in scrapes
    ]
    server = server_metrics(
        parsed,
        client_prompt_tokens=sum(r.prompt_tokens or 0 for r in measured),
        client_output_tokens=sum(r.completion_tokens or 0 for r in measured),
        client_failed=figures.failed,
    )
    run_notes = list(notes)
    if server is None and scrape_errors:
        run_notes.append(f"/metrics unavailable: {scrape_errors[0]}")
    summary = ProfileSummary(
        **_fields(info, but=("base_url", "servers")),
        **_fields(figures, but=("notes",)),
        client=health,
        server=server,
        interrupted=interrupted,
        time_bound=time_bound,
        notes=run_notes + figures.notes + spread_note(info.servers),
        settings=settings,
        tpot=tpot_stats(measured),
        slo=slo_summary(measured, slo, duration_s=figures.duration_s) if slo is not None else None,
        load_level=load_level,
    )
    metrics = MetricsLog(
        base_url=info.base_url,
        t0_monotonic_ns=t0_ns,
        time_scale=info.time_scale,
        scrapes=parsed,
        errors=list(scrape_errors),
        servers=list(info.servers),
    )
    return RunResult(records=ordered, summary=summary, metrics=metrics)


def _fields(part: RunInfo | Figures, *, but: tuple[str, ...]) -> dict[str, Any]:
    """A part of the summary, field by field under the summary's own names (but those set otherwise)."""
    return {f.name: getattr(part, f.name) for f in fields(part) if f.name not in but}


def spread_note(servers: Sequence[str]) -> list[str]:
    """The summary's note of a run spread over several API servers: which requests each answered."""
    if len(servers) < 2:
        return []
    n = len(servers)
    each = ", ".join(f"{url} (index mod {n} = {k})" for k, url in enumerate(servers))
    return [f"requests spread round-robin by index over {n} API servers: {each}; /metrics summed over them"]
