"""A stall is declared only after every value of the space's lists has been tried (pure).

Pipeline position: the run loop (:mod:`.loop`) asks :func:`untried` when the stall rule
(:func:`orchestrator.search.rules.stop_reason`) would stop the search: while a value of a listed field
(``choice``/``range``) has no trial, the stall waits and the loop asks a point that tries it
(:func:`cover_point`: the best point so far with that one value changed), so a search cannot stall in the
wrong layout at a fraction of the best because its sampler never drew another. A value counts as tried
once any trial holds it: launched and screened, measured fully, or told infeasible (it did not start, its
layout ran out of memory at it, doctor's flag table refused it): a value that cannot start has nothing
more to show. The budget still stops the search first; ``plan`` says when it cannot try every value
(:func:`fewest_launches`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from contracts.search import Space
from contracts.trials import TrialRecord
from orchestrator.search.point import Point


def untried(space: Space, trials: Iterable[TrialRecord]) -> list[tuple[str, Any]]:
    """The (field, value) pairs of the space's listed fields that no trial holds yet, in the space's
    order (a field of one value is the point's, not a choice)."""
    seen: dict[str, set[str]] = {}
    for trial in trials:
        for name, value in trial.params.items():
            seen.setdefault(name, set()).add(repr(value))
    return [
        (dim.name, value)
        for dim in space.dimensions
        if dim.finite and len(dim.values) > 1
        for value in dim.values
        if repr(value) not in seen.get(dim.name, set())
    ]


def cover_point(best: Mapping[str, Any], field: str, value: Any) -> Point:
    """The point that tries ``field=value``: the best point so far with that one value changed (what the
    value does where the rest is good)."""
    return {**best, field: value}


def fewest_launches(space: Space) -> int:
    """Launches that could try every value of the space's lists at the least: its longest list."""
    return max((len(d.values) for d in space.dimensions if d.finite and len(d.values) > 1), default=0)
