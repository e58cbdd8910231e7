"""One figure per run, candidate against baseline (or against a fixed bound), guarded as tokens/s is.

Pipeline position: pure, between :mod:`gates.stats` and :mod:`gates.compare` (the estimates, the set-aside
rule) and the gates that compare a per-run figure of their own: the cost gate's $ per million output
tokens (:mod:`gates.cost`) and the time bound's requests completed per second (:mod:`gates.time_bound`).
It does for such a figure what :func:`gates.compare.throughput` does for tokens/s (docs/gates.md):

- a minority of slow runs per side is set aside (:func:`gates.set_aside.set_aside_runs`) and the message
  says which;
- two runs or more on a side: the t-interval on the log per-run values (:func:`gates.stats.run_level_ratio`);
  one run against several decides only an effect beyond 4x (:func:`gates.stats.single_run_guard`);
- one run against one run (``run.repeats: 1``, an adaptive first look against a one-run baseline) has no
  interval of its own: a run gives one value, with no requests inside it to resample. It gets the
  single-run rule's interval ``[ratio / 4, ratio * 4]`` and decides only beyond 4x
  (:func:`gates.stats.one_run_each_guard`); :func:`gates.stats.run_level_ratio` would raise there.

    >>> est = guarded_ratio([3.0], [2.0], confidence=0.95, statistic="$/Mtok")
    >>> est.ratio, est.interval, est.p_value        # 1.5x dearer, one run each: not decided
    (1.5, (0.375, 6.0), 1.0)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from contracts.metrics import Better, fmt_ratio
from gates.set_aside import SET_ASIDE_FACTOR, set_aside_runs
from gates.stats import (
    ONE_REPEAT_NOTE,
    RatioEstimate,
    one_run_each_guard,
    run_level_ratio,
    single_run_guard,
)


@dataclass(frozen=True)
class RunValues:
    """One side's runs of a figure: which side, each run's name (``r1``) and its value."""

    side: str  # "candidate" or "baseline", as a set-aside note names it
    runs: tuple[str, ...]
    values: tuple[float, ...]


def without_slow_runs(side: RunValues, slow: Better, fmt: Callable[[float], str]) -> tuple[RunValues, str]:
    """``side`` with its slow outlier runs set aside (:func:`gates.set_aside.set_aside_runs`; ``slow``: which
    way a slow run moves the figure), and a note that says which, as the throughput comparison writes it
    ("" when none).

    >>> runs = RunValues("candidate", ("r0", "r1", "r2"), (2.0, 2.1, 6.3))
    >>> kept, note = without_slow_runs(runs, "higher", lambda v: f"{v:.3g} $/Mtok")
    >>> kept.runs
    ('r0', 'r1')
    >>> print(note)
    candidate run r2 (6.3 $/Mtok, 3.07x the others' median) set aside as one outlier run (beyond 2x)
    """
    aside = set_aside_runs(side.values, slow)
    if not aside:
        return side, ""
    rest = [v for i, v in enumerate(side.values) if i not in aside]
    centre = float(np.median(rest))
    runs = ", ".join(
        f"{side.runs[k]} ({fmt(side.values[k])}, {fmt_ratio(side.values[k] / centre)} the others' median)"
        for k in aside
    )
    what = "one outlier run" if len(aside) == 1 else f"{len(aside)} outlier runs of {len(side.values)}"
    plural = "s" if len(aside) > 1 else ""
    note = f"{side.side} run{plural} {runs} set aside as {what} (beyond {SET_ASIDE_FACTOR:g}x)"
    kept = [i for i in range(len(side.values)) if i not in aside]
    return (
        RunValues(side.side, tuple(side.runs[i] for i in kept), tuple(side.values[i] for i in kept)),
        note,
    )


def guarded_ratio(
    candidate: Sequence[float], baseline: Sequence[float], *, confidence: float, statistic: str
) -> RatioEstimate:
    """The ratio of the geometric means of one figure per run, candidate / baseline, with the single-run
    rule: two runs or more on a side, :func:`gates.stats.run_level_ratio` guarded by
    :func:`gates.stats.single_run_guard`; one run each, the two values' ratio with the interval
    ``[ratio / 4, ratio * 4]`` and p-value 1 within it (:func:`gates.stats.one_run_each_guard`).
    Values are positive (a zero is clipped as :mod:`gates.stats` clips it)."""
    if not candidate or not baseline:
        raise ValueError("guarded_ratio needs at least one run on each side")
    if len(candidate) >= 2 or len(baseline) >= 2:
        return single_run_guard(
            run_level_ratio(candidate, baseline, confidence=confidence, statistic=statistic)
        )
    c, b = float(candidate[0]), float(baseline[0])
    ratio = c / b if b > 0 else math.inf
    point = RatioEstimate(
        ratio=ratio,
        low=ratio,
        high=ratio,
        confidence=confidence,
        method=f"one run against one run ({statistic}): no interval of its own",
        n_candidate=1,
        n_baseline=1,
        repeats=1,
        note=ONE_REPEAT_NOTE,
        candidate_values=(c,),
        baseline_values=(b,),
    )
    return one_run_each_guard(point)


def bound_ratio(values: Sequence[float], bound: float, *, confidence: float, statistic: str) -> RatioEstimate:
    """The runs' geometric mean of a figure over a fixed ``bound`` (a budget), with a t-interval over the
    runs' logs and its two-sided p-value of "the mean is the bound"; one run: its value over the bound,
    deciding only beyond 4x as one run against one does (a bound has no noise, the run has unmeasured
    noise: :func:`gates.stats.one_run_each_guard`).

    >>> est = bound_ratio([2.0, 2.02, 1.98], 1.0, confidence=0.95, statistic="$/Mtok")
    >>> round(est.ratio, 3), est.low > 1.9, est.p_value < 0.001
    (2.0, True, True)
    """
    from scipy.stats import t as student_t  # noqa: PLC0415  (scipy on first use)

    if not values or bound <= 0:
        raise ValueError("bound_ratio needs at least one run and a positive bound")
    logs = [math.log(max(v, 1e-300)) for v in values]
    n, mean = len(logs), statistics.fmean(logs)
    if n < 2:
        ratio = math.exp(mean) / bound
        point = RatioEstimate(
            ratio=ratio,
            low=ratio,
            high=ratio,
            confidence=confidence,
            method=f"one run against the bound ({statistic}): no interval of its own",
            n_candidate=1,
            n_baseline=0,
            repeats=1,
            note=ONE_REPEAT_NOTE,
            candidate_values=(float(values[0]),),
        )
        return one_run_each_guard(point)
    se = statistics.stdev(logs) / math.sqrt(n)
    shift = mean - math.log(bound)
    if se > 0:
        dist = student_t(n - 1)
        half = float(dist.ppf(0.5 + confidence / 2)) * se
        p_value = float(2 * dist.sf(abs(shift) / se))
    else:  # every run the same value: no spread seen
        half, p_value = 0.0, (1.0 if shift == 0 else 0.0)
    return RatioEstimate(
        ratio=math.exp(shift),
        low=math.exp(shift - half),
        high=math.exp(shift + half),
        confidence=confidence,
        method=f"t-interval over the runs' log {statistic} against the bound ({n} runs, df {n - 1})",
        n_candidate=n,
        n_baseline=0,
        repeats=n,
        p_value=p_value,
        candidate_values=tuple(float(v) for v in values),
        df=float(n - 1),
    )
