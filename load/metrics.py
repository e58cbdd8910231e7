"""Server ``/metrics`` during a profile: filter scrapes cheaply, parse later, reduce to ServerMetrics (pure).

Pipeline position: the runner scrapes ``/metrics`` before, periodically during and after each profile and
keeps only the lines of the families below (:func:`filter_scrape`, cheap enough for the event loop);
after the profile, :func:`parse_scrape` reads them with prometheus_client's text parser, summing over the
``engine`` label (one per data-parallel rank), and :func:`server_metrics` computes deltas and peaks,
detects a restart (a counter going backwards) and cross-checks the client's token totals.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel, ConfigDict, Field

from contracts.results import ServerMetrics
from contracts.spec_decode import SpecDecodeMetrics, spec_decode_metrics

PREEMPTIONS = "vllm:num_preemptions_total"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
REQUEST_SUCCESS = "vllm:request_success_total"
WAITING = "vllm:num_requests_waiting"
RUNNING = "vllm:num_requests_running"
KV_USAGE = "vllm:kv_cache_usage_perc"
KV_USAGE_OLD = "vllm:gpu_cache_usage_perc"  # name before vLLM 0.10

# Optional counters (absent when prefix caching or speculative decoding is off, or on older servers).
PREFIX_QUERIES = "vllm:prefix_cache_queries_total"  # tokens looked up in the prefix cache
PREFIX_HITS = "vllm:prefix_cache_hits_total"  # of which found cached
SPEC_DRAFTS = "vllm:spec_decode_num_drafts_total"
SPEC_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
SPEC_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
# Accepted tokens by draft position (label ``position``: 0, 1, ...), vLLM 0.32 v1/spec_decode/metrics.py.
SPEC_ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"

COUNTERS = (PREEMPTIONS, PROMPT_TOKENS, GENERATION_TOKENS)
OPTIONAL_COUNTERS = (PREFIX_QUERIES, PREFIX_HITS, SPEC_DRAFTS, SPEC_DRAFT_TOKENS, SPEC_ACCEPTED)
GAUGES = (WAITING, RUNNING, KV_USAGE, KV_USAGE_OLD)
_FAMILIES = tuple(
    name.removesuffix("_total")
    for name in (*COUNTERS, *OPTIONAL_COUNTERS, SPEC_ACCEPTED_PER_POS, REQUEST_SUCCESS, *GAUGES)
)
_PREFIXES = (
    tuple(_FAMILIES) + tuple(f"# TYPE {f} " for f in _FAMILIES) + tuple(f"# HELP {f} " for f in _FAMILIES)
)

#: Relative difference between client and server token totals above which they disagree.
TOKEN_TOLERANCE = 0.02


class Scrape(BaseModel):
    """One parsed scrape: sums over engines (request_success keyed by finished_reason)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    t_s: float  # host seconds from the profile's start
    phase: str  # before_warmup, before, during, after
    counters: dict[str, float] = Field(default_factory=dict)
    gauges: dict[str, float] = Field(default_factory=dict)
    request_success: dict[str, float] = Field(default_factory=dict)
    spec_accepted_per_pos: dict[str, float] = Field(default_factory=dict)  # by the ``position`` label


class MetricsLog(BaseModel):
    """metrics.json: every scrape of one profile run, for plots and audits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str
    t0_monotonic_ns: int  # CLOCK_MONOTONIC at the profile's start (t_s = 0)
    time_scale: float
    scrapes: list[Scrape] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)  # scrapes that failed, with why
    #: The API servers scraped and summed (load.spread), the head's first; empty: base_url alone.
    servers: list[str] = Field(default_factory=list)


def filter_scrape(text: str) -> str:
    """Keep only the lines of the families the runner reads (a vLLM scrape is mostly histograms)."""
    return "\n".join(line for line in text.splitlines() if line.startswith(_PREFIXES)) + "\n"


def parse_scrape(text: str, *, t_s: float, phase: str) -> Scrape:
    """Parse a (filtered) scrape; sums every sample over its other labels (engine, model_name)."""
    counters: dict[str, float] = {}
    gauges: dict[str, float] = {}
    success: dict[str, float] = {}
    per_pos: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name, value = sample.name, float(sample.value)
            if name == SPEC_ACCEPTED_PER_POS:
                position = sample.labels.get("position", "")
                per_pos[position] = per_pos.get(position, 0.0) + value
            elif name in COUNTERS or name in OPTIONAL_COUNTERS:
                counters[name] = counters.get(name, 0.0) + value
            elif name == REQUEST_SUCCESS:
                reason = sample.labels.get("finished_reason", "unknown")
                success[reason] = success.get(reason, 0.0) + value
            elif name in (KV_USAGE, KV_USAGE_OLD):
                # A fraction per engine: the fullest engine's share, not a sum over engines.
                gauges[KV_USAGE] = max(gauges.get(KV_USAGE, 0.0), value)
            elif name in GAUGES:
                gauges[name] = gauges.get(name, 0.0) + value
    return Scrape(
        t_s=t_s,
        phase=phase,
        counters=counters,
        gauges=gauges,
        request_success=success,
        spec_accepted_per_pos=per_pos,
    )


def counter_delta(series: Sequence[float | None]) -> tuple[float, bool]:
    """Increase of a counter over consecutive scrapes, and whether it went backwards (a restart).

    After a restart the counter starts again from zero, so its new value is all increase.
    """
    delta = 0.0
    restarted = False
    previous: float | None = None
    for value in series:
        if value is None:
            continue
        if previous is not None:
            if value >= previous:
                delta += value - previous
            else:
                restarted = True
                delta += value
        previous = value
    return delta, restarted


def server_metrics(
    scrapes: Sequence[Scrape],
    *,
    client_prompt_tokens: int,
    client_output_tokens: int,
    client_failed: int = 0,
) -> ServerMetrics | None:
    """Deltas from the first scrape of the measured window (``before``) to the last; None without scrapes.

    ``scrapes`` are in time order; those of phase ``before_warmup`` count for restart detection only.
    """
    if not scrapes:
        return None
    notes: list[str] = []
    restart = False
    for name in COUNTERS:
        _, went_back = counter_delta([s.counters.get(name) for s in scrapes])
        restart |= went_back
    window = [s for s in scrapes if s.phase != "before_warmup"] or list(scrapes)
    deltas: dict[str, float] = {}
    for name in COUNTERS:
        deltas[name], _ = counter_delta([s.counters.get(name) for s in window])
        if all(name not in s.counters for s in window):
            notes.append(f"{name} not exported")
    reasons = sorted({r for s in window for r in s.request_success})
    success: dict[str, float] = {}
    for reason in reasons:
        first_seen = next(i for i, s in enumerate(window) if reason in s.request_success)
        series = [s.request_success.get(reason) for s in window]
        if first_seen > 0:
            series = [0.0, *series[first_seen:]]  # a label that appears mid-run started from zero
        delta, went_back = counter_delta(series)
        restart |= went_back
        success[reason] = delta
    if restart:
        notes.append("a counter went backwards between scrapes: the server restarted during the profile")

    def peak(name: str) -> float:
        return max((s.gauges.get(name, 0.0) for s in window), default=0.0)

    last = window[-1]
    mismatch = False
    for label, client, name in (
        ("prompt", client_prompt_tokens, PROMPT_TOKENS),
        ("generation", client_output_tokens, GENERATION_TOKENS),
    ):
        if all(name not in s.counters for s in window):
            continue
        server = deltas[name]
        if abs(server - client) > max(TOKEN_TOLERANCE * max(server, client), 1.0):
            mismatch = True
            notes.append(
                f"{label} tokens: client usage totals {client} vs server counter delta {server:.0f}"
                + (f" ({client_failed} failed requests may explain it)" if client_failed else "")
            )
    optional: dict[str, float | None] = {}
    for name in OPTIONAL_COUNTERS:
        present = any(name in s.counters for s in window)
        optional[name] = counter_delta([s.counters.get(name) for s in window])[0] if present else None
    return ServerMetrics(
        scrapes=len(window),
        preemptions=deltas[PREEMPTIONS],
        prompt_tokens=deltas[PROMPT_TOKENS],
        generation_tokens=deltas[GENERATION_TOKENS],
        request_success=success,
        peak_waiting=peak(WAITING),
        peak_running=peak(RUNNING),
        peak_kv_cache_usage=peak(KV_USAGE),
        waiting_at_end=last.gauges.get(WAITING, 0.0),
        running_at_end=last.gauges.get(RUNNING, 0.0),
        restart_detected=restart,
        token_mismatch=mismatch,
        notes=notes,
        prefix_cache_queries=optional[PREFIX_QUERIES],
        prefix_cache_hits=optional[PREFIX_HITS],
        prefix_cache_hit_rate=_share(optional[PREFIX_HITS], optional[PREFIX_QUERIES]),
        speculative=speculative_metrics(
            optional[SPEC_DRAFTS],
            optional[SPEC_DRAFT_TOKENS],
            optional[SPEC_ACCEPTED],
            per_position=accepted_per_position(window),
        ),
    )


def _share(part: float | None, whole: float | None) -> float | None:
    if part is None or whole is None or whole <= 0:
        return None
    return part / whole


def accepted_per_position(window: Sequence[Scrape]) -> list[float] | None:
    """Each draft position's accepted tokens over the window (position 0 first); None when the server
    does not export them or a position label is not a number."""
    labels = sorted({p for s in window for p in s.spec_accepted_per_pos})
    if not labels or not all(p.isdigit() for p in labels):
        return None
    positions = sorted(labels, key=int)
    return [counter_delta([s.spec_accepted_per_pos.get(p) for s in window])[0] for p in positions]


def speculative_metrics(
    drafts: float | None,
    draft_tokens: float | None,
    accepted: float | None,
    *,
    per_position: Sequence[float] | None = None,
) -> SpecDecodeMetrics | None:
    """The run's speculative-decoding record (:func:`contracts.spec_decode.spec_decode_metrics`); None
    when not exported."""
    return spec_decode_metrics(drafts, draft_tokens, accepted, per_position=per_position)
