"""The capacity search's core: bracketing, then bisection, for the highest load that holds the SLO (pure).

Pipeline position: :mod:`orchestrator.measure.capacity` drives it with a probe that runs one load level
against
a live server and returns the run's SLO margin (worst threshold / observed percentile; >= 1 holds). The
core decides which levels to measure and when to stop; it never touches a clock, a socket or a file, so
it is tested with tables and with the simulator's in-process replay as the probe.

The method (docs/capacity.md):

1. **Bracket.** Measure ``start``; multiply by ``growth`` while the SLO holds (up to ``max_level``), or
   divide while it fails (down to ``min_level``), until one level holds and the next one up fails.
2. **Bisect** between the highest level that held and the lowest that failed, at their geometric mean
   (integers for concurrency), until they are within ``resolution`` of each other (closed loop: or
   adjacent integers), or ``max_points`` levels were measured.
3. **Noise.** A level whose margin lies within ``noise`` of 1 is measured again, up to ``max_repeats``
   times; the median margin decides.
4. **The boundary, repeated** (issue 21; when ``noise`` > 0). The two levels of the final bracket (the
   highest that held, the lowest that failed) are measured until each has ``max_repeats`` runs: they
   carry most of the capacity fit's weight (:func:`gates.capacity.capacity_fit`, whose bootstrap gives
   the capacity's interval), and a single lucky or unlucky call there moved the bracket whole. A call
   the repeats' median reverses re-opens the bracket (the lowest level that failed, the highest that
   held below it) and the search bisects again, at most ``max_repeats`` times. A level is never
   measured twice for any other reason.

    >>> result = search(lambda level, attempt: 100 / level, SearchSettings(start=8, integer=True))
    >>> (result.low, result.high, result.order)  # 100 is the true capacity; 10% resolution
    (99.0, 108.0, [8.0, 16.0, 32.0, 64.0, 128.0, 91.0, 108.0, 99.0])
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from statistics import median

from contracts.results import CapacityPoint, CapacityResult
from contracts.schema import CapacityConfig

#: A probe: (level, attempt 1..) -> the run's SLO margin (>= 1: the SLO held).
Probe = Callable[[float, int], float]


@dataclass(frozen=True)
class SearchSettings:
    """The search's knobs (defaults: :class:`contracts.schema.CapacityConfig`'s), and whether levels are
    integers."""

    start: float = CapacityConfig.start
    min_level: float = CapacityConfig.min_level
    max_level: float = CapacityConfig.max_level
    growth: float = CapacityConfig.growth
    resolution: float = CapacityConfig.resolution
    max_points: int = CapacityConfig.max_points
    noise: float = CapacityConfig.noise
    max_repeats: int = CapacityConfig.max_repeats
    integer: bool = False  # closed loop: concurrency is a whole number of requests

    @classmethod
    def from_config(cls, cfg: CapacityConfig, *, integer: bool) -> SearchSettings:
        knobs = {f.name: getattr(cfg, f.name) for f in fields(cls) if f.name != "integer"}
        return cls(**knobs, integer=integer)


@dataclass
class SearchResult:
    """Where the SLO flipped: ``low`` held, ``high`` failed (None: not found within the bounds)."""

    low: float | None  # the capacity: highest level that held (None: even min_level failed)
    high: float | None  # lowest level above it that failed (None: max_level held)
    decided: dict[float, bool] = field(default_factory=dict)  # level -> held (median margin >= 1)
    margins: dict[float, list[float]] = field(default_factory=dict)  # level -> each run's margin
    order: list[float] = field(default_factory=list)  # levels in the order they were decided
    stopped_by_budget: bool = False  # max_points ran out before the resolution was reached
    reversed_calls: list[float] = field(default_factory=list)  # boundary levels whose repeats reversed

    @property
    def runs(self) -> int:
        """Runs measured (a level within noise counts once per repeat)."""
        return sum(len(m) for m in self.margins.values())

    def record(
        self,
        points: list[CapacityPoint],
        *,
        candidate: str,
        profile: str,
        slo: str,
        slo_text: str,
        resolution: float,
        gpus: int,
        integer: bool = True,
        notes: list[str] | None = None,
    ) -> CapacityResult:
        """The search as ``capacity.json`` records it: its runs (``points``), the bracket and each level's
        call; the sweep's (:func:`orchestrator.measure.capacity.capacity_result`), the tests' and the
        benchmarks' one builder."""
        return CapacityResult(
            candidate=candidate,
            profile=profile,
            mode="concurrency" if integer else "rate",
            unit="concurrent" if integer else "req/s",
            slo=slo,
            slo_text=slo_text,
            capacity=self.low,
            low=self.low,
            high=self.high,
            resolution=resolution,
            gpus=gpus,
            points=points,
            decided={f"{level:g}": held for level, held in self.decided.items()},
            notes=notes or [],
        )


def resolved(low: float, high: float, settings: SearchSettings) -> bool:
    """The bracket is narrow enough: within the relative resolution, or adjacent integers."""
    if settings.integer and high - low <= 1:
        return True
    return high <= low * (1 + settings.resolution)


def midpoint(low: float, high: float, settings: SearchSettings) -> float:
    """The geometric mean of the bracket (rounded, strictly inside it, for integer levels)."""
    mid = math.sqrt(low * high)
    if settings.integer:
        return float(min(max(round(mid), int(low) + 1), int(high) - 1))
    return mid


def _clip(level: float, settings: SearchSettings) -> float:
    level = min(max(level, settings.min_level), settings.max_level)
    return float(round(level)) if settings.integer else level


class _Searcher:
    def __init__(self, probe: Probe, settings: SearchSettings) -> None:
        self.probe, self.settings = probe, settings
        self.result = SearchResult(low=None, high=None)

    @property
    def budget_left(self) -> bool:
        return len(self.result.decided) < self.settings.max_points

    def holds(self, level: float) -> bool:
        """Measure ``level`` (again only while within noise) and decide it; cached."""
        res = self.result
        if level in res.decided:
            return res.decided[level]
        margins = res.margins.setdefault(level, [])
        band = 1 + self.settings.noise
        while True:
            margins.append(self.probe(level, len(margins) + 1))
            value = median(margins)
            within_noise = 1 / band < value < band
            if not within_noise or len(margins) >= self.settings.max_repeats:
                break
        res.decided[level] = value >= 1.0
        res.order.append(level)
        return res.decided[level]

    def bracket(self) -> None:
        s, res = self.settings, self.result
        level = _clip(s.start, s)
        if self.holds(level):
            res.low = level
            while level < s.max_level and self.budget_left:
                level = _clip(max(level * s.growth, level + 1), s)
                if self.holds(level):
                    res.low = level
                else:
                    res.high = level
                    return
        else:
            res.high = level
            while level > s.min_level and self.budget_left:
                level = _clip(level / s.growth, s)
                if self.holds(level):
                    res.low = level
                    return
                res.high = level

    def extend(self) -> None:
        """A bracket re-opened at one end by a reversed call (every level failed, or none did) is bracketed
        again from its other end, as step 1 does, within the budget: "held at every level tried" is then
        a bound the search reached, never one a reversal left behind."""
        s, res = self.settings, self.result
        if res.high is None and res.low is not None:
            level = res.low
            while level < s.max_level and self.budget_left:
                level = _clip(max(level * s.growth, level + 1), s)
                if not self.holds(level):
                    res.high = level
                    return
                res.low = level
        elif res.low is None and res.high is not None:
            level = res.high
            while level > s.min_level and self.budget_left:
                level = _clip(level / s.growth, s)
                if self.holds(level):
                    res.low = level
                    return
                res.high = level

    def bisect(self) -> None:
        s, res = self.settings, self.result
        while res.low is not None and res.high is not None and not resolved(res.low, res.high, s):
            if not self.budget_left:
                res.stopped_by_budget = True
                return
            mid = midpoint(res.low, res.high, s)
            if self.holds(mid):
                res.low = mid
            else:
                res.high = mid

    def repeat_boundary(self) -> None:
        """Step 4: the final bracket's levels up to ``max_repeats`` runs each; re-open on a reversal."""
        s, res = self.settings, self.result
        if s.noise <= 0 or s.max_repeats < 2:
            return
        for _ in range(s.max_repeats):
            reversed_any = False
            for level in (res.low, res.high):
                if level is None:
                    continue
                margins = res.margins[level]
                while len(margins) < s.max_repeats:
                    margins.append(self.probe(level, len(margins) + 1))
                held = median(margins) >= 1.0
                if held != res.decided[level]:
                    res.decided[level] = held
                    res.reversed_calls.append(level)
                    reversed_any = True
            if not reversed_any:
                return
            failed = [lv for lv, held in res.decided.items() if not held]
            res.high = min(failed) if failed else None
            below = [lv for lv, held in res.decided.items() if held and (res.high is None or lv < res.high)]
            res.low = max(below) if below else None
            self.extend()
            self.bisect()


def search(probe: Probe, settings: SearchSettings) -> SearchResult:
    """Bracket, bisect, then repeat the boundary's two levels (with ``noise`` > 0); every other level is
    measured once unless within noise (then repeated)."""
    searcher = _Searcher(probe, settings)
    searcher.bracket()
    searcher.bisect()
    searcher.repeat_boundary()
    return searcher.result
