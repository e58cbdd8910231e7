"""The load runner with data workloads against a fake server: shared system prompts, ShareGPT, SLO."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from contracts.files import read_jsonl
from contracts.results import ProfileSummary, RequestRecord
from contracts.schema import DataSourceConfig, SharedPrefixConfig, SloConfig, WorkloadConfig
from load import run_profile
from tests.unit.test_load_runner import OVERHEAD, FakeServer, profile


def run(tmp_path: Path, server: FakeServer, workload: WorkloadConfig, **kw: Any) -> ProfileSummary:
    return run_profile(
        "http://fake",
        "m",
        workload,
        candidate="base",
        fingerprint="f" * 8,
        repeat=1,
        out_dir=tmp_path,
        backend="sim",
        host="unit",
        progress=False,
        transport=httpx.MockTransport(server),
        salt="shared-1",  # the fake server reads a request index after the last '-'
        **kw,
    )


def test_shared_system_prompts_go_out_under_the_runs_salt(tmp_path: Path) -> None:
    server = FakeServer()
    wl = profile(shared_prefix=SharedPrefixConfig(system_prompts=2, users=3, prefix_tokens=200))
    summary = run(tmp_path, server, wl)
    assert {b["cache_salt"] for b in server.bodies} == {"shared-1"}
    systems = [b["messages"][0]["content"] for b in server.bodies]
    assert all(b["messages"][0]["role"] == "system" for b in server.bodies)
    assert len(set(systems)) == 2 and systems[0] != systems[1] and systems[0] == systems[2]
    # the system prompt hits its length as the server counts it (a user-message template around it)
    assert abs(len(systems[0].split()) + OVERHEAD - 200) <= 4
    records = read_jsonl(tmp_path / "records.jsonl", RequestRecord)
    assert all(r.target_prompt_tokens >= 250 for r in records)
    assert summary.failed == 0


def test_sharegpt_turns_send_history_and_answer_lengths(tmp_path: Path) -> None:
    data = tmp_path / "conv.json"
    data.write_text(
        json.dumps(
            [
                {
                    "id": "a",
                    "conversations": [
                        {"from": "human", "value": "one two three"},
                        {"from": "gpt", "value": "four five six seven eight"},
                        {"from": "human", "value": "nine ten"},
                        {"from": "gpt", "value": "eleven twelve"},
                    ],
                }
            ]
        )
    )
    server = FakeServer()
    wl = profile(
        num_requests=2,
        warmup_requests=0,
        concurrency=1,
        ignore_eos=True,
        data=DataSourceConfig(kind="sharegpt", file=str(data), max_turns=2),
    )
    run(tmp_path / "out", server, wl)
    first, second = server.bodies
    assert [m["content"] for m in first["messages"]] == ["one two three"]
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    # max_tokens = the file answer's words as the fake counts them, its template overhead removed
    assert (first["max_tokens"], second["max_tokens"]) == (5, 2)


def test_every_summary_carries_the_slo_when_one_is_given(tmp_path: Path) -> None:
    summary = run(tmp_path, FakeServer(), profile(), slo=SloConfig(ttft_s=10.0, tpot_s=10.0), load_level=4.0)
    assert summary.slo is not None and summary.slo.met and summary.slo.attainment == 1.0
    assert summary.slo.goodput_tps == pytest.approx(summary.output_tps)
    assert summary.load_level == 4.0 and summary.tpot is not None
    plain = run(tmp_path / "plain", FakeServer(), profile())
    assert plain.slo is None and plain.load_level is None
