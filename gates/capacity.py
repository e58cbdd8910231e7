"""Capacity at the SLO not worse than the baseline's: the ratio of the capacity searches, with an interval.

Pipeline position: reads each side's ``capacity.json`` (:class:`~contracts.results.CapacityResult`,
written by the sweep's capacity search, :mod:`orchestrator.measure.capacity`). Every measured run gives a
level
and its SLO margin (worst threshold / observed percentile; >= 1 held). Near the boundary (margins within
``FIT_BAND`` of 1) log margin falls about linearly in log load, so each side's capacity is estimated by a
least-squares fit of ``log margin = a + b log level`` where it crosses 1, and the ratio's interval is a
residual bootstrap of both fits (:func:`capacity_fit`, :func:`fitted_ratio`): it carries the runs' noise,
which the search's bracket ``[c_low / b_high, c_high / b_low]`` does not (it assumes every held or missed
call was right). The bracket is still reported, as the search's resolution. Too few levels near the
boundary (fewer than 3, or margins that do not fall with load): the bracket is the interval, as before,
and the method says so. A loss counts only when the ratio is below ``1 - capacity_tolerance`` and the
whole interval is below 1 (the rule of every requirement, :data:`gates.compare.REQUIREMENT_RULES`); below
the tolerance within the interval is inconclusive. Without a capacity search the gate is not run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from contracts.metrics import excludes_one, fmt_bounds, fmt_ratio
from contracts.results import CapacityPoint, CapacityResult
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


#: Runs whose margin lies within this factor of 1 enter the fit (the boundary's neighbourhood).
FIT_BAND = 2.0
FIT_MIN_LEVELS = 3  # distinct levels the fit needs
BOOTSTRAP = 2000  # residual resamples per side


@dataclass(frozen=True)
class CapacityFit:
    """One side's capacity from its runs near the boundary: the fit and its bootstrap replicates."""

    capacity: float  # the level where the fitted margin crosses 1
    replicates: np.ndarray  # bootstrap capacities (log-scale), for the ratio's interval
    levels: int  # distinct levels fitted
    runs: int


def capacity_fit(points: list[CapacityPoint], *, seed: int, resamples: int = BOOTSTRAP) -> CapacityFit | None:
    """``log margin = a + b log level`` by least squares over the runs with margin in
    ``[1/FIT_BAND, FIT_BAND]``; capacity ``exp(-a / b)``; residual bootstrap for its spread. None when fewer
    than ``FIT_MIN_LEVELS`` levels are near the boundary or the margin does not fall with load.

    >>> pts = [CapacityPoint(level=x, attempt=1, summary_file="", met=100 / x >= 1, margin=100 / x,
    ...        attainment=1.0, goodput_rps=0.0, goodput_tps=0.0, output_tps=0.0, tps_per_user=None)
    ...        for x in (64, 91, 99, 108, 128)]
    >>> round(capacity_fit(pts, seed=0).capacity, 1)
    100.0
    """
    near = [p for p in points if p.level > 0 and p.margin > 0 and 1 / FIT_BAND <= p.margin <= FIT_BAND]
    if len({p.level for p in near}) < FIT_MIN_LEVELS:
        return None
    x = np.log(np.asarray([p.level for p in near], dtype=np.float64))
    y = np.log(np.asarray([p.margin for p in near], dtype=np.float64))
    design = np.column_stack([np.ones_like(x), x])
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    a, b = float(coef[0]), float(coef[1])
    if b >= 0:
        return None
    fitted = design @ coef
    residuals = (y - fitted) * math.sqrt(len(y) / max(len(y) - 2, 1))  # leverage-free inflation
    rng = np.random.default_rng(seed)
    draws = fitted[None, :] + rng.choice(residuals, size=(resamples, len(y)), replace=True)
    sol, *_ = np.linalg.lstsq(design, draws.T, rcond=None)
    slopes = sol[1]
    usable = slopes < 0
    logs = np.where(usable, -sol[0] / np.where(usable, slopes, -1.0), np.inf)
    return CapacityFit(math.exp(-a / b), logs, len({p.level for p in near}), len(near))


def fitted_ratio(
    cand: CapacityFit, base: CapacityFit, confidence: float
) -> tuple[float, tuple[float, float]]:
    """Candidate / baseline capacity and its percentile interval over both sides' bootstrap replicates.

    A replicate whose margin stopped falling with load counts as unbounded on its side (ratio infinite,
    or 0 on the baseline's). Where both sides' fits failed the ratio is unknown, not 1: such a replicate
    counts as 0 for the lower end and as unbounded for the upper, so it can only widen the interval."""
    with np.errstate(invalid="ignore"):  # inf - inf: both fits failed
        logs = cand.replicates - base.replicates
    unknown = np.isnan(logs)
    tail = (1 - confidence) / 2
    low = _quantile(np.where(unknown, -np.inf, logs), tail)
    high = _quantile(np.where(unknown, np.inf, logs), 1 - tail)
    return cand.capacity / base.capacity, (math.exp(low), math.exp(high))


def _quantile(values: np.ndarray, q: float) -> float:
    """numpy's default (linear) quantile, where an infinite neighbour gives an infinite quantile instead
    of NaN (numpy interpolates ``-inf + inf``).

    >>> _quantile(np.array([-np.inf, 1.0, 2.0, 3.0]), 0.5), _quantile(np.array([1.0, np.inf]), 0.5)
    (1.5, inf)
    """
    ordered = np.sort(values)
    at = q * (len(ordered) - 1)
    below, above = float(ordered[math.floor(at)]), float(ordered[math.ceil(at)])
    if below in (above, -math.inf):
        return below
    if above == math.inf:
        return above
    return below + (above - below) * (at - math.floor(at))


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
        ratio, bracket = estimate
        interval = bracket
        fits = (
            capacity_fit(cand.points, seed=ctx.seed("capacity", "candidate")),
            capacity_fit(base.points, seed=ctx.seed("capacity", "baseline")),
        )
        c_fit, b_fit = fits
        if c_fit is not None and b_fit is not None:
            ratio, interval = fitted_ratio(c_fit, b_fit, ctx.cfg.confidence)
            method = (
                f"log-margin fit near the boundary ({c_fit.runs} vs {b_fit.runs} runs at {c_fit.levels} vs "
                f"{b_fit.levels} levels), residual bootstrap {ctx.cfg.confidence:.0%} interval"
            )
            fitted = f" (fitted {c_fit.capacity:.4g} vs {b_fit.capacity:.4g} {base.unit})"
        else:
            method = (
                "capacity search brackets: [c_low / b_high, c_high / b_low] "
                "(too few levels near the boundary to fit)"
            )
            fitted = ""
        status = judge_capacity(ratio, interval, tolerance)
        text = (
            f"{base.profile} capacity at SLO {base.slo} {_value(cand)} vs {_value(base)}{fitted}, "
            f"{fmt_ratio(ratio)}{fmt_bounds(interval)} ({method}; the search's brackets"
            f"{fmt_bounds(bracket)}, resolution {base.resolution:.0%})"
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
            method=method,
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
