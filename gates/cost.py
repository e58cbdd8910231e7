"""Cost per token: $ per million output tokens on each loaded profile, against the baseline's or a budget.

Pipeline position: reads each run's output tokens/s (its summary), its energy (``run.json``'s ``energy``)
and the host's prices recorded with the launch (``run.json``'s ``pricing``), through
:func:`contracts.cost.run_usd_per_mtok`. Two optional bounds (``gates.cost``): ``tolerance`` compares the
candidate's runs with the baseline's by the requirement rule (worse beyond the tolerance and beyond noise
fails: :data:`gates.compare.REQUIREMENT_RULES`); ``max_usd_per_mtok`` is a budget (fails when the
candidate's runs lie above it beyond noise). Each comparison is guarded as the throughput comparison is
(:mod:`gates.run_ratio`: a minority of slow runs set aside, the single-run rule, one run against one run
deciding only beyond 4x), and every comparison of the gate, over every loaded profile, is one family
under Holm's procedure (:func:`gates.compare.requirement_family`). Without a price
(``host.gpu_hour_price``) or without a bound the gate is not applicable by design, and says the figures;
a host that prices power (``host.power_price_kwh``) without a run's energy reading is a gate that could
not run (``not_run``: the verdict is INCOMPLETE, naming the host). Why its own test rather than the
concurrency gate's tokens/s: docs/accuracy-and-cost.md.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from functools import partial

from contracts.cost import run_usd_per_mtok, slo_point_costs, total_watts
from contracts.layout import repeat_name
from contracts.metrics import fmt_ratio
from contracts.sweepdir import Repeat, Results
from contracts.verdicts import Comparison, Evidence, GateResult
from gates.compare import (
    Measured,
    Planned,
    estimated,
    fmt_interval,
    judge_requirement,
    missing,
    overall_status,
    requirement_family,
    summary_evidence,
)
from gates.registry import Gate, GateContext, register
from gates.run_ratio import RunValues, bound_ratio, guarded_ratio, without_slow_runs

UNIT = "$/Mtok"
AT_SLO = " at the SLO capacity"


def _fmt(value: float) -> str:
    return f"{value:.3g} {UNIT}"


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
            input_tps=rep.summary.prompt_tps,
        )
        for rep in results.samples(profile)
    ]


def unmetered(results: Results, profile: str) -> list[Repeat]:
    """The runs of ``profile`` that ran to their end without the energy reading the host's priced power
    needs (``host.power_price_kwh`` set: their $/Mtok is unknown, not the GPU-hours alone)."""
    run = results.run
    if run is None or run.pricing is None or run.pricing.power_price_kwh is None:
        return []
    return [
        rep
        for rep in results.samples(profile)
        if total_watts(run.energy.get(repeat_name(profile, rep.summary.repeat))) is None
    ]


def side_costs(results: Results, profile: str, side: str) -> RunValues | None:
    """Each finished run's $/Mtok with its name (``r1``), the runs whose cost is known; None without one."""
    run = results.run
    if run is None or run.pricing is None:
        return None
    known = [
        (f"r{rep.summary.repeat}", cost)
        for rep in results.samples(profile)
        if (
            cost := run_usd_per_mtok(
                run.pricing,
                rep.summary.output_tps,
                run.energy.get(repeat_name(profile, rep.summary.repeat)),
                input_tps=rep.summary.prompt_tps,
            )
        )
        is not None
    ]
    if not known:
        return None
    return RunValues(side, tuple(r for r, _ in known), tuple(c for _, c in known))


def slo_costs(results: Results, profile: str, side: str) -> RunValues | None:
    """$/Mtok of each run of the capacity search at the capacity the SLO allows on ``profile`` (the level
    that held, its runs that met the SLO), named ``12 req/s a1``; None without the host's prices, a
    capacity search of ``profile``, a level that held, or the energy a priced power needs."""
    run, capacity = results.run, results.capacity
    if run is None or run.pricing is None or capacity is None or capacity.profile != profile:
        return None
    reps = results.samples(profile)
    watts = [
        w for rep in reps if (w := total_watts(run.energy.get(repeat_name(profile, rep.summary.repeat))))
    ]
    ratios = [rep.summary.prompt_tps / rep.summary.output_tps for rep in reps if rep.summary.output_tps > 0]
    per_output = statistics.median(ratios) if ratios else 0.0
    points = slo_point_costs(run.pricing, capacity, watts, input_per_output=per_output)
    if not points:
        return None
    return RunValues(side, tuple(n for n, _ in points), tuple(c for _, c in points))


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


def _notes(*notes: str) -> str:
    return "".join(f"; {n}" for n in notes if n)


def against_baseline(  # noqa: PLR0917 (bound with functools.partial; the last argument is the level)
    profile: str,
    cand: RunValues,
    base: RunValues,
    tolerance: float,
    evidence: list[Evidence],
    confidence: float,
    *,
    at_slo: bool = False,
) -> Measured:
    """The candidate's $/Mtok against the baseline's on ``profile`` at ``confidence`` (a Holm step's);
    ``at_slo``: at the capacity the SLO allows (the capacity search's runs there), not the fixed load."""
    c, c_note = without_slow_runs(cand, "higher", _fmt)
    b, b_note = without_slow_runs(base, "higher", _fmt)
    est = guarded_ratio(c.values, b.values, confidence=confidence, statistic=UNIT)
    c_val, b_val = _mean(c.values), _mean(b.values)
    comparison = estimated(
        est,
        lambda e: judge_requirement(e, "lower", tolerance),
        metric="usd_per_mtok_at_slo" if at_slo else "usd_per_mtok",
        profile=profile,
        values=(c_val, b_val),
        counts=(len(c.values), len(b.values)),
        unit=UNIT,
        message=f"{profile}{AT_SLO if at_slo else ''} {_fmt(c_val)} vs {_fmt(b_val)} "
        f"({fmt_ratio(est.ratio)}, {fmt_interval(est)}; {len(c.values)} vs {len(b.values)} runs"
        f"{_notes(est.note, c_note, b_note)})",
    )
    return Measured(comparison, est, evidence)


def against_budget(
    profile: str,
    cand: RunValues,
    budget: float,
    evidence: list[Evidence],
    confidence: float,
    *,
    at_slo: bool = False,
) -> Measured:
    """The candidate's $/Mtok on ``profile`` against the budget at ``confidence`` (a Holm step's)."""
    c, c_note = without_slow_runs(cand, "higher", _fmt)
    est = bound_ratio(c.values, budget, confidence=confidence, statistic=UNIT)
    level = f"{est.confidence:.1%}".replace(".0%", "%")
    interval = f"{level} CI [{est.low * budget:.3g}, {est.high * budget:.3g}]"
    comparison = estimated(
        est,
        lambda e: judge_requirement(e, "lower", 0.0),
        metric="usd_per_mtok_at_slo_budget" if at_slo else "usd_per_mtok_budget",
        profile=profile,
        values=(_mean(c.values), budget),
        counts=(len(c.values), 0),
        unit=UNIT,
        message=f"{profile}{AT_SLO if at_slo else ''} {_fmt(_mean(c.values))} against the budget "
        f"{budget:.3g} {UNIT} ({interval}; "
        f"{len(c.values)} runs{_notes(est.note, c_note)})",
    )
    return Measured(comparison, est, evidence)


def unpriced_energy(ctx: GateContext, profiles: Sequence[str]) -> tuple[str, str] | None:
    """(what is missing, naming the host; the run file of the launch without it) when a host that prices
    power has no energy reading for a run the gate needs (the candidate's; the baseline's too with a
    tolerance); None when nothing is missing."""
    sides = [("candidate", ctx.candidate)]
    if ctx.cfg.cost.tolerance is not None:
        sides.append(("baseline", ctx.baseline))
    parts: list[str] = []
    first_file = ""
    for side, results in sides:
        cut = [(p, rep) for p in profiles for rep in unmetered(results, p)]
        run = results.run
        if not cut or run is None or run.pricing is None:  # unmetered: power priced, so neither is None
            continue
        first_file = first_file or results.run_file
        energy = run.energy.get(repeat_name(cut[0][0], cut[0][1].summary.repeat))
        why = (energy.reason if energy is not None else None) or "no energy record in run.json"
        listed = ", ".join(f"{p} r{rep.summary.repeat}" for p, rep in cut)
        parts.append(
            f"host {run.host!r} prices power (host.power_price_kwh = {run.pricing.power_price_kwh:g} $/kWh) "
            f"but the {side} {results.name!r} has no energy reading for {listed} ({why})"
        )
    if not parts:
        return None
    return (
        "; ".join(parts) + ": $/Mtok unknown without its energy part; measure the GPUs' energy on that host "
        "(NVML), or set host.power_price_kwh: null to price the GPU-hours only",
        first_file,
    )


@register
class Cost(Gate):
    """$ per million output tokens not worse than the baseline's beyond tolerance and noise, or within a
    budget (``gates.cost``)."""

    name = "cost"
    order = 45
    requirement = "cost per million output tokens not worse than the baseline's (or within the budget)"
    failure = "cost per token"

    def _not_run(self, message: str, not_applicable: str, evidence: Sequence[Evidence] = ()) -> GateResult:
        return GateResult(
            gate=self.name,
            failure=self.failure,
            role=self.role,
            status="not_run",
            unit=UNIT,
            message=message,
            not_applicable=not_applicable,
            evidence=list(evidence),
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
        planned: list[Planned] = []
        unmeasured: list[Comparison] = []
        for profile in profiles:
            plans, gaps = self._plans(ctx, profile)
            planned += plans
            unmeasured += gaps
        measured = requirement_family(planned, ctx.cfg.confidence)
        comparisons = [m.comparison for m in measured] + unmeasured
        status = overall_status([c.status for c in comparisons])
        energy = unpriced_energy(ctx, profiles)
        if energy is not None and status != "fail":  # a failure decides; the rest could only add one
            message, run_file = energy
            return self._not_run(message, "", [Evidence(file=run_file)])
        deciding = [m for m in measured if m.comparison.status == status] or measured
        worst = max(deciding, key=lambda m: m.estimate.ratio, default=None)
        found = worst.comparison if worst else None
        message = "; ".join(c.message for c in comparisons)
        if energy is not None:
            message += f"; {energy[0]}"
        return GateResult(
            gate=self.name,
            failure=self.failure,
            role=self.role,
            status=status,
            observed=found.observed if found else None,
            threshold=found.threshold if found else None,
            baseline=found.baseline if found else None,
            interval=found.interval if found else None,
            unit=UNIT,
            message=message,
            evidence=[Evidence(file=ctx.candidate.run_file), *(worst.evidence if worst else [])],
            comparisons=comparisons,
        )

    def _plans(self, ctx: GateContext, profile: str) -> tuple[list[Planned], list[Comparison]]:
        """The comparisons of ``profile`` to measure (at a Holm step's level), and those that cannot be:
        none for a side without the energy its priced power needs (:func:`unpriced_energy` says it)."""
        bounds = ctx.cfg.cost
        if unmetered(ctx.candidate, profile):
            return [], []
        if ctx.candidate.capacity is not None and ctx.candidate.capacity.profile == profile:
            return self._slo_plans(ctx, profile)
        cand = side_costs(ctx.candidate, profile, "candidate")
        if cand is None:
            why = f"{profile}: $/Mtok not known for the candidate (no run ran to its end)"
            return [], [missing("usd_per_mtok", profile, "candidate", why)]
        plans: list[Planned] = []
        gaps: list[Comparison] = []
        cand_evidence = summary_evidence(ctx.candidate.samples(profile))
        if bounds.tolerance is not None and not unmetered(ctx.baseline, profile):
            base = side_costs(ctx.baseline, profile, "baseline")
            if base is None:
                gaps.append(missing("usd_per_mtok", profile, "baseline"))
            else:
                evidence = cand_evidence + summary_evidence(ctx.baseline.samples(profile))
                measure = partial(against_baseline, profile, cand, base, bounds.tolerance, evidence)
                plans.append(Planned("lower", measure))
        if bounds.max_usd_per_mtok is not None:
            measure = partial(against_budget, profile, cand, bounds.max_usd_per_mtok, cand_evidence)
            plans.append(Planned("lower", measure))
        return plans, gaps

    def _slo_plans(self, ctx: GateContext, profile: str) -> tuple[list[Planned], list[Comparison]]:
        """The capacity search's profile judged at the capacity the SLO allows: each side's runs at its own
        capacity (at a fixed load below both capacities every candidate reads the same tokens/s, 1.0x)."""
        bounds = ctx.cfg.cost
        cand = slo_costs(ctx.candidate, profile, "candidate")
        if cand is None:
            why = f"{profile}: $/Mtok at the SLO not known for the candidate (no level held the SLO)"
            return [], [missing("usd_per_mtok_at_slo", profile, "candidate", why)]
        plans: list[Planned] = []
        gaps: list[Comparison] = []
        evidence = [Evidence(file=ctx.candidate.run_file)]
        if bounds.tolerance is not None:
            base = slo_costs(ctx.baseline, profile, "baseline")
            if base is None:
                gaps.append(missing("usd_per_mtok_at_slo", profile, "baseline"))
            else:
                measure = partial(
                    against_baseline, profile, cand, base, bounds.tolerance, evidence, at_slo=True
                )
                plans.append(Planned("lower", measure))
        if bounds.max_usd_per_mtok is not None:
            measure = partial(against_budget, profile, cand, bounds.max_usd_per_mtok, evidence, at_slo=True)
            plans.append(Planned("lower", measure))
        return plans, gaps
