"""Request records against the service's SLO: attainment, goodput and each bounded latency (pure).

Pipeline position: part of the load runner's collect step. :func:`load.collect.summarize_run` calls
:func:`slo_summary` on a run's measured records when the sweep passes an SLO (``conf/slo/``); the result is
the summary's ``slo`` field, which the capacity search, the capacity gate and the report read. A request
*meets* the SLO when every set threshold holds for it (a failed request meets none); the run *holds* it
when every bounded latency's percentile is at or under its threshold, failed or censored requests
counting as +inf. Example::

    >>> from contracts.schema import SloConfig
    >>> slo_summary([], SloConfig(ttft_s=2.0), duration_s=0.0).met
    False
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from contracts.metrics import stats
from contracts.results import RequestRecord, SloSummary, Stats
from contracts.schema import SloConfig


def tpot_value(record: RequestRecord) -> float:
    """Time per output token after the first (a request's mean ITL); +inf for a failed request.

    A completed request with a single token has no inter-token time: 0.
    """
    if not record.ok or record.end_s is None or record.ttft_s is None:
        return math.inf
    tokens = record.completion_tokens or 0
    if tokens < 2:
        return 0.0
    return max(0.0, record.end_s - record.ttft_s) / (tokens - 1)


def _ttft(record: RequestRecord) -> float:
    return math.inf if not record.ok or record.ttft_s is None else record.ttft_s


def _visible(record: RequestRecord) -> float:
    return math.inf if not record.ok or record.first_visible_s is None else record.first_visible_s


def _e2e(record: RequestRecord) -> float:
    return math.inf if not record.ok or record.end_s is None else record.end_s


#: Each SLO metric: its threshold's field in SloConfig and the per-request value it bounds.
SLO_METRICS: dict[str, tuple[str, Callable[[RequestRecord], float]]] = {
    "ttft": ("ttft_s", _ttft),
    "tpot": ("tpot_s", tpot_value),
    "first_visible": ("first_visible_s", _visible),
    "e2e": ("e2e_s", _e2e),
}


def censored_percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (numpy's linear rule) where +inf values are allowed; +inf for no values."""
    if not values:
        return math.inf
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    frac = rank - low
    if frac == 0 or ordered[high] == ordered[low]:
        return ordered[low]
    if math.isinf(ordered[high]):
        return math.inf
    return ordered[low] + (ordered[high] - ordered[low]) * frac


def thresholds(slo: SloConfig) -> dict[str, float]:
    """The SLO's set thresholds, by metric (unset ones are not checked)."""
    out: dict[str, float] = {}
    for metric, (attr, _) in SLO_METRICS.items():
        value = getattr(slo, attr)
        if value is not None:
            out[metric] = float(value)
    return out


def tpot_stats(records: Sequence[RequestRecord]) -> Stats:
    """TPOT over the completed measured requests that produced two or more tokens."""
    values = [tpot_value(r) for r in records if not r.warmup and r.ok and (r.completion_tokens or 0) >= 2]
    return stats([v for v in values if math.isfinite(v)])


def slo_summary(records: Sequence[RequestRecord], slo: SloConfig, *, duration_s: float) -> SloSummary:
    """Attainment, goodput and the percentile of every bounded latency over the measured records."""
    measured = [r for r in records if not r.warmup]
    limits = thresholds(slo)
    observed: dict[str, float | None] = {}
    violations: dict[str, int] = {}
    margins: list[float] = []
    good = [True] * len(measured)
    for metric, limit in limits.items():
        extract = SLO_METRICS[metric][1]
        values = [extract(r) for r in measured]
        value = censored_percentile(values, slo.percentile)
        finite = math.isfinite(value)
        observed[metric] = value if finite else None
        over = [v > limit for v in values]
        violations[metric] = sum(over)
        good = [g and not o for g, o in zip(good, over, strict=True)]
        if not finite:
            margins.append(0.0)
        else:
            margins.append(math.inf if value <= 0 else limit / value)
    good_records = [r for r, g in zip(measured, good, strict=True) if g and r.ok]
    margin = min(margins) if margins else math.inf
    if not measured:
        margin = 0.0
    good_tokens = sum(r.completion_tokens or 0 for r in good_records)
    return SloSummary(
        name=slo.name,
        percentile=slo.percentile,
        thresholds=limits,
        observed=observed,
        met=bool(measured) and margin >= 1.0,
        margin=min(margin, 1e6),
        good_requests=len(good_records),
        attainment=len(good_records) / len(measured) if measured else 0.0,
        goodput_rps=len(good_records) / duration_s if duration_s > 0 else 0.0,
        goodput_tps=good_tokens / duration_s if duration_s > 0 else 0.0,
        violations=violations,
    )


#: The SLO metrics counted from the request's send: a request sent late meets a shorter queue, so the load
#: client's dispatch lag can lower them by up to that lag (TPOT, the time between tokens, is not counted
#: from the send).
FROM_SEND = ("ttft", "first_visible", "e2e")


def margin_lag_undone(slo: SloSummary, lag_s: float) -> float:
    """The run's SLO margin with the client's lag added back to every percentile counted from the send:
    the lowest margin that lateness could have hidden (the capacity gate's lag rule, docs/capacity.md).

    >>> s = SloSummary(name="x", percentile=99, thresholds={"ttft": 1.0, "tpot": 0.1},
    ...                observed={"ttft": 0.98, "tpot": 0.05}, met=True, margin=1.0204, good_requests=1,
    ...                attainment=1.0, goodput_rps=1.0, goodput_tps=1.0)
    >>> round(margin_lag_undone(s, 0.03), 3)  # 1 / (0.98 + 0.03): held only thanks to the lag
    0.99
    """
    if lag_s <= 0:
        return slo.margin
    margins: list[float] = []
    for metric, limit in slo.thresholds.items():
        value = slo.observed.get(metric)
        if value is None:
            margins.append(0.0)
            continue
        late = value + lag_s if metric in FROM_SEND else value
        margins.append(math.inf if late <= 0 else limit / late)
    return min(min(margins, default=math.inf), slo.margin, 1e6)
