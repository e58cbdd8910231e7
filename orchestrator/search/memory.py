"""What memory lets a point start: the highest ``gpu_memory_utilization`` that starts, probed once per
layout, and the memory-fit estimate (``doctor``'s), both ruling points out before they launch.

Pipeline position: the run loop (:mod:`.loop`) asks :func:`next_probe` before the sampler, and
:func:`memory_refusal` of every point before it launches. A utilisation too high for the host (no room left
for CUDA graphs and communication buffers outside vLLM's budget, memory other processes hold) never starts,
whatever the other fields: as vLLM's ``auto_tune`` does, the search launches each layout at its highest
utilisation first and steps down the space's values until one starts; the highest that started and the
lowest above it that did not (out of memory) are remembered (:func:`ceilings`, derived from the trials, so
a resumed sweep keeps them) and a higher value of that layout is told infeasible without a launch. A probe
that starts is an ordinary trial of the search (screened, perhaps measured fully); only the launches that
did not start are the probe's cost, one per value above the one that starts. A utilisation given as an
interval is not probed (no values to step down); the ceilings its out-of-memory starts teach still apply.

The memory-fit check (:data:`MemoryCheck`, built from doctor's estimate by
:func:`launch.preflight.memory_fit_check`) rules out the other end: a point whose weights and one
``max_model_len`` sequence cannot fit its budget. Pure over the trials and the space.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from contracts.schema import CandidateConfig
from contracts.search import INTEGER_FIELDS, Space
from contracts.trials import TrialRecord
from orchestrator.search.point import Point, baseline_point

#: The field probed.
UTILIZATION = "gpu_memory_utilization"
#: The startup class of a server that ran out of memory (launch.failures).
OUT_OF_MEMORY = "out-of-memory"
#: Why one candidate cannot fit its GPUs (doctor's memory-fit estimate), or None.
MemoryCheck = Callable[[CandidateConfig], str | None]


@dataclass(frozen=True)
class Ceiling:
    """One layout's utilisation as the trials found it: the highest that started, and the lowest above it
    that did not start for want of memory (the trial that found it)."""

    started: float | None = None
    refused: float | None = None
    trial: int | None = None


def layout_of(point: Mapping[str, Any]) -> str:
    """The layout a point's memory depends on (the space's ``layout`` value; "" when it is not varied)."""
    return str(point.get("layout", ""))


def _did_not_start(trial: TrialRecord) -> bool:
    return trial.state == "infeasible" and trial.fidelity == "start" and trial.launches > 0


def ceilings(trials: Iterable[TrialRecord]) -> dict[str, Ceiling]:
    """Each layout's highest utilisation that started and lowest that ran out of memory above it."""
    started: dict[str, float] = {}
    refused: list[tuple[str, float, int]] = []
    for trial in trials:
        value = trial.params.get(UTILIZATION)
        if not isinstance(value, int | float) or trial.same_as is not None:
            continue
        layout = layout_of(trial.params)
        if _did_not_start(trial):
            if trial.startup == OUT_OF_MEMORY:
                refused.append((layout, float(value), trial.number))
        elif trial.fidelity in ("screen", "full") or (trial.fidelity == "start" and trial.launches > 0):
            started[layout] = max(started.get(layout, float(value)), float(value))
    out: dict[str, Ceiling] = {layout: Ceiling(started=value) for layout, value in started.items()}
    for layout, value, number in sorted(refused, key=lambda r: r[1]):
        known = out.get(layout, Ceiling())
        above = known.started is None or value > known.started
        if above and (known.refused is None or value < known.refused):
            out[layout] = Ceiling(known.started, value, number)
    return out


def memory_refusal(point: Mapping[str, Any], known: Mapping[str, Ceiling]) -> str | None:
    """Why ``point`` would not start for its utilisation (its layout ran out of memory at that value or a
    lower one), or None."""
    value = point.get(UTILIZATION)
    ceiling = known.get(layout_of(point))
    if ceiling is None or ceiling.refused is None or not isinstance(value, int | float):
        return None
    if value < ceiling.refused:
        return None
    where = f"layout {layout_of(point)}" if layout_of(point) else "this layout"
    started = f"; {ceiling.started:g} started" if ceiling.started is not None else ""
    return (
        f"{where} did not start at {UTILIZATION}={ceiling.refused:g} (out-of-memory, trial {ceiling.trial})"
        f"{started}: no higher value of it is launched"
    )


def next_probe(
    space: Space, trials: list[TrialRecord], baseline: CandidateConfig, busy: Iterable[Point] = ()
) -> Point | None:
    """The next start probe: a layout whose highest utilisation that starts is not known yet, at the
    highest value of the space not tried in it that could still start; None when every layout is known
    (or the utilisation is not a list of values). ``busy``: points in flight (a layout probed there waits
    for its answer). The probe's other fields are the baseline's point's (its middle values when the
    baseline is not a point of the space)."""
    dims = {d.name: d for d in space.dimensions}
    util = dims.get(UTILIZATION)
    if util is None or not util.finite or len(util.values) < 2:
        return None
    layouts = [str(v) for v in dims["layout"].values] if "layout" in dims else [layout_of(space.fixed)]
    known = ceilings(trials)
    tried = {(layout_of(t.params), t.params.get(UTILIZATION)) for t in trials}
    waiting = {layout_of(p) for p in busy if UTILIZATION in p}
    base = baseline_point(space, baseline) or _middle(space)
    for layout in layouts:
        if layout in waiting:
            continue
        ceiling = known.get(layout, Ceiling())
        for value in sorted(util.values, reverse=True):
            if ceiling.refused is not None and value >= ceiling.refused:
                continue
            if ceiling.started is not None and value <= ceiling.started:
                break  # the highest that starts is known
            if (layout, value) in tried:
                continue  # tried, and neither started nor ran out of memory: the next one down
            point = {**base, UTILIZATION: value}
            if "layout" in dims:
                point["layout"] = layout
            return point
    return None


def _middle(space: Space) -> Point:
    """Each field's middle value (an interval's midpoint, whole for an integer field)."""
    point: Point = dict(space.fixed)
    for dim in space.dimensions:
        if dim.finite:
            point[dim.name] = dim.values[len(dim.values) // 2]
        else:
            assert dim.low is not None and dim.high is not None
            mid = (dim.low + dim.high) / 2
            point[dim.name] = round(mid) if dim.name in INTEGER_FIELDS else mid
    return point


def within_ceiling(point: Point, known: Mapping[str, Ceiling]) -> Point:
    """``point`` with its utilisation lowered to the highest its layout started at, when its own value is
    known not to start (a point made to cover a value, :mod:`.coverage`)."""
    ceiling = known.get(layout_of(point))
    value = point.get(UTILIZATION)
    if ceiling is None or ceiling.refused is None or ceiling.started is None:
        return point
    if isinstance(value, int | float) and value >= ceiling.refused:
        return {**point, UTILIZATION: ceiling.started}
    return point
