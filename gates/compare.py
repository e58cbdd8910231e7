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

from contracts.results import RequestRecord
from contracts.verdicts import Comparison, Evidence, GateStatus
from gates.data import Repeat
from gates.stats import RatioEstimate, latency_ratio, more_repeats, throughput_ratio

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
        censored_runs = bool(est.candidate_values) and est.df is None
        return f"{est.confidence:.0%} CI unbounded ({est.note if censored_runs else 'too few requests'})"
    if math.isinf(est.low) or est.high <= 0:
        return est.note
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
    """Aggregate tokens/s (``output_tps`` or ``prompt_tps``), mean over repeats: the two-stage bootstrap
    interval widened to the run-level one (:func:`gates.stats.throughput_ratio`)."""
    est = throughput_ratio(
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
        f"({fmt_ratio(est.ratio)}, {fmt_interval(est)}; {len(candidate)} vs {len(baseline)} repeats"
        f"{'; ' + est.note if est.note else ''})"
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


def per_repeat(repeats: Sequence[Repeat], extract: Callable[[RequestRecord], float]) -> list[list[float]]:
    """Each repeat's values (repeats with no measured request are left out)."""
    return [vals for rep in repeats if (vals := [extract(r) for r in rep.records])]


def fmt_repeats(values: Sequence[float], unit: str) -> str:
    """Per-repeat values, e.g. ``0.894/0.632/0.539 s``."""
    if not values:
        return "n/a"
    text = "/".join(fmt_value(v, unit).removesuffix(f" {unit}") for v in values)
    return f"{text} {unit}" if unit else text


def geometric_mean(values: Sequence[float]) -> float | None:
    if not values:
        return None
    if any(math.isinf(v) for v in values):
        return math.inf
    return math.exp(sum(math.log(max(v, 1e-12)) for v in values) / len(values))


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
    """Median latency, candidate against baseline, with the repeat as the unit.

    Each repeat's right-censored median; the values compared are the geometric means of those medians
    and the interval is Welch's t on their logs (:func:`gates.stats.latency_ratio`), so it carries
    run-to-run variance. With a single repeat on both sides the pooled requests' Hodges-Lehmann ratio
    is the fallback, and the message says that run-to-run noise was not measured.
    """
    c_runs, b_runs = per_repeat(candidate, extract), per_repeat(baseline, extract)
    if not c_runs or not b_runs:
        return None
    est = latency_ratio(c_runs, b_runs, confidence=confidence)
    c_all = [v for run in c_runs for v in run]
    b_all = [v for run in b_runs for v in run]
    censored = sum(math.isinf(v) for v in c_all)
    note = f", {censored} censored" if censored else ""
    if est.candidate_values:
        c_val, b_val = geometric_mean(est.candidate_values), geometric_mean(est.baseline_values)
        n_c, n_b = len(est.candidate_values), len(est.baseline_values)
        detail = (
            f"{fmt_ratio(est.ratio)}, {fmt_interval(est)}; per-repeat medians "
            f"{fmt_repeats(est.candidate_values, 's')} vs {fmt_repeats(est.baseline_values, 's')}{note}"
        )
    else:
        c_val, b_val = median_of(c_all), median_of(b_all)
        n_c, n_b = len(c_all), len(b_all)
        detail = f"HL ratio {fmt_ratio(est.ratio)}, {fmt_interval(est)}; {n_c} vs {n_b} requests{note}"
    if est.note and not fmt_interval(est).endswith(est.note):
        detail += f"; {est.note}"
    status, threshold = judge(est)
    message = f"{label} {fmt_value(c_val, 's')} vs {fmt_value(b_val, 's')} ({detail})"
    comparison = Comparison(
        metric=metric,
        profile=profile,
        status=status,
        observed=c_val,
        baseline=b_val,
        ratio=est.ratio,
        interval=est.interval,
        threshold=threshold,
        unit="s",
        method=est.method,
        n_candidate=n_c,
        n_baseline=n_b,
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
