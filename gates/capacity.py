"""Capacity at the SLO not worse than the baseline's: the ratio of the capacity searches, with an interval.

Pipeline position: reads each side's ``capacity.json`` (:class:`~contracts.results.CapacityResult`,
written by the sweep's capacity search, :mod:`orchestrator.measure.capacity`). The true capacity lies in the
bracket ``[low, high)`` the search ended with (the highest level that held, the lowest that failed), so
the ratio candidate / baseline lies in ``[c_low / b_high, c_high / b_low]``: that is the interval, and it
carries the search's resolution and its noise repeats (docs/capacity.md). A loss counts only when the
ratio is below ``1 - capacity_tolerance`` and the whole interval is below 1 (the rule of every
requirement, :data:`gates.compare.REQUIREMENT_RULES`); below the tolerance within the bracket is
inconclusive. Without a capacity search the gate is not run.
"""

from __future__ import annotations

import math

from contracts.metrics import excludes_one, fmt_bounds, fmt_ratio
from contracts.results import CapacityResult
from contracts.verdicts import Comparison, Evidence, GateResult, GateStatus
from gates.registry import Gate, GateContext, register


def capacity_ratio(cand: CapacityResult, base: CapacityResult) -> tuple[float, tuple[float, float]] | None:
    """Candidate / baseline capacity and its interval from the two brackets; None when the baseline held
    the SLO at no level (nothing to compare against)."""
    if base.low is None or base.low <= 0:
        return None
    b_high = math.inf if base.high is None else base.high
    if cand.low is None:  # even the smallest level failed: the capacity is below it
        c_low, c_high = 0.0, min((p.level for p in cand.points), default=0.0)
    else:
        c_low = cand.low
        c_high = math.inf if cand.high is None else cand.high
    ratio = c_low / base.low
    return ratio, (c_low / b_high, c_high / base.low)


def judge_capacity(ratio: float, interval: tuple[float, float], tolerance: float) -> GateStatus:
    """fail: below 1 - tolerance with the interval below 1; inconclusive: below it within the bracket."""
    if ratio >= 1 - tolerance:
        return "pass"
    return "fail" if excludes_one(interval, "below") else "inconclusive"


def _value(result: CapacityResult) -> str:
    if result.low is None:
        return f"< {min((p.level for p in result.points), default=0):g} {result.unit}"
    if result.high is None:
        return f">= {result.low:g} {result.unit}"
    return f"{result.low:g} {result.unit}"


@register
class Capacity(Gate):
    """Capacity at the baseline's SLO within tolerance of the baseline's."""

    name = "capacity"
    order = 15
    requirement = "capacity at the SLO not worse than the baseline's"
    failure = "capacity at the SLO"

    def evaluate(self, ctx: GateContext) -> GateResult:
        base, cand = ctx.baseline.capacity, ctx.candidate.capacity
        tolerance = ctx.cfg.capacity_tolerance
        if base is None or cand is None:
            missing = "the baseline" if base is None else "the candidate"
            return GateResult(
                gate=self.name,
                failure=self.failure,
                role=self.role,
                status="not_run",
                message=f"no capacity search for {missing} (set capacity.profile to run one)",
            )
        evidence = [Evidence(file=ctx.candidate.capacity_file), Evidence(file=ctx.baseline.capacity_file)]
        estimate = capacity_ratio(cand, base)
        if estimate is None:
            return GateResult(
                gate=self.name,
                failure=self.failure,
                role=self.role,
                status="inconclusive",
                message=f"the baseline held SLO {base.slo} at no level tried: nothing to compare against",
                evidence=evidence,
            )
        ratio, interval = estimate
        status = judge_capacity(ratio, interval, tolerance)
        text = (
            f"{base.profile} capacity at SLO {base.slo} {_value(cand)} vs {_value(base)}, "
            f"{fmt_ratio(ratio)}{fmt_bounds(interval)} (search brackets, resolution {base.resolution:.0%})"
        )
        comparison = Comparison(
            metric="capacity",
            profile=base.profile,
            status=status,
            observed=cand.low,
            baseline=base.low,
            ratio=ratio,
            interval=interval,
            threshold=1 - tolerance,
            unit=base.unit,
            method="capacity search brackets: [c_low / b_high, c_high / b_low]",
            n_candidate=len(cand.points),
            n_baseline=len(base.points),
            message=text,
        )
        return GateResult(
            gate=self.name,
            failure=self.failure,
            role=self.role,
            status=status,
            observed=ratio,
            threshold=1 - tolerance,
            baseline=1.0,
            interval=interval,
            unit="ratio",
            message=text,
            evidence=evidence if status != "pass" else [],
            comparisons=[comparison],
        )
