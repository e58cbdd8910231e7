"""search.png (report.search_plot): trials against launches spent, infeasible ones marked, final or not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contracts.layout import PLOT_SEARCH
from contracts.trials import (
    Confirmation,
    SearchRecord,
    TrialRecord,
    TrialState,
    Winner,
    read_search,
    write_search,
)
from report.plots import _pyplot
from report.search_plot import TrialPoint, best_so_far, search_figure, trial_points, write_search_plot


def _trial(number: int, state: TrialState, launches: int = 1, **kw: Any) -> TrialRecord:
    params = {"max_num_seqs": number}
    return TrialRecord(
        number=number, name=f"demo_t{number}", params=params, state=state, launches=launches, **kw
    )


#: A small search: 2 measured, 1 stopped after its screen, 1 OOM, 1 repeat of trial 0, 1 failed, 1 running.
TRIALS = [
    _trial(0, "complete", fidelity="full", values=[24.0]),
    _trial(1, "infeasible", why="OOM at startup", fidelity="start"),
    _trial(2, "pruned", fidelity="screen", screen=8.0),
    _trial(3, "complete", launches=0, fidelity="full", values=[24.0], same_as=0),
    _trial(4, "complete", launches=2, fidelity="full", values=[32.0]),
    _trial(5, "failed", why="the client's host stalled"),
    _trial(6, "running"),
]


def _record(**kw: Any) -> SearchRecord:
    fields: dict[str, Any] = {
        "name": "demo",
        "objective": "capacity",
        "directions": ["maximize"],
        "space_size": 16,
        "trials": TRIALS,
        "launches": 6,
        "max_launches": 8,
        "baseline": 16.0,
    }
    return SearchRecord(**(fields | kw))


def test_trial_points_place_each_trial_at_the_launches_spent_when_it_ended() -> None:
    assert trial_points(_record()) == [
        TrialPoint(0, "demo_t0", 1, 24.0, "measured"),
        TrialPoint(1, "demo_t1", 2, None, "infeasible"),
        TrialPoint(2, "demo_t2", 3, None, "screened", 8.0),  # a screen: on its own axis, no value
        # trial 3 reused trial 0's point: no dot, no launch
        TrialPoint(4, "demo_t4", 5, 32.0, "measured"),
        TrialPoint(5, "demo_t5", 6, None, "failed"),
        # trial 6 is still running: nothing to show
    ]


@pytest.mark.parametrize(
    ("values", "direction", "expected"),
    [
        ([("measured", 3.0), ("measured", 2.0), ("measured", 5.0)], "maximize", [(1, 3.0), (3, 5.0)]),
        ([("measured", 3.0), ("measured", 2.0), ("measured", 5.0)], "minimize", [(1, 3.0), (2, 2.0)]),
        ([("screened", 9.0), ("measured", 2.0)], "maximize", [(2, 2.0)]),  # a screen is not a result
        ([("infeasible", None), ("failed", None)], "maximize", []),
    ],
)
def test_best_so_far(values: list[tuple[str, float | None]], direction: str, expected: list[Any]) -> None:
    points = [TrialPoint(i, f"t{i}", i + 1, v, k) for i, (k, v) in enumerate(values)]  # type: ignore[arg-type]
    assert best_so_far(points, direction) == expected


def _drawn(fig: Any) -> dict[str, Any]:
    """The lines of the objective's panel (the figure's first axes), by label."""
    return {line.get_label(): line for line in fig.axes[0].get_lines()}


def test_the_plot_marks_infeasible_trials_on_the_floor_and_says_the_search_is_not_final() -> None:
    plt = _pyplot()
    fig = search_figure(plt, _record(), "sweep-x")
    try:
        lines = _drawn(fig)
        ax = fig.axes[0]
        infeasible = next(line for label, line in lines.items() if label.startswith("infeasible"))
        assert list(infeasible.get_xdata()) == [2]
        assert list(infeasible.get_ydata()) == [0.03]  # axes fraction: the floor, whatever the values
        assert infeasible.get_transform() == ax.get_xaxis_transform()
        failed = next(line for label, line in lines.items() if label.startswith("failed"))
        assert list(failed.get_xdata()) == [6]
        best = lines["best measured so far"]
        assert list(best.get_xdata()) == [1, 5, 6] and list(best.get_ydata()) == [24.0, 32.0, 32.0]
        assert "baseline 16" in lines
        assert "still running: not final" in fig.get_suptitle()
        assert "launched 6 of 16 configurations, 6 of 8 launches" in fig.get_suptitle()
        assert not any(label.startswith(("winner", "confirmation")) for label in lines)
    finally:
        plt.close(fig)


@pytest.mark.parametrize(
    ("confirmation", "title_says", "diamond"),
    [
        (None, "winner demo_t4 not confirmed yet", False),
        (Confirmation(decision="keep", capacity=30.0), "winner demo_t4: KEEP", True),
        (Confirmation(decision="incomplete", reason="drift"), "winner demo_t4: INCOMPLETE", False),
    ],
)
def test_the_winner_is_starred_and_its_confirmation_drawn_only_when_measured(
    confirmation: Confirmation | None, title_says: str, diamond: bool
) -> None:
    winner = Winner(name="demo_t4", trial=4, params={}, estimate=[32.0], yaml_file="search/winner.yaml")
    record = _record(stopped="budget spent", winner=winner, confirmation=confirmation)
    plt = _pyplot()
    fig = search_figure(plt, record, "sweep-x")
    try:
        lines = _drawn(fig)
        star = lines["winner demo_t4 (search estimate)"]
        assert (list(star.get_xdata()), list(star.get_ydata())) == ([5], [32.0])
        assert title_says in fig.get_suptitle()
        assert any(label.startswith("confirmation KEEP: 30") for label in lines) is diamond
    finally:
        plt.close(fig)


def test_search_png_is_written_from_trials_json_and_not_without_a_search(tmp_path: Path) -> None:
    plt = _pyplot()
    assert write_search_plot(plt, tmp_path, read_search(tmp_path), "t") == []
    assert not (tmp_path / PLOT_SEARCH).exists()
    write_search(tmp_path, _record())
    assert write_search_plot(plt, tmp_path, read_search(tmp_path), "t") == [PLOT_SEARCH]
    assert (tmp_path / PLOT_SEARCH).read_bytes().startswith(b"\x89PNG")
