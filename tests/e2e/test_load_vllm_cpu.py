"""The load runner against real vLLM on CPU: the user-visible boundary with a model whose output is known.

tiny-chain (``--reasoning-parser deepseek_r1``, temperature 0) reasons for exactly N tokens on the prompt
``count<N>`` and then answers, so the first visible answer must come after TTFT and after exactly N
reasoning chunks; tiny-random checks that generated prompts hit their token targets as vLLM counts them
(chat template included) and that the client's usage totals agree with vLLM's /metrics counters.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from contracts.files import read_jsonl
from contracts.results import ProfileSummary, RequestRecord
from contracts.schema import LengthConfig, WorkloadConfig
from launch.supervisor import Server, Supervisor
from launch.testmodels import MAX_REASONING_TOKENS, chain_completion_tokens, chain_prompt
from load import run_profile

pytestmark = pytest.mark.slow

CHAIN_LENGTHS = [0, 3, 16, 64]


@pytest.fixture
def chain_server(chain_vllm: tuple[Supervisor, Server, float]) -> Server:
    return chain_vllm[1]


@pytest.fixture
def random_server(random_vllm: tuple[Supervisor, Server, float]) -> Server:
    return random_vllm[1]


def run(server: Server, out: Path, workload: WorkloadConfig, **kw: Any) -> ProfileSummary:
    return run_profile(
        server.base_url,
        server.spec.served_model_name,
        workload,
        candidate="e2e",
        fingerprint=server.spec.fingerprint,
        repeat=0,
        out_dir=out,
        backend="vllm",
        host="cpu",
        progress=False,
        **kw,
    )


def chain_workload(
    prompts: Path, *, max_tokens: int, concurrency: int = 1, lengths: Sequence[int] = CHAIN_LENGTHS
) -> WorkloadConfig:
    (prompts / "chain.json").write_text(json.dumps([chain_prompt(n) for n in lengths]))
    return WorkloadConfig(
        name="chain",
        concurrency=concurrency,
        num_requests=len(lengths),
        warmup_requests=0,
        prompt_tokens=LengthConfig(kind="fixed", mean=1),
        output_tokens=LengthConfig(kind="fixed", mean=max_tokens),
        ignore_eos=False,
        temperature=0.0,
        prompts_file="chain.json",
        time_limit_s=300,
        request_timeout_s=120,
    )


def _reasoning_shown_first(
    summary: ProfileSummary, records: list[RequestRecord], lengths: Sequence[int]
) -> list[int]:
    """Check each chain request's timing; return the chain lengths whose reasoning came before the answer."""
    assert summary.completed == len(lengths) and summary.errors == {}
    seen: list[int] = []
    for record, n in zip(records, lengths, strict=True):
        assert record.finish_reason == "stop"
        # usage: n reasoning tokens + </think> + the 4-token answer + </s>, so exactly n before the answer
        assert record.completion_tokens == chain_completion_tokens(n)
        assert record.ttft_s is not None and record.first_visible_s is not None
        assert record.ttft_s <= record.first_visible_s
        before_answer = [t for t in record.chunk_offsets_s if t < record.first_visible_s]
        # vLLM merges deltas that queue up behind a slow consumer, so one chunk can carry several tokens
        # (53 chunks for 64 tokens was seen serially on 2 cores), even the last reasoning and the first
        # answer tokens together: count tokens from usage, never from chunks.
        assert len(before_answer) <= n
        if before_answer:
            assert record.ttft_s < record.first_visible_s
            seen.append(n)
    return seen


def test_first_visible_answer_comes_after_exactly_the_reasoning_chain(
    chain_server: Server, tmp_path: Path
) -> None:
    summary = run(
        chain_server, tmp_path / "out", chain_workload(tmp_path, max_tokens=128), prompts_dir=tmp_path
    )
    records = read_jsonl(tmp_path / "out" / "records.jsonl", RequestRecord)
    seen_reasoning_first = _reasoning_shown_first(summary, records, CHAIN_LENGTHS)
    assert summary.first_visible_censored.censored == 0
    # A server starved of CPU (the other e2e worker starting vLLM beside it) can merge even a 64-token chain
    # and its answer into one chunk: then the longest chain alone, up to three times, must show its
    # reasoning first (the timing above is checked on every one).
    for attempt in range(3):
        if seen_reasoning_first:
            break
        out = tmp_path / f"longest{attempt}"
        workload = chain_workload(tmp_path, max_tokens=128, lengths=[MAX_REASONING_TOKENS])
        again = run(chain_server, out, workload, prompts_dir=tmp_path)
        longest = read_jsonl(out / "records.jsonl", RequestRecord)
        seen_reasoning_first = _reasoning_shown_first(again, longest, [MAX_REASONING_TOKENS])
    if not seen_reasoning_first:
        # Every chain, in four runs, reached the client as one chunk with its answer: the server's API
        # process was starved (a vLLM sweep busy-polling both cores on the other e2e worker), so there was no
        # reasoning-first stream to time. The timing checks above ran on every request; the stream's
        # reasoning-then-answer order is test_vllm_cpu.py's (test_stream_reasoning_then_content_exactly),
        # the load runner's reading of it tests/unit/test_load_runner.py's. Shown as xfail, not passed.
        pytest.xfail("vLLM merged every chain and its answer into one chunk in 4 runs (a CPU-starved server)")


def test_an_answer_cut_off_by_max_tokens_is_censored_not_dropped(
    chain_server: Server, tmp_path: Path
) -> None:
    summary = run(
        chain_server,
        tmp_path / "out",
        chain_workload(tmp_path, max_tokens=10, concurrency=4),
        prompts_dir=tmp_path,
    )
    records = read_jsonl(tmp_path / "out" / "records.jsonl", RequestRecord)
    censored = [n for r, n in zip(records, CHAIN_LENGTHS, strict=True) if r.censored]
    assert censored == [16, 64]  # their chains are longer than max_tokens
    assert all(r.ok for r in records)  # finished with "length": censored, not failed
    assert summary.first_visible_censored.censored == 2 and summary.first_visible_censored.n == 4
    assert summary.server is not None and not summary.server.token_mismatch


def test_generated_prompts_hit_their_targets_as_vllm_counts_them(
    random_server: Server, tmp_path: Path
) -> None:
    workload = WorkloadConfig(
        name="targets",
        concurrency=4,
        num_requests=8,
        warmup_requests=1,
        prompt_tokens=LengthConfig(kind="uniform", mean=700, min=64, max=1500),
        output_tokens=LengthConfig(kind="fixed", mean=16),
        ignore_eos=True,
        seed=9,
        time_limit_s=300,
        request_timeout_s=120,
    )
    summary = run(random_server, tmp_path, workload)
    records = read_jsonl(tmp_path / "records.jsonl", RequestRecord)
    assert summary.completed == 8 and summary.prompt_mismatches == 0
    for record in records:
        assert record.prompt_tokens is not None
        assert abs(record.prompt_tokens - record.target_prompt_tokens) <= 0.02 * record.target_prompt_tokens
        assert record.completion_tokens == 16  # ignore_eos with min_tokens = max_tokens
    assert summary.server is not None
    assert summary.server.prompt_tokens == summary.prompt_tokens
    assert summary.server.generation_tokens == summary.output_tokens
    assert not summary.server.token_mismatch and not summary.server.restart_detected
    assert summary.server.request_success.get("length") == 8
