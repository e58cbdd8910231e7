"""The lm_eval_accuracy gate in a sweep: each lm_eval profile's runs on the two launches, judged by the
accuracy rule; a run lm-eval could not score is not_run naming the profile (incomplete, never a reject)."""

from __future__ import annotations

import pytest

from contracts.lmeval import LmEvalDoc, LmEvalRun
from contracts.lmeval_sweep import LmEvalFailure, LmEvalOutcome
from contracts.schema import AccuracyGateConfig, GatesConfig
from gates.lm_eval_gate import LmEvalAccuracy, lm_eval_result
from gates.verdict import not_run_gaps


def _run(profile: str, rights: list[bool], name: str = "c") -> LmEvalRun:
    docs = [
        LmEvalDoc(task="t", doc_id=i, doc_hash=str(i), filter="none", metric="exact_match", score=float(r),
                  target="1", response="1")
        for i, r in enumerate(rights)
    ]  # fmt: skip
    return LmEvalRun(profile=profile, candidate=name, base_url="http://h:1", model="m", argv=[], tasks=["t"],
                     docs=docs, wall_s=1.0)  # fmt: skip


def _failed(profile: str, fault: str = "harness") -> LmEvalFailure:
    return LmEvalFailure.model_validate(
        {"profile": profile, "candidate": "c", "fault": fault, "message": "lm-eval is not installed in py"}
    )


ALL = [True] * 40
LOST = [True] * 30 + [False] * 10
CFG = GatesConfig(accuracy=AccuracyGateConfig(tolerance=0.10))


@pytest.mark.parametrize(
    ("base", "cand", "status", "words", "gap"),
    [
        ({}, {}, "not_run", "the sweep ran no lm_eval profile (lm_eval.profiles)", False),
        ({"a": _run("a", ALL)}, {"a": _run("a", ALL)}, "pass", "lm_eval profile 'a' (lm-eval", False),
        ({"a": _run("a", ALL)}, {"a": _run("a", LOST)}, "fail", "10 document(s) lost", False),
        ({"a": _run("a", ALL)}, {"a": _failed("a")}, "not_run",
         "lm-eval left no scores on the candidate (lm-eval's or the machine's fault, not the candidate's)",
         True),
        ({"a": _failed("a", "server")}, {"a": _run("a", ALL)}, "not_run",
         "lm_eval profile 'a': lm-eval left no scores on the baseline (the server's)", True),
        ({"a": _run("a", ALL)}, {}, "not_run", "lm_eval profile 'a': the candidate has no lm-eval run", True),
        ({"a": _run("a", ALL), "b": _run("b", ALL)}, {"a": _run("a", LOST), "b": _failed("b")}, "fail",
         "10 document(s) lost", False),
        ({"a": _run("a", ALL), "b": _run("b", ALL)}, {"a": _run("a", ALL), "b": _failed("b")}, "not_run",
         "lm_eval profile 'b': lm-eval left no scores on the candidate", True),
        ({"a": _run("a", ALL), "b": _run("b", ALL)}, {"a": _run("a", ALL), "b": _run("b", ALL)}, "pass",
         "lm_eval profile 'b'", False),
    ],
    ids=["not-asked", "same", "lost", "harness-failed", "baseline-server-failed", "candidate-missing",
         "fail-beats-not-run", "not-run-beats-pass", "two-pass"],
)  # fmt: skip
def test_each_profile_is_judged_and_a_failed_run_is_incomplete(
    base: dict[str, LmEvalOutcome], cand: dict[str, LmEvalOutcome], status: str, words: str, gap: bool
) -> None:
    result = lm_eval_result(base, cand, CFG, LmEvalAccuracy())
    assert (result.gate, result.status) == ("lm_eval_accuracy", status), result.message
    assert words in result.message, result.message
    assert bool(not_run_gaps([result])) is gap  # a gap: the verdict is incomplete, not a reject
