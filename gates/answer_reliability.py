"""Visible-answer reliability: on the fixed answer prompts, as many visible answers as the baseline, and a
right-censored median time to visible answer not worse than the baseline by more than the tolerance.

Pipeline position: reads the answer profile's records of both sides, pooled over repeats. A request with
no visible content is right-censored (+inf), never dropped: dropping it would make a candidate that
answers less often look faster. The rule is strict on purpose (a handful of fixed prompts cannot make a
population claim, but it is enough to refuse a change). The interval reported for context (it does not
soften the rule) is run-level: the ratio of per-repeat right-censored medians with Welch's t on their logs,
or, with a single repeat on both sides, the requests' Hodges-Lehmann interval, marked as such.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from contracts.metrics import fmt_ratio, fmt_repeats, fmt_value, median, visible_value
from contracts.verdicts import Comparison, GateResult, GateStatus
from gates.compare import fmt_interval, per_repeat, pooled, records_evidence
from gates.registry import Gate, GateContext, register
from gates.stats import RatioEstimate, latency_ratio


def _counts(profile: str, c_vals: Sequence[float], b_vals: Sequence[float]) -> Comparison:
    """Visible answers of the candidate against the baseline's rate (censored = no visible answer)."""
    c_seen = sum(not math.isinf(v) for v in c_vals)
    b_seen = sum(not math.isinf(v) for v in b_vals)
    c_rate, b_rate = c_seen / len(c_vals), b_seen / len(b_vals)
    return Comparison(
        metric="visible_answers",
        profile=profile,
        status="fail" if c_rate < b_rate else "pass",
        observed=float(c_seen),
        baseline=float(b_seen),
        ratio=c_rate / b_rate if b_rate else None,
        threshold=float(b_seen) * len(c_vals) / len(b_vals),
        unit="answers",
        method="count (no interval: a fixed prompt set)",
        n_candidate=len(c_vals),
        n_baseline=len(b_vals),
        message=f"{c_seen}/{len(c_vals)} visible answers vs {b_seen}/{len(b_vals)}",
    )


def _median_rule(c_med: float | None, b_med: float | None, limit: float) -> tuple[GateStatus, float | None]:
    """The strict rule on the pooled censored medians: not worse than ``limit`` x the baseline's."""
    if c_med is None or b_med is None:
        return "not_run", None
    if math.isinf(b_med):
        return "pass", (1.0 if math.isinf(c_med) else 0.0)
    if math.isinf(c_med):
        return "fail", math.inf
    ratio = c_med / b_med if b_med > 0 else math.inf
    return ("fail" if ratio > limit else "pass"), ratio


def _context(est: RatioEstimate) -> str:
    """The run-level interval, shown for context (it does not soften the rule)."""
    if est.candidate_values:
        context = (
            f"per-repeat censored medians {fmt_repeats(est.candidate_values, 's')} vs "
            f"{fmt_repeats(est.baseline_values, 's')}: {fmt_ratio(est.ratio)}, {fmt_interval(est)}"
        )
    else:
        context = f"HL ratio {fmt_ratio(est.ratio)}, {fmt_interval(est)}"
    return context + (f"; {est.note}" if est.note and not context.endswith(est.note) else "")


@register
class AnswerReliability(Gate):
    """At least as many visible answers as the baseline; censored median not worse beyond tolerance."""

    name = "answer_reliability"
    order = 30
    requirement = "visible-answer reliability"
    failure = "visible-answer reliability"

    def evaluate(self, ctx: GateContext) -> GateResult:
        profile = ctx.cfg.answer_profile
        cand, base = ctx.candidate.repeats(profile), ctx.baseline.repeats(profile)
        if not cand or not base:
            side = "baseline" if not base else "candidate"
            return GateResult(
                gate=self.name,
                role=self.role,
                status="not_run" if not base else "inconclusive",
                message=f"answer profile {profile!r} not measured for the {side}",
            )
        c_vals, b_vals = pooled(cand, visible_value), pooled(base, visible_value)
        counts = _counts(profile, c_vals, b_vals)
        c_med, b_med = median(c_vals), median(b_vals)
        limit = 1 + ctx.cfg.latency_tolerance
        est = latency_ratio(
            per_repeat(cand, visible_value), per_repeat(base, visible_value), confidence=ctx.cfg.confidence
        )
        median_status, ratio = _median_rule(c_med, b_med, limit)
        change = ""
        if ratio is not None and math.isfinite(ratio):
            change = f", {ratio - 1:+.1%} against the {ctx.cfg.latency_tolerance:.0%} tolerance"
        timing = Comparison(
            metric="visible_p50_censored",
            profile=profile,
            status=median_status,
            observed=c_med,
            baseline=b_med,
            ratio=ratio,
            interval=est.interval,
            threshold=limit,
            unit="s",
            method="right-censored median (missing = +inf); interval: " + est.method,
            n_candidate=len(c_vals),
            n_baseline=len(b_vals),
            message=(
                f"censored median time to visible answer {fmt_value(c_med, 's')} vs "
                f"{fmt_value(b_med, 's')}{change} ({_context(est)}; for context)"
            ),
        )
        return GateResult(
            gate=self.name,
            role=self.role,
            status="fail" if "fail" in (counts.status, median_status) else "pass",
            observed=c_med,
            threshold=limit,
            baseline=b_med,
            interval=est.interval,
            unit="s",
            message=f"{counts.message}; {timing.message}",
            evidence=records_evidence(cand, lambda r: r.censored)
            + records_evidence(base, lambda r: r.censored),
            comparisons=[counts, timing],
        )
