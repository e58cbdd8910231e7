"""The capacity ratio and its interval: each side's capacity from its launches' fits, never beyond the levels
its searches tried, with the spread from launch to launch (pure).

Pipeline position: inside the gates; :mod:`gates.capacity` calls it with both sides' capacity searches
(``capacity.json``: a candidate's, the baseline's opening one and those of its interleaved blocks, each a
fresh launch of the same configuration).

**One launch** (:func:`launch_estimate`). The log-margin fit (:func:`gates.capacity.capacity_fit`) crosses
1 at the launch's capacity; its residual bootstrap gives replicates. Each replicate, and the point, is an
interval on the log capacity, ``(low, high)``, equal where nothing is censored:

- the fit never extrapolates beyond the levels the search tried: a fit or replicate beyond them is
  clipped to the highest (lowest) level tried; where the SLO held at the highest level tried (the search's
  bracket is open above) the capacity is "at least that level": the point is that level and every
  replicate is unbounded above; where it held at no level tried, "below the lowest": the point is that
  level and every replicate is unbounded below;
- a replicate whose margin stopped falling with load is **unknown**, on either side: it takes its launch's
  bracket from the search, ``(log low, log high)`` (unbounded where the bracket is open), at both ends of
  the ratio's interval, never that side's best case (:func:`gates.capacity.fitted_ratio`, without a
  search's bracket, counts it as ``(-inf, +inf)``);
- too few levels near the boundary to fit: the search's bracket ``[low, high)`` stands in (open ends as
  above).

**A side's launches** (:func:`side_estimate`) are averaged on the log scale (point and replicates).

**From launch to launch** (:func:`launch_spread`). A configuration's capacity moves between launches (the
engine's start, the host), which one search per side cannot see: each ratio replicate gets a draw
``N(0, sd^2 (1/n_c + 1/n_b))`` (n: launches averaged per side). ``sd`` is the configured prior
``gates.capacity_launch_sd`` (assumed, and the verdict says so), unless a side's own launches spread more
than the prior and their fits' noise allow (a chi-square test at 95%): then the measured spread is used.

**The ratio** (:func:`ratio_interval`): per replicate ``(c_low - b_high, c_high - b_low) + draw``; the lower
end of the interval is the lower quantile of the first, the upper end the upper quantile of the second.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from contracts.results import CapacityPoint, CapacityResult

#: Runs whose margin lies within this factor of 1 enter the fit (the boundary's neighbourhood).
FIT_BAND = 2.0
FIT_MIN_LEVELS = 3  # distinct levels the fit needs
BOOTSTRAP = 2000  # residual resamples per side
#: The level at which a launch spread larger than the prior allows is called measured (chi-square test).
SPREAD_TEST = 0.95


@dataclass(frozen=True)
class CapacityFit:
    """One side's capacity from its runs near the boundary: the fit and its bootstrap replicates."""

    capacity: float  # the level where the fitted margin crosses 1
    replicates: np.ndarray  # bootstrap capacities (log-scale); +inf where the margin stopped falling
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


@dataclass(frozen=True)
class SideEstimate:
    """One side's log capacity over its launches: the point and, per bootstrap replicate, its bounds."""

    log_point: float  # mean over launches of each launch's log capacity, within the levels it tried
    low: np.ndarray  # per replicate: lower bound of the log capacity (-inf: unbounded below)
    high: np.ndarray  # per replicate: upper bound (+inf: unbounded above)
    at_least: bool = False  # a launch held the SLO at the highest level it tried: the point is a floor
    below: bool = False  # a launch held the SLO at no level it tried: the point is a ceiling
    launches: tuple[float, ...] = ()  # each launch's capacity (within its levels), in measuring order
    censored: tuple[bool, ...] = ()  # per launch: its capacity is a floor or a ceiling, not an estimate
    fit_var: float = 0.0  # mean over the launches of their replicates' variance (the fits' own noise)
    fitted: bool = True  # every launch had a fit (else its search's bracket stood in)
    runs: int = 0
    levels: int = 0

    @property
    def count(self) -> int:
        return max(len(self.launches), 1)

    @property
    def capacity(self) -> float:
        return math.exp(self.log_point)


def _open(result: CapacityResult) -> tuple[bool, bool]:
    """(open above: the SLO held at the highest level tried; open below: it held at no level tried)."""
    return result.low is not None and result.high is None, result.low is None


def launch_estimate(result: CapacityResult, *, seed: int, resamples: int = BOOTSTRAP) -> SideEstimate:
    """One launch's capacity: the fit's crossing within the levels tried, else the search's bracket.

    >>> pts = [CapacityPoint(level=x, attempt=1, summary_file="", met=True, margin=1.2 * 16 / x,
    ...        attainment=1.0, goodput_rps=0.0, goodput_tps=0.0, output_tps=0.0, tps_per_user=None)
    ...        for x in (8, 10, 12, 16)]
    >>> r = CapacityResult(candidate="c", profile="p", mode="concurrency", unit="concurrent", slo="s",
    ...                    slo_text="", capacity=16, low=16, high=None, resolution=0.1, gpus=8, points=pts)
    >>> est = launch_estimate(r, seed=0)  # the fit crosses 1 at 19.2, never tried: at least 16
    >>> round(est.capacity, 6), est.at_least, est.fitted, float(est.high.min())
    (16.0, True, True, inf)
    """
    # The levels tried: every run's, and the bracket's ends (a search's answer names levels it ran).
    levels = [p.level for p in result.points if p.level > 0]
    levels += [lv for lv in (result.low, result.high) if lv is not None and lv > 0]
    if not levels:
        return SideEstimate(-math.inf, np.array([-math.inf]), np.array([math.inf]), fitted=False)
    lo_level, hi_level = math.log(min(levels)), math.log(max(levels))
    open_above, open_below = _open(result)
    fit = capacity_fit(result.points, seed=seed, resamples=resamples)
    if fit is None:
        if result.low is None:
            point, low, high = lo_level, -math.inf, lo_level
        else:
            point = low = math.log(result.low)
            high = math.inf if result.high is None else math.log(result.high)
        return SideEstimate(
            point,
            np.full(resamples, low),
            np.full(resamples, high),
            at_least=open_above,
            below=open_below,
            launches=(math.exp(point),),
            censored=(open_above or open_below,),
            fitted=False,
            runs=len(result.points),
            levels=len(set(levels)),
        )
    # Held at the highest level tried: the capacity is at least that level, whatever the line says above
    # it (no extrapolation) or below it (the fit's replicates stay as the lower bounds: a lucky call at the
    # top is noise the interval keeps); held at none: below the lowest, likewise.
    point = min(max(math.log(fit.capacity), lo_level), hi_level)
    point = hi_level if open_above else lo_level if open_below else point
    reps = fit.replicates
    unknown = ~np.isfinite(reps)
    clipped = np.clip(np.where(unknown, 0.0, reps), lo_level, hi_level)
    # A replicate whose fit failed is unknown within what the search measured: its bracket [low, high).
    bracket_low = -math.inf if result.low is None else math.log(result.low)
    bracket_high = math.inf if result.high is None else math.log(result.high)
    lows = np.where(open_below, -np.inf, np.where(unknown, bracket_low, clipped))
    highs = np.where(open_above, np.inf, np.where(unknown, bracket_high, clipped))
    finite = clipped[~unknown]  # the fit's own noise, within the levels tried
    return SideEstimate(
        point,
        lows,
        highs,
        at_least=open_above,
        below=open_below,
        launches=(math.exp(point),),
        censored=(open_above or open_below,),
        fit_var=float(np.var(finite)) if len(finite) > 1 else 0.0,
        runs=fit.runs,
        levels=fit.levels,
    )


def side_estimate(launches: Sequence[SideEstimate]) -> SideEstimate:
    """A side's launches averaged on the log scale (point and each replicate's bounds)."""
    if len(launches) == 1:
        return launches[0]
    n = min(len(e.low) for e in launches)
    return SideEstimate(
        float(np.mean([e.log_point for e in launches])),
        np.mean([e.low[:n] for e in launches], axis=0),
        np.mean([e.high[:n] for e in launches], axis=0),
        at_least=any(e.at_least for e in launches),
        below=any(e.below for e in launches),
        launches=tuple(c for e in launches for c in e.launches),
        censored=tuple(c for e in launches for c in e.censored),
        fit_var=float(np.mean([e.fit_var for e in launches])),
        fitted=all(e.fitted for e in launches),
        runs=sum(e.runs for e in launches),
        levels=sum(e.levels for e in launches),
    )


@dataclass(frozen=True)
class LaunchSpread:
    """The launch-to-launch sd the interval uses, and where it came from."""

    sd: float  # of the log capacity
    measured: float | None  # the spread between a side's own launches (None: fewer than 2 to compare)
    beyond_prior: bool  # the measured spread is larger than the prior and the fits' noise allow


def launch_spread(sides: Sequence[SideEstimate], prior: float) -> LaunchSpread:
    """The prior, unless a side's own launches (two or more, none censored) spread more than the prior and
    their fits' noise allow at :data:`SPREAD_TEST` (chi-square on their log capacities): then the measured
    launch sd (their variance less the fits' own, never below the prior). The largest over the sides.

    >>> same = SideEstimate(0.0, np.zeros(1), np.zeros(1), launches=(100.0, 103.0))
    >>> far = SideEstimate(0.0, np.zeros(1), np.zeros(1), launches=(16.0, 8.0))
    >>> launch_spread([same], 0.03).beyond_prior, round(launch_spread([far], 0.03).sd, 2)
    (False, 0.49)
    """
    from scipy import stats as sps  # noqa: PLC0415  (scipy on first use)

    sd, measured, beyond = prior, None, False
    for side in sides:
        cut = side.censored or (False,) * len(side.launches)
        values = [math.log(c) for c, out in zip(side.launches, cut, strict=True) if not out and c > 0]
        if len(values) < 2:
            continue
        spread = float(np.var(values, ddof=1))
        measured = max(measured or 0.0, math.sqrt(spread))
        allowed = prior**2 + side.fit_var
        critical = float(sps.chi2.ppf(SPREAD_TEST, len(values) - 1)) / (len(values) - 1)
        if allowed <= 0 or spread / allowed > critical:
            beyond = True
            sd = max(sd, math.sqrt(max(prior**2, spread - side.fit_var)))
    return LaunchSpread(sd, measured, beyond)


def launch_draws(cand: SideEstimate, base: SideEstimate, sd: float, *, seed: int) -> np.ndarray:
    """Each replicate's launch-to-launch shift of the log ratio: ``N(0, sd^2 (1/n_c + 1/n_b))``."""
    n = min(len(cand.low), len(base.low))
    scale = sd * math.sqrt(1 / cand.count + 1 / base.count)
    return np.random.default_rng(seed).normal(0.0, scale, n) if scale > 0 else np.zeros(n)


def ratio_interval(
    cand: SideEstimate, base: SideEstimate, draws: np.ndarray, confidence: float
) -> tuple[float, float]:
    """The ratio's percentile interval at ``confidence`` over the replicates (each side's bounds, the
    launch draws added): a replicate unknown or censored on either side can only widen it."""
    n = len(draws)
    with np.errstate(invalid="ignore"):
        low = cand.low[:n] - base.high[:n] + draws
        high = cand.high[:n] - base.low[:n] + draws
    tail = (1 - confidence) / 2
    return _exp(_quantile(np.nan_to_num(low, nan=-np.inf), tail)), _exp(
        _quantile(np.nan_to_num(high, nan=np.inf), 1 - tail)
    )


def _exp(value: float) -> float:
    """exp that reads +inf for an unbounded log (``math.exp`` overflows)."""
    return math.inf if value > 700 else math.exp(value)


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


def without_lag(result: CapacityResult) -> CapacityResult | None:
    """The search with each run's margin as low as its client's lag allows (``margin_lag_undone``), and
    each level decided again by its median; None when no run recorded a lag."""
    if all(p.margin_lag_undone is None for p in result.points):
        return None
    points = [
        p if p.margin_lag_undone is None else p.model_copy(update={"margin": p.margin_lag_undone})
        for p in result.points
    ]
    by_level: dict[float, list[float]] = {}
    for p in points:
        by_level.setdefault(p.level, []).append(p.margin)
    held = {level: float(np.median(m)) >= 1 for level, m in by_level.items()}
    low = max((lv for lv, ok in held.items() if ok), default=None)
    high = min((lv for lv, ok in held.items() if not ok and (low is None or lv > low)), default=None)
    return result.model_copy(update={"points": points, "low": low, "high": high, "capacity": low})


def lag_moved_levels(result: CapacityResult) -> list[tuple[float, float, float, float]]:
    """The levels whose SLO call the client's lag could reverse: (level, median margin, median margin with
    the lag added back, the largest p99 lag there in s), for each level that held only with the lag."""
    out: list[tuple[float, float, float, float]] = []
    for level in sorted({p.level for p in result.points}):
        runs = [p for p in result.points if p.level == level]
        undone = [p.margin_lag_undone for p in runs if p.margin_lag_undone is not None]
        if len(undone) < len(runs):
            continue
        raw, lagged = float(np.median([p.margin for p in runs])), float(np.median(undone))
        if raw >= 1 > lagged:
            out.append((level, raw, lagged, max(p.client_lag_s or 0.0 for p in runs)))
    return out
