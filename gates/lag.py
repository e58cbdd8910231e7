"""The load client's own lateness: how far it can have moved a loaded latency, and what that leaves open.

Pipeline position: pure helpers of :func:`gates.compare.latency` (where a loaded latency's ratio can lie
with the lateness undone, and what that leaves open) and of the gain gate
(:func:`gates.latency_gain.gain_with_the_lag`). Under load a request that
leaves ``d`` late meets at most the queue it would have met, shorter by what drained meanwhile, and its
TTFT counts from the send: its TTFT on time would have been at most its own value plus its own ``d``
(never more: the queue it met can only have shrunk). A run's median can therefore have been lowered by at
most ``median(value + d) - median(value)`` over its requests (:func:`run_lag_effect`), what the
records' own lateness says, not by the run's p99 lag added to every request (a closed loop's turnarounds
are mostly a fraction of a millisecond late; only its opening burst is late by the p99). Records that
carry no lateness of their own (an older summary) fall back to the summary's p99.

A comparison whose bounds straddle a limit (``1 + latency_tolerance``) is **lag-open**: at the near end
of its bounds the requirement passes, at the far end it may not. It is *undecidable* (the verdict
``incomplete``: more repeats will not settle it) only when at the far end the change is beyond noise, so
that the lag alone decides; where the far end is itself a change within noise, the comparison is
``inconclusive``, as any change within noise, and more repeats may settle it (:func:`lag_open`). Neither
is ever a failed requirement nor a gain.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from contracts.metrics import fmt_ratio, fmt_value, median
from contracts.results import RequestRecord
from contracts.sweepdir import Repeat
from gates.stats import RatioEstimate


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def run_lag_effect(run: Repeat, extract: Callable[[RequestRecord], float]) -> float:
    """How far the client's lateness can have lowered this run's median (s): ``median(value + d) -
    median(value)`` over its measured requests, each ``d`` its own lateness (``sent_s - scheduled_s``);
    the summary's p99 dispatch lag when no record carries a lateness of its own (an older summary).
    """
    late = [max(0.0, r.sent_s - r.scheduled_s) for r in run.records]
    if not any(d > 0 for d in late):
        return float(run.summary.client.dispatch_lag_p99_s)
    values = [extract(r) for r in run.records]
    before, after = median(values), median([v + d for v, d in zip(values, late, strict=True)])
    if _finite(before) is None or _finite(after) is None:
        return float(max(late))  # a censored median: what lateness did there is unknown, at most the most
    assert before is not None and after is not None
    return max(0.0, after - before)


def lag_effect(runs: Sequence[Repeat], extract: Callable[[RequestRecord], float]) -> float:
    """The lag's effect on one side's compared value (the geometric mean of its runs' medians moves by
    about 1/n of each run's own effect): the mean of :func:`run_lag_effect` over the runs compared."""
    effects = [run_lag_effect(run, extract) for run in runs]
    return float(np.mean(effects)) if effects else 0.0


def lag_resolution(runs: Sequence[Repeat]) -> float:
    """How late the load client was on one side, as the messages and the ``client_lag`` gap report it:
    the mean over the runs compared of each run's p99 dispatch lag (``summary.json:
    client.dispatch_lag_p99_s``, the records' seconds). What that lateness can have done to the compared
    value is :func:`lag_effect`.

    >>> lag_resolution([])
    0.0
    """
    lags = [rep.summary.client.dispatch_lag_p99_s for rep in runs]
    return float(np.mean(lags)) if lags else 0.0


def lag_bounds(candidate: float, baseline: float, lag: tuple[float, float]) -> tuple[float, float]:
    """Where the ratio ``candidate / baseline`` can lie once the load client's lateness is undone, both
    ways. Lateness only lowers the TTFT of the runs it was in, each side's compared value by at most its
    lag's effect (:func:`lag_effect`; ``lag``: candidate's, baseline's): the candidate's true value
    is in ``[c, c + lag_c]`` and the baseline's in ``[b, b + lag_b]``, so the ratio is in
    ``[c / (b + lag_b), (c + lag_c) / b]``.

    >>> lo, hi = lag_bounds(0.40, 0.40, (0.24, 0.0))   # looks the same, but could be 1.6x
    >>> round(lo, 3), round(hi, 3)
    (1.0, 1.6)
    """
    c_lag, b_lag = lag
    return candidate / (baseline + b_lag), (candidate + c_lag) / baseline


def straddled(bounds: tuple[float, float] | None, limits: Sequence[float]) -> float | None:
    """The first of ``limits`` (ratios a change is material beyond, e.g. ``1 + latency_tolerance``) that
    ``bounds`` straddle: the client's lag alone may decide which side of it the ratio is on. None when
    every limit lies outside the bounds (the lag cannot move the comparison across one).

    >>> straddled((1.0, 1.6), [1.05]), straddled((0.95, 1.04), [1.05]), straddled((1.1, 1.3), [1.05])
    (1.05, None, None)
    """
    if bounds is None or not bounds[0] < bounds[1]:
        return None
    return next((t for t in limits if bounds[0] <= t <= bounds[1]), None)


def at_the_end(est: RatioEstimate, factor: float) -> RatioEstimate:
    """The estimate with one side's lateness undone: its ratio and interval scaled by ``factor`` (the
    ratio at that end of the lag's bounds over the raw one)."""
    return replace(est, ratio=est.ratio * factor, low=est.low * factor, high=est.high * factor)


@dataclass(frozen=True)
class LagOpen:
    """A comparison whose lag bounds straddle ``limit``: what the rule at the far end of them says."""

    limit: float  # the limit straddled, e.g. 1 + latency_tolerance
    bounds: tuple[float, float]  # [c / (b + effect_b), (c + effect_c) / b]
    #: the estimate at the end of the bounds beyond the limit (the candidate's lateness undone for a
    #: limit above 1, the baseline's below it)
    far: RatioEstimate

    @property
    def undecidable(self) -> bool:
        """At the far end the change is beyond noise (its interval excludes 1) while at the near end it
        is within the limit: the lag alone decides between "no change" and a change, and more repeats
        will not settle it. Otherwise the far end is itself a change within noise: more repeats may
        settle it, as they settle any change within noise."""
        return self.far.low > 1 if self.limit > 1 else self.far.high < 1


def lag_open(est: RatioEstimate, ratio: float, bounds: tuple[float, float], limit: float) -> LagOpen:
    """The far end of the lag's ``bounds`` across ``limit`` for a comparison whose raw ratio is ``ratio``
    (:class:`LagOpen`). The requirement's rule applied at the near end passes (its point is within the
    limit); at the far end it fails when the scaled interval excludes 1, else it is unsettled.

    >>> from gates.stats import RatioEstimate
    >>> tight = RatioEstimate(1.0, 0.97, 1.03, 0.95, "t", 3, 3, 3)   # looks the same, lag 1.6x
    >>> lag_open(tight, 1.0, (1.0, 1.6), 1.05).undecidable
    True
    >>> wide = RatioEstimate(1.0, 0.8, 1.25, 0.95, "t", 3, 3, 3)     # the runs spread 25%, lag 1.04x
    >>> lag_open(wide, 1.0, (0.99, 1.06), 1.05).undecidable
    False
    """
    factor = (bounds[1] if limit > 1 else bounds[0]) / ratio
    return LagOpen(limit, bounds, at_the_end(est, factor))


def open_message(found: LagOpen, lags: tuple[float, float], effects: tuple[float, float]) -> str:
    """The sentence a lag-open comparison carries: the lag, its effect, the bounds, the limit."""
    return (
        f"with the load client's dispatch lag (p99, mean over each side's runs: candidate "
        f"{fmt_value(lags[0], 's')}, baseline {fmt_value(lags[1], 's')}; on the medians at most "
        f"{fmt_value(effects[0], 's')} and {fmt_value(effects[1], 's')}, from each request's own lateness) "
        f"undone, the ratio lies anywhere in [{fmt_ratio(found.bounds[0])}, {fmt_ratio(found.bounds[1])}], "
        f"across {fmt_ratio(found.limit)}"
    )
