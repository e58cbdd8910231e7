"""The search-quality benchmark's pure parts: the SLO margin a run reads, the exact capacity of a surface,
the within-5% rule, one seed's run, the summary against the goal and the table.

Pipeline position: under :mod:`benchmarks.search.surface` and :mod:`benchmarks.search.runner`; the driver
``benchmarks/search_quality.py`` prints what these compute. Pure.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contracts.metrics import percentile
from contracts.schema import SloConfig

#: A winner counts as found when its capacity is at least this fraction of the best (issue 34: within 5%).
WITHIN = 0.95
#: The issue's goal: at least this share of seeds within 5%, with at most this share of the space launched.
GOAL_FOUND, GOAL_LAUNCHED = 0.9, 0.25


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


@dataclass(frozen=True)
class SeedRun:
    """One seed's search: its winner (None: nothing measured fully), that point's true capacity, the
    server launches it spent and the distinct configurations it launched."""

    seed: int
    winner: str | None
    winner_point: dict[str, Any] | None
    estimate: float | None
    true_capacity: float | None
    launches: int
    distinct: int
    stopped: str


@dataclass(frozen=True)
class Summary:
    """The runs judged against the brute force."""

    seeds: int
    found: int  # winners within 5% of the best
    best: float
    space_size: int
    mean_launches: float
    max_launches: int
    mean_share: float  # mean launches / space size

    @property
    def goal_met(self) -> bool:
        return self.found >= GOAL_FOUND * self.seeds and self.max_launches <= GOAL_LAUNCHED * self.space_size


def summarize(runs: Sequence[SeedRun], best: float, space_size: int) -> Summary:
    """How many winners are within 5% of ``best``, and the launches spent (mean, most, mean share)."""
    if not runs:
        raise ValueError("no seeds to summarize")
    launches = [r.launches for r in runs]
    mean_launches = sum(launches) / len(runs)
    return Summary(
        seeds=len(runs),
        found=sum(1 for r in runs if within(r.true_capacity, best)),
        best=best,
        space_size=space_size,
        mean_launches=mean_launches,
        max_launches=max(launches),
        mean_share=mean_launches / space_size if space_size else math.nan,
    )


def num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def render_table(runs: Sequence[SeedRun], summary: Summary) -> str:
    """The runs as a Markdown table, then the summary line against the issue's goal."""
    lines = [
        "| seed | winner | point | search estimate | true capacity | of best | within 5% | launches |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        share = "-" if run.true_capacity is None else f"{run.true_capacity / summary.best:.0%}"
        point = "-" if run.winner_point is None else point_text(run.winner_point)
        mark = "yes" if within(run.true_capacity, summary.best) else "no"
        lines.append(
            f"| {run.seed} | {run.winner or '-'} | {point} | {num(run.estimate)} | "
            f"{num(run.true_capacity)} | {share} | {mark} | {run.launches} |"
        )
    goal = "met" if summary.goal_met else "not met"
    lines.append("")
    lines.append(
        f"{summary.found}/{summary.seeds} winners within 5% of the best capacity ({num(summary.best)}); "
        f"launches: mean {summary.mean_launches:.1f}, most {summary.max_launches} of {summary.space_size} "
        f"configurations ({summary.mean_share:.0%} on average); goal (>= {GOAL_FOUND:.0%} within 5%, "
        f"<= {GOAL_LAUNCHED:.0%} of the space launched): {goal}"
    )
    return "\n".join(lines)


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
