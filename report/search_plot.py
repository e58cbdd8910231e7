"""The search's plot, ``search.png``: each trial's objective estimate against the launches spent so far.

Pipeline position: beside :mod:`report.plots`, drawn from ``search/trials.json`` (:mod:`contracts.trials`),
deciding nothing. A measured trial is a filled dot, a trial stopped after its screen a hollow one (its
screen's estimate), an infeasible or failed start a cross on the axis' floor (it has no value), the best
estimate so far a step line, the winner a star, the baseline's figure a dashed line, and the confirmation's
figure (the winner measured again) a diamond at the end. A search still running, or a winner not
confirmed, says so in the title. Without a search no file is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from contracts.layout import PLOT_SEARCH, SweepPaths
from contracts.metrics import fmt_estimate
from contracts.trials import SearchRecord, TrialRecord
from contracts.verdicts import decision_label

#: How a trial is drawn: measured in full, stopped after its screen, or no value (infeasible, failed).
PointKind = Literal["measured", "screened", "infeasible", "failed"]

_STYLE: dict[PointKind, tuple[str, str, str]] = {  # marker, colour, legend label
    "measured": ("o", "#1f77b4", "measured (estimate)"),
    "screened": ("o", "#1f77b4", "stopped after its screen (screen estimate)"),
    "infeasible": ("x", "#d62728", "infeasible (no value: failed start, OOM, refused)"),
    "failed": ("x", "#7f7f7f", "failed (not the configuration's fault)"),
}


@dataclass(frozen=True)
class TrialPoint:
    """One trial on the plot: launches spent when it ended (all trials up to it), and its value."""

    number: int
    name: str
    launches: int
    value: float | None
    kind: PointKind


def _kind(trial: TrialRecord) -> PointKind | None:
    if trial.state in ("infeasible", "failed"):
        return trial.state
    if trial.state == "running" or trial.same_as is not None:
        return None  # nothing to show yet; a repeated point is its earlier trial's dot
    if trial.state == "complete" and trial.fidelity == "full":
        return "measured"
    return "screened" if _value(trial) is not None else None


def _value(trial: TrialRecord) -> float | None:
    if trial.values:
        return trial.values[0]
    return trial.screen


def trial_points(record: SearchRecord) -> list[TrialPoint]:
    """The trials drawn, by trial number: x is the launches spent by this trial and every one before it.

    A trial that reused an earlier point's result, or one still running, is not drawn; a pruned trial
    without a screen value (stopped before it was measured) neither.
    """
    points: list[TrialPoint] = []
    spent = 0
    for trial in sorted(record.trials, key=lambda t: t.number):
        spent += trial.launches
        kind = _kind(trial)
        if kind is None:
            continue
        value = None if kind in ("infeasible", "failed") else _value(trial)
        points.append(TrialPoint(trial.number, trial.name, spent, value, kind))
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


def search_title(record: SearchRecord) -> str:
    """What the plot shows, and whether it is final: a running search or an unconfirmed winner says so."""
    size = "a continuous space of" if record.space_size is None else str(record.space_size)
    head = (
        f"search {record.name}: {record.objective} against launches; launched {record.distinct_launched} "
        f"of {size} configurations, {record.launches} of {record.max_launches} launches"
    )
    if not record.stopped:
        state = "still running: not final"
    elif record.winner is None:
        state = f"stopped ({record.stopped}), no winner"
    elif record.confirmation is None:
        state = f"stopped ({record.stopped}); winner {record.winner.name} not confirmed yet"
    else:
        said = decision_label(record.confirmation.decision)
        state = f"stopped ({record.stopped}); winner {record.winner.name}: {said}"
    return f"{head}\n{state}"


def search_figure(plt: Any, record: SearchRecord, title: str) -> Any:
    """The figure of :func:`trial_points`, the best-so-far line, the winner, baseline and confirmation."""
    fig, ax = plt.subplots(figsize=(10, 4.8))
    points = trial_points(record)
    direction = record.directions[0] if record.directions else "maximize"
    for kind, (marker, color, label) in _STYLE.items():
        mine = [p for p in points if p.kind == kind]
        if not mine:
            continue
        xs = [p.launches for p in mine]
        if kind in ("infeasible", "failed"):  # no value: on the floor of the axis, whatever its scale
            ax.plot(xs, [0.03] * len(xs), marker, color=color, label=label, linestyle="none",
                    transform=ax.get_xaxis_transform(), markersize=8)  # fmt: skip
            continue
        face = color if kind == "measured" else "none"
        ax.plot(xs, [p.value for p in mine], marker, color=color, markerfacecolor=face, label=label,
                linestyle="none", markersize=6)  # fmt: skip
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
    confirmed = record.confirmation
    if capacity and confirmed is not None and confirmed.capacity is not None:
        shown = fmt_estimate([confirmed.capacity], at_least=confirmed.at_least)  # never beyond a level tried
        label = f"confirmation {decision_label(confirmed.decision)}: {shown}"
        ax.plot([record.launches], [confirmed.capacity], "D", markersize=8, color="#9467bd",
                linestyle="none", label=label)  # fmt: skip
    if not points:
        ax.text(0.5, 0.5, "no trial has a result yet", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("server launches spent")
    unit = "" if len(record.directions) < 2 else f" (first of {len(record.directions)} objectives)"
    ax.set_ylabel(f"{record.objective}{unit} ({'higher' if direction == 'maximize' else 'lower'} is better)")
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(f"{search_title(record)}\n{title}", fontsize=9)
    fig.tight_layout()
    return fig


def write_search_plot(plt: Any, sweep_dir: Path, record: SearchRecord | None, title: str) -> list[str]:
    """Draw ``search.png`` when the sweep ran a search; returns the files written."""
    if record is None:
        return []
    fig = search_figure(plt, record, title)
    try:
        fig.savefig(SweepPaths(sweep_dir).search_plot, dpi=110, metadata={"Software": None})
    finally:
        plt.close(fig)
    return [PLOT_SEARCH]
