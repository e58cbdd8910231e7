"""One spelling for every verdict a person reads (issue 42, item 13): upper case, through
contracts.verdicts.decision_label, in judge's summary and a reason's first word (the search's line, the
search plot and the report's cells: tests/unit/test_search_rules.py, test_search_plot.py, test_report.py)."""

from __future__ import annotations

import pytest

from contracts.verdicts import DriftResult, SweepVerdict, Verdict, decision_label, spelled_reason
from gates.judge import summary_lines

DECISIONS = ["keep", "reject", "neutral", "incompatible", "inconclusive", "incomplete"]


@pytest.mark.parametrize("decision", DECISIONS)
def test_every_verdict_is_printed_in_one_spelling(decision: str) -> None:
    label = decision_label(decision)
    assert label == decision.upper()
    # A file judged before the one spelling (a lower-case first word) prints the same as a new one.
    for reason in (f"{decision}: why", f"{label}: why"):
        assert spelled_reason(decision, reason) == f"{label}: why"
        verdict = Verdict.model_validate({"candidate": "c", "decision": decision, "reason": reason})
        lines = summary_lines(
            SweepVerdict(
                baseline="b",
                retained="b",
                retained_reason=f"no candidate is {decision_label('keep')}",
                drift=DriftResult(status="not_run", message="no recovery"),
                verdicts=[verdict],
            )
        )
        assert lines[1].split() == ["c", label, "why"], lines


@pytest.mark.parametrize(
    ("decision", "reason", "printed"),
    [
        ("neutral", "neutral: fails nothing", "NEUTRAL: fails nothing"),
        ("keep", "keep: a gain; neutral: not a word here", "KEEP: a gain; neutral: not a word here"),
        ("reject", "stability failed", "stability failed"),  # no leading decision: left as it is
        ("baseline", "baseline: retained", "baseline: retained"),  # the baseline's row is no verdict
    ],
)
def test_a_reasons_first_word_is_the_label(decision: str, reason: str, printed: str) -> None:
    assert spelled_reason(decision, reason) == printed
