"""Request records → the figures of one profile run (pure).

Pipeline position: the runner builds a :class:`~contracts.results.RequestRecord` per request with
:func:`make_record`, then :func:`summarize` reduces the measured ones (warmup excluded) to the
:class:`~contracts.results.ProfileSummary` fields the gates judge, and :func:`client_health` says
whether the client itself kept up. All durations are host seconds (wall seconds times time_scale).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from contracts.metrics import censored_median, percentile, stats
from contracts.results import CensoredMedian, ClientHealth, RequestRecord, Stats
from load.sse import StreamOutcome
from load.workload import PROMPT_TOLERANCE

NS = 1e-9
#: Client CPU share of one core above which the runner calls itself saturated.
CPU_SATURATED_PERCENT = 85.0
#: Dispatch lag p99 above which the runner calls itself saturated (host-independent wall seconds).
DISPATCH_SATURATED_S = 0.025
DISPATCH_NOTE_S = 0.005
#: Below this CPU share, a client whose sends fell behind was starved of the CPU, not busy.
STARVED_PERCENT = 50.0
#: The CPU share of a core each worker process should stay under when the hint sizes load.workers.
WORKER_TARGET_PERCENT = 60.0


def make_record(
    *,
    index: int,
    warmup: bool,
    target_prompt_tokens: int,
    target_output_tokens: int,
    t0_ns: int,
    scheduled_ns: int,
    sent_ns: int,
    outcome: StreamOutcome,
    http_status: int | None,
    time_scale: float,
) -> RequestRecord:
    """One record: profile-relative send times, request-relative stream times, host seconds."""
    scale = NS * time_scale

    def since_sent(ns: int | None) -> float | None:
        return None if ns is None else (ns - sent_ns) * scale

    return RequestRecord(
        index=index,
        warmup=warmup,
        target_prompt_tokens=target_prompt_tokens,
        target_output_tokens=target_output_tokens,
        scheduled_s=(scheduled_ns - t0_ns) * scale,
        sent_s=(sent_ns - t0_ns) * scale,
        ttft_s=since_sent(outcome.first_token_ns),
        first_visible_s=since_sent(outcome.first_visible_ns),
        end_s=since_sent(outcome.last_byte_ns),
        chunk_offsets_s=[(ns - sent_ns) * scale for ns in outcome.token_chunk_ns],
        prompt_tokens=outcome.prompt_tokens,
        completion_tokens=outcome.completion_tokens,
        finish_reason=outcome.finish_reason,
        http_status=http_status,
        error=outcome.error,
        error_detail=outcome.error_detail,
        output_text=outcome.text,
    )


@dataclass(frozen=True)
class Figures:
    """The record-derived part of a ProfileSummary."""

    duration_s: float
    num_requests: int
    completed: int
    failed: int
    errors: dict[str, int]
    prompt_tokens: int
    output_tokens: int
    prompt_tps: float
    output_tps: float
    ttft: Stats
    first_visible: Stats
    first_visible_censored: CensoredMedian
    itl: Stats
    e2e: Stats
    prompt_mismatches: int
    notes: list[str]


def summarize(records: Sequence[RequestRecord], *, planned: int) -> Figures:
    """Reduce the measured records (warmup ignored) of one profile run."""
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.ok]
    errors: Counter[str] = Counter(r.error for r in measured if r.error is not None)
    failed = sum(1 for r in measured if not r.ok)
    starts = [r.sent_s for r in measured]
    ends = [r.sent_s + r.end_s for r in measured if r.end_s is not None]
    duration = max(ends) - min(starts) if ends and starts else 0.0
    prompt_tokens = sum(r.prompt_tokens or 0 for r in measured)
    output_tokens = sum(r.completion_tokens or 0 for r in measured)
    gaps = [b - a for r in measured for a, b in zip(r.chunk_offsets_s, r.chunk_offsets_s[1:], strict=False)]
    notes: list[str] = []
    if len(measured) < planned:
        notes.append(f"{len(measured)} of {planned} planned requests were sent")
    mismatches = [
        r
        for r in measured
        if r.prompt_tokens is not None
        and r.target_prompt_tokens > 0
        and abs(r.prompt_tokens - r.target_prompt_tokens) > PROMPT_TOLERANCE * r.target_prompt_tokens
    ]
    if mismatches:
        worst = max(mismatches, key=lambda r: abs((r.prompt_tokens or 0) - r.target_prompt_tokens))
        notes.append(
            f"{len(mismatches)} requests missed their prompt-token target by more than "
            f"{PROMPT_TOLERANCE:.0%}; worst: request {worst.index} aimed at {worst.target_prompt_tokens}, "
            f"the server counted {worst.prompt_tokens}"
        )
    return Figures(
        duration_s=duration,
        num_requests=planned,
        completed=len(ok),
        failed=failed,
        errors=dict(sorted(errors.items())),
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        prompt_tps=prompt_tokens / duration if duration > 0 else 0.0,
        output_tps=output_tokens / duration if duration > 0 else 0.0,
        ttft=stats([r.ttft_s for r in ok if r.ttft_s is not None]),
        first_visible=stats([r.first_visible_s for r in ok if r.first_visible_s is not None]),
        first_visible_censored=censored_median([r.first_visible_s for r in measured]),
        itl=stats(gaps),
        e2e=stats([r.end_s for r in ok if r.end_s is not None]),
        prompt_mismatches=len(mismatches),
        notes=notes,
    )


def client_health(
    records: Sequence[RequestRecord],
    *,
    chunks_per_read: Sequence[int],
    cpu_seconds: float,
    wall_seconds: float,
    time_scale: float,
    lateness_bound_s: float | None = None,
    pacer: str | None = None,
    worker_cpu_seconds: Sequence[float] = (),
    rss_per_stream_bytes: float | None = None,
) -> ClientHealth:
    """Judge whether the client was the bottleneck: late sends, batched reads, a busy core.

    ``lateness_bound_s`` (wall seconds, ``load.max_send_lateness_s``) flags the run ``late`` when the send
    lateness p99 exceeds it. ``worker_cpu_seconds``: each worker process's CPU over the window when
    several sent the requests (``cpu_seconds`` is then their sum); a busy core is judged per process.
    """
    measured = [r for r in records if not r.warmup]
    lags = [max(0.0, r.sent_s - r.scheduled_s) for r in measured]
    lag_p50 = percentile(lags, 50) or 0.0
    lag_p99 = percentile(lags, 99) or 0.0
    lag_max = max(lags, default=0.0)
    per_read = float(percentile([float(c) for c in chunks_per_read], 99) or 0.0)
    cpu = 100.0 * cpu_seconds / wall_seconds if wall_seconds > 0 else 0.0
    workers = max(1, len(worker_cpu_seconds))
    per_worker = [100.0 * c / wall_seconds if wall_seconds > 0 else 0.0 for c in worker_cpu_seconds]
    busiest = max(per_worker, default=cpu)
    notes: list[str] = []
    saturated = False
    lag_p99_wall = lag_p99 / time_scale if time_scale > 0 else lag_p99
    if busiest >= CPU_SATURATED_PERCENT:
        saturated = True
        who = "client" if workers == 1 else f"the busiest of {workers} client processes"
        notes.append(f"{who} used {busiest:.0f}% of a core: it cannot keep up, timings are inflated")
    if lag_p99_wall > DISPATCH_SATURATED_S:
        saturated = True
        notes.append(f"requests left {lag_p99_wall * 1e3:.1f} ms late (p99 wall): the schedule was not kept")
    elif lag_p99_wall > DISPATCH_NOTE_S:
        notes.append(f"requests left up to {lag_p99_wall * 1e3:.1f} ms late (p99 wall)")
    if per_read > 1:
        busy = cpu >= 50.0
        saturated |= busy
        notes.append(
            f"p99 of {per_read:.0f} token chunks per socket read"
            + (
                ": the client read late, gaps between chunks are under-reported"
                if busy
                else " (server batching)"
            )
        )
    if lag_p99_wall > DISPATCH_NOTE_S and busiest < STARVED_PERCENT:
        notes.append(
            f"the client used only {busiest:.0f}% of a core while its sends fell behind: it was waiting for "
            "the CPU (other processes on its core), not doing its own work; give it a core of its own"
        )
    late = lateness_bound_s is not None and lag_p99_wall > lateness_bound_s
    if late:
        assert lateness_bound_s is not None
        notes.append(
            f"send lateness p99 {lag_p99_wall * 1e3:.2f} ms (wall) exceeds the bound of "
            f"{lateness_bound_s * 1e3:.2f} ms (load.max_send_lateness_s)"
        )
    if saturated and workers == 1 and len(measured) > 0:
        notes.append(workers_hint(cpu))
    return ClientHealth(
        dispatch_lag_p50_s=lag_p50,
        dispatch_lag_p99_s=lag_p99,
        dispatch_lag_max_s=lag_max,
        chunks_per_read_p99=per_read,
        client_cpu_percent=cpu,
        saturated=saturated,
        notes=notes,
        late=late,
        lateness_bound_s=lateness_bound_s,
        pacer=pacer,
        workers=workers,
        worker_cpu_percent=per_worker,
        rss_per_stream_bytes=rss_per_stream_bytes,
    )


def workers_hint(cpu_percent: float) -> str:
    """What to do when one process could not sustain the run's streams or request rate."""
    suggest = max(2, math.ceil(cpu_percent / WORKER_TARGET_PERCENT))
    return (
        f"one client process did not sustain this run's streams or request rate: set load.workers={suggest} "
        f"(worker processes, each its own event loop and core) and give the client that many free cores"
    )
