"""The report's search section (report/search.py): the estimate beside the confirmation's verdict, the
trials, the infeasible region, the winner's file; only a KEEP is a recommendation; no search, no section."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.layout import SweepPaths
from contracts.trials import PrunedPoint, SearchRecord, TrialRecord, Winner, write_search
from contracts.verdicts import DriftResult, SweepVerdict, Verdict
from report.search import search_section


def _verdicts(decision: str | None) -> SweepVerdict:
    found = [] if decision is None else [Verdict(candidate="s_t001", decision=decision, reason="why")]  # type: ignore[arg-type]
    return SweepVerdict(
        baseline="base",
        retained="base",
        retained_reason="",
        drift=DriftResult.model_construct(),
        verdicts=found,
    )


def _record() -> SearchRecord:
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
        ),
    )


@pytest.mark.parametrize(
    ("decision", "shown", "advice"),
    [
        ("keep", "KEEP", "**Recommended**: `search/winner.yaml`"),
        ("reject", "REJECT", "Not recommended: only a KEEP is"),
        ("incomplete", "INCOMPLETE", "Not recommended: only a KEEP is"),
        (None, "not judged", "Not recommended: only a KEEP is"),
    ],
)
def test_the_search_section_puts_the_estimate_beside_the_confirmations_verdict(
    tmp_path: Path, decision: str | None, shown: str, advice: str
) -> None:
    assert search_section(tmp_path, _verdicts(decision)) == ""  # no search: no section
    write_search(tmp_path, _record())
    SweepPaths(tmp_path).winner.write_text("defaults: [baseline, _self_]\nname: s_t001\n")
    text = search_section(tmp_path, _verdicts(decision))
    assert "launched 3 of 8 configurations, 3 launch(es) of 4 (budget spent: 3 of 3 launches)" in text
    assert "| search's estimate (trial 1, one launch) | 152 | - |" in text
    assert f"| confirmation (s_t001 measured again, the gates) | - | {shown} |" in text
    assert "| baseline (base) | 128 | retained |" in text
    assert advice in text
    assert "| 2 | max_num_seqs=128 | pruned | screen | 9 (screen) | 1 |" in text
    assert "- pruned before start: layout=tp8_dp2: TP x DP = 16 exceeds the 8 GPUs" in text
    assert "- trial 0 (max_num_seqs=64): OOM" in text
    assert "```yaml\ndefaults: [baseline, _self_]\nname: s_t001\n```" in text
