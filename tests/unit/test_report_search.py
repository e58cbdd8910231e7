"""The report's search section (report/search.py): the section as data (report.json's ``search``) and
report.md rendered from it: the estimate beside the confirmation's verdict, the trials, the infeasible
region, the winner's file; only a KEEP is a recommendation; no search, no section."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.files import write_model
from contracts.layout import PromotionPaths, SweepPaths, promotion_dir
from contracts.results import CapacityResult, RecoveryValidation
from contracts.trials import PrunedPoint, SearchRecord, Tradeoff, TrialRecord, Winner, write_search
from contracts.verdicts import DriftResult, SweepVerdict, Verdict
from orchestrator.search.lines import baseline_best_line
from report.search import SearchSection, search_model, search_section
from report.search_plot import search_title
from report.search_table import row_cells, search_fields, trial_rows
from report.search_tradeoff import tradeoff_section

WINNER_YAML = "defaults: [baseline, _self_]\nname: s_t001\n"


def search_verdicts(decision: str | None, retained: str = "base") -> SweepVerdict:
    """The gates' verdicts on a search's winner ``s_t001`` (None: not judged)."""
    found = [] if decision is None else [Verdict(candidate="s_t001", decision=decision, reason="why")]  # type: ignore[arg-type]
    return SweepVerdict(
        baseline="base",
        retained=retained,
        retained_reason="",
        drift=DriftResult.model_construct(),
        verdicts=found,
    )


def search_record(*, winner: bool = True) -> SearchRecord:
    """A search of 8 points: one out of memory, a winner measured fully, one pruned at its screen."""
    trials = [
        TrialRecord(
            number=0, name="s_t000", params={"max_num_seqs": 64}, state="infeasible", why="OOM", launches=1
        ),
        TrialRecord(
            number=1,
            name="s_t001",
            params={"max_num_seqs": 256},
            state="complete",
            fidelity="full",
            values=[152.0],
            launches=1,
            wall_s=5.5,
        ),
        TrialRecord(
            number=2,
            name="s_t002",
            params={"max_num_seqs": 128},
            state="pruned",
            fidelity="screen",
            values=[9.0],
            screen=9.0,
            launches=1,
        ),
    ]
    return SearchRecord(
        name="s",
        objective="capacity",
        directions=["maximize"],
        space_size=8,
        trials=trials,
        launches=3,
        max_launches=4,
        stopped="budget spent: 3 of 3 launches",
        baseline=128.0,
        pruned=[PrunedPoint(params={"layout": "tp8_dp2"}, why="TP x DP = 16 exceeds the 8 GPUs")],
        winner=Winner(
            name="s_t001",
            trial=1,
            params={"max_num_seqs": 256},
            estimate=[152.0],
            yaml_file="search/winner.yaml",
        )
        if winner
        else None,
    )


def searched(sweep: Path, decision: str | None, retained: str = "base") -> SearchSection | None:
    """The section of a sweep directory holding :func:`search_record` and its winner's file."""
    write_search(sweep, search_record())
    SweepPaths(sweep).winner.write_text(WINNER_YAML)
    return search_model(sweep, search_verdicts(decision, retained))


#: decision on the winner, the configuration retained, its label, the advice, the baseline's row's verdict.
VERDICT_ROWS = [
    ("keep", "s_t001", "KEEP", "**Recommended**: `search/winner.yaml`", "recommended: s_t001"),
    ("reject", "base", "REJECT", "Not recommended: only a KEEP is", "retained"),
    ("incomplete", "base", "INCOMPLETE", "Not recommended: only a KEEP is", "retained"),
    (None, "base", "not judged", "Not recommended: only a KEEP is", "retained"),
]


@pytest.mark.parametrize(("decision", "retained", "shown", "advice", "base_state"), VERDICT_ROWS)
def test_the_search_section_puts_the_estimate_beside_the_confirmations_verdict(
    tmp_path: Path, decision: str | None, *, retained: str, shown: str, advice: str, base_state: str
) -> None:
    text = search_section(searched(tmp_path, decision, retained))
    assert "launched 3 of 8 configurations, 3 launch(es) of 4 (budget spent: 3 of 3 launches)" in text
    assert "| search's estimate (trial 1, one launch) | 152 | - |" in text
    assert f"| confirmation (s_t001 measured again, the gates) | - | {shown} |" in text
    assert f"| baseline (base) | 128 | {base_state} |" in text
    assert advice in text
    assert "| 2 | 128 | pruned | 9 | - | 1 | 1 | 0.0 | screen not among the best |" in text
    assert "- pruned before start: layout=tp8_dp2: TP x DP = 16 exceeds the 8 GPUs" in text
    assert "- trial 0 (max_num_seqs=64): OOM" in text
    assert "```yaml\ndefaults: [baseline, _self_]\nname: s_t001\n```" in text


@pytest.mark.parametrize(
    ("decision", "capacity", "measured", "measured_text", "recommended"),
    [
        ("keep", 160.0, 160.0, "160", True),
        ("reject", None, None, "below the lowest level", False),
        ("inconclusive", "no file", None, "-", False),
        (None, 150.0, 150.0, "150", False),
    ],
)
def test_the_model_holds_the_estimate_the_confirmation_and_the_gates_decision(
    tmp_path: Path,
    decision: str | None,
    *,
    capacity: float | str | None,
    measured: float | None,
    measured_text: str,
    recommended: bool,
) -> None:
    if capacity != "no file":
        found = capacity if isinstance(capacity, float) else None
        cap = CapacityResult(
            candidate="s_t001",
            profile="p",
            mode="concurrency",
            unit="concurrent",
            slo="s",
            slo_text="TTFT p99 <= 1 s",
            capacity=found,
            low=found,
            high=None if found is None else found * 1.25,  # failed one step up: the capacity is measured
            resolution=0.25,
            gpus=8,
        )
        path = SweepPaths(tmp_path).candidate("s_t001").capacity
        path.parent.mkdir(parents=True)
        write_model(path, cap)
    section = searched(tmp_path, decision)
    assert section is not None and section.winner is not None
    winner = section.winner
    assert (winner.estimate, winner.measured, winner.measured_text) == ([152.0], measured, measured_text)
    assert (winner.decision, winner.recommended) == (decision, recommended)
    assert winner.yaml == WINNER_YAML
    assert section.trials == search_record().trials
    assert section.infeasible == [
        "pruned before start: layout=tp8_dp2: TP x DP = 16 exceeds the 8 GPUs",
        "trial 0 (max_num_seqs=64): OOM",
    ]
    budget = (section.space_size, section.distinct_launched, section.launches, section.max_launches)
    assert budget == (8, 3, 3, 4)
    assert SearchSection.model_validate_json(section.model_dump_json()) == section


def test_without_a_winner_nothing_is_confirmed_or_recommended(tmp_path: Path) -> None:
    write_search(tmp_path, search_record(winner=False))
    section = search_model(tmp_path, search_verdicts(None))
    assert section is not None and section.winner is None
    text = search_section(section)
    assert "No trial was measured fully: nothing was confirmed, the baseline stays." in text
    assert "search's estimate" not in text and "Recommended" not in text and "```yaml" not in text
    assert "| 1 | 256 | complete | - | 152 | 1 | 1 | 5.5 |  |" in text


def test_a_partial_record_says_so_and_every_point_started(tmp_path: Path) -> None:
    record = search_record(winner=False).model_copy(update={"stopped": "", "pruned": [], "trials": []})
    write_search(tmp_path, record)
    text = search_section(search_model(tmp_path, search_verdicts(None)))
    assert "(still running, or interrupted: the record is partial)" in text
    assert "### Infeasible region\n\nEvery point tried started." in text


def test_no_search_no_section(tmp_path: Path) -> None:
    assert search_model(tmp_path, search_verdicts("keep")) is None
    assert search_section(None) == ""


@pytest.mark.parametrize(
    ("trial", "why"),
    [
        # the baseline's point, measured by the sweep's opening: its row says so (issue 43 item 5)
        (
            TrialRecord(
                number=0,
                name="s_t000",
                params={"max_num_seqs": 1},
                state="complete",
                fidelity="full",
                values=[8.0],
                why="the baseline's point: its capacity measured by the sweep's opening, nothing launched",
                baseline=True,
            ),
            "the baseline's point",  # the reason's first clause: the table's cell is short
        ),
        (
            TrialRecord(number=1, name="s_t001", params={}, state="complete", values=[9.0], why="x"),
            "",
        ),
    ],
)
def test_a_trial_row_says_why_when_its_figure_is_not_its_own_launch(trial: TrialRecord, why: str) -> None:
    assert row_cells(trial_rows([trial])[0], search_fields([trial]))[-1] == why


@pytest.mark.parametrize(
    ("validated", "base_state"),
    [
        (None, "recommended: s_t001"),  # never promoted: the winner is a recommendation
        (True, "replaced by s_t001 (promoted)"),  # promoted: promotions/<stamp>/launch/ validated
        (False, "recommended: s_t001"),  # its promotion failed: the baseline was restored
    ],
)
def test_the_search_baseline_row_says_whether_the_winner_was_promoted(
    tmp_path: Path, validated: bool | None, base_state: str
) -> None:
    if validated is not None:
        launch = PromotionPaths(promotion_dir(tmp_path, "20261206T094712Z")).launch
        launch.root.mkdir(parents=True)
        fingerprint = "sha256:" + "0" * 64
        write_model(
            launch.validation,
            RecoveryValidation(
                ok=validated,
                candidate="s_t001",
                fingerprint=fingerprint,
                recorded_fingerprint=fingerprint,
                pid=7,
                reason="promoted s_t001 (...)" if validated else "server events: died",
            ),
        )
    text = search_section(searched(tmp_path, "keep", "s_t001"))
    assert f"| baseline (base) | 128 | {base_state} |" in text


def _current_best(sweep: Path) -> tuple[SearchRecord, SweepVerdict]:
    """A search whose best point (s_t001, 152) is the baseline's configuration: nothing confirmed, as the
    console says; a point that broke a requirement at its screen estimated higher (216)."""
    record = search_record(winner=False)
    record.trials[1].baseline = True
    record.trials.append(
        TrialRecord(
            number=3,
            name="s_t003",
            params={"max_num_seqs": 512},
            state="infeasible",
            fidelity="screen",
            screen=216.0,
            constraints={"serial latency": 0.144},
            launches=1,
        )
    )
    record.best_is_baseline, record.best_trial = True, 1
    record.tradeoff = Tradeoff(
        best_name="s_t003", best_estimate=216.0, best_broken={"serial latency": 0.144}, relax=["x"]
    )
    write_search(sweep, record)
    return record, search_verdicts(None)


def _rendered(where: str, sweep: Path) -> str:
    record, verdicts = _current_best(sweep)
    if where == "plot title":
        return search_title(record)
    if where == "trade-off section":
        return tradeoff_section(record, verdicts)
    section = search_model(sweep, verdicts)
    assert section is not None
    return search_section(section) if where == "search section" else section.advice


@pytest.mark.parametrize("where", ["search section", "trade-off section", "plot title", "report.json advice"])
def test_a_best_point_that_is_the_baseline_reads_as_the_console_says(tmp_path: Path, where: str) -> None:
    record, _ = _current_best(tmp_path)
    console = baseline_best_line(record).removeprefix("search: ")  # the sweep's own line
    assert console == (
        "your current configuration is the best found (estimate 152, trial 1): nothing to confirm, the "
        "baseline stays"
    )
    text = _rendered(where, tmp_path)
    assert console in text or console[0].upper() + console[1:] in text, text
    # no winner to adopt, nothing said that the console does not say
    for word in (
        "No trial was measured fully",
        "No configuration beats",
        "Recommended",
        "relax",
        "no winner",
    ):
        assert word not in text, (word, text)
