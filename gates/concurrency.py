"""No material concurrency regression: aggregate tokens/s and loaded median TTFT against the baseline.

Pipeline position: for every loaded profile the baseline measured, compares output and prompt tokens/s
(two-stage bootstrap over repeats and requests) within ``throughput_tolerance``, and median TTFT
within ``latency_tolerance`` (each repeat's right-censored median, Welch's t on their logs: the interval
carries run-to-run variance; where the load client's dispatch lag, undone on either side, could put the
ratio on both sides of the tolerance it never decides; see :func:`gates.compare.latency`). A regression
counts only when it is beyond the tolerance and Holm's procedure over all the gate's comparisons
rejects "no change" for it (:func:`gates.compare.requirement_family`: family-wise error control across
profiles and metrics). A candidate's run its profile's time bound stopped, where the baseline finished
every run in time, is judged by its requests completed per second against the baseline's, with
``throughput_tolerance``, in the same family (:mod:`gates.time_bound`).
"""

from __future__ import annotations

from functools import partial

from contracts.metrics import ttft_value
from contracts.schema import GatesConfig
from contracts.sweepdir import Repeat
from contracts.verdicts import Comparison, Evidence, GateResult
from gates.compare import (
    Measured,
    Planned,
    judge_requirement,
    latency,
    max_more,
    missing,
    overall_status,
    requirement_family,
    throughput,
)
from gates.evidence import lost_how
from gates.registry import Gate, GateContext, register
from gates.time_bound import time_bound_comparisons


def loaded_plans(ctx: GateContext) -> tuple[list[Planned], list[Comparison]]:
    """Every loaded comparison that can be measured (at any confidence), and the ones that cannot (or
    that need no statistics: a majority of runs the time bound stopped, :mod:`gates.time_bound`). Only
    runs that ran to their end are samples: a run cut short (a lost server, the time bound) is not; a
    run the time bound stopped is judged by its rate (:func:`gates.time_bound.time_bound_comparisons`)."""
    cfg = ctx.cfg
    planned, unmeasured, bounded = time_bound_comparisons(ctx)
    for profile in cfg.loaded_profiles:
        base = ctx.baseline.samples(profile)
        cand = ctx.candidate.samples(profile)
        if not base:
            continue
        if not cand:
            if profile not in bounded:  # the time bound's rate comparison says it
                unmeasured.append(_no_sample(ctx, profile))
            continue
        for metric in ("output_tps", "prompt_tps"):
            planned.append(
                Planned(
                    "higher",
                    partial(_throughput, metric, profile, cand, base, ctx.seed(profile, metric), ctx.cfg),
                )
            )
        planned.append(Planned("lower", partial(_ttft, profile, cand, base, ctx.cfg)))
    return planned, unmeasured


def _no_sample(ctx: GateContext, profile: str) -> Comparison:
    """A profile whose candidate runs were all cut short (or never ran): no throughput sample."""
    cut = ctx.candidate.repeats(profile)
    if not cut:
        return missing("loaded", profile, "candidate")
    runs = ", ".join(f"r{rep.summary.repeat}" for rep in cut)
    lost = lost_how(ctx.candidate)
    why = f"the server {lost} during {runs}" if lost else f"{runs} cut short"
    return missing(
        "loaded",
        profile,
        "candidate",
        f"{profile}: no throughput sample ({why}; a run cut short is not a sample)",
    )


def _throughput(  # noqa: PLR0917 (bound with functools.partial; the last argument is the level)
    metric: str,
    profile: str,
    cand: list[Repeat],
    base: list[Repeat],
    seed: int,
    cfg: GatesConfig,
    confidence: float,
) -> Measured:
    return throughput(
        metric,
        profile,
        cand,
        base,
        confidence=confidence,
        resamples=cfg.bootstrap_resamples,
        seed=seed,
        judge=lambda e: judge_requirement(e, "higher", cfg.throughput_tolerance),
    )


def _ttft(
    profile: str, cand: list[Repeat], base: list[Repeat], cfg: GatesConfig, confidence: float
) -> Measured | None:
    return latency(
        "ttft_p50",
        profile,
        cand,
        base,
        ttft_value,
        confidence=confidence,
        judge=lambda e: judge_requirement(e, "lower", cfg.latency_tolerance),
        label=f"{profile} median TTFT",
        client_lag=True,
        lag_limits=(1 + cfg.latency_tolerance,),
        lag_confidence=cfg.confidence,
    )


def loaded_measurements(ctx: GateContext) -> tuple[list[Measured], list[Comparison]]:
    """Every loaded comparison that could be measured, Holm-adjusted as one family, and the ones that
    could not."""
    planned, unmeasured = loaded_plans(ctx)
    return requirement_family(planned, ctx.cfg.confidence), unmeasured


@register
class Concurrency(Gate):
    """Loaded throughput within tolerance of the baseline, loaded median TTFT not worse."""

    name = "concurrency"
    order = 10
    requirement = "no material concurrency regression"
    failure = "concurrency regression"

    def evaluate(self, ctx: GateContext) -> GateResult:
        measured, unmeasured = loaded_measurements(ctx)
        comparisons = [m.comparison for m in measured] + unmeasured
        status = overall_status([c.status for c in comparisons])
        evidence: list[Evidence] = []
        for m in measured:
            if m.comparison.status != "pass":
                evidence.extend(e for e in m.evidence if e not in evidence)
        deciding = next((c for c in comparisons if c.status == status), None)
        if status == "not_run":
            message = (
                "no loaded profile measured for the baseline "
                f"(gates.loaded_profiles = {ctx.cfg.loaded_profiles})"
            )
        elif status == "pass":
            worst = min(
                (m for m in measured if m.comparison.unit == "tok/s"),
                key=lambda m: m.estimate.ratio,
                default=None,
            )
            message = "within tolerance on every loaded profile" + (
                f" (lowest: {worst.comparison.message})" if worst else ""
            )
        else:
            listed = "; ".join(c.message for c in comparisons if c.status == status)
            message = listed if status == "fail" else f"unsettled: {listed}"
        tolerance = ctx.cfg.throughput_tolerance
        return GateResult(
            gate=self.name,
            role=self.role,
            status=status,
            observed=deciding.ratio if deciding else None,
            threshold=deciding.threshold if deciding else 1 - tolerance,
            baseline=1.0,
            interval=deciding.interval if deciding else None,
            unit="ratio",
            message=message,
            evidence=evidence,
            comparisons=comparisons,
            more_repeats=max_more(comparisons) if status == "inconclusive" else None,
            not_applicable=ctx.not_asked(ctx.cfg.loaded_profiles) if status == "not_run" else "",
        )
