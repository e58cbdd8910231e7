"""The ways of choosing points the benchmark compares at one budget: TPE, random search and a grid.

Pipeline position: under :mod:`benchmarks.search.runner`, which runs each as the product's
:class:`~orchestrator.search.loop.SearchRun`: the same budget (launches, the confirmations' kept), the
same pruning before start (placement, the memory ceilings), the same screen (the gated requirements, the
noise-aware pruner), the same stall rule and the same trial record. Only the points asked differ: TPE
(``search.sampler: tpe``), Optuna's random sampler (``random``), or :func:`grid_design`'s points asked in
turn (:class:`GridRun`), then random ones if budget is left (a grid point refused before start costs no
launch).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

from contracts.search import Space
from contracts.trials import SearchRecord
from orchestrator.search.batch import Batch
from orchestrator.search.loop import SearchRun
from orchestrator.search.study import SearchStudy

#: The methods, by name: the sampler each runs with (the grid's leftover budget is random's).
METHODS = {"tpe": "tpe", "random": "random", "grid": "random"}


def spread(count: int, levels: int) -> list[int]:
    """``levels`` indices of a list of ``count`` values, spread from one end to the other (one level: the
    middle value).

    >>> spread(4, 1), spread(4, 2), spread(5, 3), spread(3, 3)
    ([2], [0, 3], [0, 2, 4], [0, 1, 2])
    """
    if levels <= 1:
        return [count // 2]
    return sorted({round(i * (count - 1) / (levels - 1)) for i in range(levels)})


def grid_levels(sizes: Sequence[int], points: int) -> list[int]:
    """How many values of each field a grid of at most ``points`` points takes: one each, then one more at
    a time for the field that has the fewest so far (the first such in declaration order; a field whose
    values are all taken is full), while the grid still fits.

    >>> grid_levels([3, 4, 4, 3, 4], 46), grid_levels([2, 4, 4, 3, 3], 26), grid_levels([2, 2], 100)
    ([2, 2, 2, 2, 2], [2, 2, 2, 2, 1], [2, 2])
    """
    levels = [1] * len(sizes)
    while True:
        open_ = [i for i, n in enumerate(sizes) if levels[i] < n]
        if not open_:
            return levels
        field = min(open_, key=lambda i: (levels[i], i))
        grown = levels[field] + 1
        total = 1
        for i, level in enumerate(levels):
            total *= grown if i == field else level
        if total > points:
            return levels
        levels[field] = grown


def grid_design(space: Space, points: int) -> list[dict[str, Any]]:
    """A coarse grid of the space's finite fields with at most ``points`` points (:func:`grid_levels`,
    each field's values spread over its range), in declaration order."""
    dims = [d for d in space.dimensions if d.finite]
    if len(dims) != len(space.dimensions):
        raise ValueError("a grid needs every field to be a list of values (choice or range)")
    levels = grid_levels([len(d.values) for d in dims], points)
    axes = [[d.values[i] for i in spread(len(d.values), n)] for d, n in zip(dims, levels, strict=True)]
    names = [d.name for d in dims]
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*axes)]


class GridRun(SearchRun):
    """The product's search loop asking a grid's points in turn, instead of its own steering (the start
    probe and the stall's coverage: a grid covers its values by construction)."""

    def __init__(self, *args: Any, design: Sequence[dict[str, Any]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._design: Iterator[dict[str, Any]] = iter(design)

    def _steer(
        self, study: SearchStudy, record: SearchRecord, batch: Batch, gaps: list[tuple[str, Any]]
    ) -> None:
        point = next(self._design, None)
        if point is not None:
            study.enqueue(point)
