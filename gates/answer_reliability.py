"""Visible-answer reliability: on the fixed answer prompts, the visible-answer rate against the baseline's,
and the right-censored time to visible answer not worse beyond the tolerance and beyond noise.

Pipeline position: reads the answer profile's records of both sides. A request with no visible content is
right-censored (+inf), never dropped: dropping it would make a candidate that answers less often look
faster. Two comparisons, each stating its statistics:

- **visible answers** (pooled over repeats): Fisher's exact test, one-sided (the candidate answers less
  often), and the Beta-binomial posterior (uniform priors) of the rate difference with its credible
  interval (:func:`gates.significance.compare_rates`). How a loss is decided is ``gates.answer_policy``:
  ``any_lost_answer_blocks`` (the case study's rule, a **policy**: any lost answer fails, whatever the
  noise; the statistics are reported, not used) or ``exact_test`` (a **test**: the loss fails when the
  exact test rejects "no change" at the gates' one-sided level, else it is inconclusive);
- **censored median time to visible answer**: each repeat's right-censored median, Welch's t on their
  logs (or, with one repeat per side, the requests' Hodges-Lehmann ratio with the Mann-Whitney interval,
  +inf ranked above every value): a regression beyond ``latency_tolerance`` fails only when its interval
  excludes "no change"; beyond the tolerance within noise it is inconclusive.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from contracts.errors import GateError
from contracts.metrics import fmt_ratio, fmt_repeats, fmt_value, median, visible_value
from contracts.verdicts import Comparison, GateResult, GateStatus
from gates.compare import (
    fmt_interval,
    judge_requirement,
    overall_status,
    per_repeat,
    pooled,
    records_evidence,
)
from gates.registry import Gate, GateContext, register
from gates.significance import RateComparison, compare_rates
from gates.stats import RatioEstimate, latency_ratio, more_repeats

#: ``gates.answer_policy`` values and what each means, for messages and docs.
ANSWER_POLICIES: dict[str, str] = {
    "any_lost_answer_blocks": "policy: any lost visible answer blocks promotion",
    "exact_test": "test: Fisher's exact test, one-sided",
}


def _rates(
    profile: str, c_vals: Sequence[float], b_vals: Sequence[float], *, policy: str, confidence: float
) -> tuple[Comparison, RateComparison]:
    """Visible answers of the candidate against the baseline's rate (censored = no visible answer)."""
    c_seen = sum(not math.isinf(v) for v in c_vals)
    b_seen = sum(not math.isinf(v) for v in b_vals)
    rates = compare_rates((c_seen, len(c_vals)), (b_seen, len(b_vals)), confidence=confidence)
    alpha = (1 - confidence) / 2
    status: GateStatus
    if not rates.lost:
        status = "pass"
    elif policy == "any_lost_answer_blocks" or rates.p_value <= alpha:
        status = "fail"
    else:
        status = "inconclusive"
    c_rate, b_rate = c_seen / len(c_vals), b_seen / len(b_vals)
    low, high = rates.difference
    statistics = (
        f"Fisher exact one-sided p {rates.p_value:.2g} (level {alpha:.3g}); posterior P(lower rate) "
        f"{rates.posterior_lower:.2f}, rate difference {c_rate - b_rate:+.0%} "
        f"({confidence:.0%} credible interval [{low:+.0%}, {high:+.0%}])"
    )
    decided_by = ANSWER_POLICIES[policy] if rates.lost else "no answer lost"
    comparison = Comparison(
        metric="visible_answers",
        profile=profile,
        status=status,
        observed=float(c_seen),
        baseline=float(b_seen),
        ratio=c_rate / b_rate if b_rate else None,
        threshold=float(b_seen) * len(c_vals) / len(b_vals),
        unit="answers",
        method=f"{decided_by}; {statistics}",
        n_candidate=len(c_vals),
        n_baseline=len(b_vals),
        message=(
            f"{c_seen}/{len(c_vals)} visible answers vs {b_seen}/{len(b_vals)} ({decided_by}; {statistics})"
        ),
    )
    return comparison, rates


def _context(est: RatioEstimate) -> str:
    if est.candidate_values:
        context = (
            f"per-repeat censored medians {fmt_repeats(est.candidate_values, 's')} vs "
            f"{fmt_repeats(est.baseline_values, 's')}: {fmt_ratio(est.ratio)}, {fmt_interval(est)}"
        )
    else:
        context = f"HL ratio {fmt_ratio(est.ratio)}, {fmt_interval(est)}"
    return context + (f"; {est.note}" if est.note and not context.endswith(est.note) else "")


def _pooled_ratio(c_med: float | None, b_med: float | None) -> float | None:
    """Ratio of the pooled censored medians (+inf / finite = inf; +inf / +inf = 1)."""
    if c_med is None or b_med is None:
        return None
    if math.isinf(b_med):
        return 1.0 if math.isinf(c_med) else 0.0
    return math.inf if math.isinf(c_med) or b_med <= 0 else c_med / b_med


def _timing(profile: str, ctx: GateContext, c_vals: Sequence[float], b_vals: Sequence[float]) -> Comparison:
    """The censored median time to visible answer, judged with its run-level (or request-level) interval."""
    cand, base = ctx.candidate.repeats(profile), ctx.baseline.repeats(profile)
    est = latency_ratio(
        per_repeat(cand, visible_value), per_repeat(base, visible_value), confidence=ctx.cfg.confidence
    )
    c_med, b_med = median(c_vals), median(b_vals)
    status, threshold = judge_requirement(est, "lower", ctx.cfg.latency_tolerance)
    ratio = _pooled_ratio(c_med, b_med)  # shown with the values; the decision uses the estimate
    change = ""
    if ratio is not None and math.isfinite(ratio):
        change = f", {ratio - 1:+.1%} against the {ctx.cfg.latency_tolerance:.0%} tolerance"
    return Comparison(
        metric="visible_p50_censored",
        profile=profile,
        status=status,
        observed=c_med,
        baseline=b_med,
        ratio=ratio,
        interval=est.interval,
        threshold=threshold,
        unit="s",
        method="right-censored median (missing = +inf); interval: " + est.method,
        n_candidate=len(c_vals),
        n_baseline=len(b_vals),
        more_repeats=more_repeats(est) if status == "inconclusive" else None,
        message=(
            f"censored median time to visible answer {fmt_value(c_med, 's')} vs "
            f"{fmt_value(b_med, 's')}{change} ({_context(est)})"
        ),
    )


@register
class AnswerReliability(Gate):
    """Visible-answer rate (policy or exact test) and censored time to visible answer (interval)."""

    name = "answer_reliability"
    order = 30
    requirement = "visible-answer reliability"
    failure = "visible-answer reliability"

    def evaluate(self, ctx: GateContext) -> GateResult:
        profile, policy = ctx.cfg.answer_profile, ctx.cfg.answer_policy
        if policy not in ANSWER_POLICIES:
            raise GateError(
                f"gates.answer_policy = {policy!r} is not a policy",
                hint=f"use one of {', '.join(ANSWER_POLICIES)} (conf/gates/default.yaml; docs/gates.md)",
            )
        cand, base = ctx.candidate.repeats(profile), ctx.baseline.repeats(profile)
        if not cand or not base:
            side = "baseline" if not base else "candidate"
            return GateResult(
                gate=self.name,
                role=self.role,
                status="not_run" if not base else "inconclusive",
                message=f"answer profile {profile!r} not measured for the {side}",
                not_applicable=ctx.not_asked([profile]) if not base else "",
            )
        c_vals, b_vals = pooled(cand, visible_value), pooled(base, visible_value)
        counts, _ = _rates(profile, c_vals, b_vals, policy=policy, confidence=ctx.cfg.confidence)
        timing = _timing(profile, ctx, c_vals, b_vals)
        status = overall_status([counts.status, timing.status])
        return GateResult(
            gate=self.name,
            role=self.role,
            status=status,
            observed=timing.observed,
            threshold=timing.threshold,
            baseline=timing.baseline,
            interval=timing.interval,
            unit="s",
            message=f"{counts.message}; {timing.message}",
            evidence=records_evidence(cand, lambda r: r.censored)
            + records_evidence(base, lambda r: r.censored),
            comparisons=[counts, timing],
            more_repeats=timing.more_repeats if status == "inconclusive" else None,
        )
