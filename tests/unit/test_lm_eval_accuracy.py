"""The accuracy gate on lm-eval documents: paired by task and doc_id, judged by the gate's own rule."""

from __future__ import annotations

import pytest

from contracts.lmeval import LmEvalDoc, LmEvalRun
from contracts.schema import AccuracyGateConfig, GatesConfig
from gates.answer_accuracy import AnswerAccuracy
from gates.lm_eval_accuracy import judge_lm_eval, pair_docs


def _docs(rights: list[bool], task: str = "gsm8k", hashes: str = "h", filt: str = "none") -> list[LmEvalDoc]:
    return [
        LmEvalDoc(task=task, doc_id=i, doc_hash=f"{hashes}{i}", filter=filt, metric="exact_match",
                  score=float(r), target="1", response="1" if r else "2")
        for i, r in enumerate(rights)
    ]  # fmt: skip


def _run(docs: list[LmEvalDoc], name: str, profile: str = "gsm") -> LmEvalRun:
    return LmEvalRun(profile=profile, candidate=name, base_url="http://h:1", model="m", argv=[],
                     tasks=sorted({d.task for d in docs}), docs=docs, wall_s=1.0)  # fmt: skip


def _cfg(tolerance: float = 0.10, min_items: int = 20) -> GatesConfig:
    """A 10-point tolerance: 40 documents can show it (upper bound 8.8 points with none lost), not 2."""
    return GatesConfig(accuracy=AccuracyGateConfig(profile="gsm", tolerance=tolerance, min_items=min_items))


@pytest.mark.parametrize(
    ("base", "cand", "cfg", "status", "words"),
    [
        ([True] * 40, [True] * 40, _cfg(), "pass", "accuracy 40/40 (100%"),
        ([True] * 40, [True] * 30 + [False] * 10, _cfg(), "fail", "10 document(s) lost, 0 gained"),
        ([True] * 40, [True] * 38 + [False] * 2, _cfg(), "inconclusive", "upper bound +16.5"),
        ([True] * 40, [True] * 38 + [False] * 2, _cfg(tolerance=0.20), "pass", "within the 20-point"),
        ([True] * 30 + [False] * 10, [True] * 40, _cfg(), "pass", "0 document(s) lost, 10 gained"),
        ([True] * 10, [True] * 10, _cfg(), "not_run", "fewer than gates.accuracy.min_items = 20"),
    ],
    ids=["same", "ten-lost", "two-lost", "within-tolerance", "gained", "too-few"],
)  # fmt: skip
def test_the_paired_documents_are_judged_by_the_accuracy_gates_rule(
    base: list[bool], cand: list[bool], cfg: GatesConfig, status: str, words: str
) -> None:
    result = judge_lm_eval(_run(_docs(base), "baseline"), _run(_docs(cand), "cand"), cfg)
    assert result.gate == AnswerAccuracy.name and result.role == AnswerAccuracy.role
    assert result.status == status, result.message
    assert words in result.message, result.message
    assert "lm_eval profile 'gsm'" in result.message


def test_documents_of_two_tasks_pair_by_task_and_doc_id() -> None:
    base = _docs([True] * 20, "gsm8k") + _docs([True] * 20, "tiny")
    cand = _docs([True] * 20, "gsm8k") + _docs([False] * 20, "tiny")
    result = judge_lm_eval(_run(base, "b"), _run(list(reversed(cand)), "c"), _cfg())
    assert result.status == "fail" and "gsm8k 20/20 vs 20/20; tiny 0/20 vs 20/20" in result.message
    assert "lost: tiny/0, tiny/1" in result.message


@pytest.mark.parametrize(
    ("base", "cand", "words"),
    [
        (_docs([True] * 3), _docs([True] * 2),
         "1 document(s) scored on one side only, missing for the candidate: gsm8k/2"),
        (_docs([True] * 2), _docs([True] * 3), "missing for the baseline: gsm8k/2"),
        (_docs([True] * 3), _docs([True] * 3, hashes="x"),
         "3 document(s) differ between the sides (doc_hash)"),
        (_docs([True] * 3), _docs([True] * 3, filt="strict-match"), "different filters or metrics"),
    ],
    ids=["candidate-short", "baseline-short", "other-dataset", "other-filter"],
)  # fmt: skip
def test_runs_that_do_not_pair_are_not_judged(
    base: list[LmEvalDoc], cand: list[LmEvalDoc], words: str
) -> None:
    assert isinstance(pair_docs(base, cand), str)
    result = judge_lm_eval(_run(base, "b"), _run(cand, "c"), _cfg(min_items=1))
    assert result.status == "not_run" and words in result.message, result.message


def test_runs_of_two_profiles_are_not_compared() -> None:
    result = judge_lm_eval(_run(_docs([True] * 20), "b", "other"), _run(_docs([True] * 20), "c"), _cfg())
    assert result.status == "not_run" and "the baseline ran profile 'other'" in result.message
