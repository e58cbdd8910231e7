"""The search-quality benchmark's pure parts: the SLO margin a run reads, the exact capacity of a surface,
the within-5% rule, a point in one line.

Pipeline position: under every other part of :mod:`benchmarks.search` (the goals and their summaries:
:mod:`benchmarks.search.goals`). Pure.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from contracts.metrics import percentile
from contracts.schema import SloConfig

#: A winner counts as found when its capacity is at least this fraction of the best (issue 34: within 5%).
WITHIN = 0.95


def slo_margin(ttft: Sequence[float], tpot: Sequence[float], e2e: Sequence[float], slo: SloConfig) -> float:
    """The run's SLO margin as the capacity search reads it (docs/capacity.md): the worst
    ``threshold / observed percentile`` over the set thresholds; >= 1 holds; +inf counts as censored.

    >>> slo_margin([0.5, 0.5], [0.02, 0.02], [1.0, 1.0], SloConfig(ttft_s=1.0, tpot_s=0.015))
    0.75
    """
    margins: list[float] = []
    for threshold, values in ((slo.ttft_s, ttft), (slo.tpot_s, tpot), (slo.e2e_s, e2e)):
        if threshold is None:
            continue
        observed = percentile(list(values), slo.percentile)
        if observed is None or math.isinf(observed):
            margins.append(0.0)
        else:
            margins.append(math.inf if observed <= 0 else threshold / observed)
    return min(margins) if margins else math.inf


def exact_capacity(holds: Callable[[int], bool], min_level: int, max_level: int) -> int:
    """The highest whole level at which ``holds`` is true, assuming it holds up to a point and then fails:
    double from ``min_level`` until it fails (or ``max_level``), then bisect to one request. 0 when
    ``min_level`` already fails; ``max_level`` when it holds there.

    >>> exact_capacity(lambda level: level <= 37, 2, 512)
    37
    """
    if not holds(min_level):
        return 0
    low, high = min_level, min(min_level * 2, max_level)
    while holds(high):
        if high >= max_level:
            return max_level
        low, high = high, min(high * 2, max_level)
    while high - low > 1:
        middle = (low + high) // 2
        if holds(middle):
            low = middle
        else:
            high = middle
    return low


def within(value: float | None, best: float, tolerance: float = 1 - WITHIN) -> bool:
    """Whether ``value`` is within ``tolerance`` of ``best`` (a missing value never is).

    >>> within(96, 100), within(94.9, 100), within(None, 100)
    (True, False, False)
    """
    return value is not None and value >= (1 - tolerance) * best


def num(value: float | None) -> str:
    """A figure as printed (``-``: none)."""
    return "-" if value is None else f"{value:g}"


def point_text(point: Mapping[str, Any]) -> str:
    """A point in one short line: its values in the space's order (``tp2_dp4 seqs=128 ...``)."""
    short = {
        "max_num_seqs": "seqs",
        "max_num_batched_tokens": "mbt",
        "gpu_memory_utilization": "gmu",
        "speculative.num_speculative_tokens": "k",
        "speculative.method": "spec",
        "moe_backend": "moe",
    }
    return " ".join(str(v) if k == "layout" else f"{short.get(k, k)}={v}" for k, v in point.items())


def point_key(point: Mapping[str, Any]) -> str:
    return json.dumps(dict(point), sort_keys=True, default=str)
