"""Drift: the baseline's opening repeats against the same configuration measured later in the sweep.

Pipeline position: compares ``<sweep>/candidates/<baseline>/<profile>/r*`` (the opening repeats, before
any candidate) with the later measurements of the retained configuration: the interleaved blocks measured
after each candidate (``candidates/<baseline>/blocks/after-<candidate>/``, ``run.interleave``: the
sweep's order is baseline, candidate, baseline, ...) and the restored baseline at the end
(``<sweep>/recovery/<profile>/r*``), for every recovery profile: output tokens/s and median TTFT, one value
per repeat (the repeat's figure; the repeat's right-censored median TTFT). The later runs count as drift
only when their mean lies outside the pooled-variance t interval that the two samples give (log scale,
the run-to-run variance pooled over both sides and over the recovery profiles of a metric,
Bonferroni-adjusted over the drift comparisons) **and** it changed by more than the tolerance, in either
direction: then the host changed under the sweep and every measured verdict becomes inconclusive. With
blocks the later side has several runs, so its own spread enters the test (one slow run no longer
decides); without them (``run.interleave: false``) a single recovery run is tested against the
prediction interval for a new run. A block that did not start is drift by itself. Only when both sides
have a single repeat (run-to-run noise unmeasured) do the request-level methods stand in, and the message
says so. The result states the check's minimum detectable drift (:func:`min_detectable_drift`). A node of
a parallel sweep gets the same check on its own baseline and blocks (:func:`evaluate_node_drift`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from contracts.layout import RECOVERY_ROOT
from contracts.metrics import fmt_ratio, fmt_repeats, fmt_value, geometric_mean, ttft_value
from contracts.schema import GatesConfig
from contracts.sweepdir import Repeat, Results, load_results
from contracts.verdicts import Comparison, DriftResult, Evidence, GateStatus
from gates.compare import (
    Measured,
    estimated,
    fmt_interval,
    latency,
    overall_status,
    records_evidence,
    run_medians,
    summary_evidence,
    throughput,
)
from gates.registry import GateContext
from gates.significance import bonferroni
from gates.stats import ONE_REPEAT_NOTE, RatioEstimate, mean_log_ratio_across, prediction_ratio


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
        f"{label} later {fmt_repeats(est.candidate_values, unit)} vs the opening repeats "
        f"{fmt_repeats(est.baseline_values, unit)} ({fmt_ratio(est.ratio)} of their geometric mean; "
        f"{_prediction_text(est, unit)}; tolerance {tolerance:.0%})"
    )
    comparison = estimated(
        est,
        _judge(tolerance, decisive=metric == "output_tps"),
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
    return run_medians(repeats, ttft_value)


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
    """One comparison per metric across the recovery profiles (:func:`_across_profiles`: a host's drift
    moves every profile); a metric whose values cannot be pooled (censored, or no degree of freedom)
    goes profile by profile against the prediction interval."""
    out: list[Measured] = []
    for metric in dict.fromkeys(s.metric for s in series):
        group = [s for s in series if s.metric == metric]
        combined = _across_profiles(group, confidence)
        if combined is not None:
            out.append(combined)
            continue
        statistic = group[0].label.split(" ", 1)[1]
        out += [
            _run_level(s, prediction_ratio(s.end, s.start, confidence=confidence, statistic=statistic))
            for s in group
        ]
    return out


def _across_profiles(group: Sequence[_Series], confidence: float) -> Measured | None:
    """The later runs against the opening repeats for one metric, all recovery profiles together
    (:func:`gates.stats.mean_log_ratio_across`: one test per metric instead of one per profile). None when
    a value is censored or not positive, or no degree of freedom is left."""
    statistic = group[0].label.split(" ", 1)[1]
    est = mean_log_ratio_across([(s.end, s.start) for s in group], confidence=confidence, statistic=statistic)
    if est is None:
        return None
    first = group[0]
    later, opening, count = est.n_candidate, est.n_baseline, len(group)
    profiles = [s.profile for s in group]
    per_profile = "; ".join(
        f"{s.profile} {fmt_repeats(s.end, s.unit)} vs {fmt_repeats(s.start, s.unit)} "
        f"({fmt_ratio((geometric_mean(s.end) or 0.0) / (geometric_mean(s.start) or 1.0))})"
        for s in group
    )
    level = f"{confidence:.2%}".rstrip("0").rstrip(".")
    kind = "prediction interval for a new run" if later == count else "CI"
    message = (
        f"{statistic} later vs the opening repeats, across {', '.join(profiles)}: {fmt_ratio(est.ratio)} "
        f"({level} {kind} [{fmt_ratio(est.low)}, {fmt_ratio(est.high)}]; tolerance {first.tolerance:.0%}; "
        f"per profile: {per_profile})"
    )
    comparison = estimated(
        est,
        _judge(first.tolerance, decisive=first.metric == "output_tps"),
        metric=first.metric,
        profile=", ".join(profiles),
        values=(None, None),  # the profiles' units add up to no one value
        counts=(later, opening),
        unit=first.unit,
        message=message,
        settles=False,
    )
    return Measured(comparison, est, [e for s in group for e in s.evidence])


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
            f"{'output tokens/s' if m.comparison.unit == 'tok/s' else 'median TTFT'} "
            f"across {m.comparison.profile}"
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
        label=f"{profile} output tokens/s later",
    )
    ttft = latency(
        "ttft_p50",
        profile,
        end,
        start,
        ttft_value,
        confidence=confidence,
        judge=_judge(cfg.latency_tolerance, decisive=False),
        label=f"{profile} median TTFT later",
    )
    return [_one_repeat(m) for m in (tps, ttft) if m is not None]


def _drift_message(status: GateStatus, comparisons: Sequence[Comparison], where: str) -> str:
    if status == "fail":
        drifted = "; ".join(c.message for c in comparisons if c.status == "fail")
        return (
            f"BASELINE DRIFT beyond noise ({drifted}): {where} moved outside the run-to-run spread of the "
            "opening repeats; every measured verdict is inconclusive; rerun the sweep on a quiet host"
        )
    if status == "inconclusive":
        maybe = "; ".join(c.message for c in comparisons if c.status == "inconclusive")
        return (
            f"possible baseline drift within noise ({maybe}): inside the run-to-run spread; "
            "verdicts stand, more repeats would tell"
        )
    return "no drift beyond noise: " + "; ".join(c.message for c in comparisons)


def _failed_block(baseline: Results) -> DriftResult | None:
    """A block that did not start: the host no longer starts the retained configuration."""
    for block in baseline.blocks:
        if block.run is not None and not block.run.startup.ok:
            startup = block.run.startup
            return DriftResult(
                status="fail",
                message=(
                    f"BASELINE DRIFT: the retained configuration did not start again after "
                    f"{block.run.follows or 'a candidate'} ({startup.kind}: "
                    f"{startup.matched_line or 'no log line'}): the host changed under the sweep; every "
                    "measured verdict is inconclusive"
                ),
                evidence=[Evidence(file=block.run_file)],
                baseline=baseline.name,
                blocks=len(baseline.blocks),
            )
    return None


def evaluate_drift(sweep_dir: Path, cfg: GatesConfig, baseline: Results) -> DriftResult:
    """Compare the baseline's opening repeats with its blocks and its measurement after the restore."""
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
            baseline=baseline.name,
        )
    return _compare_later(cfg, baseline, recovery)


def evaluate_node_drift(cfg: GatesConfig, baseline: Results) -> DriftResult:
    """One node's baseline (``<baseline>@<node>``): its opening repeats against its later blocks."""
    return _compare_later(cfg, baseline, None)


def _compare_later(cfg: GatesConfig, baseline: Results, recovery: Results | None) -> DriftResult:
    failed = _failed_block(baseline)
    if failed is not None:
        return failed
    later: dict[str, list[Repeat]] = {}
    for block in baseline.blocks:
        for profile, reps in block.profiles.items():
            later.setdefault(profile, []).extend(reps)
    for profile, reps in (recovery.profiles if recovery is not None else {}).items():
        later.setdefault(profile, []).extend(reps)
    shared = [p for p in later if baseline.repeats(p) and later[p]]
    has_recovery = recovery is not None and bool(recovery.profiles)
    if not shared:
        what = "recovery measurement or baseline block" if recovery is not None else "baseline block"
        return DriftResult(
            status="not_run",
            message=f"no {what} of a profile the baseline ran: drift not checked",
            baseline=baseline.name,
            blocks=len(baseline.blocks),
        )
    start_of = {p: baseline.repeats(p) for p in shared}
    ctx = GateContext(
        cfg=cfg,
        baseline=replace(baseline, profiles=start_of),
        candidate=Results(name=baseline.name, root=baseline.root, run=None, profiles=later),
    )
    # Drift voids every verdict: the family "some figure drifted" keeps the configured confidence (one
    # comparison per metric across the profiles; per profile where only one run per side exists).
    confidence = bonferroni(cfg.confidence, 2)
    request_confidence = bonferroni(cfg.confidence, 2 * len(shared))
    measured: list[Measured] = []
    series: list[_Series] = []
    for profile in shared:
        end, start = later[profile], start_of[profile]
        if len(end) >= 2 or len(start) >= 2:
            series += _run_level_series(profile, end, start, cfg)
        else:
            measured += _request_level_drift(profile, ctx, request_confidence)
    measured = _estimate_series(series, confidence) + measured
    comparisons = [m.comparison for m in measured]
    status = overall_status([c.status for c in comparisons])
    evidence = [e for m in measured if m.comparison.status != "pass" for e in m.evidence]
    detectable = min_detectable_drift(measured)
    blocks = len(baseline.blocks)
    where = _later_side(blocks, has_recovery)
    message = _drift_message(status, comparisons, where) + f"; measured later: {where}"
    if detectable is not None:
        size, label = detectable
        message += (
            f"; minimum detectable drift {size:.1%} ({label}: the larger of the tolerance and the "
            "interval's half-width)"
        )
    return DriftResult(
        status=status,
        message=message,
        comparisons=comparisons,
        evidence=evidence,
        min_detectable_drift=detectable[0] if detectable else None,
        baseline=baseline.name,
        blocks=blocks,
        recovery=has_recovery,
    )


def _later_side(blocks: int, recovery: bool) -> str:
    parts = [f"{blocks} interleaved baseline block(s)"] if blocks else []
    parts += ["the end-of-sweep recovery"] if recovery else []
    return " and ".join(parts) or "the later runs"


def _judge(tolerance: float, *, decisive: bool = True) -> Callable[[RatioEstimate], tuple[GateStatus, float]]:
    """The drift rule; a comparison that is not ``decisive`` (median TTFT) can say "possible drift"
    (inconclusive) but never void the verdicts (why: the comment below)."""

    def judge(est: RatioEstimate) -> tuple[GateStatus, float]:
        status, threshold = judge_drift(est, tolerance)
        return ("inconclusive" if status == "fail" and not decisive else status), threshold

    return judge


# Why median TTFT does not decide drift. The median TTFT of a loaded burst is a step function (the burst
# enters in prefill waves and the median sits at a wave's edge), so it jumps by a whole wave from run to
# run: measured on the simulator (2026-12-03), 24 decode_heavy runs of the demo's baseline read
# 0.247-0.417 s in two clusters, whatever the server ran before, while output tokens/s stayed within 3.3%
# (docs/gates.md, "Drift"). A slower host moves throughput; throughput decides.
