"""Workload sources (load.sources): shared prefixes, JSONL traces, ShareGPT conversations, as planned."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from contracts.errors import ConfigError, LoadError
from contracts.paths import CONF_DIR
from contracts.schema import DataSourceConfig, LengthConfig, SharedPrefixConfig, WorkloadConfig
from load.plan import make_plan, request_body
from load.sources import (
    SYSTEM_PROMPT_BASE,
    USER_PROMPT_BASE,
    parse_sharegpt,
    parse_trace,
    plan_source,
    read_trace,
    replays_offsets,
    shares_prefix,
)
from load.workload import BuiltPrompt
from orchestrator.config.compose import load
from orchestrator.config.validate import validate

PROMPTS = CONF_DIR / "workload"


def wl(**changes: object) -> WorkloadConfig:
    base = WorkloadConfig(
        name="w",
        num_requests=8,
        warmup_requests=2,
        prompt_tokens=LengthConfig(kind="fixed", mean=100),
        output_tokens=LengthConfig(kind="fixed", mean=16),
        seed=3,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_shared_prefix_cycles_n_system_prompts_and_m_user_messages() -> None:
    shared = wl(num_requests=14, warmup_requests=0, shared_prefix=SharedPrefixConfig(3, 2, 500))
    planned = plan_source(shared, scale=1.0, prompts=None, prompts_dir=PROMPTS)
    assert [p.system_prompt_index for p in planned[:7]] == [0, 1, 2, 0, 1, 2, 0]
    users = [(p.prompt_seed_index or 0) - USER_PROMPT_BASE for p in planned]
    assert users[:6] == [0, 2, 4, 1, 3, 5]  # prefix k, user u -> k * M + u
    assert users[6:12] == users[:6]  # beyond N x M, whole prompts recur
    assert all(p.target_prompt_tokens == 600 for p in planned)
    assert shares_prefix(shared) and not shares_prefix(wl())


def test_a_shared_prefix_run_sends_its_system_prompt_under_one_salt() -> None:
    shared = wl(shared_prefix=SharedPrefixConfig(2, 2, 64))
    planned = plan_source(shared, scale=1.0, prompts=None, prompts_dir=PROMPTS)
    prompts = [BuiltPrompt(f"user {p.index}", 80, system=f"system {p.system_prompt_index}") for p in planned]
    plan = make_plan(shared, planned, prompts, served_model="m", run_salt="run-1", max_model_len=None)
    assert {r.cache_salt for r in plan.requests} == {"run-1"}
    body = json.loads(plan.requests[3].body)
    assert body["messages"] == [
        {"role": "system", "content": "system 1"},
        {"role": "user", "content": "user 3"},
    ]
    plain = make_plan(
        wl(),
        plan_source(wl(), scale=1.0, prompts=None, prompts_dir=PROMPTS),
        [BuiltPrompt("x", 10)] * 10,
        served_model="m",
        run_salt="run-1",
        max_model_len=None,
    )
    assert len({r.cache_salt for r in plain.requests}) == 10  # the default: a salt per request
    assert SYSTEM_PROMPT_BASE < 0


def test_request_body_with_history() -> None:
    body = json.loads(
        request_body(
            wl(),
            model="m",
            prompt="q2",
            max_tokens=4,
            cache_salt="s",
            index=0,
            history=(("user", "q1"), ("assistant", "a1")),
        )
    )
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]


TRACE = "\n".join(
    [
        '{"arrival_s": 1.5, "prompt_tokens": 300, "output_tokens": 20}',
        '{"arrival_s": 0.5, "prompt": "hello there", "output_tokens": 10, "conversation_id": "c1"}',
        "",
        '{"arrival_s": 2.5, "prompt_tokens": 50, "output_tokens": 5}',
    ]
)


def test_a_trace_is_read_in_arrival_order() -> None:
    rows = parse_trace(TRACE)
    assert [r.arrival_s for r in rows] == [0.5, 1.5, 2.5]
    assert rows[0].prompt == "hello there" and rows[0].conversation_id == "c1"


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("{not json", "trace:1: not JSON"),
        ('{"arrival_s": 0, "output_tokens": 5}', "exactly one of prompt"),
        ('{"arrival_s": 0, "prompt": "x", "prompt_tokens": 3, "output_tokens": 5}', "exactly one of prompt"),
        ('{"arrival_s": "soon", "prompt": "x", "output_tokens": 5}', "arrival_s = 'soon': expected a number"),
        ('{"arrival_s": -1, "prompt": "x", "output_tokens": 5}', "arrival_s must be >= 0"),
        ("[1, 2]", "expected a JSON object per line"),
        ("", "no requests in the trace"),
    ],
)
def test_a_bad_trace_line_is_named(line: str, fragment: str) -> None:
    with pytest.raises(LoadError) as info:
        parse_trace(line)
    assert fragment in str(info.value)


def test_trace_arrivals_are_offsets_from_each_phase_divided_by_speed() -> None:
    rows = parse_trace(TRACE)
    trace = wl(num_requests=4, warmup_requests=1, mode="open", data=DataSourceConfig("trace", "t", speed=2.0))
    planned = plan_source_rows(trace, rows)
    assert [p.warmup for p in planned] == [True, False, False, False, False]
    # measured: rows 1, 2, then the trace again one span later (last offset + mean gap = 3.5 s): rows 0, 1
    assert [p.arrival_s for p in planned] == pytest.approx([0.0, 0.0, 0.5, 1.25, 1.75])
    assert [p.max_tokens for p in planned] == [10, 20, 5, 10, 20]
    assert [p.fixed_prompt for p in planned][:2] == ["hello there", None]
    assert planned[1].target_prompt_tokens == 300
    assert replays_offsets(trace)
    closed = replace(trace, mode="closed", data=DataSourceConfig("trace", "t", speed=0.0))
    assert not replays_offsets(closed)
    assert all(p.arrival_s is None for p in plan_source_rows(closed, rows))


def plan_source_rows(workload: WorkloadConfig, rows: list) -> list:  # type: ignore[type-arg]
    from load.sources import plan_trace

    return plan_trace(workload, rows, scale=1.0)


def test_the_shipped_trace_and_sharegpt_files_plan() -> None:
    rows = read_trace(PROMPTS / "data" / "trace_example.jsonl")
    assert len(rows) == 40 and rows[-1].arrival_s < 10
    for name, count in (("trace_example", 40), ("sharegpt_example", 16), ("shared_prefix", 68)):
        cfg, _ = load([f"+workload@workloads.{name}={name}"])
        assert len(plan_source(cfg.workloads[name], scale=1.0, prompts=None, prompts_dir=PROMPTS)) == count


def conversation(*messages: tuple[str, str]) -> dict[str, object]:
    return {"id": "c", "conversations": [{"from": f, "value": v} for f, v in messages]}


def test_sharegpt_turns_carry_the_previous_exchanges_up_to_max_turns() -> None:
    data = [conversation(("human", "q1"), ("gpt", "a1"), ("human", "q2"), ("gpt", "a2"), ("human", "q3"))]
    one = parse_sharegpt(data, max_turns=1)
    assert [(t.question, t.answer, t.history) for t in one] == [("q1", "a1", ())]
    two = parse_sharegpt(data, max_turns=5)
    assert [t.question for t in two] == ["q1", "q2"]  # q3 has no answer: its length is unknown
    assert two[1].history == (("user", "q1"), ("assistant", "a1"))


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"not": "a list"}, "expected a JSON list"),
        ([{"id": 1}], "expected an object with a 'conversations' list"),
        ([conversation(("gpt", "a"), ("human", "q"))], "expected a human message then a gpt answer"),
        ([conversation(("human", "q"))], "no complete human/gpt exchange"),
    ],
)
def test_a_bad_sharegpt_file_is_named(data: object, fragment: str) -> None:
    with pytest.raises(LoadError) as info:
        parse_sharegpt(data, max_turns=2)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (
            {"shared_prefix": SharedPrefixConfig(system_prompts=0)},
            "workloads.short.shared_prefix.system_prompts = 0",
        ),
        ({"data": DataSourceConfig("csv", "data/trace_example.jsonl")}, "workloads.short.data.kind = 'csv'"),
        (
            {"data": DataSourceConfig("trace", "data/nope.jsonl")},
            "workloads.short.data.file = 'data/nope.jsonl'",
        ),
        ({"data": DataSourceConfig("trace", "data/trace_example.jsonl", speed=-1)}, "data.speed = -1"),
        (
            {
                "data": DataSourceConfig("trace", "data/trace_example.jsonl"),
                "shared_prefix": SharedPrefixConfig(),
            },
            "null when data is set",
        ),
    ],
)
def test_bad_source_settings_are_named(change: dict[str, object], fragment: str) -> None:
    cfg, _ = load([])
    cfg.workloads["short"] = replace(cfg.workloads["short"], **change)  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("kind", "text", "fragment"),
    [
        (
            "trace",
            '{"arrival_s": 0, "prompt": "x", "output_tokens": 5}\n{"arrival_s": 1, "prompt": "y"\n',
            "broken.data:2: not JSON",
        ),
        (
            "trace",
            '{"arrival_s": -1, "prompt": "x", "output_tokens": 5}\n',
            "broken.data:1: arrival_s must be >= 0",
        ),
        ("trace", "\n\n", "broken.data: no requests in the trace"),
        ("sharegpt", "[]", "broken.data: no complete human/gpt exchange"),
        ("sharegpt", "{not json", "cannot read ShareGPT file"),
    ],
)
def test_broken_workload_data_is_refused_when_the_config_is_validated(
    tmp_path: Path, kind: str, text: str, fragment: str
) -> None:
    """Issue 21: a broken data file is a config error naming the file, the field and the line, before
    anything starts; the sweep never finds it under load and blames the server."""
    broken = tmp_path / "broken.data"
    broken.write_text(text)
    cfg, _ = load([])
    cfg.workloads["short"] = replace(cfg.workloads["short"], data=DataSourceConfig(kind, str(broken)))
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    message = str(info.value)
    assert f"workloads.short.data.file = '{broken}': a valid {kind} file: " in message
    assert fragment in message
