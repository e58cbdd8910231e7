"""Truncation is a finding (issue 44 item 3): answers cut at max_tokens on the labelled profile are counted
per side, and above gates.accuracy.max_truncated the comparison is incomplete, naming the profile and
advising a larger max_tokens; the shipped accuracy profile's budget fits a reasoning service's reasoning."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from contracts.errors import ConfigError
from contracts.labelled import parse_labelled
from contracts.paths import CONF_DIR
from contracts.schema import AccuracyGateConfig, GatesConfig
from contracts.sweepdir import Results
from contracts.verdicts import GateStatus
from gates.answer_accuracy import AnswerAccuracy
from gates.registry import GateContext
from gates.verdict import decide
from launch.sim.answers import answer_text
from launch.sim.profile import load_profile
from orchestrator.config.compose import load
from tests.unit.test_answer_accuracy import _answers, _side


def _cut(results: Results, items: Sequence[int]) -> Results:
    """``results`` with the answers to ``items`` cut at 512 tokens (finish_reason length)."""
    reps = [
        replace(
            rep,
            records=[
                r.model_copy(update={"finish_reason": "length", "target_output_tokens": 512})
                if r.index in items
                else r
                for r in rep.records
            ],
        )
        for rep in results.profiles["accuracy"]
    ]
    return replace(results, profiles={"accuracy": reps})


@pytest.mark.parametrize(
    ("cand_cut", "base_cut", "limit", "status", "fragment"),
    [
        (
            [],
            [],
            0.02,
            "pass",
            "answers cut at max_tokens (finish_reason length): candidate 0 of 40, baseline 0",
        ),
        # 1 of 40 is 2.5%, above 2%: the candidate's profile is named, with the advice.
        (
            [7],
            [],
            0.02,
            "not_run",
            "the candidate's answers on profile 'accuracy': 1 of 40 (2.5%) cut at max_tokens 512, above "
            "gates.accuracy.max_truncated = 0.02",
        ),
        ([7], [], 0.05, "pass", "candidate 1 of 40 (2.5%), baseline 0 of 40"),  # within a 5% share
        (
            [],
            [1, 2, 3],
            0.02,
            "not_run",
            "the baseline's answers on profile 'accuracy': 3 of 40 (7.5%) cut at max_tokens 512",
        ),
        ([1, 2], [1, 2], 0.0, "not_run", "raise the profile's max_tokens (workloads.accuracy.output_tokens)"),
        ([], [], 0.0, "pass", "candidate 0 of 40, baseline 0 of 40"),  # none cut: nothing to find at 0
    ],
)
def test_truncated_answers_make_the_comparison_incomplete(  # noqa: PLR0917  (one argument per column)
    tmp_path: Path, cand_cut: list[int], base_cut: list[int], limit: float, status: GateStatus, fragment: str
) -> None:
    cfg = GatesConfig(accuracy=AccuracyGateConfig(profile="accuracy", tolerance=0.1, max_truncated=limit))
    base = _cut(_side(tmp_path, "baseline", [_answers()]), base_cut)
    cand = _cut(_side(tmp_path, "c", [_answers()]), cand_cut)
    result = AnswerAccuracy().evaluate(
        GateContext(cfg=cfg, baseline=base, candidate=cand, candidate_claim="")
    )
    assert result.status == status, result.message
    assert fragment in result.message
    verdict = decide("c", "baseline", [result], cfg)
    assert (verdict.decision == "incomplete") is (status == "not_run"), verdict.reason
    if status == "not_run":
        assert "as measured, not judged: accuracy 40/40" in result.message
        cut = {e.file: e.requests for e in result.evidence}
        if cand_cut:
            assert cut["candidates/c/accuracy/r1/records.jsonl"] == cand_cut


@pytest.mark.parametrize(
    ("sim_profile", "budget", "fits"),
    [
        # The case study's reasoning service: ordinary requests reason up to 4096 tokens, then answer.
        ("h100x8_deepseek_v4_flash", None, True),  # the shipped profile's budget
        ("h100x8_deepseek_v4_flash", 512, False),  # the budget before: reasoning cut, answers read wrong
        ("cpu2_tiny_head80", None, True),
    ],
)
def test_the_accuracy_profile_budget_fits_reasoning(sim_profile: str, budget: int | None, fits: bool) -> None:
    """The shipped service reasons (service.reasoning_parser): the accuracy profile's max_tokens holds the
    longest reasoning the simulator's stated model draws for an ordinary request plus the longest answer
    to the shipped set, and stays an ordinary request (below the max-reasoning threshold)."""
    cfg, _ = load([])
    assert cfg.service.reasoning_parser is not None
    wl = cfg.workloads["accuracy"]
    assert wl.output_tokens.kind == "fixed" and not wl.ignore_eos
    budget = int(wl.output_tokens.mean) if budget is None else budget
    spec = load_profile(sim_profile).reasoning
    items = parse_labelled((CONF_DIR / "workload" / "accuracy_set.jsonl").read_text(), "set")
    answers = [answer_text(i.prompt, seed=0, draft_sample_method="greedy") or "" for i in items]
    longest = max(len(a.split()) for a in answers)
    assert (spec.normal.max + longest <= budget < spec.max_reasoning_min_max_tokens) is fits
    assert cfg.gates.accuracy.max_truncated == 0.02


@pytest.mark.parametrize(("value", "refused"), [(1.5, True), (-0.1, True), (0.05, False), (0, False)])
def test_the_truncated_share_is_checked_when_the_config_is_composed(value: float, refused: bool) -> None:
    if not refused:
        assert load([f"gates.accuracy.max_truncated={value}"])[0].gates.accuracy.max_truncated == value
        return
    with pytest.raises(ConfigError) as info:
        load([f"gates.accuracy.max_truncated={value}"])
    assert f"gates.accuracy.max_truncated = {value}: a share of a side's answers in [0, 1]" in str(info.value)
