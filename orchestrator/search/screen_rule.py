"""When a screen may cut a point (pure): only when even its upper bound, with the screen's noise, is below
the best screen of its rung.

Pipeline position: the pruner's second word (:class:`orchestrator.search.study.NoisePruner`): Optuna's
successive halving (or Hyperband) keeps the best ``1/reduction_factor`` of a rung's screens and would cut
the rest, however close; a screen is one short run at one level, whose SLO margin moves by about
``capacity.noise`` from run to run (the fraction within which the capacity search itself measures a level
again). A point the halving rule would cut goes on to the full measurement unless
``screen x (1 + noise) < best``: a point at 94% of the best after one screen is not cut at a 10% noise.
"""

from __future__ import annotations

from collections.abc import Iterable


def screen_outranked(screen: float, others: Iterable[float], noise: float) -> bool:
    """Whether a screen estimate is beyond noise below the best of the other screens of its rung (so the
    halving rule may cut it); False when there is no other screen to be below."""
    best = max(others, default=None)
    if best is None:
        return False
    return screen * (1.0 + max(0.0, noise)) < best
