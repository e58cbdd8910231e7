"""The search report one reads at a glance (report/search_table.py, report/search_region.py and the
section and plot built on them): one row per point with a column per field, the screen in the objective's
unit and never shown as the full measurement, repeats folded, the feasible region, and the winner's
confirmation as the gates judged it rather than "not confirmed yet"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contracts.trials import (
    Confirmation,
    PrunedPoint,
    SearchRecord,
    TrialRecord,
    TrialState,
    Winner,
    write_search,
)
from report.plots import _pyplot
from report.search import confirmation_of, search_model, search_section
from report.search_plot import search_figure, search_title, trial_points
from report.search_region import RegionCell, feasible_region
from tests.unit.test_report_search import search_verdicts


def _trial(number: int, state: TrialState, params: dict[str, Any] | None = None, **kw: Any) -> TrialRecord:
    kw.setdefault("launches", 0 if "same_as" in kw else 1)
    return TrialRecord(
        number=number, name=f"s_t{number:03}", params=params or {"max_num_seqs": number}, state=state, **kw
    )


def _record(trials: list[TrialRecord], **kw: Any) -> SearchRecord:
    fields: dict[str, Any] = {
        "name": "s",
        "objective": "capacity",
        "directions": ["maximize"],
        "space_size": 16,
        "trials": trials,
        "launches": sum(t.launches for t in trials),
        "max_launches": 16,
        "stopped": "budget spent",
        "baseline": 16.0,
    }
    return SearchRecord(**(fields | kw))


def _table(tmp_path: Path, record: SearchRecord, mode: str | None = "closed") -> list[str]:
    """report.md's trials table of ``record``: the header line, then one line per row."""
    write_search(tmp_path, record)
    text = search_section(search_model(tmp_path, search_verdicts(None), capacity_mode=mode))
    table = text.split("### Trials\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    return [table[0], *table[2:]]


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip("|").split("|")]


# --------------------------------------------------------------------------- the screen is not a result

#: A trial, then its row's screen and capacity cells: the screen's column holds the screen, in the
#: objective's unit; the capacity's column only a value measured in full.
SCREEN_ROWS = [
    (_trial(1, "pruned", fidelity="screen", screen=143.4, values=[143.4]), "143", "-"),
    (_trial(1, "pruned", fidelity="screen", screen=0.79, values=[0.79]), "0.79", "-"),
    (_trial(1, "complete", fidelity="full", screen=5.16, values=[24.0]), "5.16", "24"),
    (_trial(1, "complete", fidelity="full", screen=40.0, values=[16.0], at_least=True), "40", "≥ 16"),
    (_trial(1, "infeasible", fidelity="start", why="did not start (oom)"), "-", "-"),
    (_trial(1, "failed", fidelity="start", why="the screening run did not complete"), "-", "-"),
]


@pytest.mark.parametrize(("trial", "screen", "full"), SCREEN_ROWS)
def test_the_screen_has_its_own_column_and_is_never_the_full_figure(
    tmp_path: Path, trial: TrialRecord, screen: str, full: str
) -> None:
    header, row = _table(tmp_path, _record([trial]))
    columns = _cells(header)
    cells = dict(zip(columns, _cells(row), strict=True))
    assert cells["screen (concurrent; rough: screen level x SLO margin)"] == screen
    assert cells["capacity (concurrent)"] == full


#: Trials, then the values the objective's panel draws (measured in full) and the screens' own panel.
PLOT_ROWS = [
    (
        [
            _trial(0, "complete", fidelity="full", screen=20.0, values=[24.0]),
            _trial(1, "pruned", fidelity="screen", screen=143.4, values=[143.4]),
        ],
        [24.0],
        [20.0, 143.4],
    ),
    ([_trial(0, "pruned", fidelity="screen", screen=9.0, values=[9.0])], [], [9.0]),
    ([_trial(0, "complete", fidelity="full", values=[12.0])], [12.0], []),
]


#: Trials, then the launches at which the objective's panel draws a cross (no value) and their labels.
CROSS_ROWS = [
    (  # a point that did not start, asked again twice: one cross, at its one launch
        [
            _trial(0, "infeasible", fidelity="start", why="OOM"),
            _trial(1, "complete", fidelity="full", values=[20.0]),
            _trial(2, "infeasible", fidelity="start", why="same point as trial 0: OOM", same_as=0),
            _trial(3, "infeasible", fidelity="start", why="same point as trial 0: OOM", same_as=0),
        ],
        [1],
    ),
    (  # a point that broke a requirement is a cross, not a value
        [_trial(0, "complete", fidelity="full", screen=9.0, values=[30.0], constraints={"ttft": 0.2})],
        [1],
    ),
    ([_trial(0, "failed", why="the client's host stalled"), _trial(1, "failed", why="x", same_as=0)], [1]),
]


@pytest.mark.parametrize(("trials", "crosses"), CROSS_ROWS)
def test_a_point_without_a_value_is_one_cross_however_often_it_was_asked(
    trials: list[TrialRecord], crosses: list[int]
) -> None:
    plt = _pyplot()
    fig = search_figure(plt, _record(trials), "t")
    try:
        drawn = [
            int(x)
            for line in fig.axes[0].get_lines()
            if str(line.get_label()).startswith(("infeasible", "failed"))
            for x in line.get_xdata()
        ]
        assert drawn == crosses
        assert _panel_values(fig.axes[0]) == sorted(
            v for t in trials if t.same_as is None and not t.broken and t.values for v in t.values[:1]
        )
    finally:
        plt.close(fig)


def _panel_values(ax: Any) -> list[float]:
    """The data values a panel plots (markers only: the baseline's and best-so-far lines excluded)."""
    out: list[float] = []
    for line in ax.get_lines():
        label = str(line.get_label())
        marker_only = line.get_linestyle() in ("None", "none", "")
        if marker_only and not label.startswith(("infeasible", "failed", "winner", "confirmation")):
            out += [float(v) for v in line.get_ydata()]
    return sorted(out)


@pytest.mark.parametrize(("trials", "measured", "screens"), PLOT_ROWS)
def test_a_screen_is_drawn_on_its_own_axis_never_beside_full_measurements(
    trials: list[TrialRecord], measured: list[float], screens: list[float]
) -> None:
    plt = _pyplot()
    fig = search_figure(plt, _record(trials), "t", unit="concurrent")
    try:
        objective, screen_axis = fig.axes[0], fig.axes[1]
        assert _panel_values(objective) == measured
        assert _panel_values(screen_axis) == screens
        assert "capacity (concurrent)" in objective.get_ylabel()
        assert screen_axis.get_ylabel() == "screen (concurrent)"
    finally:
        plt.close(fig)


# --------------------------------------------------------------------------- repeats, fields, units

#: Trials, then the rows' trial numbers and how many times each point was asked.
FOLD_ROWS = [
    ([_trial(0, "complete", fidelity="full", values=[24.0])], [("0", "1")]),
    (
        [
            _trial(0, "complete", fidelity="full", values=[24.0]),
            _trial(1, "complete", fidelity="full", values=[24.0], same_as=0),
            _trial(2, "pruned", fidelity="screen", screen=3.0, values=[3.0]),
            _trial(3, "complete", fidelity="full", values=[24.0], same_as=0),
        ],
        [("0", "3"), ("2", "1")],
    ),
    (  # a repeat of a repeat is the first trial's point
        [
            _trial(0, "pruned", fidelity="screen", screen=3.0, values=[3.0]),
            _trial(1, "pruned", fidelity="screen", screen=3.0, values=[3.0], same_as=0),
            _trial(2, "pruned", fidelity="screen", screen=3.0, values=[3.0], same_as=1),
        ],
        [("0", "3")],
    ),
    (  # a point asked again after it did not start
        [
            _trial(0, "infeasible", fidelity="start", why="OOM"),
            _trial(1, "infeasible", fidelity="start", why="same point as trial 0: OOM", same_as=0),
        ],
        [("0", "2")],
    ),
]


@pytest.mark.parametrize(("trials", "rows"), FOLD_ROWS)
def test_repeats_of_a_point_fold_into_its_row_with_a_count(
    tmp_path: Path, trials: list[TrialRecord], rows: list[tuple[str, str]]
) -> None:
    header, *lines = _table(tmp_path, _record(trials))
    columns = _cells(header)
    found = [dict(zip(columns, _cells(line), strict=True)) for line in lines]
    assert [(r["trial"], r["asked"]) for r in found] == rows


def test_each_search_field_has_a_column_in_the_order_first_tried(tmp_path: Path) -> None:
    trials = [
        _trial(0, "complete", {"layout": "tp2_dp4", "max_num_seqs": 64}, fidelity="full", values=[20.0]),
        _trial(1, "pruned", {"layout": "tp4_dp2", "kv_cache_dtype": "fp8"}, screen=2.0, values=[2.0]),
    ]
    header, first, second = _table(tmp_path, _record(trials))
    assert _cells(header)[:5] == ["trial", "layout", "max_num_seqs", "kv_cache_dtype", "state"]
    assert _cells(first)[:5] == ["0", "tp2_dp4", "64", "-", "complete"]
    assert _cells(second)[:5] == ["1", "tp4_dp2", "-", "fp8", "pruned"]


#: objective, capacity.profile's mode, then the objective's column, the screen's and the winner table's.
UNIT_ROWS = [
    ("capacity", "closed", "capacity (concurrent)", "screen (concurrent; rough: screen level x SLO margin)"),
    ("capacity", "open", "capacity (req/s)", "screen (req/s; rough: screen level x SLO margin)"),
    ("goodput", "closed", "goodput (tok/s)", "screen (tok/s; rough: one run at the screen level)"),
    (
        "tps_per_gpu",
        "open",
        "tps_per_gpu (output tok/s per GPU)",
        "screen (output tok/s per GPU; rough: one run at the screen level)",
    ),
    ("capacity", None, "capacity", "screen (rough: screen level x SLO margin)"),  # no capacity profile
]


@pytest.mark.parametrize(("objective", "mode", "column", "screen"), UNIT_ROWS)
def test_the_header_names_the_objectives_unit(
    tmp_path: Path, objective: str, mode: str | None, column: str, screen: str
) -> None:
    trials = [_trial(0, "complete", fidelity="full", screen=5.0, values=[24.0])]
    winner = Winner(name="s_t000", trial=0, params={}, estimate=[24.0], yaml_file="search/winner.yaml")
    header, _row = _table(tmp_path, _record(trials, objective=objective, winner=winner), mode)
    assert _cells(header)[3:5] == [screen, column]
    text = search_section(search_model(tmp_path, search_verdicts("keep"), capacity_mode=mode))
    unit = column.split(" (", 1)[1].rstrip(")") if " (" in column else ""
    assert (f"|  | figure ({unit}) | verdict |" if unit else "|  | figure | verdict |") in text


# --------------------------------------------------------------------------- requirements, region

BROKE = {"prefill_10k TTFT": 0.18, "serial e2e": -0.05}
MET = {"prefill_10k TTFT": -0.02}

#: A trial's constraint record, then its row's requirements cell, its kind on the plot and in the region.
CONSTRAINT_ROWS = [
    (BROKE, "broke prefill_10k TTFT +18.0% beyond its limit", "infeasible", "infeasible"),
    (MET, "all met", "measured", "measured"),
    ({}, "-", "measured", "measured"),
]


@pytest.mark.parametrize(("constraints", "cell", "kind", "status"), CONSTRAINT_ROWS)
def test_a_point_that_broke_a_requirement_is_infeasible_everywhere(
    tmp_path: Path, constraints: dict[str, float], cell: str, kind: str, status: str
) -> None:
    trials = [
        _trial(0, "complete", fidelity="full", screen=30.0, values=[30.0], constraints=constraints),
        _trial(1, "complete", fidelity="full", screen=20.0, values=[20.0], constraints={"x": -1.0}),
    ]
    record = _record(trials)
    header, row, _other = _table(tmp_path, record)
    cells = dict(zip(_cells(header), _cells(row), strict=True))
    assert cells["requirements at the screen"] == cell
    assert trial_points(record)[0].kind == kind
    region = feasible_region(record)
    assert region is not None
    assert region.cells[0].status == status


def test_without_a_constraint_record_there_is_no_requirements_column(tmp_path: Path) -> None:
    header, _row = _table(tmp_path, _record([_trial(0, "complete", fidelity="full", values=[24.0])]))
    assert "requirements at the screen" not in _cells(header)


def test_the_feasible_region_places_every_point_over_the_two_fields_tried_most() -> None:
    def point(layout: str, seqs: int, util: float) -> dict[str, Any]:
        return {"layout": layout, "max_num_seqs": seqs, "gpu_memory_utilization": util}

    trials = [
        _trial(0, "complete", point("tp2", 64, 0.8), fidelity="full", values=[20.0]),
        _trial(1, "infeasible", point("tp2", 64, 0.9), fidelity="start", why="OOM"),
        _trial(2, "pruned", point("tp4", 128, 0.8), fidelity="screen", screen=9.0, values=[9.0]),
        _trial(3, "complete", point("tp4", 64, 0.8), fidelity="full", values=[24.0]),
        _trial(4, "complete", point("tp4", 64, 0.8), fidelity="full", values=[24.0], same_as=3),
        _trial(5, "complete", point("tp2", 256, 0.8), fidelity="full", values=[28.0]),
        _trial(6, "complete", point("tp4", 256, 0.8), fidelity="full", values=[30.0], constraints={"t": 1.0}),
        _trial(7, "failed", point("tp2", 128, 0.8), why="the client's host stalled"),
    ]
    pruned = [PrunedPoint(params={"layout": "tp16"}, why="16 GPUs on an 8-GPU host")]
    region = feasible_region(_record(trials, pruned=pruned))
    assert region is not None
    assert (region.x_field, region.x_values) == ("layout", ["tp2", "tp4", "tp16"])  # a tie: the first
    assert (region.y_field, region.y_values) == ("max_num_seqs", [64, 128, 256])
    assert region.cells == [
        RegionCell(0, 0, "measured", 20.0, points=2, infeasible=1),  # one of its two points did not start
        RegionCell(0, 1, "failed", None, points=1, infeasible=0),
        RegionCell(0, 2, "measured", 28.0, points=1, infeasible=0),
        RegionCell(1, 0, "measured", 24.0, points=1, infeasible=0),  # the repeat counts once
        RegionCell(1, 1, "screened", None, points=1, infeasible=0),  # a screen is no best value
        RegionCell(1, 2, "infeasible", None, points=1, infeasible=1),  # 30 broke a requirement: not best
        *(RegionCell(2, y, "infeasible", None, points=1, infeasible=1) for y in range(3)),  # tp16: all out
    ]


# --------------------------------------------------------------------------- the winner's confirmation

WINNER = Winner(name="s_t001", trial=1, params={}, estimate=[24.0], yaml_file="search/winner.yaml")

#: The gates' decision on the winner in verdicts.json (None: no verdict), trials.json's confirmation,
#: then what the plot's title says.
CONFIRMATION_ROWS = [
    ("keep", None, "winner s_t001: KEEP"),  # the sweep's end: trials.json's confirmation not yet written
    ("reject", None, "winner s_t001: REJECT"),
    ("reject", Confirmation(decision="reject"), "winner s_t001: REJECT"),  # `report` run later
    (None, None, "winner s_t001: INCOMPLETE"),  # judged, and the winner was never measured
]


@pytest.mark.parametrize(("decision", "recorded", "said"), CONFIRMATION_ROWS)
def test_a_judged_winner_is_never_not_confirmed_yet(
    tmp_path: Path, decision: str | None, recorded: Confirmation | None, said: str
) -> None:
    record = _record(
        [_trial(1, "complete", fidelity="full", values=[24.0])], winner=WINNER, confirmation=recorded
    )
    write_search(tmp_path, record)
    section = search_model(tmp_path, search_verdicts(decision))
    title = search_title(record, confirmation_of(section, record))
    assert said in title
    assert "not confirmed yet" not in title


def test_without_the_gates_word_a_winner_is_still_said_to_be_unconfirmed() -> None:
    record = _record([_trial(1, "complete", fidelity="full", values=[24.0])], winner=WINNER)
    assert "winner s_t001 not confirmed yet" in search_title(record, confirmation_of(None, record))
