"""Request records against the service's SLO: attainment, goodput and each bounded latency (pure).

Pipeline position: part of the load runner's collect step. :func:`load.collect.summarize_run` calls
:func:`slo_summary` on a run's measured records when the sweep passes an SLO (``conf/slo/``); the result is
the summary's ``slo`` field, which the capacity search, the capacity gate and the report read. A request
*meets* the SLO when every set threshold holds for it (a failed request meets none); the run *holds* it
when every bounded latency's percentile is at or under its threshold, failed or censored requests
counting as +inf. The summary also holds the margin with each request's own send lateness added back
(:func:`late_margin`), which the capacity search records as the lowest margin the load client's lateness
could have hidden. Example::

    >>> from contracts.schema import SloConfig
    >>> slo_summary([], SloConfig(ttft_s=2.0), duration_s=0.0).met
    False
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from contracts.metrics import stats
from contracts.results import RequestRecord, SloSummary, Stats
from contracts.schema import SloConfig

#: The SLO metrics counted from the request's send: a request sent late meets a shorter queue, so the load
#: client's dispatch lag can lower them by up to that lag (TPOT, the time between tokens, is not counted
#: from the send).
FROM_SEND = ("ttft", "first_visible", "e2e")


def own_lateness(record: RequestRecord) -> float:
    """How late the request left against its schedule (``sent_s - scheduled_s``, at least 0), in the
    records' seconds: host seconds, as its latencies and the SLO's thresholds (on the simulator, wall
    seconds times ``time_scale``; the summary's ``client.dispatch_lag_p99_s`` is their p99)."""
    return max(0.0, record.sent_s - record.scheduled_s)


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
    by_metric: dict[str, list[float]] = {}
    for metric, limit in limits.items():
        extract = SLO_METRICS[metric][1]
        values = by_metric[metric] = [extract(r) for r in measured]
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
    lateness = [own_lateness(r) for r in measured]
    undone = None
    if any(d > 0 for d in lateness):
        undone = late_margin(by_metric, lateness, limits, slo.percentile, margin=min(margin, 1e6))
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
        margin_lag_undone=undone,
    )


def late_margin(
    values: Mapping[str, Sequence[float]],
    lateness: Sequence[float],
    limits: Mapping[str, float],
    percentile: float,
    *,
    margin: float,
) -> float:
    """The run's SLO margin with each request's own lateness added back (the capacity gate's lag rule,
    docs/capacity.md): a request sent ``d`` late met at most the queue it would have met on time, so its
    latencies counted from the send (:data:`FROM_SEND`) would have been at most ``value + d``; each bounded
    metric's percentile is taken over those (TPOT's over its values), the margin is the lowest threshold
    over percentile, never above the observed ``margin``. ``values``: each metric's per-request values
    (+inf: failed or censored), ``lateness`` each request's (:func:`own_lateness`), in the same order.

    A burst sent at once whose late requests are not the slow ones moves the percentile little; where the
    slowest requests are the latest (one burst queued in prefill waves along its send order) it moves by
    about their lateness, as :func:`margin_lag_undone` (the run's p99 lag added to every request) does.

    >>> v = {"ttft": [0.1] * 90 + [0.9] * 10}
    >>> burst = [0.03] * 50 + [0.0003] * 50       # the opening burst late, the slow requests on time
    >>> round(late_margin(v, burst, {"ttft": 1.0}, 99, margin=1 / 0.9), 3)   # 1 / 0.9003
    1.111
    >>> round(late_margin(v, [0.03] * 100, {"ttft": 1.0}, 99, margin=1 / 0.9), 3)   # all 30 ms late: 1 / 0.93
    1.075
    """
    margins: list[float] = []
    for metric, limit in limits.items():
        own = values[metric]
        if metric in FROM_SEND:
            own = [v + d for v, d in zip(own, lateness, strict=True)]
        value = censored_percentile(own, percentile)
        margins.append(0.0 if not math.isfinite(value) else math.inf if value <= 0 else limit / value)
    return min(min(margins, default=math.inf), margin, 1e6)


def margin_lag_undone(slo: SloSummary, lag_s: float) -> float:
    """The run's SLO margin with the client's p99 lag added back to every percentile counted from the send:
    the rule for a summary without :attr:`SloSummary.margin_lag_undone` (written before each request's own
    lateness was counted, or whose records carry none), as :func:`gates.lag.run_lag_effect` falls back.

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
