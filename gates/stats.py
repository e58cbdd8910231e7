"""Statistics of the gates: ratio estimates of candidate / baseline with confidence intervals.

Pipeline position: pure functions the gate modules call on numbers taken from stored result files.
Every estimate is a ratio candidate / baseline with an interval; an effect counts only when the interval
excludes 1 ("no change"). The repeat (one run) is the unit of every interval: runs differ as a whole
(scheduling, host noise shift every request of a run), so requests of one run are not independent draws.
Methods (why these: docs/gates.md):

- :func:`gates.bootstrap.throughput_ratio` for aggregate figures (tokens/s), one value per repeat: a
  two-stage bootstrap (:func:`gates.bootstrap.bootstrap_ratio`) that resamples repeats, then requests
  inside each chosen repeat, so that few repeats still carry the within-run noise, its interval widened
  to the Welch t-interval on the log per-repeat values (:func:`run_level_ratio`), which keeps its
  coverage of run-to-run variance with 3 repeats;
- :func:`run_level_ratio` for latencies: one statistic per repeat (its right-censored median), a
  Welch t-interval on the log ratio (Welch-Satterthwaite degrees of freedom), so the interval carries
  run-to-run variance; :func:`prediction_ratio` for drift: is a new run of the same configuration
  outside the prediction interval its earlier repeats give;
- :func:`hodges_lehmann_ratio`, one value per request: the Hodges-Lehmann shift of the log latencies
  with the distribution-free interval that inverts the Mann-Whitney test, only where both sides have a
  single repeat and run-to-run noise cannot be measured (:func:`latency_ratio` chooses; one run against
  one run decides only an effect beyond what one outlier run can produce: :func:`one_run_each_guard`).
  Missing values are right-censored (+inf) and rank above every observed value (medians:
  :func:`contracts.metrics.median`).

:func:`one_sided_p` turns an estimate into the p-value of "the candidate is worse"; what a family of
them decides (Bonferroni, Holm), and rates compared by Fisher's exact test, is :mod:`gates.significance`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from contracts.metrics import median

FloatArray = NDArray[np.float64]

TINY = 1e-9  # latencies (and service times) are clipped here before logs and divisions (0 s: -inf)
MAX_MORE_REPEATS = 200  # beyond this, "more repeats" is not a useful answer


@dataclass(frozen=True)
class RatioEstimate:
    """candidate / baseline: the point estimate and its confidence interval."""

    ratio: float
    low: float
    high: float
    confidence: float
    method: str
    n_candidate: int  # units behind the candidate side (repeats or requests)
    n_baseline: int
    repeats: int  # repeats per side (the smaller side), the unit "more repeats" is counted in
    p_value: float | None = None
    note: str = ""  # a caveat the message must carry, e.g. "1 repeat: run-to-run noise not measured"
    candidate_values: tuple[float, ...] = ()  # per-repeat statistics behind a run-level estimate
    baseline_values: tuple[float, ...] = ()
    df: float | None = None  # degrees of freedom of a t-interval

    @property
    def interval(self) -> tuple[float, float]:
        return (self.low, self.high)

    @property
    def excludes_one(self) -> bool:
        return self.high < 1.0 or self.low > 1.0


def _log(values: Sequence[float] | FloatArray) -> FloatArray:
    data = np.asarray(values, dtype=np.float64)
    return np.log(np.maximum(data, TINY))


def hodges_lehmann_ratio(
    candidate: Sequence[float], baseline: Sequence[float], *, confidence: float, repeats: int = 1
) -> RatioEstimate:
    """Ratio of typical latencies (candidate / baseline) with the Mann-Whitney interval.

    Values are latencies in seconds; +inf marks a censored request. The estimate is
    exp(median of log(c_i) - log(b_j)) over all pairs; pairs of two censored values are ties (0).

    >>> est = hodges_lehmann_ratio([2.0, 2.2, 1.9, 2.1], [1.0, 1.1, 0.95, 1.05], confidence=0.9)
    >>> round(est.ratio, 2)
    2.0
    """
    from scipy.stats import mannwhitneyu, norm  # noqa: PLC0415  (scipy on first use)

    c, b = _log(candidate), _log(baseline)
    n, m = len(c), len(b)
    if n == 0 or m == 0:
        raise ValueError("hodges_lehmann_ratio needs at least one value on each side")
    with np.errstate(invalid="ignore"):
        diffs = (c[:, None] - b[None, :]).ravel()
    diffs[np.isnan(diffs)] = 0.0  # inf - inf: both censored, a tie
    diffs.sort()
    total = n * m
    point = float(np.median(diffs))
    z = float(norm.ppf(0.5 + confidence / 2))
    k = math.floor(total / 2 - z * math.sqrt(n * m * (n + m + 1) / 12.0))
    if k < 1:
        low, high = -math.inf, math.inf
    else:
        low, high = float(diffs[k - 1]), float(diffs[total - k])
    p_value: float | None = None
    if n > 1 or m > 1:
        with np.errstate(invalid="ignore"):
            p_value = float(mannwhitneyu(c, b, alternative="two-sided", method="asymptotic").pvalue)
        if math.isnan(p_value):
            p_value = 1.0
    return RatioEstimate(
        ratio=_exp(point),
        low=_exp(low),
        high=_exp(high),
        confidence=confidence,
        method="Hodges-Lehmann / Mann-Whitney over requests (censored = +inf)",
        n_candidate=n,
        n_baseline=m,
        repeats=repeats,
        p_value=p_value,
    )


def _exp(x: float) -> float:
    """exp that saturates: +inf beyond the float range (a t quantile of 1 degree of freedom at a look's
    99.9% can put an interval's end there), 0 below it.

    >>> _exp(800.0), _exp(-800.0), _exp(0.0)
    (inf, 0.0, 1.0)
    """
    if x >= 709.0:
        return math.inf
    if x <= -745.0:
        return 0.0
    return math.exp(x)


ONE_REPEAT_NOTE = "1 repeat: run-to-run noise not measured"


def _t_quantile(confidence: float, df: float) -> float:
    from scipy.stats import norm  # noqa: PLC0415  (scipy on first use)
    from scipy.stats import t as student_t  # noqa: PLC0415  (scipy on first use)

    level = 0.5 + confidence / 2
    return float(norm.ppf(level)) if math.isinf(df) else float(student_t.ppf(level, df))


def run_level_ratio(
    candidate: Sequence[float],
    baseline: Sequence[float],
    *,
    confidence: float,
    pooled: bool = False,
    statistic: str = "median",
) -> RatioEstimate:
    """Ratio of the geometric means of per-repeat statistics, with a t-interval on the log scale.

    One value per repeat (e.g. each repeat's right-censored median TTFT): the repeat is the unit, so
    the interval carries run-to-run variance as well as each run's own sampling noise. The
    pooled-variance interval (df = n + m - 2) when ``pooled``, when one side has a single repeat (its
    run-to-run variance is then taken from the other side), or when an F-test does not reject equal
    variances (:func:`_equal_variances`: one host, one noise); Welch's interval (Welch-Satterthwaite
    degrees of freedom) when the two sides' spreads differ beyond noise (an outlier run).
    A +inf value (more than half of a repeat censored) leaves no t-interval: see :func:`_censored_runs`.

    >>> est = run_level_ratio([0.552, 0.444, 0.501], [0.398, 0.426, 0.306], confidence=0.95)
    >>> round(est.ratio, 2), est.excludes_one   # a 33% shift, but within the runs' own spread
    (1.33, False)
    """
    from scipy.stats import norm  # noqa: PLC0415  (scipy on first use)
    from scipy.stats import t as student_t  # noqa: PLC0415  (scipy on first use)

    n, m = len(candidate), len(baseline)
    if n == 0 or m == 0:
        raise ValueError("run_level_ratio needs at least one repeat on each side")
    if n < 2 and m < 2:
        raise ValueError("run_level_ratio needs two repeats on one side at least (see latency_ratio)")
    c = np.asarray(candidate, dtype=np.float64)
    b = np.asarray(baseline, dtype=np.float64)
    values = (tuple(float(v) for v in c), tuple(float(v) for v in b))
    if np.isinf(c).any() or np.isinf(b).any():
        return _censored_runs(c, b, confidence=confidence, statistic=statistic, values=values)
    lc, lb = _log(c), _log(b)
    diff = float(lc.mean() - lb.mean())
    single = n < 2 or m < 2
    df: float
    equal = single or pooled or _equal_variances(lc, lb)
    if equal:
        squares = float(((lc - lc.mean()) ** 2).sum() + ((lb - lb.mean()) ** 2).sum())
        df = float(n + m - 2)
        se = math.sqrt(squares / df * (1 / n + 1 / m))
        kind = "pooled-variance t"
    else:
        a = float(lc.var(ddof=1)) / n
        d = float(lb.var(ddof=1)) / m
        se = math.sqrt(a + d)
        denominator = a * a / (n - 1) + d * d / (m - 1)
        df = (a + d) ** 2 / denominator if denominator > 0 else math.inf
        kind = "Welch t"
    if se > 0:
        half = _t_quantile(confidence, df) * se
        dist = norm if math.isinf(df) else student_t(df)
        p_value: float = float(2 * dist.sf(abs(diff) / se))
    else:  # every repeat identical on both sides: no spread seen (synthetic data)
        half, p_value = 0.0, (1.0 if diff == 0 else 0.0)
    note = ""
    if single:
        side = "candidate" if n < 2 else "baseline"
        other = "baseline" if n < 2 else "candidate"
        note = f"1 {side} repeat: run-to-run noise from the {other}'s {max(n, m)} repeats only"
    return RatioEstimate(
        ratio=_exp(diff),
        low=_exp(diff - half),
        high=_exp(diff + half),
        confidence=confidence,
        method=f"{kind} on log per-repeat {statistic} ({n} vs {m} repeats, df {df:.1f})",
        n_candidate=n,
        n_baseline=m,
        repeats=min(n, m),
        p_value=p_value,
        note=note,
        candidate_values=values[0],
        baseline_values=values[1],
        df=df,
    )


#: The F-test of equal run-to-run variances must not reject at this level for the sides to be pooled.
EQUAL_VARIANCE_LEVEL = 0.05


def _equal_variances(lc: FloatArray, lb: FloatArray) -> bool:
    """Both sides' log per-repeat values are consistent with one run-to-run variance (two-sided F-test).

    Candidate and baseline run on the same host under the same load generator, so their run-to-run
    noise is the host's: pooling both sides' spread gives ``n + m - 2`` degrees of freedom instead of
    Welch's fewer (with 2 repeats of one side, Welch's df falls towards 1 and its interval is useless).
    An outlier run or a configuration with noise of its own makes the variances differ; the F-test then
    rejects and Welch's interval is kept.
    """
    from scipy.stats import f as f_dist  # noqa: PLC0415  (scipy on first use)

    vc, vb = float(lc.var(ddof=1)), float(lb.var(ddof=1))
    if vc <= 0 or vb <= 0:
        return vc == vb
    f = vc / vb
    dist = f_dist(len(lc) - 1, len(lb) - 1)
    p = 2 * min(float(dist.cdf(f)), float(dist.sf(f)))
    return p >= EQUAL_VARIANCE_LEVEL


def _censored_runs(
    c: FloatArray,
    b: FloatArray,
    *,
    confidence: float,
    statistic: str,
    values: tuple[tuple[float, ...], tuple[float, ...]],
) -> RatioEstimate:
    """Per-repeat values with +inf (a repeat whose median is censored): no t-interval exists.

    Every candidate repeat infinite against every baseline repeat finite is a ratio of +inf in each run,
    whatever the run-to-run noise: the interval is [inf, inf] (and [0, 0] the other way round). Any other
    mix is unbounded. The estimate is the Hodges-Lehmann shift over repeats (two +inf are a tie).
    """
    lc, lb = _log(c), _log(b)
    with np.errstate(invalid="ignore"):
        diffs = (lc[:, None] - lb[None, :]).ravel()
    diffs[np.isnan(diffs)] = 0.0
    point = float(np.median(diffs))
    c_inf, b_inf = np.isinf(c), np.isinf(b)
    if c_inf.all() and not b_inf.any():
        low, high = math.inf, math.inf
        note = f"{statistic} censored (+inf) in every candidate repeat"
    elif b_inf.all() and not c_inf.any():
        low, high = 0.0, 0.0
        note = f"{statistic} censored (+inf) in every baseline repeat"
    else:
        low, high = 0.0, math.inf
        note = f"{statistic} censored (+inf) in some repeats: interval unbounded"
    return RatioEstimate(
        ratio=_exp(point),
        low=low,
        high=high,
        confidence=confidence,
        method=f"per-repeat {statistic}, censored repeats (+inf): no t-interval",
        n_candidate=len(c),
        n_baseline=len(b),
        repeats=min(len(c), len(b)),
        note=note,
        candidate_values=values[0],
        baseline_values=values[1],
    )


def prediction_ratio(
    new: Sequence[float], reference: Sequence[float], *, confidence: float, statistic: str = "median"
) -> RatioEstimate:
    """New runs of a configuration (e.g. the end-of-sweep recovery) against its earlier repeats.

    The pooled-variance t-interval of the log ratio; with one new run its interval excludes 1 exactly
    when the new run's value lies outside the prediction interval for a new run that the reference
    repeats give, ``exp(mean(log x) +- t(n-1) * s * sqrt(1 + 1/n))``.

    >>> est = prediction_ratio([0.457], [0.894, 0.632, 0.539], confidence=0.95)
    >>> round(est.ratio, 3), est.excludes_one   # the recovery run is inside the baseline's own spread
    (0.679, False)
    """
    est = run_level_ratio(new, reference, confidence=confidence, pooled=True, statistic=statistic)
    if est.df is None:
        return est
    kind = "prediction interval for a new run" if len(new) == 1 else "pooled t for the new runs' mean"
    return replace(
        est,
        method=f"{kind} (log per-repeat {statistic}, {len(new)} vs {len(reference)} repeats, "
        f"df {est.df:.0f})",
        note="",
    )


#: How much slower one run can be on its own (a cold first burst, a busy host): one run in ten 2-3x
#: slower (issue 21; the restored baseline's first 128-wide burst read 2x before the warmup fix), with
#: the run-to-run noise of both sides on top of 3x. With a single repeat on one side, an effect within
#: this factor could be that one run.
OUTLIER_FACTOR = 4.0


def single_run_guard(est: RatioEstimate, factor: float = OUTLIER_FACTOR) -> RatioEstimate:
    """A run-level estimate with a single repeat on one side (its run-to-run variance borrowed from the
    other side) decides only an effect beyond what one outlier run can produce.

    The borrowed variance says how the other side's runs spread, not whether the lone run is one of the
    rare slow ones. So the interval is widened to at least ``ratio / factor .. ratio * factor`` (it
    excludes 1 only when the effect is beyond ``factor``) and the p-value is 1 within it (Holm rejects
    nothing there). Unchanged with two repeats or more on both sides; one run on both sides is
    :func:`one_run_each_guard`'s.

    >>> est = single_run_guard(run_level_ratio([0.5], [0.25, 0.26, 0.24], confidence=0.95))
    >>> round(est.ratio, 2), est.excludes_one, est.p_value   # 2x slower: could be one slow run
    (2.0, False, 1.0)
    >>> single_run_guard(run_level_ratio([1.25], [0.25, 0.26, 0.24], confidence=0.95)).excludes_one
    True
    """
    single = min(est.n_candidate, est.n_baseline) == 1 and max(est.n_candidate, est.n_baseline) >= 2
    if not single or est.df is None:
        return est
    return _beyond_one_outlier_run(est, factor)


def one_run_each_guard(est: RatioEstimate, factor: float = OUTLIER_FACTOR) -> RatioEstimate:
    """An estimate of one run against one run (``run.repeats: 1``, an adaptive first look against a
    one-run baseline) decides only an effect beyond what one outlier run can produce, as
    :func:`single_run_guard` does for one run against several.

    The request-level interval of one run each (Hodges-Lehmann over requests, the bootstrap's inner
    stage for tokens/s) treats every request as an independent draw: it measures the two runs, not the
    configurations, and a single 2.5x-slow run gives p ~ 3e-10. The caller knows the estimate is one run
    against one run (its ``n_candidate`` counts requests there).

    >>> slow = hodges_lehmann_ratio([1.0, 1.02, 0.98, 1.01], [0.40, 0.41, 0.39, 0.40], confidence=0.95)
    >>> slow.excludes_one, one_run_each_guard(slow).excludes_one   # one 2.5x-slow run: nothing decided
    (True, False)
    """
    return _beyond_one_outlier_run(est, factor)


def two_run_guard(
    est: RatioEstimate, measured: tuple[int, int], factor: float = OUTLIER_FACTOR
) -> RatioEstimate:
    """An estimate of two candidate runs against three baseline runs or more (an adaptive look after two
    repeats; ``measured``: each side's runs before any was set aside) decides only an effect beyond what
    outlier runs can produce, as :func:`single_run_guard` does for one run.

    A slow outlier run is set aside only among three runs or more (:func:`gates.set_aside.set_aside_runs`);
    of two, both can be the host's slow runs (one in ten 3x slower: 1% of a look's profiles) or one mode
    of a bimodal figure (decode_heavy's prefill waves: half the runs 1.2-1.6x), and the t-interval, which
    takes runs for normal draws, reads them as the configuration (issue 42: such looks were most of the
    identical candidates' false rejects). The loop measures a third repeat instead, which the set-aside
    rule can read. Two runs on both sides (``run.repeats: 2``, fixed) are left as they are: no run is
    coming that would settle them, and every effect below 4x would stay undecided.

    >>> est = run_level_ratio([1.20, 1.23], [0.40, 0.41, 0.39], confidence=0.95)
    >>> est.excludes_one, two_run_guard(est, (2, 3)).excludes_one   # two 3x-slow runs: could be the host
    (True, False)
    >>> two_run_guard(run_level_ratio([2.0, 2.05], [0.40, 0.41, 0.39], confidence=0.95), (2, 3)).excludes_one
    True
    >>> two_run_guard(est, (2, 2)).excludes_one   # run.repeats: 2 on both sides
    True
    """
    if measured[0] != 2 or measured[1] < 3:
        return est
    return _beyond_one_outlier_run(est, factor, runs="2 candidate runs, too few to set an outlier run aside")


def _beyond_one_outlier_run(est: RatioEstimate, factor: float, runs: str = "") -> RatioEstimate:
    """``est`` with its interval widened to at least ``ratio / factor .. ratio * factor`` and its p-value
    1 within ``factor`` (a ratio of 0 or +inf, a failure rather than a slow run, is left as it is)."""
    if not 0 < est.ratio < math.inf:
        return est
    low, high = min(est.low, est.ratio / factor), max(est.high, est.ratio * factor)
    beyond = abs(math.log(est.ratio)) > math.log(factor)
    what = "outlier runs" if runs else "one outlier run"
    rule = (
        f"{runs + ': ' if runs else ''}a decision needs an effect beyond {factor:g}x, what {what} can produce"
    )
    return replace(
        est,
        low=low,
        high=high,
        p_value=est.p_value if beyond else 1.0,
        note=f"{est.note}; {rule}" if est.note else rule,
        method=f"{est.method}; {'two' if runs else 'single'}-run guard {factor:g}x"
        if (low, high) != est.interval
        else est.method,
    )


def latency_ratio(
    candidate: Sequence[Sequence[float]],
    baseline: Sequence[Sequence[float]],
    *,
    confidence: float,
) -> RatioEstimate:
    """Median latency of candidate against baseline from per-repeat request latencies (+inf = censored).

    The run-level ratio of per-repeat right-censored medians (:func:`run_level_ratio`) when a side has
    two repeats or more (guarded by :func:`single_run_guard` when the other has one); the request-level
    Hodges-Lehmann ratio only as a fallback when both sides have a single repeat, with the note that
    run-to-run noise was not measured, guarded by :func:`one_run_each_guard` (one run against one run
    decides only an effect beyond what one outlier run can produce).
    """
    c_runs = [list(r) for r in candidate if len(r)]
    b_runs = [list(r) for r in baseline if len(r)]
    if not c_runs or not b_runs:
        raise ValueError("latency_ratio needs at least one measured request on each side")
    if len(c_runs) >= 2 or len(b_runs) >= 2:
        c_med = [_finite_or_inf(median(r)) for r in c_runs]
        b_med = [_finite_or_inf(median(r)) for r in b_runs]
        return single_run_guard(run_level_ratio(c_med, b_med, confidence=confidence))
    est = hodges_lehmann_ratio(c_runs[0], b_runs[0], confidence=confidence, repeats=1)
    return one_run_each_guard(replace(est, note=ONE_REPEAT_NOTE))


def _finite_or_inf(value: float | None) -> float:
    return math.inf if value is None else value


def more_repeats(estimate: RatioEstimate) -> int | None:
    """Repeats per side to add so that the interval would exclude 1, if the estimate held.

    The interval's half-width on the log scale shrinks like 1/sqrt(repeats); None when the estimate is
    1 (no effect to settle), the interval is unbounded, or more than MAX_MORE_REPEATS would be needed.

    >>> more_repeats(RatioEstimate(0.9, 0.8, 1.02, 0.95, "", 3, 3, 3))
    2
    """
    if estimate.ratio <= 0 or not math.isfinite(estimate.ratio):
        return None
    point = math.log(estimate.ratio)
    if abs(point) < 1e-12:
        return None
    bound = estimate.high if point < 0 else estimate.low
    if bound <= 0 or not math.isfinite(bound):
        return None
    width = abs(math.log(bound) - point)
    needed = math.ceil(max(estimate.repeats, 1) * (width / abs(point)) ** 2)
    extra = max(needed - estimate.repeats, 1)
    return extra if extra <= MAX_MORE_REPEATS else None


def one_sided_p(estimate: RatioEstimate, worse: Literal["below", "above"]) -> float:
    """p-value of "no change" against the candidate being worse on ``worse``'s side of 1.

    Half the two-sided p-value when the estimate lies on that side, else one minus it. An estimate
    without a p-value (censored repeats, no spread at all) is certain when its interval excludes 1 on
    that side, else it is no evidence (1).

    >>> one_sided_p(RatioEstimate(0.9, 0.8, 0.98, 0.95, "", 3, 3, 3, p_value=0.02), "below")
    0.01
    """
    p = estimate.p_value
    on_side = estimate.ratio < 1 if worse == "below" else estimate.ratio > 1
    if p is None:
        excluded = estimate.high < 1 if worse == "below" else estimate.low > 1
        return 0.0 if excluded else 1.0
    return p / 2 if on_side else 1 - p / 2


def mean_log_ratio_across(
    groups: Sequence[tuple[Sequence[float], Sequence[float]]], *, confidence: float, statistic: str = "value"
) -> RatioEstimate | None:
    """Later runs against reference repeats, several groups (profiles) at once, sharing one run-level noise.

    Each group is ``(later, reference)`` per-run values of one profile. Per group
    ``d_p = mean(log later) - mean(log reference)``; the estimate is their mean ``d = sum(d_p) / P`` with
    ``se = s * sqrt(sum(1/m_p + 1/n_p)) / P``, ``s`` the run-to-run log sd pooled over both samples of
    every group (``df = sum(m_p - 1 + n_p - 1)``): a slow host moves every profile, so the mean keeps a
    real drift whole while one profile's odd run counts 1/P. With one later run per profile the interval
    is the prediction interval for a new run. None when a value is censored or not positive, or no degree
    of freedom is left (the caller falls back to :func:`prediction_ratio` per group).

    >>> est = mean_log_ratio_across([([0.95], [1.0, 1.01, 0.99]), ([1.9], [2.0, 2.02, 1.98])],
    ...     confidence=0.95)
    >>> round(est.ratio, 3), est.df, est.low < 0.95 < est.high < 1
    (0.95, 4.0, True)
    """
    from scipy.stats import t as student_t  # noqa: PLC0415  (scipy on first use)

    logs = []
    for later, ref in groups:
        values = [*later, *ref]
        if not later or not ref or any(not math.isfinite(v) or v <= 0 for v in values):
            return None
        logs.append((np.log(np.asarray(later, dtype=np.float64)), np.log(np.asarray(ref, dtype=np.float64))))
    df = float(sum(len(a) - 1 + len(b) - 1 for a, b in logs))
    if df < 1:
        return None
    squares = sum(float(((a - a.mean()) ** 2).sum() + ((b - b.mean()) ** 2).sum()) for a, b in logs)
    sd = math.sqrt(squares / df)
    count = len(logs)
    diff = sum(float(a.mean() - b.mean()) for a, b in logs) / count
    se = sd * math.sqrt(sum(1 / len(a) + 1 / len(b) for a, b in logs)) / count
    half = _t_quantile(confidence, df) * se
    p_value = float(2 * student_t(df).sf(abs(diff) / se)) if se > 0 else (1.0 if diff == 0 else 0.0)
    later_n, ref_n = sum(len(a) for a, _ in logs), sum(len(b) for _, b in logs)
    one_each = (
        "; one later run per profile: the prediction interval for a new run" if later_n == count else ""
    )
    return RatioEstimate(
        ratio=_exp(diff),
        low=_exp(diff - half),
        high=_exp(diff + half),
        confidence=confidence,
        method=f"pooled t on the mean log ratio across {count} profile(s) (per-run {statistic}; run-to-run "
        f"variance pooled over both samples and the profiles, df {df:.0f}{one_each})",
        n_candidate=later_n,
        n_baseline=ref_n,
        repeats=min(later_n, ref_n),
        p_value=p_value,
        df=df,
    )
