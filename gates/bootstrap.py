"""Aggregate figures (tokens/s) compared: a two-stage bootstrap, widened to the run-level t-interval.

Pipeline position: pure functions the throughput comparisons of the gates call (``gates.compare``), on
one :class:`RunSample` per repeat taken from stored summaries and records. The latency estimates, the
:class:`gates.stats.RatioEstimate` they all return and the run-level interval are :mod:`gates.stats`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from gates.stats import (
    ONE_REPEAT_NOTE,
    TINY,
    FloatArray,
    RatioEstimate,
    one_run_each_guard,
    run_level_ratio,
    single_run_guard,
)


@dataclass(frozen=True)
class RunSample:
    """One repeat of an aggregate figure, with per-request parts for the inner bootstrap stage.

    ``value`` is the figure the summary reports (e.g. output tokens/s). ``amounts`` and ``times`` are
    per-request tokens and service times; a resample of requests scales ``value`` by
    ``sum(amounts*)/sum(times*)`` over ``sum(amounts)/sum(times)`` (Little's law: at a fixed number of
    requests in flight, throughput is proportional to tokens per request-second).
    """

    value: float
    amounts: FloatArray = field(default_factory=lambda: np.zeros(0))
    times: FloatArray = field(default_factory=lambda: np.zeros(0))


def _inner_factors(sample: RunSample, size: int, rng: np.random.Generator) -> FloatArray:
    amounts, times = sample.amounts, sample.times
    n = len(amounts)
    if n < 2 or len(times) != n or float(times.sum()) <= 0 or float(amounts.sum()) <= 0:
        return np.ones(size)
    idx = rng.integers(0, n, size=(size, n))
    num = amounts[idx].sum(axis=1)
    den = np.maximum(times[idx].sum(axis=1), TINY)
    factors: FloatArray = (num / den) / (float(amounts.sum()) / float(times.sum()))
    return factors


def _side_replicates(samples: Sequence[RunSample], resamples: int, rng: np.random.Generator) -> FloatArray:
    k = len(samples)
    outer = rng.integers(0, k, size=(resamples, k))
    total = np.zeros(resamples)
    for r, sample in enumerate(samples):
        counts = (outer == r).sum(axis=1)
        most = int(counts.max())
        if most == 0:
            continue
        factors = _inner_factors(sample, resamples * most, rng).reshape(resamples, most)
        chosen = np.arange(most)[None, :] < counts[:, None]
        total += sample.value * (factors * chosen).sum(axis=1)
    replicates: FloatArray = total / k
    return replicates


def bootstrap_ratio(
    candidate: Sequence[RunSample],
    baseline: Sequence[RunSample],
    *,
    confidence: float,
    resamples: int,
    seed: int,
) -> RatioEstimate:
    """Ratio of mean per-repeat figures with a two-stage percentile bootstrap interval.

    >>> c = [RunSample(95.0), RunSample(96.0), RunSample(94.0)]
    >>> b = [RunSample(100.0), RunSample(101.0), RunSample(99.0)]
    >>> est = bootstrap_ratio(c, b, confidence=0.95, resamples=500, seed=1)
    >>> round(est.ratio, 2), est.high < 1
    (0.95, True)
    """
    if not candidate or not baseline:
        raise ValueError("bootstrap_ratio needs at least one repeat on each side")
    c_mean = float(np.mean([s.value for s in candidate]))
    b_mean = float(np.mean([s.value for s in baseline]))
    repeats = min(len(candidate), len(baseline))
    method = "two-stage bootstrap (repeats, then requests within each repeat)"
    if b_mean <= 0:
        return RatioEstimate(
            math.inf if c_mean > 0 else 1.0, 0.0, math.inf, confidence, method, 0, 0, repeats
        )
    rng = np.random.default_rng(seed)
    c_rep = _side_replicates(candidate, resamples, rng)
    b_rep = np.maximum(_side_replicates(baseline, resamples, rng), TINY)
    ratios = np.maximum(c_rep / b_rep, TINY)
    alpha = 1 - confidence
    logs = np.log(ratios)
    low, high = np.quantile(logs, [alpha / 2, 1 - alpha / 2])
    # The percentile test of "no change": twice the share of replicates on the far side of 1.
    p_value = min(1.0, 2 * min(float((logs <= 0).mean()), float((logs >= 0).mean())))
    return RatioEstimate(
        ratio=c_mean / b_mean,
        low=math.exp(float(low)),
        high=math.exp(float(high)),
        confidence=confidence,
        method=method,
        n_candidate=len(candidate),
        n_baseline=len(baseline),
        repeats=repeats,
        p_value=p_value,
    )


def throughput_ratio(
    candidate: Sequence[RunSample],
    baseline: Sequence[RunSample],
    *,
    confidence: float,
    resamples: int,
    seed: int,
) -> RatioEstimate:
    """Aggregate figures (tokens/s): the two-stage bootstrap, its interval widened to the run-level one.

    The bootstrap's outer stage resamples repeats, but with 3 repeats its percentile interval is about
    the sample's range and covers run-to-run variance far less often than promised. When a side has
    two repeats or more, the interval is therefore the union of the bootstrap interval and the Welch
    t-interval on the log per-repeat values (:func:`run_level_ratio`): the t quantile pays for the few
    repeats, the inner stage keeps within-run noise a single repeat shows. One repeat per side: the
    bootstrap alone, noted as such and guarded (:func:`gates.stats.one_run_each_guard`: one run against
    one run decides only an effect beyond what one outlier run can produce). One repeat on one side
    only: :func:`gates.stats.single_run_guard`.

    >>> c = [RunSample(95.0), RunSample(99.0), RunSample(91.0)]
    >>> b = [RunSample(100.0), RunSample(104.0), RunSample(96.0)]
    >>> est = throughput_ratio(c, b, confidence=0.95, resamples=500, seed=1)
    >>> round(est.ratio, 2), est.excludes_one   # every repeat 5% lower, but the runs spread by 8%
    (0.95, False)
    """
    boot = bootstrap_ratio(candidate, baseline, confidence=confidence, resamples=resamples, seed=seed)
    c_vals, b_vals = [s.value for s in candidate], [s.value for s in baseline]
    measurable = len(c_vals) >= 2 or len(b_vals) >= 2
    if not measurable:
        return one_run_each_guard(replace(boot, note=ONE_REPEAT_NOTE))
    if min(c_vals + b_vals) <= 0:
        return boot
    runs = run_level_ratio(c_vals, b_vals, confidence=confidence, statistic="value")
    low, high = min(boot.low, runs.low), max(boot.high, runs.high)
    method = boot.method
    if (low, high) != (boot.low, boot.high):
        method += f", widened to {runs.method}"
    p_values = [p for p in (boot.p_value, runs.p_value) if p is not None]
    widened = replace(
        boot,
        low=low,
        high=high,
        p_value=max(p_values) if p_values else None,  # the union excludes 1 only when both do
        method=method,
        note=runs.note,
        candidate_values=runs.candidate_values,
        baseline_values=runs.baseline_values,
        df=runs.df,
    )
    return single_run_guard(widened)  # one repeat on a side: only an effect beyond one outlier run
