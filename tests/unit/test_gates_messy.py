"""The gates on messy data: the answer policy against the exact test, Holm across the concurrency gate,
looks, and the drift check's minimum detectable drift (synthetic sweeps, the case study)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from contracts.errors import GateError
from contracts.schema import GatesConfig
from gates import SweepVerdict, evaluate_sweep
from gates.sequential import SequentialPlan
from tests.unit.gates_fixtures import case_study

CFG = GatesConfig(
    accepted_profiles=["prefill_10k", "decode_heavy"],
    loaded_profiles=["short", "prefill_10k", "decode_heavy", "mixed"],
    bootstrap_resamples=1000,
)


@pytest.fixture(scope="module")
def study_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return case_study(tmp_path_factory.mktemp("case_study"))


def _spec(sweep: SweepVerdict):  # type: ignore[no-untyped-def]
    return next(v for v in sweep.verdicts if v.candidate == "spec_probabilistic")


def test_the_lost_answer_rejects_by_policy_and_says_so_with_its_statistics(study_dir: Path) -> None:
    spec = _spec(evaluate_sweep(study_dir, CFG, baseline="baseline"))
    assert (spec.decision, spec.failed) == ("reject", ["answer_reliability"])
    counts = next(
        c
        for g in spec.gates
        if g.gate == "answer_reliability"
        for c in g.comparisons
        if c.metric == "visible_answers"
    )
    assert counts.status == "fail"
    assert "policy: any lost visible answer blocks promotion" in counts.message
    assert "Fisher exact one-sided p 0.5" in counts.message  # 3/5 vs 4/5: far within noise
    assert "credible interval" in counts.message and "posterior P(lower rate)" in counts.message


def test_the_exact_test_policy_calls_the_same_loss_unsettled(study_dir: Path) -> None:
    spec = _spec(evaluate_sweep(study_dir, replace(CFG, answer_policy="exact_test"), baseline="baseline"))
    answers = next(g for g in spec.gates if g.gate == "answer_reliability")
    counts = next(c for c in answers.comparisons if c.metric == "visible_answers")
    assert counts.status == "inconclusive"
    assert "test: Fisher's exact test, one-sided" in counts.message
    # 3/5 vs 4/5 is far within noise (p = 0.5): the gate and the verdict are unsettled, nothing failed
    assert (spec.decision, spec.failed, answers.status) == ("inconclusive", [], "inconclusive")
    assert "Fisher exact one-sided p 0.5 (level 0.025)" in counts.message


def test_an_unknown_answer_policy_names_the_allowed_ones(study_dir: Path) -> None:
    with pytest.raises(GateError, match="any_lost_answer_blocks, exact_test"):
        evaluate_sweep(study_dir, replace(CFG, answer_policy="strict"), baseline="baseline")


def test_a_concurrency_failure_is_holm_adjusted_and_says_at_which_step(study_dir: Path) -> None:
    tp4 = next(
        v for v in evaluate_sweep(study_dir, CFG, baseline="baseline").verdicts if v.candidate == "tp4_dp2"
    )
    conc = next(g for g in tp4.gates if g.gate == "concurrency")
    failed = [c for c in conc.comparisons if c.status == "fail"]
    assert failed
    for c in failed:
        assert "Holm step" in c.method and "family-wise 95%" in c.method
        assert (c.interval is not None and c.interval[1] < 1) or c.interval[0] > 1  # type: ignore[index]


def test_looks_widen_the_candidates_intervals_not_the_drift_check(study_dir: Path) -> None:
    once = evaluate_sweep(study_dir, CFG, baseline="baseline")
    looked = evaluate_sweep(study_dir, CFG, baseline="baseline", plan=SequentialPlan(2, 5))
    assert looked.drift == once.drift
    tp4 = [next(v for v in s.verdicts if v.candidate == "tp4_dp2") for s in (once, looked)]
    serial = [next(c for g in v.gates if g.gate == "latency_gain" for c in g.comparisons) for v in tp4]
    assert serial[0].interval is not None and serial[1].interval is not None
    # the look's confidence (99.67% at 2..5 repeats' first look) is above 95%: strictly wider on both ends
    assert serial[1].interval[0] < serial[0].interval[0] and serial[1].interval[1] > serial[0].interval[1]
    assert [v.decision for v in tp4] == ["reject", "reject"]


def test_the_drift_check_states_its_minimum_detectable_drift(study_dir: Path) -> None:
    drift = evaluate_sweep(study_dir, CFG, baseline="baseline").drift
    assert drift.min_detectable_drift is not None
    assert drift.min_detectable_drift >= CFG.throughput_tolerance  # never below the tolerance
    assert f"minimum detectable drift {drift.min_detectable_drift:.1%}" in drift.message
