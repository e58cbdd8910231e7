"""Drift: the baseline measured at the start of the sweep against the restored baseline at the end.

Pipeline position: compares ``<sweep>/candidates/<baseline>/<profile>/r*`` with
``<sweep>/recovery/<profile>/r*`` for every recovery profile: output tokens/s and median TTFT, one value
per repeat (the repeat's figure; the repeat's right-censored median TTFT). The end-of-sweep run counts
as drift only when it lies outside the prediction interval for a new run that the baseline's repeats
give (pooled t on the log scale, the run-to-run variance pooled over the recovery profiles of a metric,
Bonferroni-adjusted over the drift comparisons) **and** it changed by
more than the tolerance, in either direction: then the host changed under the sweep and every measured
verdict becomes inconclusive. Only when both sides have a single repeat (run-to-run noise unmeasured)
do the request-level methods stand in, and the message says so. The result states the check's minimum
detectable drift (:func:`min_detectable_drift`): a check whose interval is wider than any plausible drift
says so instead of passing silently.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from contracts.metrics import fmt_ratio, fmt_repeats, fmt_value, geometric_mean, median, ttft_value
from contracts.schema import GatesConfig
from contracts.sweepdir import RECOVERY_ROOT, Repeat, Results, load_results
from contracts.verdicts import Comparison, DriftResult, Evidence, GateStatus
from gates.compare import (
    Measured,
    estimated,
    fmt_interval,
    latency,
    overall_status,
    per_repeat,
    records_evidence,
    summary_evidence,
    throughput,
)
from gates.registry import GateContext
from gates.stats import (
    ONE_REPEAT_NOTE,
    RatioEstimate,
    bonferroni,
    pooled_prediction_ratios,
    prediction_ratio,
)


def judge_drift(est: RatioEstimate, tolerance: float) -> tuple[GateStatus, float]:
    """fail: changed by more than the tolerance either way, beyond noise; inconclusive: within noise."""
    material = est.ratio < 1 - tolerance or est.ratio > 1 + tolerance
    if material:
        return ("fail" if est.excludes_one else "inconclusive"), tolerance
    return "pass", tolerance


def _prediction_text(est: RatioEstimate, unit: str) -> str:
    """The prediction interval in the metric's unit: where a run without drift would have landed."""
    reference = geometric_mean(est.baseline_values)
    if est.df is None or reference is None or est.ratio <= 0 or not math.isfinite(reference):
        return fmt_interval(est)
    half = math.log(est.high / est.ratio)
    low, high = reference * math.exp(-half), reference * math.exp(half)
    new = "a new run" if est.n_candidate == 1 else f"the mean of {est.n_candidate} new runs"
    level = f"{est.confidence:.2%}".rstrip("0").rstrip(".")
    return f"{level} prediction interval for {new} [{fmt_value(low, unit)}, {fmt_value(high, unit)}]"


@dataclass(frozen=True)
class _Series:
    """One drift comparison before it is estimated: a metric of a profile, end runs against start."""

    metric: str
    profile: str
    label: str
    unit: str
    end: list[float]
    start: list[float]
    tolerance: float
    evidence: list[Evidence]


def _run_level(series: _Series, est: RatioEstimate) -> Measured:
    metric, profile, label, unit = series.metric, series.profile, series.label, series.unit
    tolerance, evidence = series.tolerance, series.evidence
    message = (
        f"{label} at the end {fmt_repeats(est.candidate_values, unit)} vs the baseline's repeats "
        f"{fmt_repeats(est.baseline_values, unit)} ({fmt_ratio(est.ratio)} of their geometric mean; "
        f"{_prediction_text(est, unit)}; tolerance {tolerance:.0%})"
    )
    comparison = estimated(
        est,
        _judge(tolerance),
        metric=metric,
        profile=profile,
        values=(geometric_mean(est.candidate_values), geometric_mean(est.baseline_values)),
        counts=(est.n_candidate, est.n_baseline),
        unit=unit,
        message=message,
        settles=False,  # a prediction interval for a new run does not shrink below the runs' spread
    )
    return Measured(comparison, est, evidence)


def _one_repeat(measured: Measured) -> Measured:
    """Both sides have a single repeat: the request-level comparison, marked as such."""
    if measured.estimate.note:
        return measured
    comparison = measured.comparison.model_copy(
        update={"message": f"{measured.comparison.message}; {ONE_REPEAT_NOTE}"}
    )
    return Measured(comparison, measured.estimate, measured.evidence)


def _ttft_medians(repeats: Sequence[Repeat]) -> list[float]:
    medians = [median(run) for run in per_repeat(repeats, ttft_value)]
    return [math.inf if m is None else m for m in medians]


def _run_level_series(
    profile: str, end: Sequence[Repeat], start: Sequence[Repeat], cfg: GatesConfig
) -> list[_Series]:
    """Two repeats or more on a side: each run's figure against the baseline's repeats."""
    series = [
        _Series(
            "output_tps",
            profile,
            f"{profile} output tokens/s",
            "tok/s",
            end=[float(r.summary.output_tps) for r in end],
            start=[float(r.summary.output_tps) for r in start],
            tolerance=cfg.throughput_tolerance,
            evidence=summary_evidence(end, start),
        )
    ]
    end_ttft, start_ttft = _ttft_medians(end), _ttft_medians(start)
    if end_ttft and start_ttft and (len(end_ttft) >= 2 or len(start_ttft) >= 2):
        series.append(
            _Series(
                "ttft_p50",
                profile,
                f"{profile} median TTFT",
                "s",
                end=end_ttft,
                start=start_ttft,
                tolerance=cfg.latency_tolerance,
                evidence=records_evidence(end) + records_evidence(start),
            )
        )
    return series


def _estimate_series(series: Sequence[_Series], confidence: float) -> list[Measured]:
    """Each metric's comparisons with the run-to-run variance pooled over the profiles (the host's
    noise); a metric whose values cannot be pooled (censored, or no degree of freedom) goes one by one."""
    out: list[Measured] = []
    for metric in dict.fromkeys(s.metric for s in series):
        group = [s for s in series if s.metric == metric]
        statistic = group[0].label.split(" ", 1)[1]
        pooled = pooled_prediction_ratios(
            [(s.end, s.start) for s in group], confidence=confidence, statistic=statistic
        )
        if pooled is None or len(group) == 1:
            pooled = [
                prediction_ratio(s.end, s.start, confidence=confidence, statistic=statistic) for s in group
            ]
        out += [_run_level(s, est) for s, est in zip(group, pooled, strict=True)]
    return out


def min_detectable_drift(measured: Sequence[Measured]) -> tuple[float, str] | None:
    """The smallest drift the check would call drift, and where: for each run-level comparison the larger
    of its tolerance and its interval's half-width (a change inside the interval is noise), the smallest
    over the comparisons (drift moves every profile; the first comparison to see it fires)."""
    best: tuple[float, str] | None = None
    for m in measured:
        est = m.estimate
        if est.df is None or est.ratio <= 0 or not math.isfinite(est.high) or est.high <= 0:
            continue
        half = max(math.log(est.high / est.ratio), math.log(est.ratio / est.low) if est.low > 0 else 0.0)
        tolerance = m.comparison.threshold or 0.0
        size = max(math.exp(half) - 1, tolerance)
        label = (
            f"{m.comparison.profile} {'output tokens/s' if m.comparison.unit == 'tok/s' else 'median TTFT'}"
        )
        if best is None or size < best[0]:
            best = (size, label)
    return best


def _request_level_drift(profile: str, ctx: GateContext, confidence: float) -> list[Measured]:
    """A single repeat on both sides: the request-level methods, marked as such."""
    end, start, cfg = ctx.candidate.repeats(profile), ctx.baseline.repeats(profile), ctx.cfg
    tps = throughput(
        "output_tps",
        profile,
        end,
        start,
        confidence=confidence,
        resamples=cfg.bootstrap_resamples,
        seed=ctx.seed("drift", profile),
        judge=_judge(cfg.throughput_tolerance),
        label=f"{profile} output tokens/s at the end",
    )
    ttft = latency(
        "ttft_p50",
        profile,
        end,
        start,
        ttft_value,
        confidence=confidence,
        judge=_judge(cfg.latency_tolerance),
        label=f"{profile} median TTFT at the end",
    )
    return [_one_repeat(m) for m in (tps, ttft) if m is not None]


def _drift_message(status: GateStatus, comparisons: Sequence[Comparison]) -> str:
    if status == "fail":
        drifted = "; ".join(c.message for c in comparisons if c.status == "fail")
        return (
            f"BASELINE DRIFT beyond noise ({drifted}): the end-of-sweep run is outside the baseline's "
            "run-to-run spread; every measured verdict is inconclusive; rerun the sweep on a quiet host"
        )
    if status == "inconclusive":
        maybe = "; ".join(c.message for c in comparisons if c.status == "inconclusive")
        return (
            f"possible baseline drift within noise ({maybe}): inside the baseline's run-to-run spread; "
            "verdicts stand, more repeats would tell"
        )
    return "no drift beyond noise: " + "; ".join(c.message for c in comparisons)


def evaluate_drift(sweep_dir: Path, cfg: GatesConfig, baseline: Results) -> DriftResult:
    """Compare the baseline's first measurement with its measurement after the restore."""
    recovery = load_results(sweep_dir, RECOVERY_ROOT, baseline.name)
    if recovery.run is not None and not recovery.run.startup.ok:
        startup = recovery.run.startup
        return DriftResult(
            status="not_run",
            message=(
                f"RECOVERY FAILED TO START ({startup.kind}: {startup.matched_line or 'no log line'}): "
                "drift unknown, and the retained configuration is not validated"
            ),
            evidence=[Evidence(file=recovery.run_file)],
        )
    shared = [p for p in recovery.profiles if baseline.repeats(p)]
    if not shared:
        return DriftResult(
            status="not_run",
            message="no recovery measurement of a profile the baseline ran: drift not checked",
        )
    ctx = GateContext(cfg=cfg, baseline=baseline, candidate=recovery)
    # Drift voids every verdict: the family "some figure drifted" keeps the configured confidence.
    confidence = bonferroni(cfg.confidence, 2 * len(shared))
    measured: list[Measured] = []
    series: list[_Series] = []
    for profile in shared:
        end, start = recovery.repeats(profile), baseline.repeats(profile)
        if len(end) >= 2 or len(start) >= 2:
            series += _run_level_series(profile, end, start, cfg)
        else:
            measured += _request_level_drift(profile, ctx, confidence)
    measured = _estimate_series(series, confidence) + measured
    comparisons = [m.comparison for m in measured]
    status = overall_status([c.status for c in comparisons])
    evidence = [e for m in measured if m.comparison.status != "pass" for e in m.evidence]
    detectable = min_detectable_drift(measured)
    message = _drift_message(status, comparisons)
    if detectable is not None:
        size, where = detectable
        message += (
            f"; minimum detectable drift {size:.1%} ({where}: the larger of the tolerance and the "
            "interval's half-width)"
        )
    return DriftResult(
        status=status,
        message=message,
        comparisons=comparisons,
        evidence=evidence,
        min_detectable_drift=detectable[0] if detectable else None,
    )


def _judge(tolerance: float) -> Callable[[RatioEstimate], tuple[GateStatus, float]]:
    return lambda est: judge_drift(est, tolerance)
