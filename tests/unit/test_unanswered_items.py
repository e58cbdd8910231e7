"""Unanswered labelled items (issue 42, item 1): an item the baseline answered and the candidate did not
counts against the candidate, unless the load client could not send it (a harness gap naming the items:
INCOMPLETE); an item the baseline did not answer is left out; the message always says "k of N items
unanswered" per side; failed requests on the labelled profile count in the stability gate."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from contracts.results import LoadSettings, RequestRecord
from contracts.schema import AccuracyGateConfig, GatesConfig
from contracts.sweepdir import Repeat, Results
from contracts.verdicts import Decision, GateResult, GateStatus
from gates.answer_accuracy import AnswerAccuracy
from gates.registry import GateContext
from gates.stability import Stability
from gates.verdict import decide
from tests.unit.fakes import summary
from tests.unit.load_fixtures import workload
from tests.unit.test_answer_accuracy import SET, SIZE

CFG = GatesConfig(
    # 40 items show an accuracy drop of at most 8.8 points at best (gates.noninferiority): 10 points.
    accuracy=AccuracyGateConfig(profile="accuracy", tolerance=0.1, min_items=20),
    accepted_profiles=["decode_heavy"],
)

#: An item's outcome on one side: None (right), "wrong", a request error class (no answer), or "no record".
Outcome = str | None


def _record(i: int, outcome: Outcome) -> RequestRecord:
    answered = outcome in (None, "wrong")
    text = f"{i} + {i} is\n#### {2 * i + (1 if outcome == 'wrong' else 0)}" if answered else None
    return RequestRecord(
        index=i,
        warmup=False,
        target_prompt_tokens=20,
        target_output_tokens=64,
        scheduled_s=0.0,
        sent_s=0.0,
        ttft_s=0.1 if answered else None,
        first_visible_s=0.1 if answered else None,
        end_s=0.5 if answered else None,
        completion_tokens=8 if answered else None,
        finish_reason="stop" if answered else None,
        http_status=400 if outcome == "http_4xx" else None,
        error=None if answered else outcome,  # type: ignore[arg-type]
        error_detail=None if answered else f"{outcome} on item {i}",
        output_text=text,
    )


def _side(tmp: Path, name: str, outcomes: dict[int, Outcome]) -> Results:
    """One repeat of the labelled profile: every item right but those in ``outcomes``."""
    (tmp / "set.jsonl").write_text(SET)
    settings = LoadSettings(
        base_url="http://h",
        served_model="m",
        salt="s",
        scale=1.0,
        time_scale=1.0,
        prompts_dir=str(tmp),
        workload=workload(name="accuracy", num_requests=SIZE, warmup_requests=0, prompts_file="set.jsonl"),
    )
    records = [_record(i, outcomes.get(i)) for i in range(SIZE) if outcomes.get(i) != "no record"]
    errors: dict[str, int] = {}
    for r in records:
        if r.error:
            errors[r.error] = errors.get(r.error, 0) + 1
    base = summary(name, "accuracy", 1, "sha256:0", n=SIZE)
    rep = Repeat(
        base.model_copy(
            update={
                "settings": settings,
                "errors": errors,
                "failed": sum(errors.values()),
                "completed": SIZE - sum(errors.values()),
            }
        ),
        records,
        f"candidates/{name}/accuracy/r1/summary.json",
        f"candidates/{name}/accuracy/r1/records.jsonl",
    )
    return Results(name=name, root=f"candidates/{name}", run=None, profiles={"accuracy": [rep]})


def _ctx(tmp: Path, cand: dict[int, Outcome], base: dict[int, Outcome]) -> GateContext:
    return GateContext(
        cfg=CFG, baseline=_side(tmp, "baseline", base), candidate=_side(tmp, "c", cand), candidate_claim=""
    )


FAILS_15 = dict.fromkeys(range(10), "http_4xx") | dict.fromkeys(range(10, 15), "timeout")


@pytest.mark.parametrize(
    ("cand", "base", "status", "decision", "said"),
    [
        # The case: 15 of 40 failed with 4xx and timeouts. Before: scored on the other 25, passed.
        (
            FAILS_15,
            {},
            "fail",
            "reject",
            [
                "candidate: 15 of 40 items unanswered (http_4xx 10, timeout 5)",
                "baseline: 0 of 40 items unanswered",
                "accuracy 25/40 (62%",
                "15 item(s) lost (15 unanswered by the candidate's server, counted wrong)",
            ],
        ),
        # Three items failed by the server: 3 lost of 40 is within noise (McNemar p 0.125).
        (
            dict.fromkeys((4, 5, 6), "http_5xx"),
            {},
            "inconclusive",
            "inconclusive",
            ["candidate: 3 of 40 items unanswered (http_5xx 3)", "accuracy 37/40"],
        ),
        # Nothing unanswered: the message still says so, per side.
        ({}, {}, "pass", "neutral", ["candidate: 0 of 40 items unanswered; baseline: 0 of 40"]),
        # The baseline failed 5 items: no reference; left out on both sides, the candidate not blamed.
        (
            dict.fromkeys(range(5), "timeout"),
            dict.fromkeys(range(5), "timeout"),
            "pass",
            "neutral",
            ["on 35 items", "candidate: 5 of 40 items unanswered (timeout 5)", "baseline: 5 of 40"],
        ),
        # The load client could not send 3 items to the candidate: the harness's fault, a gap naming them.
        (
            dict.fromkeys((7, 8, 9), "client"),
            {},
            "pass",
            "incomplete",
            ["candidate: 3 of 40 items unanswered (client 3)", "on 37 items"],
        ),
        # ... also to the baseline.
        (
            {},
            dict.fromkeys((2, 3), "client"),
            "pass",
            "incomplete",
            ["baseline: 2 of 40 items unanswered (client 2)"],
        ),
        # An interrupted run's cancelled items are not the candidate's (the interrupted gap says so).
        (dict.fromkeys((1, 2), "cancelled"), {}, "pass", "neutral", ["(cancelled 2)", "on 38 items"]),
        # No record at all (a run cut short): the server's, counted wrong.
        (
            dict.fromkeys(range(30, 35), "no record"),
            {},
            "inconclusive",
            "inconclusive",
            ["candidate: 5 of 40 items unanswered (no record 5)", "accuracy 35/40", "on 40 items"],
        ),
        # Too few scored: the baseline failed 25 of them.
        ({}, dict.fromkeys(range(25), "http_4xx"), "not_run", "incomplete", ["15 of 40 items of"]),
    ],
)
def test_an_unanswered_item_counts_against_the_candidate_unless_the_harness_failed(  # noqa: PLR0917
    tmp_path: Path,
    cand: dict[int, Outcome],
    base: dict[int, Outcome],
    status: GateStatus,
    decision: Decision,
    said: Sequence[str],
) -> None:
    result = AnswerAccuracy().evaluate(_ctx(tmp_path, cand, base))
    assert result.status == status, result.message
    for words in said:
        assert words in result.message, (words, result.message)
    verdict = decide("c", "baseline", [result], CFG)
    assert verdict.decision == decision, verdict.reason


@pytest.mark.parametrize(
    ("cand", "base", "side", "items"),
    [
        (dict.fromkeys((7, 8, 9), "client"), {}, "candidate", "item(s) 7, 8, 9 (0-based)"),
        ({}, dict.fromkeys((2, 3), "client"), "baseline", "item(s) 2, 3 (0-based)"),
        (dict.fromkeys((7, 8, 9), "http_5xx"), {}, None, ""),  # the server's: counted, no gap
    ],
)
def test_items_the_load_client_could_not_send_are_a_harness_gap_naming_them(
    tmp_path: Path, cand: dict[int, Outcome], base: dict[int, Outcome], side: str | None, items: str
) -> None:
    result = AnswerAccuracy().evaluate(_ctx(tmp_path, cand, base))
    if side is None:
        assert result.gaps == []
        return
    (gap,) = result.gaps
    assert (gap.kind, gap.side) == ("harness", side)
    assert items in gap.message and "the load client could not send them" in gap.message
    assert gap.file == f"candidates/{'c' if side == 'candidate' else 'baseline'}/accuracy/r1/records.jsonl"
    verdict = decide("c", "baseline", [result], CFG, resume="python -m orchestrator ...")
    assert verdict.decision == "incomplete" and items in verdict.reason
    assert verdict.resume == "python -m orchestrator ..."  # measuring again fills it


def test_the_unanswered_items_are_the_evidence_of_the_loss(tmp_path: Path) -> None:
    result = AnswerAccuracy().evaluate(_ctx(tmp_path, FAILS_15, {}))
    assert result.evidence[0].file == "candidates/c/accuracy/r1/records.jsonl"
    assert result.evidence[0].requests == list(range(15))


# ------------------------------------------------------------------------------------ stability


@pytest.mark.parametrize(
    ("cand", "status", "fragment"),
    [
        (FAILS_15, "fail", "accuracy: 15/40 requests failed (http_4xx 10, timeout 5)"),
        (dict.fromkeys((1, 2), "client"), "pass", "2 the load client could not send"),
        ({}, "pass", "accuracy: 0/40 failed"),
    ],
)
def test_failed_requests_on_the_labelled_profile_count_in_the_stability_gate(
    tmp_path: Path, cand: dict[int, Outcome], status: GateStatus, fragment: str
) -> None:
    result: GateResult = Stability().evaluate(_ctx(tmp_path, cand, {}))
    assert result.status == status, result.message
    assert fragment in result.message
    assert not any("not measured in this sweep" in c.message for c in result.comparisons)
