"""The search's feasible region: where in the space the points started, met the gated requirements and
what they measured, over the two fields the search tried most.

Pipeline position: part of the search's plot (:mod:`report.search_plot` draws it), a pure function from
``search/trials.json`` (:mod:`contracts.trials`) to cells; it decides nothing. A point is *infeasible*
when it did not start, was ruled out before it started (``pruned``), or broke a gated requirement at its
screen (``TrialRecord.constraints``, a violation above 0); a failed trial (the harness's fault, not the
configuration's) says nothing either way. A cell shows the best value measured in full in it, or that
only screens were measured there, or that every point tried there was infeasible; it counts the
infeasible points beside feasible ones. Fields not on the two axes are folded into the cells.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from contracts.trials import SearchRecord
from report.search_table import TrialRow, search_fields, trial_rows

#: What one point of the space found, best first: a value measured in full, a screen only, nothing
#: (the point was infeasible), or a failure that was not the configuration's.
PointStatus = Literal["measured", "screened", "infeasible", "failed"]


@dataclass(frozen=True)
class RegionCell:
    """One cell (a value of each axis' field): the best of its points and how many were infeasible."""

    x: int  # index into Region.x_values
    y: int  # index into Region.y_values (0 when the space has one field)
    status: PointStatus  # the best any of its points reached
    best: float | None  # the best value measured in full there (the first objective)
    points: int  # points tried or ruled out there (a repeat of a point counts once)
    infeasible: int  # of which infeasible


@dataclass(frozen=True)
class Region:
    """The cells over one or two fields; ``y_field`` None: the space has a single field."""

    x_field: str
    x_values: list[Any]
    y_field: str | None
    y_values: list[Any]
    cells: list[RegionCell]


def point_status(row: TrialRow) -> PointStatus | None:
    """What a point found (None: still running, nothing to say yet)."""
    if row.state == "infeasible" or row.broken:
        return "infeasible"
    if row.state == "failed":
        return "failed"
    if row.values:
        return "measured"
    if row.screen is not None:
        return "screened"
    return None


def _ordered(values: list[Any]) -> list[Any]:
    """An axis' values: numbers ascending, otherwise in the order first tried."""
    unique = list(dict.fromkeys(values))
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in unique)
    return sorted(unique) if numeric else unique


def _better(a: float, b: float | None, direction: str) -> bool:
    return b is None or (a > b if direction == "maximize" else a < b)


#: A point placed on the axes: its params (a pruned point's may name fewer fields), status, value.
_Placed = tuple[dict[str, Any], PointStatus, float | None]


def _points(record: SearchRecord) -> list[_Placed]:
    placed: list[_Placed] = []
    for row in trial_rows(record.trials):
        status = point_status(row)
        if status is not None:
            placed.append((row.params, status, row.values[0] if row.values else None))
    placed += [(p.params, "infeasible", None) for p in record.pruned]
    return placed


def _axes(placed: Sequence[_Placed], fields: list[str]) -> tuple[str, str | None]:
    """The two fields with the most distinct values (ties: the order the search names them)."""
    distinct = {f: len({repr(p[f]) for p, _s, _v in placed if f in p}) for f in fields}
    ranked = sorted(fields, key=lambda f: -distinct[f])
    return ranked[0], (ranked[1] if len(ranked) > 1 else None)


def _at(params: dict[str, Any], field: str | None, values: list[Any]) -> list[int]:
    """The axis positions a point covers: its value's, or every one when it leaves the field unset."""
    if field is not None and field in params:
        return [values.index(params[field])]
    return list(range(len(values)))


_RANK: dict[PointStatus, int] = {"measured": 0, "screened": 1, "infeasible": 2, "failed": 3}


def feasible_region(record: SearchRecord) -> Region | None:
    """The cells of the space the search reached (None: no point to place). A point ruled out before start
    that leaves an axis' field unset counts in every cell along that axis (the whole value is out)."""
    placed = _points(record)
    fields = search_fields(record.trials, record.pruned)
    if not placed or not fields:
        return None
    x_field, y_field = _axes(placed, fields)
    x_values = _ordered([p[x_field] for p, _s, _v in placed if x_field in p])
    y_values = _ordered([p[y_field] for p, _s, _v in placed if y_field in p]) if y_field else [None]
    direction = record.directions[0] if record.directions else "maximize"
    found: dict[tuple[int, int], list[tuple[PointStatus, float | None]]] = {}
    for params, status, value in placed:
        for x in _at(params, x_field, x_values):
            for y in _at(params, y_field, y_values):
                found.setdefault((x, y), []).append((status, value))
    cells = []
    for (x, y), seen in sorted(found.items()):
        best: float | None = None
        for status, value in seen:
            if status == "measured" and value is not None and _better(value, best, direction):
                best = value
        top = min((s for s, _v in seen), key=lambda s: _RANK[s])
        bad = sum(1 for s, _v in seen if s == "infeasible")
        cells.append(RegionCell(x, y, top, best, len(seen), bad))
    return Region(x_field, x_values, y_field, y_values, cells)
