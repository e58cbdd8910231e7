"""The pure planner: planned requests and prompts to bodies, salts, clipping and the warmup split."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contracts.errors import LoadError
from contracts.schema import WorkloadConfig
from load.plan import SEED_STRIDE, Plan, make_plan, request_body
from load.workload import BuiltPrompt, PlannedRequest, plan_requests
from tests.unit.load_fixtures import workload


def planned(
    index: int, *, target: int = 100, max_tokens: int = 64, fixed: str | None = None
) -> PlannedRequest:
    return PlannedRequest(
        index=index,
        warmup=index == 0,
        target_prompt_tokens=target,
        max_tokens=max_tokens,
        arrival_s=None,
        fixed_prompt=fixed,
    )


def plan_of(wl: WorkloadConfig, *, max_model_len: int | None = None, counted: int | None = 64) -> Plan:
    requests = plan_requests(wl)
    prompts = [BuiltPrompt(f"prompt {r.index}", counted) for r in requests]
    return make_plan(wl, requests, prompts, served_model="m", run_salt="run", max_model_len=max_model_len)


@pytest.mark.parametrize(
    ("fields", "want"),
    [
        (
            {},
            {"temperature": 0.0, "stream": True, "stream_options": {"include_usage": True}, "max_tokens": 16},
        ),
        ({"ignore_eos": True}, {"ignore_eos": True, "min_tokens": 16}),
        ({"temperature": 0.7}, {"temperature": 0.7, "seed": 3 * SEED_STRIDE + 3}),
    ],
)
def test_request_body(fields: dict[str, Any], want: dict[str, Any]) -> None:
    wl = workload(**fields)
    body = json.loads(request_body(wl, model="m", prompt="hi", max_tokens=16, cache_salt="s-3", index=3))
    assert body["model"] == "m" and body["cache_salt"] == "s-3"
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert {k: body[k] for k in want} == want
    assert ("seed" in body) is ("seed" in want) and ("min_tokens" in body) is ("min_tokens" in want)


def test_bodies_are_compact_json() -> None:
    body = request_body(workload(), model="m", prompt="hi", max_tokens=1, cache_salt="s", index=0)
    assert b": " not in body and b", " not in body


@pytest.mark.parametrize(
    ("max_model_len", "counted", "want_max_tokens", "clipped_note"),
    [
        (None, 64, [16] * 12, False),  # /v1/models unknown: nothing checked
        (4096, 64, [16] * 12, False),  # room enough
        (74, 64, [10] * 12, True),  # 74 - 64 counted
        (60, 64, [1] * 12, True),  # no room at all: at least one token
        (74, None, [10] * 12, True),  # no server count: the target stands in
    ],
)
def test_max_tokens_are_clipped_to_fit_the_model(
    max_model_len: int | None, counted: int | None, want_max_tokens: list[int], clipped_note: bool
) -> None:
    wl = workload(ignore_eos=True)
    plan = plan_of(wl, max_model_len=max_model_len, counted=counted)
    assert [r.max_tokens for r in plan.requests] == want_max_tokens
    for request in plan.requests:  # the typed value is the one on the wire
        body = json.loads(request.body)
        assert body["max_tokens"] == body["min_tokens"] == request.max_tokens
    assert any("clipped to fit max_model_len" in n for n in plan.notes) is clipped_note


def test_salts_indices_and_the_warmup_split() -> None:
    wl = workload(num_requests=3, warmup_requests=2)
    plan = plan_of(wl)
    assert [r.index for r in plan.warmup] == [0, 1] and [r.index for r in plan.measured] == [2, 3, 4]
    assert [r.cache_salt for r in plan.requests] == [f"run-{i}" for i in range(5)]
    assert [json.loads(r.body)["messages"][0]["content"] for r in plan.requests] == [
        f"prompt {i}" for i in range(5)
    ]
    assert [json.loads(r.body)["cache_salt"] for r in plan.requests] == [r.cache_salt for r in plan.requests]
    assert plan_of(wl) == plan  # deterministic from the seed


def test_a_fixed_prompt_targets_the_servers_count() -> None:
    requests = [planned(0, target=999, fixed="five words in this prompt"), planned(1, target=999, fixed="x")]
    prompts = [BuiltPrompt("five words in this prompt", 9), BuiltPrompt("x", None)]
    plan = make_plan(workload(), requests, prompts, served_model="m", run_salt="r", max_model_len=None)
    assert [r.target_prompt_tokens for r in plan.requests] == [9, 0]
    assert json.loads(plan.requests[0].body)["messages"][0]["content"] == "five words in this prompt"


def test_notes_come_first_then_clipping() -> None:
    plan = make_plan(
        workload(),
        [planned(0)],
        [BuiltPrompt("p", 64)],
        served_model="m",
        run_salt="r",
        max_model_len=70,
        notes=["/v1/models says so"],
    )
    assert plan.notes == ("/v1/models says so", "max_tokens of 1 requests clipped to fit max_model_len 70")


def test_a_salt_vllm_refuses_is_an_error() -> None:
    with pytest.raises(LoadError, match="cache_salt"):
        make_plan(
            workload(),
            [planned(0)],
            [BuiltPrompt("p", 1)],
            served_model="m",
            run_salt="a/b",
            max_model_len=None,
        )
