"""The search's trials as a table one reads at a glance: one row per point, a column per search field.

Pipeline position: part of the report's search section (:mod:`report.search` builds the section,
report.md and report.html render these rows), pure functions from ``search/trials.json``'s records
(:mod:`contracts.trials`) to rows; it decides nothing. A trial that asked an already-measured point again
(``same_as``) is folded into that point's row and counted (``asked``). The screen's estimate has a column
of its own, in the objective's unit (named in the header) and marked rough: it is never shown, nor
ranked, as the full measurement (a pruned trial's full figure is ``-``). A trial that broke a gated
requirement at its screen (``TrialRecord.constraints``) says which.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from contracts.metrics import fmt_estimate
from contracts.trials import PrunedPoint, TrialRecord

#: The objective's unit by objective; a capacity's is its profile's mode (:func:`objective_unit`).
_UNITS = {"goodput": "tok/s", "tps_per_gpu": "output tok/s per GPU"}
#: How the screen's figure was made, by objective (the header's note).
_SCREEN_HOW = {"capacity": "rough: screen level x SLO margin"}
#: The Pareto front's second objective (contracts.trials: the serial profile's median end-to-end time).
SECOND_OBJECTIVE = "serial e2e (s)"
#: Longest "why" a row shows; the infeasible region below the table has the whole text.
WHY_WIDTH = 60


def objective_unit(objective: str, capacity_mode: str | None) -> str:
    """The unit the objective (and so the screen) is in: a capacity is requests in flight (closed loop)
    or requests/s (open loop), as :mod:`orchestrator.measure.capacity` writes it; "" when unknown."""
    if objective == "capacity":
        if capacity_mode is None:
            return ""
        return "req/s" if capacity_mode == "open" else "concurrent"
    return _UNITS.get(objective, "")


def search_fields(trials: Sequence[TrialRecord], pruned: Sequence[PrunedPoint] = ()) -> list[str]:
    """The search's fields, in the order the trials (then the points pruned before start) first name them."""
    seen: dict[str, None] = {}
    for params in [t.params for t in trials] + [p.params for p in pruned]:
        seen.update(dict.fromkeys(params))
    return list(seen)


@dataclass(frozen=True)
class TrialRow:
    """One point of the search: its first trial, the trials that asked it again, what it measured."""

    number: int
    repeats: tuple[int, ...]  # later trials that asked the same point (same_as), nothing launched
    params: dict[str, Any]
    state: str
    screen: float | None  # the screen's estimate, in the objective's unit (rough)
    values: list[float] | None  # the full measurement's value(s): None when not measured in full
    at_least: bool
    launches: int
    wall_s: float
    why: str
    broken: tuple[str, ...]  # gated requirements the screen broke (TrialRecord.constraints)
    constraints: dict[str, float]

    @property
    def asked(self) -> int:
        """How many trials asked this point (1: only its own)."""
        return 1 + len(self.repeats)


def _root(trial: TrialRecord, by_number: dict[int, TrialRecord]) -> int:
    """The first trial of ``trial``'s point (a same_as chain followed to its start)."""
    number, seen = trial.number, set()
    while (found := by_number.get(number)) is not None and found.same_as is not None and number not in seen:
        seen.add(number)
        number = found.same_as
    return number


def _full(trial: TrialRecord) -> list[float] | None:
    """The full measurement's value(s): a pruned trial's recorded value is its screen, not a result."""
    return trial.values if trial.fidelity == "full" and trial.values else None


def trial_rows(trials: Sequence[TrialRecord]) -> list[TrialRow]:
    """One row per point, by first trial number: a trial that reused an earlier point's result is folded
    into the row of that point (and counted); a trial still running has a row saying so."""
    by_number = {t.number: t for t in trials}
    repeats: dict[int, list[int]] = {}
    for trial in trials:
        root = _root(trial, by_number)
        if root != trial.number and root in by_number:
            repeats.setdefault(root, []).append(trial.number)
    rows: list[TrialRow] = []
    for trial in sorted(trials, key=lambda t: t.number):
        root = _root(trial, by_number)
        if root != trial.number and root in by_number:
            continue
        rows.append(
            TrialRow(
                number=trial.number,
                repeats=tuple(sorted(repeats.get(trial.number, []))),
                params=trial.params,
                state=trial.state,
                screen=trial.screen,
                values=_full(trial),
                at_least=trial.at_least,
                launches=trial.launches,
                wall_s=trial.wall_s,
                why=_why(trial),
                broken=tuple(trial.broken),
                constraints=dict(trial.constraints),
            )
        )
    return rows


def _why(trial: TrialRecord) -> str:
    """The row's reason: none for a point measured in full; a pruned point's in words; others shortened
    to their first clause when long (the infeasible region lists the whole text)."""
    if trial.state == "complete" and not trial.baseline:  # the baseline's point says why: not its own launch
        return ""
    if trial.state == "pruned":
        return "screen not among the best"
    why = " ".join(trial.why.split())
    if len(why) <= WHY_WIDTH:
        return why
    head = why.split(": ", 1)[0]
    return head if len(head) <= WHY_WIDTH else why[: WHY_WIDTH - 3] + "..."


def trials_header(
    objective: str, unit: str, fields: Sequence[str], *, pareto: bool = False, constraints: bool = False
) -> tuple[str, ...]:
    """The table's columns: the trial, one per search field, what happened, the screen's estimate and the
    full measurement in the objective's unit (named here), how often the point was asked, its cost."""
    in_unit = f" ({unit})" if unit else ""
    how = _SCREEN_HOW.get(objective, "rough: one run at the screen level")
    sep = "; " if unit else ""
    header = ["trial", *fields, "state", f"screen ({unit}{sep}{how})", f"{objective}{in_unit}"]
    if pareto:
        header.append(SECOND_OBJECTIVE)
    if constraints:
        header.append("requirements at the screen")
    return (*header, "asked", "launches", "wall s", "why")


def _param(value: Any) -> str:
    return "-" if value is None else str(value)


def _constraints(row: TrialRow) -> str:
    if not row.constraints:
        return "-"
    if not row.broken:
        return "all met"
    # the violation size is a fraction beyond the gates' limit (TrialRecord.constraints): as the console
    return "broke " + ", ".join(
        f"{name} {row.constraints[name]:+.1%} beyond its limit" for name in row.broken
    )


def row_cells(
    row: TrialRow, fields: Sequence[str], *, pareto: bool = False, constraints: bool = False
) -> list[str]:
    """A row's cells under :func:`trials_header` (same ``fields``, ``pareto`` and ``constraints``)."""
    screen = "-" if row.screen is None else f"{row.screen:.3g}"
    full = fmt_estimate(row.values[:1] if row.values else None, at_least=row.at_least)
    cells = [str(row.number), *(_param(row.params.get(f)) for f in fields), row.state, screen, full]
    if pareto:
        cells.append(fmt_estimate(row.values[1:2]) if row.values else "-")
    if constraints:
        cells.append(_constraints(row))
    return [*cells, str(row.asked), str(row.launches), f"{row.wall_s:.1f}", row.why]
