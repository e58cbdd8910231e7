"""The search's plot, ``search.png``: the objective against the launches spent, the screens' rough
estimates on an axis of their own, and the feasible region.

Pipeline position: beside :mod:`report.plots`, drawn from ``search/trials.json`` (:mod:`contracts.trials`)
and the report's search section (the confirmation as the gates judged it), deciding nothing. Left, top: a
trial measured in full is a filled dot at the launches spent when it ended, an infeasible or failed start
a cross on the axis' floor (it has no value), the best value measured in full so far a step line, the
winner a star, the baseline's figure a dashed line, the confirmation's figure (the winner measured again)
a diamond at the end. Left, below, on an axis of its own: each trial's screen (one run at the screen
level, a rough estimate), hollow where the pruner stopped the trial there; a screen is never drawn nor
ranked as a full measurement. Right: the feasible region (:mod:`report.search_region`). A search still
running, or a winner not judged, says so in the title. Without a search no file is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from contracts.layout import PLOT_SEARCH, SweepPaths
from contracts.metrics import fmt_estimate
from contracts.trials import Confirmation, SearchRecord, TrialRecord, current_best_words
from contracts.verdicts import decision_label
from report.search_region import PointStatus, Region, feasible_region

#: How a trial is drawn: measured in full, stopped after its screen, or no value (infeasible, failed).
PointKind = Literal["measured", "screened", "infeasible", "failed"]

_STYLE: dict[PointKind, tuple[str, str, str]] = {  # marker, colour, legend label
    "measured": ("o", "#1f77b4", "measured in full"),
    "screened": ("o", "#ff7f0e", "stopped after its screen"),
    "infeasible": ("x", "#d62728", "infeasible, no value (did not start,\nOOM, broke a requirement)"),
    "failed": ("x", "#7f7f7f", "failed (not the configuration's fault)"),
}
#: The feasible region's fill by what a cell's points found (a measured cell is shaded by its value).
_REGION: dict[PointStatus, tuple[str, str, str]] = {  # colour, hatch, legend label
    "measured": ("#2ca02c", "", "measured in full (best value)"),
    "screened": ("#d9d9d9", "", "screened only"),
    "infeasible": ("#f4a6a6", "xx", "infeasible (did not start, ruled out, broke a requirement)"),
    "failed": ("#ffffff", "..", "failed (not the configuration's fault)"),
}


@dataclass(frozen=True)
class TrialPoint:
    """One trial on the plot: launches spent when it ended (all trials up to it), its value measured in
    full (None: not measured in full) and its screen's estimate (drawn on the screens' own axis)."""

    number: int
    name: str
    launches: int
    value: float | None
    kind: PointKind
    screen: float | None = None


def _kind(trial: TrialRecord) -> PointKind | None:
    if trial.state == "running" or trial.same_as is not None:
        return None  # nothing to show yet; a repeated point (even one that did not start) is its first's
    if trial.state == "infeasible" or trial.broken:
        return "infeasible"
    if trial.state == "failed":
        return "failed"
    if trial.state == "complete" and trial.fidelity == "full" and trial.values:
        return "measured"
    return "screened" if trial.screen is not None else None


def trial_points(record: SearchRecord) -> list[TrialPoint]:
    """The trials drawn, by trial number: x is the launches spent by this trial and every one before it.

    A trial that reused an earlier point's result, or one still running, is not drawn; a pruned trial
    without a screen value (stopped before it was measured) neither. Only a trial measured in full has a
    value; a pruned trial's recorded value is its screen, which goes to :attr:`TrialPoint.screen`.
    """
    points: list[TrialPoint] = []
    spent = 0
    for trial in sorted(record.trials, key=lambda t: t.number):
        spent += trial.launches
        kind = _kind(trial)
        if kind is None:
            continue
        value = trial.values[0] if kind == "measured" and trial.values else None
        points.append(TrialPoint(trial.number, trial.name, spent, value, kind, trial.screen))
    return points


def best_so_far(points: Sequence[TrialPoint], direction: str) -> list[tuple[int, float]]:
    """The best *measured* estimate after each launch count where it changed (a screen is not a result)."""
    out: list[tuple[int, float]] = []
    for p in points:
        if p.kind != "measured" or p.value is None:
            continue
        better = not out or (p.value > out[-1][1] if direction == "maximize" else p.value < out[-1][1])
        if better:
            out.append((p.launches, p.value))
    return out


def search_title(record: SearchRecord, confirmation: Confirmation | None = None) -> str:
    """What the plot shows, and whether it is final: a running search or an unjudged winner says so.
    ``confirmation``: the gates' word as the report knows it (:func:`report.search.confirmation_of`),
    else trials.json's."""
    confirmed = confirmation if confirmation is not None else record.confirmation
    size = "a continuous space of" if record.space_size is None else str(record.space_size)
    head = (
        f"search {record.name}: {record.objective} against launches; launched {record.distinct_launched} "
        f"of {size} configurations, {record.launches} of {record.max_launches} launches"
    )
    if not record.stopped:
        state = "still running: not final"
    elif record.best_is_baseline:  # the console's words: nothing confirmed, nothing to adopt
        state = f"stopped ({record.stopped}); {current_best_words(record)}"
    elif record.winner is None:
        state = f"stopped ({record.stopped}), no winner"
    elif confirmed is None:
        state = f"stopped ({record.stopped}); winner {record.winner.name} not confirmed yet"
    else:
        said = decision_label(confirmed.decision)
        state = f"stopped ({record.stopped}); winner {record.winner.name}: {said}"
    return f"{head}\n{state}"


def _in(unit: str) -> str:
    return f" ({unit})" if unit else ""


def _draw_objective(
    ax: Any, record: SearchRecord, points: list[TrialPoint], confirmed: Any, unit: str
) -> None:
    """The values measured in full, failures on the floor, best so far, winner, baseline, confirmation."""
    direction = record.directions[0] if record.directions else "maximize"
    for kind in ("measured", "infeasible", "failed"):
        marker, color, label = _STYLE[kind]
        mine = [p for p in points if p.kind == kind]
        if not mine:
            continue
        xs = [p.launches for p in mine]
        if kind != "measured":  # no value: on the floor of the axis, whatever its scale
            ax.plot(xs, [0.03] * len(xs), marker, color=color, label=label, linestyle="none",
                    transform=ax.get_xaxis_transform(), markersize=8)  # fmt: skip
            continue
        ax.plot(xs, [p.value for p in mine], marker, color=color, label=label, linestyle="none",
                markersize=6)  # fmt: skip
    steps = best_so_far(points, direction)
    if steps:
        end = max(record.launches, steps[-1][0])
        xs = [x for x, _ in steps] + [end]
        ys = [y for _, y in steps] + [steps[-1][1]]
        ax.step(xs, ys, where="post", color="#2ca02c", linewidth=1.2, label="best measured so far")
    by_number = {p.number: p for p in points}
    won = by_number.get(record.winner.trial) if record.winner is not None else None
    if record.winner is not None and won is not None and won.value is not None:
        ax.plot([won.launches], [won.value], "*", markersize=16, color="#ff7f0e", markeredgecolor="black",
                linestyle="none", label=f"winner {record.winner.name} (search estimate)")  # fmt: skip
    capacity = record.objective == "capacity"
    if capacity and record.baseline is not None:
        ax.axhline(record.baseline, color="#222222", linestyle="--", linewidth=1,
                   label=f"baseline {record.baseline:g}")  # fmt: skip
    if capacity and confirmed is not None and confirmed.capacity is not None:
        shown = fmt_estimate([confirmed.capacity], at_least=confirmed.at_least)  # never beyond a level tried
        label = f"confirmation {decision_label(confirmed.decision)}: {shown}"
        ax.plot([record.launches], [confirmed.capacity], "D", markersize=8, color="#9467bd",
                linestyle="none", label=label)  # fmt: skip
    if not any(p.kind == "measured" for p in points):
        ax.text(0.5, 0.5, "no trial measured in full yet", ha="center", va="center", transform=ax.transAxes)
    many = "" if len(record.directions) < 2 else f", first of {len(record.directions)} objectives"
    better = "higher" if direction == "maximize" else "lower"
    ax.set_ylabel(f"{record.objective}{_in(unit)}\nmeasured in full{many}")
    ax.set_title(f"measured in full ({better} is better)", fontsize=8, loc="left")
    ax.set_xlim(left=0)
    ax.margins(y=0.15)  # room for the crosses on the floor
    ax.grid(alpha=0.3)


def _draw_screens(ax: Any, record: SearchRecord, points: list[TrialPoint], unit: str) -> None:
    """Each trial's screen on its own axis: hollow where the pruner stopped it, filled where promoted, a
    cross where it broke a gated requirement."""
    screened = [p for p in points if p.screen is not None]
    stopped = [p for p in screened if p.kind == "screened"]
    broke = [p for p in screened if p.kind == "infeasible"]
    promoted = [p for p in screened if p.kind in ("measured", "failed")]
    if promoted:
        ax.plot([p.launches for p in promoted], [p.screen for p in promoted], "o", color="#1f77b4",
                markersize=5, linestyle="none", label="promoted to the full measurement")  # fmt: skip
    if stopped:
        ax.plot([p.launches for p in stopped], [p.screen for p in stopped], "o", color="#ff7f0e",
                markerfacecolor="none", markersize=6, linestyle="none",
                label="stopped after its screen\n(not measured in full)")  # fmt: skip
    if broke:
        ax.plot([p.launches for p in broke], [p.screen for p in broke], "x", color="#d62728",
                markersize=7, linestyle="none", label="broke a gated requirement\nat its screen")  # fmt: skip
    if not screened:
        ax.text(0.5, 0.5, "no screen measured", ha="center", va="center", transform=ax.transAxes)

    how = "screen level x SLO margin" if record.objective == "capacity" else "one run at the screen level"
    ax.set_title(f"screens, a rough estimate ({how}): not a measurement in full", fontsize=8, loc="left")
    ax.set_ylabel(f"screen{_in(unit)}")
    ax.set_xlabel("server launches spent")
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)


def _tick(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _draw_region(plt: Any, ax: Any, region: Region | None, unit: str) -> None:
    """The feasible region: a cell per value of the two fields tried most, by what its points found."""
    ax.set_title("feasible region", fontsize=9)
    if region is None:
        ax.text(0.5, 0.5, "no point placed yet", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    values = [c.best for c in region.cells if c.best is not None]
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    greens = plt.get_cmap("Greens")
    for cell in region.cells:
        color, hatch, _ = _REGION[cell.status]
        if cell.status == "measured" and cell.best is not None:
            color = greens(0.25 + 0.45 * ((cell.best - low) / (high - low) if high > low else 1.0))
        edge = "#d62728" if cell.infeasible and cell.status != "infeasible" else "#555555"
        ax.add_patch(plt.Rectangle((cell.x - 0.5, cell.y - 0.5), 1, 1, facecolor=color, hatch=hatch,
                                   edgecolor=edge, linewidth=1.5 if edge == "#d62728" else 0.5))  # fmt: skip
        text = f"{cell.best:.3g}" if cell.best is not None else ""
        if cell.infeasible and cell.status != "infeasible":
            text += f"\n{cell.infeasible} of {cell.points} infeasible"
        if text:
            ax.text(cell.x, cell.y, text.strip(), ha="center", va="center", fontsize=7)
    ax.set_xlim(-0.5, len(region.x_values) - 0.5)
    ax.set_ylim(-0.5, len(region.y_values) - 0.5)
    ax.set_xticks(range(len(region.x_values)), [_tick(v) for v in region.x_values], rotation=30, fontsize=7)
    ax.set_xlabel(region.x_field)
    if region.y_field is None:
        ax.set_yticks([])
    else:
        ax.set_yticks(range(len(region.y_values)), [_tick(v) for v in region.y_values], fontsize=7)
        ax.set_ylabel(region.y_field)
    shown = {c.status for c in region.cells}
    handles = [
        plt.Rectangle((0, 0), 1, 1, facecolor=color, hatch=hatch, edgecolor="#555555", label=label)
        for status, (color, hatch, label) in _REGION.items()
        if status in shown
    ]
    note = f"cell: best value measured in full{_in(unit)}; other fields folded in"
    ax.legend(handles=handles, fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.14), title=note,
              title_fontsize=6)  # fmt: skip


def search_figure(
    plt: Any, record: SearchRecord, title: str, *, confirmation: Confirmation | None = None, unit: str = ""
) -> Any:
    """The figure: the objective against launches above the screens' own axis, the feasible region beside.
    ``confirmation``: the winner's as the report knows it (else trials.json's); ``unit``: the objective's."""
    fig = plt.figure(figsize=(15, 6.8))
    grid = fig.add_gridspec(2, 3, width_ratios=(3, 1.3, 2.2), height_ratios=(3, 2))
    top = fig.add_subplot(grid[0, 0])
    screens = fig.add_subplot(grid[1, 0], sharex=top)
    region = fig.add_subplot(grid[:, 2])
    points = trial_points(record)
    confirmed = confirmation if confirmation is not None else record.confirmation
    _draw_objective(top, record, points, confirmed, unit)
    _draw_screens(screens, record, points, unit)
    _draw_region(plt, region, feasible_region(record), unit)
    for row, ax in enumerate((top, screens)):  # each panel's legend beside it, in a column of its own
        keys = fig.add_subplot(grid[row, 1])
        keys.set_axis_off()
        handles, labels = ax.get_legend_handles_labels()
        if handles:
            keys.legend(handles, labels, fontsize=7, loc="center left", frameon=False)
    fig.suptitle(f"{search_title(record, confirmed)}\n{title}", fontsize=9)
    fig.tight_layout()
    return fig


def write_search_plot(
    plt: Any,
    sweep_dir: Path,
    record: SearchRecord | None,
    title: str,
    *,
    confirmation: Confirmation | None = None,
    unit: str = "",
) -> list[str]:
    """Draw ``search.png`` when the sweep ran a search; returns the files written. The PNG's ``Title``
    carries :func:`search_title` (what a reader, or a test, can check without looking)."""
    if record is None:
        return []
    fig = search_figure(plt, record, title, confirmation=confirmation, unit=unit)
    said = search_title(record, confirmation if confirmation is not None else record.confirmation)
    try:
        fig.savefig(SweepPaths(sweep_dir).search_plot, dpi=110, metadata={"Software": None, "Title": said})
    finally:
        plt.close(fig)
    return [PLOT_SEARCH]
