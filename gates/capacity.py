"""Capacity at the SLO not worse than the baseline's: the ratio of the capacity searches, with an interval.

Pipeline position: reads each side's ``capacity.json`` (:class:`~contracts.results.CapacityResult`,
written by the sweep's capacity search, :mod:`orchestrator.measure.capacity`), the baseline's opening
search and those of its interleaved blocks (each a fresh launch). Every measured run gives a level and its
SLO margin (worst threshold / observed percentile; >= 1 held). Each launch's capacity is where a
least-squares fit of ``log margin = a + b log level`` over its runs near the boundary crosses 1, never
beyond the levels it tried; a side's launches are averaged, and the ratio's interval is a residual
bootstrap of the fits with the launch-to-launch spread added (:mod:`gates.capacity_interval`: assumed,
``gates.capacity_launch_sd``, unless the baseline's own launches spread more). The search's bracket
``[c_low / b_high, c_high / b_low]`` is reported beside it as the search's resolution.

The rule is every requirement's (:data:`gates.compare.REQUIREMENT_RULES`): a loss counts only when the
ratio is below ``1 - capacity_tolerance`` and the whole interval is below 1; below the tolerance within
the interval is inconclusive. A gain (:func:`gates.verdict.decide`, rule 4) needs the ratio up by
``min_gain`` and the interval at the capacity's share of the gain family (:mod:`gates.gain_family`) above 1.

A side whose search never crossed the SLO has a bound, not an estimate (held at every level tried: at
least the highest; at none: below the lowest). A ratio such a bound leaves open (both sides held at every
level tried; neither held at any) compares nothing: the gate could not run, and says which setting
measures it (a looser SLO, a lower ``capacity.min_level``; a higher ``capacity.max_level``). A baseline
that held the SLO at no level tried against a candidate that held somewhere is a gain with a one-sided
interval. The load client's dispatch lag, recorded per run, can only raise a margin: where, with it added
back, a side's capacity could move the ratio across ``1 - capacity_tolerance`` (or make a gain), the
comparison is undecidable (``client_lag``; the verdict is incomplete). Without a capacity search the gate
is not run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from contracts.metrics import capacity_bound, excludes_one, fmt_bounds, fmt_capacity, fmt_ratio
from contracts.results import CapacityResult
from contracts.schema import GatesConfig
from contracts.verdicts import Comparison, Evidence, GateResult, GateStatus
from gates.capacity_interval import (
    BOOTSTRAP,
    FIT_BAND,
    FIT_MIN_LEVELS,
    CapacityFit,
    LaunchSpread,
    SideEstimate,
    capacity_fit,
    lag_moved_levels,
    launch_draws,
    launch_estimate,
    launch_spread,
    ratio_interval,
    side_estimate,
    without_lag,
)
from gates.gain_family import capacity_confidence
from gates.lag import straddled
from gates.registry import REGISTRY, Gate, GateContext, register

__all__ = [
    "BOOTSTRAP",
    "FIT_BAND",
    "FIT_MIN_LEVELS",
    "CapacityFit",
    "before_search",
    "capacity_fit",
    "capacity_ratio",
    "compare_capacities",
    "fitted_ratio",
    "judge_capacity",
]


def before_search(cfg: GatesConfig) -> GatesConfig:
    """The gates an adaptive look runs: every enabled one but capacity. A candidate's capacity search runs
    after its repeats (:func:`orchestrator.measure.candidate.run_candidate`), so at a look the gate could
    only say "not run", which made every look incomplete and stopped the loop at its first look."""
    names = [name for name in (cfg.enabled or REGISTRY) if name != "capacity"]
    return replace(cfg, enabled=names)


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


def fitted_ratio(
    cand: CapacityFit, base: CapacityFit, confidence: float
) -> tuple[float, tuple[float, float]]:
    """Candidate / baseline capacity and its percentile interval over both sides' bootstrap replicates
    (one launch each, no launch spread, the fits as they are).

    A replicate whose margin stopped falling with load, on either side, leaves that replicate's ratio
    unknown: it counts as 0 for the lower end and as unbounded for the upper, never as that side's best
    case (an unbounded candidate) nor as a ratio of 1: it can only widen the interval."""

    def side(fit: CapacityFit) -> SideEstimate:
        unknown = ~np.isfinite(fit.replicates)
        return SideEstimate(
            math.log(fit.capacity),
            np.where(unknown, -np.inf, fit.replicates),
            np.where(unknown, np.inf, fit.replicates),
        )

    n = min(len(cand.replicates), len(base.replicates))
    return cand.capacity / base.capacity, ratio_interval(side(cand), side(base), np.zeros(n), confidence)


def judge_capacity(ratio: float, interval: tuple[float, float], tolerance: float) -> GateStatus:
    """fail: below 1 - tolerance with the interval below 1; inconclusive: below it within the bracket."""
    if ratio >= 1 - tolerance:
        return "pass"
    return "fail" if excludes_one(interval, "below") else "inconclusive"


@dataclass(frozen=True)
class CapacityJudgement:
    """The capacity comparison: its status, figures and words (``status`` ``not_run``: nothing compared)."""

    status: GateStatus
    message: str
    ratio: float | None = None
    interval: tuple[float, float] | None = None
    gain_interval: tuple[float, float] | None = None  # at the capacity's share of the gain family
    method: str = ""
    lag_s: float | None = None  # set when the client's lag leaves the comparison undecidable


def _range(result: CapacityResult) -> tuple[float, float]:
    levels = [p.level for p in result.points] + [lv for lv in (result.low, result.high) if lv is not None]
    levels = levels or [0.0]
    return min(levels), max(levels)


def _value(result: CapacityResult) -> str:
    """A side's capacity in the message: ``128 concurrent``, ``≥ 16 concurrent`` (held at every level
    tried, 16 the highest), ``< 2 concurrent`` (held at none, 2 the lowest)."""
    if result.high is not None and result.low is not None:
        return f"{result.low:g} {result.unit}"
    return fmt_capacity(result.low, result.high, result.unit, _range(result)[0])


def _side_text(name: str, result: CapacityResult, est: SideEstimate) -> str:
    lowest, highest = _range(result)
    if est.below:
        return f"{name} held the SLO at no level tried (lowest {lowest:g} {result.unit})"
    if est.at_least:
        return f"{name} held the SLO at every level tried (up to {highest:g} {result.unit})"
    return ""


def _not_comparable(
    sides: tuple[CapacityResult, CapacityResult], c: SideEstimate, b: SideEstimate, ratio: float, bound: str
) -> str:
    """Why the bounds compare nothing, and the setting that measures it."""
    cand, base = sides
    said = [t for t in (_side_text("the baseline", base, b), _side_text("the candidate", cand, c)) if t]
    fixes = []
    if b.below or c.below:
        fixes.append(
            "a looser SLO or a lower capacity.min_level (the lowest level the search may try) measures "
            "where the SLO holds"
        )
    if b.at_least or c.at_least:
        fixes.append(
            "a higher capacity.max_level, or more capacity.max_points (capacity.json's notes say which ran "
            "out), measures where it stops holding"
        )
    what = (
        f"the ratio is {'at least' if bound == '≥' else 'at most'} {fmt_ratio(ratio)}"
        if bound in ("≥", "≤")
        else "the ratio has no bound"
    )
    return (
        f"{base.profile} capacity at SLO {base.slo} ({base.slo_text}): {'; '.join(said)}: {what}, which "
        f"decides nothing: {'; '.join(fixes)}"
    )


def _launch_text(
    spread: LaunchSpread, cand: SideEstimate, base: SideEstimate, unit: str, prior: float
) -> str:
    counts = f"{cand.count} vs {base.count} launch{'es' if max(cand.count, base.count) > 1 else ''}"
    if spread.measured is None:
        return f"launch-to-launch sd {prior:.0%} assumed (gates.capacity_launch_sd; {counts})"
    seen = ", ".join(f"{v:.4g}" for v in base.launches if base.count > 1) or ", ".join(
        f"{v:.4g}" for v in cand.launches
    )
    side = "the baseline's" if base.count > 1 else "the candidate's"
    if spread.beyond_prior:
        return (
            f"{side} launches measured {seen} {unit}: launch-to-launch spread {spread.measured:.0%}, beyond "
            f"the assumed {prior:.0%} and the fits' noise, so the interval uses {spread.sd:.0%} ({counts})"
        )
    return (
        f"launch-to-launch sd {prior:.0%} assumed (gates.capacity_launch_sd); {side} launches {seen} {unit} "
        f"(spread {spread.measured:.0%}) are within it and their fits' noise ({counts})"
    )


def _lag_factor(launches: Sequence[CapacityResult], est: SideEstimate, seeds: Sequence[int], n: int) -> float:
    """How far the client's lag could lower this side's capacity: (capacity with every run's lag added back
    to its margin) / capacity, at most 1; 0 when with the lag added back it held at no level tried."""
    undone = [without_lag(r) for r in launches]
    if all(u is None for u in undone):
        return 1.0
    lagged = side_estimate(
        [
            launch_estimate(u or r, seed=s, resamples=n)
            for u, r, s in zip(undone, launches, seeds, strict=True)
        ]
    )
    if lagged.below and not est.below:
        return 0.0
    return min(1.0, math.exp(lagged.log_point - est.log_point))


def compare_capacities(
    cands: Sequence[CapacityResult],
    bases: Sequence[CapacityResult],
    cfg: GatesConfig,
    seed: Callable[..., int],
) -> CapacityJudgement:
    """The capacity comparison of a candidate's launches against the baseline's (pure; ``seed(*parts)``
    gives each bootstrap's seed)."""
    n = cfg.bootstrap_resamples
    c_seeds = [seed("candidate", str(k)) for k in range(len(cands))]
    b_seeds = [seed("baseline", str(k)) for k in range(len(bases))]
    c = side_estimate([launch_estimate(r, seed=s, resamples=n) for r, s in zip(cands, c_seeds, strict=True)])
    b = side_estimate([launch_estimate(r, seed=s, resamples=n) for r, s in zip(bases, b_seeds, strict=True)])
    cand, base = cands[0], bases[0]
    tolerance, gain = cfg.capacity_tolerance, cfg.min_gain
    ratio = math.exp(c.log_point - b.log_point) if math.isfinite(b.log_point) else math.inf
    bound = capacity_bound(cands, bases)  # how the point bounds the true ratio
    if bound == "?" or (bound == "≥" and ratio < 1 - tolerance) or (bound == "≤" and ratio >= 1 - tolerance):
        return CapacityJudgement("not_run", _not_comparable((cand, base), c, b, ratio, bound))
    spread = launch_spread([c, b], cfg.capacity_launch_sd)
    draws = launch_draws(c, b, spread.sd, seed=seed("launch"))
    interval = ratio_interval(c, b, draws, cfg.confidence)
    share = capacity_confidence(cfg)
    gain_interval = ratio_interval(c, b, draws, share)
    status = judge_capacity(ratio, interval, tolerance)
    fitted = c.fitted and b.fitted
    method = (
        f"log-margin fit near the boundary ({c.runs} vs {b.runs} runs at {c.levels} vs {b.levels} levels), "
        f"residual bootstrap {cfg.confidence:.0%} interval, never beyond a level tried"
        if fitted
        else "capacity search brackets: [c_low / b_high, c_high / b_low] (too few levels near the boundary "
        "to fit)"
    )
    method += f"; {_launch_text(spread, c, b, base.unit, cfg.capacity_launch_sd)}"
    bracket = capacity_ratio(cand, base)
    values = f"{_value(cand)} vs {_value(base)}"
    if fitted and not (c.at_least or c.below or b.at_least or b.below):
        values += f" (fitted {c.capacity:.4g} vs {b.capacity:.4g} {base.unit})"
    if b.below:
        values += " (the baseline held the SLO at no level tried: a one-sided interval)"
    shown = (f"{bound} " if bound else "") + fmt_ratio(ratio)
    brackets = f"; the search's brackets{fmt_bounds(bracket[1])}" if bracket else ""
    text = (
        f"{base.profile} capacity at SLO {base.slo} {values}, {shown}{fmt_bounds(interval)} ({method}"
        f"{brackets}, resolution {base.resolution:.0%})"
    )
    is_gain = ratio >= 1 + gain and excludes_one(gain_interval, "above") and bound in ("", "≥")
    if is_gain:
        text += (
            f"; up beyond noise at the gain family's capacity share ({share:.1%}:{fmt_bounds(gain_interval)})"
        )
    # The client's lag can only raise a margin: with it added back, each side's capacity could be lower.
    f_c = _lag_factor(cands, c, c_seeds, n)
    f_b = _lag_factor(bases, b, b_seeds, n)
    lag_bounds = (ratio * f_c, ratio / f_b if f_b > 0 else math.inf)
    crosses = straddled(lag_bounds, [1 - tolerance])
    lag_gain = ratio * f_c >= 1 + gain and gain_interval[0] * f_c > 1
    if crosses is not None or (is_gain and not lag_gain):
        moved = [m for r in (*cands, *bases) for m in lag_moved_levels(r)]
        lag = max((p.client_lag_s or 0.0 for r in (*cands, *bases) for p in r.points), default=0.0)
        levels = "; ".join(f"at {m[0]:g} the margin {m[1]:.3f} reads {m[2]:.3f}" for m in moved[:3])
        limit = f"across {fmt_ratio(crosses)}" if crosses is not None else f"below the {gain:.0%} gain"
        text += (
            f"; with each request's own send lateness added back to its run's latencies "
            f"({levels or 'the fit moves'}), the ratio lies anywhere in "
            f"[{fmt_ratio(lag_bounds[0])}, {fmt_ratio(lag_bounds[1])}], {limit}: "
            "requests sent late meet a shorter queue, so the client may have made or hidden the difference; "
            "more repeats will not settle it, a less loaded client will"
        )
        return CapacityJudgement("inconclusive", text, ratio, interval, gain_interval, method, lag_s=lag)
    return CapacityJudgement(status, text, ratio, interval, gain_interval, method)


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
            # Neither side searched: capacity.profile is not set, by design (a configured search without
            # its capacity.json makes the verdict incomplete: gates.evidence, naming the file). One side
            # searched: the other's search did not finish, and the gate could not run.
            return GateResult(
                gate=self.name,
                failure=self.failure,
                role=self.role,
                status="not_run",
                message=f"no capacity search recorded for {missing} (capacity.json): capacity.profile is "
                "not set, or the search did not finish",
                not_applicable="no capacity search (capacity.profile is not set)"
                if base is None and cand is None
                else "",
            )
        blocks = [b for b in ctx.baseline.blocks if b.capacity is not None]
        evidence = [Evidence(file=ctx.candidate.capacity_file), Evidence(file=ctx.baseline.capacity_file)]
        evidence += [Evidence(file=b.capacity_file) for b in blocks]
        bases = [base, *(b.capacity for b in blocks if b.capacity is not None)]
        # Searched once, after an adaptive candidate's looks: judged at the sweep's confidence, whatever
        # look the loop stopped at (the looks' shares are the latency family's: gates.gain_family).
        cfg = replace(ctx.cfg, confidence=ctx.sweep_confidence or ctx.cfg.confidence)
        judged = compare_capacities([cand], bases, cfg, lambda *parts: ctx.seed("capacity", *parts))
        if judged.status == "not_run":
            # Nothing measured compares: the verdict is incomplete, its gap naming the setting to change.
            return GateResult(
                gate=self.name,
                failure=self.failure,
                role=self.role,
                status="not_run",
                message=judged.message,
                evidence=evidence,
            )
        assert judged.ratio is not None
        comparison = Comparison(
            metric="capacity",
            profile=base.profile,
            status=judged.status,
            observed=cand.low,
            baseline=base.low,
            ratio=judged.ratio,
            interval=judged.interval,
            gain_interval=judged.gain_interval,
            threshold=1 - tolerance,
            unit=base.unit,
            method=judged.method,
            n_candidate=len(cand.points),
            n_baseline=sum(len(r.points) for r in bases),
            message=judged.message,
            undecidable="client_lag" if judged.lag_s is not None else None,
            client_lag_s=judged.lag_s,
        )
        return GateResult(
            gate=self.name,
            failure=self.failure,
            role=self.role,
            status=judged.status,
            observed=judged.ratio,
            threshold=1 - tolerance,
            baseline=1.0,
            interval=judged.interval,
            unit="ratio",
            message=judged.message,
            evidence=evidence if judged.status != "pass" else [],
            comparisons=[comparison],
        )
