"""Comparisons shared by the gates: one metric of one profile, candidate against baseline.

Pipeline position: pure helpers between :mod:`gates.stats` (the numbers) and the gate modules (the
rules). The rules are data: :data:`REQUIREMENT_RULES` and :data:`GAIN_RULES` say, for each direction of
"better", when a ratio is material and when its interval counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from gates.data import Repeat
from gates.models import Comparison, Evidence, GateStatus
from gates.stats import RatioEstimate, bootstrap_ratio, hodges_lehmann_ratio, more_repeats
from orchestrator.results import RequestRecord

Better = Literal["higher", "lower"]


@dataclass(frozen=True)
class _Rule:
    threshold: Callable[[float], float]  # tolerance -> the ratio that is material
    material: Callable[[float, float], bool]  # (ratio, threshold) -> beyond it
    counted: Callable[[RatioEstimate], bool]  # the interval excludes "no change" on that side


#: A requirement fails when the candidate is worse beyond the tolerance and beyond noise.
REQUIREMENT_RULES: dict[Better, _Rule] = {
    "higher": _Rule(lambda tol: 1 - tol, lambda r, t: r < t, lambda e: e.high < 1),
    "lower": _Rule(lambda tol: 1 + tol, lambda r, t: r > t, lambda e: e.low > 1),
}
#: A gain counts when the candidate is better by at least the minimum and beyond noise.
GAIN_RULES: dict[Better, _Rule] = {
    "higher": _Rule(lambda g: 1 + g, lambda r, t: r >= t, lambda e: e.low > 1),
    "lower": _Rule(lambda g: 1 - g, lambda r, t: r <= t, lambda e: e.high < 1),
}


def judge_requirement(est: RatioEstimate, better: Better, tolerance: float) -> tuple[GateStatus, float]:
    """fail: worse beyond tolerance and noise; inconclusive: worse beyond tolerance within noise."""
    rule = REQUIREMENT_RULES[better]
    threshold = rule.threshold(tolerance)
    if rule.material(est.ratio, threshold):
        return ("fail" if rule.counted(est) else "inconclusive"), threshold
    return "pass", threshold


def judge_gain(est: RatioEstimate, better: Better, min_gain: float) -> tuple[GateStatus, float]:
    """pass: better by min_gain and beyond noise; inconclusive: by min_gain within noise; else fail."""
    rule = GAIN_RULES[better]
    threshold = rule.threshold(min_gain)
    if rule.material(est.ratio, threshold):
        return ("pass" if rule.counted(est) else "inconclusive"), threshold
    return "fail", threshold


def worse_beyond_noise(est: RatioEstimate, better: Better, tolerance: float) -> bool:
    return judge_requirement(est, better, tolerance)[0] == "fail"


# ----------------------------------------------------------------------------------------- formatting

UNITS = {"output_tps": "tok/s", "prompt_tps": "tok/s"}


def fmt_value(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if math.isinf(value):
        return "inf"
    if unit == "tok/s":
        return f"{value:,.0f} tok/s" if value >= 100 else f"{value:,.1f} tok/s"
    if unit == "s":
        return f"{value:.3f} s" if value < 10 else f"{value:.2f} s"
    return f"{value:g}{(' ' + unit) if unit else ''}"


def fmt_ratio(value: float) -> str:
    if math.isinf(value):
        return "infx"
    if value >= 10:
        return f"{value:.1f}x"
    if value >= 0.1:
        return f"{value:.3f}x" if value < 1.2 else f"{value:.2f}x"
    return f"{value:.3g}x"


def fmt_interval(est: RatioEstimate) -> str:
    if est.low <= 0 and math.isinf(est.high):
        return f"{est.confidence:.0%} CI unbounded (too few requests)"
    return f"{est.confidence:.1%} CI [{fmt_ratio(est.low)}, {fmt_ratio(est.high)}]".replace(".0% CI", "% CI")


# ---------------------------------------------------------------------------------------- extractors


def ttft_value(record: RequestRecord) -> float:
    """Time to first token; a request that never got one is right-censored (+inf)."""
    return math.inf if record.ttft_s is None else record.ttft_s


def e2e_value(record: RequestRecord) -> float:
    """Request latency; a failed request is right-censored (+inf)."""
    return record.end_s if record.ok and record.end_s is not None else math.inf


def visible_value(record: RequestRecord) -> float:
    """Time to first visible answer; a request that showed none is right-censored (+inf)."""
    return math.inf if record.first_visible_s is None else record.first_visible_s


def pooled(repeats: Sequence[Repeat], extract: Callable[[RequestRecord], float]) -> list[float]:
    return [extract(r) for rep in repeats for r in rep.records]


def median_of(values: Sequence[float]) -> float | None:
    if not values:
        return None
    data = np.sort(np.asarray(values, dtype=np.float64))
    n = len(data)
    if n % 2:
        return float(data[n // 2])
    high = float(data[n // 2])
    return math.inf if math.isinf(high) else float((data[n // 2 - 1] + high) / 2)


def summary_evidence(*sides: Sequence[Repeat]) -> list[Evidence]:
    return [Evidence(file=rep.summary_file) for side in sides for rep in side]


def records_evidence(
    repeats: Sequence[Repeat], select: Callable[[RequestRecord], bool] | None = None
) -> list[Evidence]:
    out = []
    for rep in repeats:
        chosen = [r.index for r in rep.records if select(r)] if select else []
        if select is None or chosen:
            out.append(Evidence(file=rep.records_file, requests=chosen))
    return out


# --------------------------------------------------------------------------------------- comparisons


@dataclass(frozen=True)
class Measured:
    """A comparison together with the estimate behind it (for rules that need more than the status)."""

    comparison: Comparison
    estimate: RatioEstimate
    evidence: list[Evidence]


def throughput(
    metric: str,
    profile: str,
    candidate: Sequence[Repeat],
    baseline: Sequence[Repeat],
    *,
    confidence: float,
    resamples: int,
    seed: int,
    judge: Callable[[RatioEstimate], tuple[GateStatus, float]],
    label: str | None = None,
) -> Measured:
    """Aggregate tokens/s (``output_tps`` or ``prompt_tps``), mean over repeats, bootstrap interval."""
    est = bootstrap_ratio(
        [rep.throughput_sample(metric) for rep in candidate],
        [rep.throughput_sample(metric) for rep in baseline],
        confidence=confidence,
        resamples=resamples,
        seed=seed,
    )
    c_val = float(np.mean([float(getattr(rep.summary, metric)) for rep in candidate]))
    b_val = float(np.mean([float(getattr(rep.summary, metric)) for rep in baseline]))
    status, threshold = judge(est)
    name = label or f"{profile} {'output' if metric == 'output_tps' else 'prompt'} tokens/s"
    message = (
        f"{name} {fmt_value(c_val, 'tok/s')} vs {fmt_value(b_val, 'tok/s')} "
        f"({fmt_ratio(est.ratio)}, {fmt_interval(est)}; {len(candidate)} vs {len(baseline)} repeats)"
    )
    comparison = Comparison(
        metric=metric,
        profile=profile,
        status=status,
        observed=c_val,
        baseline=b_val,
        ratio=est.ratio,
        interval=est.interval,
        threshold=threshold,
        unit="tok/s",
        method=est.method,
        n_candidate=len(candidate),
        n_baseline=len(baseline),
        more_repeats=more_repeats(est) if status == "inconclusive" else None,
        message=message,
    )
    return Measured(comparison, est, summary_evidence(candidate, baseline))


def latency(
    metric: str,
    profile: str,
    candidate: Sequence[Repeat],
    baseline: Sequence[Repeat],
    extract: Callable[[RequestRecord], float],
    *,
    confidence: float,
    judge: Callable[[RatioEstimate], tuple[GateStatus, float]],
    label: str,
) -> Measured | None:
    """Median latency over the pooled requests of every repeat, Hodges-Lehmann ratio and interval."""
    c_vals, b_vals = pooled(candidate, extract), pooled(baseline, extract)
    if not c_vals or not b_vals:
        return None
    est = hodges_lehmann_ratio(
        c_vals, b_vals, confidence=confidence, repeats=min(len(candidate), len(baseline))
    )
    c_med, b_med = median_of(c_vals), median_of(b_vals)
    status, threshold = judge(est)
    censored = sum(math.isinf(v) for v in c_vals)
    note = f", {censored} censored" if censored else ""
    message = (
        f"{label} {fmt_value(c_med, 's')} vs {fmt_value(b_med, 's')} "
        f"(HL ratio {fmt_ratio(est.ratio)}, {fmt_interval(est)}; "
        f"{len(c_vals)} vs {len(b_vals)} requests{note})"
    )
    comparison = Comparison(
        metric=metric,
        profile=profile,
        status=status,
        observed=c_med,
        baseline=b_med,
        ratio=est.ratio,
        interval=est.interval,
        threshold=threshold,
        unit="s",
        method=est.method,
        n_candidate=len(c_vals),
        n_baseline=len(b_vals),
        more_repeats=more_repeats(est) if status == "inconclusive" else None,
        message=message,
    )
    evidence = records_evidence(candidate) + records_evidence(baseline)
    return Measured(comparison, est, evidence)


def missing(metric: str, profile: str, side: str, message: str | None = None) -> Comparison:
    return Comparison(
        metric=metric,
        profile=profile,
        status="inconclusive",
        observed=None,
        baseline=None,
        message=message or f"{profile}: not measured for the {side}",
    )


def overall_status(statuses: Sequence[GateStatus]) -> GateStatus:
    """fail beats inconclusive beats pass; nothing measured is not_run."""
    order: tuple[GateStatus, ...] = ("fail", "inconclusive", "pass")
    for status in order:
        if status in statuses:
            return status
    return "not_run"


def severity(c: Comparison) -> float:
    """How far a comparison's ratio is from 1 (log scale); 0 when it has none."""
    if c.ratio is None or c.ratio <= 0:
        return 0.0 if c.ratio is None else math.inf
    return abs(math.log(c.ratio))


def brief(comparisons: Sequence[Comparison], status: GateStatus, most: int = 2) -> str:
    """The most severe comparison with ``status`` of each unit (tok/s, s, ...), at most ``most`` of them,
    with a count of the rest; output tokens/s is preferred over prompt tokens/s at equal severity."""
    chosen = sorted(
        (c for c in comparisons if c.status == status),
        key=lambda c: (round(severity(c), 2), c.metric == "output_tps"),
        reverse=True,
    )
    shown: list[Comparison] = []
    for c in chosen:
        if len(shown) < most and all(c.unit != s.unit for s in shown):
            shown.append(c)
    for c in chosen:
        if len(shown) < most and c not in shown:
            shown.append(c)
    text = "; ".join(c.message for c in shown)
    return text + (f" (+{len(chosen) - len(shown)} more)" if len(chosen) > len(shown) else "")


def max_more(comparisons: Sequence[Comparison]) -> int | None:
    values = [c.more_repeats for c in comparisons if c.status == "inconclusive" and c.more_repeats]
    return max(values) if values else None
