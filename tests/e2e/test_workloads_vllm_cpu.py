"""Workloads from data against real vLLM on CPU: prefix-cache hits from /metrics, trace replay timing.

One tiny-random server (prefix caching is on by default for this model on x86) serves every test:
the shipped shared-prefix profile must show a prefix-cache hit rate > 0 in the summary, read from
vLLM's own ``vllm:prefix_cache_{queries,hits}_total``, while a default profile (a cache_salt per request)
shows ~0; the shipped JSONL trace is replayed at its arrival offsets with its token lengths.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from contracts.files import read_jsonl
from contracts.paths import CONF_DIR
from contracts.results import ProfileSummary, RequestRecord
from contracts.schema import WorkloadConfig
from launch.supervisor import Server, Supervisor
from load import run_profile
from load.metrics import PREFIX_HITS, PREFIX_QUERIES
from load.sources import read_trace
from orchestrator.config.compose import load

pytestmark = pytest.mark.slow


@pytest.fixture
def server(random_vllm: tuple[Supervisor, Server, float]) -> Server:
    return random_vllm[1]


def workload(name: str, **changes: Any) -> WorkloadConfig:
    cfg, _ = load([f"+workload@workloads.{name}={name}"] if name not in ("short",) else [])
    return replace(cfg.workloads[name], **changes)


def run(server: Server, out: Path, wl: WorkloadConfig) -> ProfileSummary:
    return run_profile(
        server.base_url,
        server.spec.served_model_name,
        wl,
        candidate="e2e",
        fingerprint=server.spec.fingerprint,
        repeat=1,
        out_dir=out,
        backend="vllm",
        host="cpu",
        progress=False,
    )


def test_the_server_exports_the_prefix_cache_counters_we_read(server: Server) -> None:
    text = httpx.get(f"{server.base_url}/metrics", timeout=30).text
    names = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if not line.startswith("#")}
    assert {PREFIX_QUERIES, PREFIX_HITS} <= names


def test_shared_prefixes_hit_the_cache_and_salted_profiles_do_not(server: Server, tmp_path: Path) -> None:
    shared = run(server, tmp_path / "shared", workload("shared_prefix", num_requests=32, concurrency=8))
    salted = run(server, tmp_path / "salted", workload("short", num_requests=32, warmup_requests=4))
    assert shared.server is not None and salted.server is not None
    assert shared.failed == 0 and salted.failed == 0
    # ~1000 of ~1130 prompt tokens are a system prompt the run has already seen.
    assert shared.server.prefix_cache_hit_rate is not None and shared.server.prefix_cache_hit_rate > 0.5
    assert salted.server.prefix_cache_hit_rate is not None and salted.server.prefix_cache_hit_rate < 0.02
    print(
        f"prefix-cache hit rate: shared_prefix {shared.server.prefix_cache_hit_rate:.1%}, "
        f"salted short {salted.server.prefix_cache_hit_rate:.1%}"
    )


def test_a_trace_is_replayed_at_its_offsets_with_its_lengths(server: Server, tmp_path: Path) -> None:
    wl = workload("trace_example")
    summary = run(server, tmp_path / "trace", wl)
    rows = read_trace(CONF_DIR / "workload" / "data" / "trace_example.jsonl")
    records = read_jsonl(tmp_path / "trace" / "records.jsonl", RequestRecord)
    measured = [r for r in records if not r.warmup]
    assert summary.failed == 0 and len(measured) == wl.num_requests
    # Scheduled times count from the profile's start; the measured phase starts at its first request.
    origin, start = rows[wl.warmup_requests].arrival_s, measured[0].scheduled_s
    for record in measured:
        row = rows[record.index]
        assert record.scheduled_s - start == pytest.approx(row.arrival_s - origin, abs=1e-6)  # the offsets
        assert record.completion_tokens == row.output_tokens
        if row.prompt_tokens is not None:  # a length: generated text, within +-2% as vLLM counts it
            assert record.prompt_tokens is not None
            assert abs(record.prompt_tokens - row.prompt_tokens) <= 0.02 * row.prompt_tokens
    assert summary.prompt_mismatches == 0
    # The dispatch lag (sent - scheduled) is reported, and it is the records' own lag: how late a send is
    # depends on how loaded the 2 shared cores are (vLLM's CPU engine runs on them too), so the test checks
    # what the lag figures mean, not how small they are; docs/load-runner.md has the measured figures.
    lag = summary.client
    print(
        f"trace replay: {len(measured)} requests over {summary.duration_s:.1f} s, dispatch lag p50 "
        f"{lag.dispatch_lag_p50_s * 1e3:.2f} ms, p99 {lag.dispatch_lag_p99_s * 1e3:.2f} ms"
    )
    lateness = [record.sent_s - record.scheduled_s for record in measured]
    assert min(lateness) >= 0.0  # the pacer never sends before the trace's offset
    assert lag.dispatch_lag_max_s == pytest.approx(max(lateness), abs=1e-9)
    assert 0.0 <= lag.dispatch_lag_p50_s <= lag.dispatch_lag_p99_s <= lag.dispatch_lag_max_s


def test_sharegpt_turns_carry_the_previous_exchange(server: Server, tmp_path: Path) -> None:
    summary = run(server, tmp_path / "sharegpt", workload("sharegpt_example", num_requests=8))
    records = [r for r in read_jsonl(tmp_path / "sharegpt" / "records.jsonl", RequestRecord) if not r.warmup]
    assert summary.failed == 0
    first, second = records[0], records[1]  # conversation 0: its first turn, then its second
    assert first.prompt_tokens is not None and second.prompt_tokens is not None
    assert second.prompt_tokens > first.prompt_tokens + first.target_output_tokens
    # (These short conversations share less than one KV block, so vLLM reports no prefix-cache hit.)
