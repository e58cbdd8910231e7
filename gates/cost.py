"""Cost per token: $ per million output tokens on each loaded profile, against the baseline's or a budget.

Pipeline position: reads each run's output tokens/s (its summary), its energy (``run.json``'s ``energy``)
and the host's prices recorded with the launch (``run.json``'s ``pricing``), through
:func:`contracts.cost.run_usd_per_mtok`. Two optional bounds (``gates.cost``): ``tolerance`` compares the
candidate's runs with the baseline's by the requirement rule (worse beyond the tolerance and beyond noise
fails: :data:`gates.compare.REQUIREMENT_RULES`, the runs' log-scale t-interval); ``max_usd_per_mtok`` is a
budget (fails when the interval of the candidate's runs lies above it). Without a price
(``host.gpu_hour_price``) or without a bound the gate is not applicable by design, and says the figures.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from scipy.stats import t as student_t

from contracts.cost import run_usd_per_mtok
from contracts.layout import repeat_name
from contracts.metrics import fmt_ratio
from contracts.sweepdir import Results
from contracts.verdicts import Comparison, Evidence, GateResult
from gates.compare import estimated, judge_requirement, missing, overall_status, summary_evidence
from gates.registry import Gate, GateContext, register
from gates.stats import RatioEstimate, run_level_ratio

UNIT = "$/Mtok"


def run_costs(results: Results, profile: str) -> list[float | None] | None:
    """$/Mtok of each run of ``profile`` that ran to its end; None without the host's prices in run.json.
    A run whose cost is unknown (power priced, energy not measured) is None."""
    run = results.run
    if run is None or run.pricing is None:
        return None
    return [
        run_usd_per_mtok(
            run.pricing,
            rep.summary.output_tps,
            run.energy.get(repeat_name(profile, rep.summary.repeat)),
        )
        for rep in results.samples(profile)
    ]


def budget_estimate(costs: Sequence[float], budget: float, confidence: float) -> RatioEstimate:
    """The runs' geometric-mean cost over ``budget``, with a t-interval over the runs' log costs (one run:
    unbounded, its noise not measured)."""
    logs = [math.log(c) for c in costs]
    mean = statistics.fmean(logs)
    n = len(logs)
    if n < 2:
        low, high, note = 0.0, math.inf, "1 run: run-to-run noise not measured"
    else:
        half = float(student_t.ppf(0.5 + confidence / 2, n - 1)) * statistics.stdev(logs) / math.sqrt(n)
        low, high, note = math.exp(mean - half) / budget, math.exp(mean + half) / budget, ""
    return RatioEstimate(
        ratio=math.exp(mean) / budget,
        low=low,
        high=high,
        confidence=confidence,
        method="t-interval over the runs' log $/Mtok",
        n_candidate=n,
        n_baseline=0,
        repeats=n,
        note=note,
    )


def _mean(values: Sequence[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def _known(costs: list[float | None] | None) -> list[float] | None:
    if not costs or any(c is None for c in costs):
        return None
    return [c for c in costs if c is not None]


def cost_figures(ctx: GateContext, profiles: Sequence[str]) -> str:
    """The loaded profiles' $/Mtok, candidate vs baseline, for a message; "" when none is known."""
    parts = []
    for profile in profiles:
        cand, base = _known(run_costs(ctx.candidate, profile)), _known(run_costs(ctx.baseline, profile))
        if cand and base:
            parts.append(f"{profile} {_mean(cand):.3g} vs {_mean(base):.3g} {UNIT}")
    return "; ".join(parts)


@register
class Cost(Gate):
    """$ per million output tokens not worse than the baseline's beyond tolerance and noise, or within a
    budget (``gates.cost``)."""

    name = "cost"
    order = 45
    requirement = "cost per million output tokens not worse than the baseline's (or within the budget)"
    failure = "cost per token"

    def _not_run(self, message: str, not_applicable: str) -> GateResult:
        return GateResult(
            gate=self.name,
            failure=self.failure,
            role=self.role,
            status="not_run",
            unit=UNIT,
            message=message,
            not_applicable=not_applicable,
        )

    def evaluate(self, ctx: GateContext) -> GateResult:
        bounds = ctx.cfg.cost
        loaded = list(ctx.cfg.loaded_profiles)
        profiles = [p for p in loaded if ctx.baseline.samples(p)]
        figures = cost_figures(ctx, profiles)
        shown = f" ({figures})" if figures else ""
        run = ctx.candidate.run
        if run is None or run.pricing is None:
            why = "no host.gpu_hour_price: no cost to judge"
            return self._not_run(why, why)
        if bounds.tolerance is None and bounds.max_usd_per_mtok is None:
            why = "no cost bound set (gates.cost.tolerance, gates.cost.max_usd_per_mtok)"
            return self._not_run(f"{why}: cost not judged{shown}", why)
        if not profiles:
            why = ctx.not_asked(loaded) or "the baseline has no loaded run to compare with"
            return self._not_run(why, ctx.not_asked(loaded))
        comparisons: list[Comparison] = []
        for profile in profiles:
            comparisons += self._profile(ctx, profile)
        status = overall_status([c.status for c in comparisons])
        worst = max(comparisons, key=lambda c: c.ratio if c.ratio is not None else -1.0)
        return GateResult(
            gate=self.name,
            failure=self.failure,
            role=self.role,
            status=status,
            observed=worst.observed,
            threshold=worst.threshold,
            baseline=worst.baseline,
            interval=worst.interval,
            unit=UNIT,
            message="; ".join(c.message for c in comparisons),
            evidence=[
                Evidence(file=ctx.candidate.run_file),
                *summary_evidence(ctx.candidate.samples(worst.profile)),
            ],
            comparisons=comparisons,
        )

    def _profile(self, ctx: GateContext, profile: str) -> list[Comparison]:
        bounds, confidence = ctx.cfg.cost, ctx.cfg.confidence
        cand = _known(run_costs(ctx.candidate, profile))
        if cand is None:
            return [
                missing(
                    "usd_per_mtok",
                    profile,
                    "candidate",
                    f"{profile}: $/Mtok not known for the candidate (no finished run, or power priced "
                    "without the run's energy)",
                )
            ]
        out: list[Comparison] = []
        if bounds.tolerance is not None:
            tolerance = bounds.tolerance
            base = _known(run_costs(ctx.baseline, profile))
            if base is None:
                out.append(missing("usd_per_mtok", profile, "baseline"))
            else:
                est = run_level_ratio(cand, base, confidence=confidence, statistic="mean")
                out.append(
                    estimated(
                        est,
                        lambda e: judge_requirement(e, "lower", tolerance),
                        metric="usd_per_mtok",
                        profile=profile,
                        values=(_mean(cand), _mean(base)),
                        counts=(len(cand), len(base)),
                        unit=UNIT,
                        message=f"{profile} {_mean(cand):.3g} vs {_mean(base):.3g} {UNIT} "
                        f"({fmt_ratio(est.ratio)}, {confidence:.0%} CI [{fmt_ratio(est.low)}, "
                        f"{fmt_ratio(est.high)}]; {len(cand)} vs {len(base)} runs)",
                    )
                )
        if bounds.max_usd_per_mtok is not None:
            budget = bounds.max_usd_per_mtok
            est = budget_estimate(cand, budget, confidence)
            bounds_text = (
                f"{confidence:.0%} CI [{est.low * budget:.3g}, {est.high * budget:.3g}]"
                if math.isfinite(est.high)
                else est.note
            )
            out.append(
                estimated(
                    est,
                    lambda e: judge_requirement(e, "lower", 0.0),
                    metric="usd_per_mtok_budget",
                    profile=profile,
                    values=(_mean(cand), budget),
                    counts=(len(cand), 0),
                    unit=UNIT,
                    message=f"{profile} {_mean(cand):.3g} {UNIT} against the budget {budget:.3g} "
                    f"({bounds_text}; {len(cand)} runs)",
                )
            )
        return out
