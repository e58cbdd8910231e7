"""More repeats: how many more runs per side may settle an inconclusive comparison, and how sure that is.

Pipeline position: beside :mod:`gates.stats` (``more_repeats``: the count if the effect is as measured).
:func:`settle_range` adds what that count rests on: the effect it must clear is itself estimated from a
few runs, so a smaller true effect needs many more (a promised "about 2" became 21 after 5 more repeats
per side), and the count if the effect is only as large as what counts (the comparison's threshold:
``1 - min_gain``, ``1 + tolerance``) gives the scale, not a bound: the interval of an inconclusive
comparison still allows no effect, for which no number of repeats settles anything.
:func:`combined` is the verdict's over its pending comparisons; the words are
:meth:`contracts.verdicts.MoreRepeats.words` ("N or more ... it may be far off"). Pure.

    >>> est = RatioEstimate(0.85, 0.70, 1.03, 0.95, "", 3, 3, 3)
    >>> settle_range(est, 0.95)
    MoreRepeats(runs=3, if_measured=2, if_least=40, threshold=0.95)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from contracts.verdicts import Comparison, MoreRepeats
from gates.stats import MAX_MORE_REPEATS, RatioEstimate, more_repeats


def _extra(runs: int, width: float, effect: float) -> int | None:
    """Repeats per side to add so that an interval of log half-width ``width`` at ``runs`` runs excludes
    1 around a log effect ``effect``; None beyond :data:`gates.stats.MAX_MORE_REPEATS` or for no effect."""
    if abs(effect) < 1e-12:
        return None
    extra = max(math.ceil(runs * (width / abs(effect)) ** 2) - runs, 1)
    return extra if extra <= MAX_MORE_REPEATS else None


def settle_range(est: RatioEstimate, threshold: float | None) -> MoreRepeats | None:
    """The repeats per side that may settle ``est``: as measured (:func:`gates.stats.more_repeats`) and
    if the effect is only ``threshold`` (the ratio that counts); None when not even the first is known."""
    measured = more_repeats(est)
    if measured is None:
        return None
    point = math.log(est.ratio)
    bound = est.high if point < 0 else est.low
    width = abs(math.log(bound) - point)
    runs = max(est.repeats, 1)
    least = None
    if threshold is not None and threshold > 0 and abs(math.log(threshold)) < abs(point):
        least = _extra(runs, width, math.log(threshold))
    return MoreRepeats(runs=runs, if_measured=measured, if_least=least, threshold=threshold)


def combined(comparisons: Sequence[Comparison]) -> MoreRepeats | None:
    """The range a verdict's pending comparisons give (inconclusive, with a count): the most repeats of
    any as measured, and the most if each effect is only what counts (None when any has no such count);
    the fewest runs any rests on. None when none has a count, or one has a count without its range."""
    counted = [c for c in comparisons if c.status == "inconclusive" and c.more_repeats]
    pending = [c.settle for c in counted if c.settle is not None]
    if not pending or len(pending) < len(counted):
        return None
    leasts = [s.if_least for s in pending]
    widest = max(pending, key=lambda s: s.if_least or 0)
    return MoreRepeats(
        runs=min(s.runs for s in pending),
        if_measured=max(s.if_measured for s in pending),
        if_least=None if None in leasts else max(s.if_least or 0 for s in pending),
        threshold=widest.threshold,
    )


def settle_words(comparisons: Sequence[Comparison], more: int) -> str:
    """What the verdict says of ``more`` repeats (the most any pending comparison asks for): its range
    (:func:`combined`), or, where none is known, the count as a lower estimate, never a promise."""
    found = combined(comparisons)
    if found is not None:
        return found.words()
    return (
        f"{more} or more repeat(s) per side may settle it (if the effect is as large as measured; an "
        "estimate from few runs, it may be far off)"
    )
