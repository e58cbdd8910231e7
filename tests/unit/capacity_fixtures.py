"""Capacity searches for the capacity gate's tests: the real search core on a stated margin curve (pure)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from contracts.results import CapacityPoint, CapacityResult
from contracts.schema import GatesConfig
from contracts.sweepdir import Results
from contracts.verdicts import GateResult
from gates.capacity import Capacity
from gates.registry import GateContext
from orchestrator.measure.capacity_search import SearchSettings, search

#: The search demo's settings (conf/experiment/demo_search.yaml): start 32, 5% resolution, 12 levels.
DEMO = SearchSettings(start=32, min_level=2, max_level=512, resolution=0.05, max_points=12, integer=True)
TTFT_S = 1.0  # the SLO's TTFT threshold the margins stand for (the interactive SLO's)
CFG = GatesConfig(bootstrap_resamples=2000)


def searched(
    capacity: float,
    *,
    settings: SearchSettings = DEMO,
    name: str = "c",
    wobble: Sequence[float] = (),
    lag_s: float | None = None,
) -> CapacityResult:
    """What the search records for a server whose SLO margin at level ``x`` is ``capacity / x`` (times
    ``exp(wobble[k])`` on its k-th run: run-to-run noise); each run's TTFT is the threshold over the
    margin, and ``lag_s`` the client's p99 dispatch lag (the margin with it added back is recorded)."""
    runs: list[tuple[float, float]] = []

    def probe(level: float, attempt: int) -> float:
        shift = wobble[len(runs) % len(wobble)] if wobble else 0.0
        margin = capacity / level * math.exp(shift)
        runs.append((level, margin))
        return margin

    found = search(probe, settings)
    points = []
    attempts: dict[float, int] = {}
    for level, margin in runs:
        attempts[level] = attempts.get(level, 0) + 1
        undone = None if lag_s is None else TTFT_S / (TTFT_S / margin + lag_s)
        points.append(
            CapacityPoint(
                level=level,
                attempt=attempts[level],
                summary_file=f"capacity/c{level:g}/a{attempts[level]}/summary.json",
                met=margin >= 1,
                margin=margin,
                attainment=1.0,
                goodput_rps=0.0,
                goodput_tps=0.0,
                output_tps=0.0,
                tps_per_user=None,
                client_lag_s=lag_s,
                margin_lag_undone=undone,
            )
        )
    return found.record(
        points,
        candidate=name,
        profile="decode_heavy",
        slo="interactive",
        slo_text="TTFT p99 <= 1 s",
        resolution=settings.resolution,
        gpus=8,
    )


def side(name: str, first: CapacityResult, *again: CapacityResult) -> Results:
    """A side's results: its capacity search, and (a baseline) its blocks' searches, each a fresh launch."""
    blocks = tuple(
        Results(name=name, root=f"candidates/{name}/blocks/after-c{k}", run=None, capacity=result)
        for k, result in enumerate(again)
    )
    return Results(name=name, root=f"candidates/{name}", run=None, capacity=first, blocks=blocks)


def judge(cand: Results, base: Results, cfg: GatesConfig = CFG) -> GateResult:
    return Capacity().evaluate(GateContext(cfg, base, cand))
