"""The answer_accuracy gate against real vLLM on CPU: a labelled set scored on the tiny model, and a
candidate that changes its outputs caught.

The two session servers stand in for a baseline and a candidate whose answers differ: tiny-random is the
baseline and tiny-chain (another model, as a kernel or a lossy setting changes greedy outputs) the
candidate. A random-weight model knows no arithmetic, so the references are what the baseline's model
answers at temperature 0: its first run of 20 prompts, exactly 12 tokens each (``ignore_eos``), becomes
the set's answers. Its second run must reproduce them (greedy decoding on one server is deterministic),
and the candidate, launched without speculative decoding (a lossless claim), must lose them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contracts.labelled import parse_labelled
from contracts.schema import AccuracyGateConfig, GatesConfig, LengthConfig, WorkloadConfig
from contracts.sweepdir import load_results
from gates.agreement import unpromised
from gates.answer_accuracy import AnswerAccuracy
from gates.registry import GateContext
from launch.supervisor import Server, Supervisor
from load import run_profile

pytestmark = pytest.mark.slow

ITEMS = 20
PROMPTS = [f"Item {i}: what comes after the number {i * 7}? Answer in a few words." for i in range(ITEMS)]


def _run(server: Server, sweep: Path, name: str, repeat: int, prompts_dir: Path) -> None:
    workload = WorkloadConfig(
        name="accuracy",
        concurrency=4,
        num_requests=ITEMS,
        warmup_requests=0,
        prompt_tokens=LengthConfig(kind="fixed", mean=1),
        output_tokens=LengthConfig(kind="fixed", mean=12),
        ignore_eos=True,
        temperature=0.0,
        prompts_file="set.jsonl",
        time_limit_s=300,
        request_timeout_s=120,
    )
    summary = run_profile(
        server.base_url,
        server.spec.served_model_name,
        workload,
        candidate=name,
        fingerprint=server.spec.fingerprint,
        repeat=repeat,
        out_dir=sweep / "candidates" / name / "accuracy" / f"r{repeat}",
        backend="vllm",
        host="cpu",
        progress=False,
        prompts_dir=prompts_dir,
    )
    assert summary.completed == ITEMS and summary.errors == {}


def test_a_labelled_set_is_scored_and_a_candidate_that_changes_outputs_is_caught(
    random_vllm: tuple[Supervisor, Server, float],
    chain_vllm: tuple[Supervisor, Server, float],
    tmp_path: Path,
) -> None:
    baseline, candidate = random_vllm[1], chain_vllm[1]
    labelled = tmp_path / "set.jsonl"
    labelled.write_text("".join(json.dumps({"prompt": p, "answer": "?"}) + "\n" for p in PROMPTS))
    sweep = tmp_path / "sweep"
    _run(baseline, sweep, "baseline", 1, tmp_path)
    # The references: the baseline model's own greedy answers (its first run), item by item.
    first = load_results(sweep, "candidates/baseline", "baseline").repeats("accuracy")[0]
    answers = {r.index: r.output_text or "" for r in first.records}
    assert all(answers[i].strip() for i in range(ITEMS)), answers
    labelled.write_text(
        "".join(json.dumps({"prompt": p, "answer": answers[i]}) + "\n" for i, p in enumerate(PROMPTS))
    )
    assert len(parse_labelled(labelled.read_text(), str(labelled))) == ITEMS
    _run(baseline, sweep, "baseline", 2, tmp_path)
    _run(candidate, sweep, "chain", 1, tmp_path)

    # 20 items show an accuracy drop of at most 16.1 points at best (Tango's bound with no item lost,
    # gates.noninferiority): a 20-point tolerance, so that the same answers can pass.
    # Every answer is exactly 12 tokens by design (the references are the baseline's own 12-token outputs,
    # ignore_eos), so each is cut at max_tokens: the test's truncation, not a finding (gates.truncation),
    # which is still counted and said.
    cfg = GatesConfig(
        accuracy=AccuracyGateConfig(profile="accuracy", tolerance=0.2, min_items=ITEMS, max_truncated=1.0)
    )
    base = load_results(sweep, "candidates/baseline", "baseline")
    # Greedy decoding on one server reproduces itself: the baseline's second run is the references too.
    second = base.repeats("accuracy")[1]
    assert [r.output_text for r in second.records] == [answers[r.index] for r in second.records]
    chain = load_results(sweep, "candidates/chain", "chain")
    # The promise stated (agreement_unpromised None), as on a GPU host under VLLM_BATCH_INVARIANT=1: the
    # changed greedy outputs are flagged. A CPU sweep's own launches have no such promise (below).
    result = AnswerAccuracy().evaluate(
        GateContext(cfg=cfg, baseline=base, candidate=chain, candidate_claim="no speculative decoding")
    )
    print(f"\nanswer_accuracy on vLLM CPU: {result.message}")
    assert result.status == "fail", result.message
    assert f"candidate {ITEMS} of {ITEMS} (100.0%)" in result.message  # cut at max_tokens, counted
    assert f"vs {ITEMS}/{ITEMS} (100%" in result.message  # the baseline answers its own references
    assert result.observed is not None and result.observed < 0.5
    assert "FLAGGED: greedy agreement with the baseline" in result.message
    assert f"baseline's own repeat-to-repeat agreement {ITEMS}/{ITEMS}" in result.message
    # vLLM 0.32 on CPU promises no batch invariance (gates.agreement): reported, not flagged.
    cpu = unpromised({"host_kind": "cpu", "env": {}, "argv": []}, None)
    unjudged = AnswerAccuracy().evaluate(
        GateContext(
            cfg=cfg,
            baseline=base,
            candidate=chain,
            candidate_claim="no speculative decoding",
            agreement_unpromised=cpu,
        )
    )
    assert unjudged.status == "fail" and "FLAGGED" not in unjudged.message
    assert "not judged" in unjudged.message
    same = AnswerAccuracy().evaluate(GateContext(cfg=cfg, baseline=base, candidate=base))
    assert same.status == "pass", same.message
