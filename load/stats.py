"""Statistics of the load runner's summaries: percentiles and right-censored medians (pure).

Pipeline position: :mod:`load.summary` reduces request records with these; the gates may reuse
them. Percentiles interpolate linearly between order statistics (numpy's default), so small samples give
the same figures here, in numpy and in a spreadsheet.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from contracts.results import CensoredMedian, Stats


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100) with linear interpolation; None for no values.

    >>> percentile([1.0, 2.0, 3.0, 4.0], 50)
    2.5
    """
    if not values:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0-100")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def stats(values: Sequence[float]) -> Stats:
    """n, mean, p50/p90/p99, min and max of a sample (all None when it is empty)."""
    if not values:
        return Stats(n=0, mean=None, p50=None, p90=None, p99=None)
    return Stats(
        n=len(values),
        mean=math.fsum(values) / len(values),
        p50=percentile(values, 50),
        p90=percentile(values, 90),
        p99=percentile(values, 99),
        min=min(values),
        max=max(values),
    )


def censored_median(values: Sequence[float | None]) -> CensoredMedian:
    """Median where a missing value (None) counts as +infinity: a request that never answered.

    With n values sorted and the missing ones last, the median is the usual middle (mean of the two
    middle values for even n); it is infinite as soon as a middle position is missing.

    >>> censored_median([1.0, None, 3.0]).value_s
    3.0
    """
    n = len(values)
    present = sorted(v for v in values if v is not None)
    censored = n - len(present)
    if n == 0:
        return CensoredMedian(n=0, censored=0, value_s=None, infinite=False)
    middle = [(n - 1) // 2, n // 2]
    if any(index >= len(present) for index in middle):
        return CensoredMedian(n=n, censored=censored, value_s=None, infinite=True)
    value = (present[middle[0]] + present[middle[1]]) / 2
    return CensoredMedian(n=n, censored=censored, value_s=value, infinite=False)
