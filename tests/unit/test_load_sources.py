"""Workload sources (load.sources): shared prefixes, JSONL traces, ShareGPT conversations, as planned."""

from __future__ import annotations

import json
import math
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
from orchestrator.config.validate import validate
from tests.unit.composed import load

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
        '{"arrival_s": 0.5, "prompt": "hello there", "output_tokens": 10, "conversation_id": "c1"}',
        '{"arrival_s": 1.5, "prompt_tokens": 300, "output_tokens": 20}',
        "",
        '{"arrival_s": 2.5, "prompt_tokens": 50, "output_tokens": 5}',
    ]
)


def test_a_trace_is_read_in_arrival_order_with_its_lines() -> None:
    rows = parse_trace(TRACE)
    assert [r.arrival_s for r in rows] == [0.5, 1.5, 2.5]
    assert [r.line for r in rows] == [1, 2, 4]
    assert rows[0].prompt == "hello there" and rows[0].conversation_id == "c1"


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("{not json", "trace:1: not JSON"),
        ('{"arrival_s": 0, "output_tokens": 5}', "exactly one of prompt"),
        ('{"arrival_s": 0, "prompt": "x", "prompt_tokens": 3, "output_tokens": 5}', "exactly one of prompt"),
        ('{"arrival_s": "soon", "prompt": "x", "output_tokens": 5}', "arrival_s = 'soon': expected a number"),
        ('{"arrival_s": -1, "prompt": "x", "output_tokens": 5}', "arrival_s must be >= 0"),
        ('{"arrival_s": NaN, "prompt": "x", "output_tokens": 5}', "trace:1: arrival_s = nan: expected"),
        ('{"arrival_s": Infinity, "prompt": "x", "output_tokens": 5}', "arrival_s = inf: expected a finite"),
        (
            '{"arrival_s": 0, "prompt": "x", "output_tokens": 5}\n{"arrival_s": -Infinity, "prompt": "y", '
            '"output_tokens": 5}',
            "trace:2: arrival_s = -inf: expected a finite",
        ),
        ("[1, 2]", "expected a JSON object per line"),
        ("", "no requests in the trace"),
        (
            '{"arrival_s": 1.5, "prompt": "x", "output_tokens": 5}\n{"arrival_s": 0.5, "prompt": "y", '
            '"output_tokens": 5}',
            "trace:2: arrival_s = 0.5 is before line 1's 1.5: offsets must not decrease",
        ),
        (
            '{"arrival_s": 0, "prompt": "x", "output_tokens": 5}\n{"arrival_s": 0, "prompt": "y", '
            '"output_tokens": 5}\n\n{"arrival_s": -0.1, "prompt": "z", "output_tokens": 5}',
            "trace:4: arrival_s must be >= 0",
        ),
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
        ({"data": DataSourceConfig("trace", "data/trace_example.jsonl", speed=math.inf)}, "data.speed = inf"),
        ({"mode": "open", "rate": math.nan}, "workloads.short.rate = nan: a positive arrival rate"),
        ({"mode": "open", "rate": math.inf}, "workloads.short.rate = inf: a positive arrival rate"),
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
        (
            "trace",
            '{"arrival_s": 0, "prompt": "x", "output_tokens": 5}\n{"arrival_s": NaN, "prompt": "y", '
            '"output_tokens": 5}\n',
            "broken.data:2: arrival_s = nan: expected a finite number of seconds >= 0",
        ),
        (
            "trace",
            '{"arrival_s": 2, "prompt": "x", "output_tokens": 5}\n{"arrival_s": 1, "prompt": "y", '
            '"output_tokens": 5}\n',
            "broken.data:2: arrival_s = 1 is before line 1's 2",
        ),
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


@pytest.mark.parametrize(
    ("lines", "fragments"),
    [
        (  # one line beyond the context: named with its file, line, numbers and the limit
            [(0.0, 100, 16), (0.1, 131000, 100), (0.2, 100, 16)],
            [
                ":2: prompt_tokens 131000 + output_tokens 100 = 131100",
                "at most service.max_model_len (131072)",
            ],
        ),
        (  # exactly the context is allowed; one token more is not
            [(0.0, 131000, 72), (0.1, 131000, 73)],
            [":2: prompt_tokens 131000 + output_tokens 73 = 131073"],
        ),
        (  # many lines beyond it: the first three, then a count
            [(float(i), 200000, 1) for i in range(5)],
            [":1: prompt_tokens 200000", ":3: prompt_tokens 200000", "(2 more lines beyond it)"],
        ),
    ],
)
def test_a_trace_line_longer_than_the_context_is_refused(
    tmp_path: Path, lines: list[tuple[float, int, int]], fragments: list[str]
) -> None:
    """Issue 21: prompt + max_tokens beyond the service's max_model_len is refused before anything starts
    (the server would answer 400 and the sweep would blame the candidate)."""
    trace = tmp_path / "long.jsonl"
    trace.write_text(
        "".join(
            json.dumps({"arrival_s": t, "prompt_tokens": p, "output_tokens": o}) + "\n" for t, p, o in lines
        )
    )
    cfg, _ = load([])
    cfg.workloads["short"] = replace(cfg.workloads["short"], data=DataSourceConfig("trace", str(trace)))
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    message = str(info.value)
    assert f"workloads.short.data.file = '{trace}:" in message
    for fragment in fragments:
        assert fragment in message
    assert message.count("prompt_tokens") == min(len([x for x in lines if x[1] + x[2] > 131072]), 3)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (
            {
                "prompt_tokens": LengthConfig(kind="fixed", mean=131000),
                "output_tokens": LengthConfig(mean=100),
            },
            "workloads.short.prompt_tokens = 'longest prompt 131000 + longest output_tokens 100 = 131100'",
        ),
        (
            {
                "prompt_tokens": LengthConfig(kind="uniform", mean=1000, min=10, max=130000),
                "output_tokens": LengthConfig(kind="lognormal", mean=500, std=100, min=1, max=2000),
            },
            "longest prompt 130000 + longest output_tokens 2000 = 132000",
        ),
        (
            {
                "prompt_tokens": LengthConfig(kind="fixed", mean=130500),
                "output_tokens": LengthConfig(mean=100),
                "shared_prefix": SharedPrefixConfig(prefix_tokens=512),
            },
            "shared_prefix.prefix_tokens 512 + longest prompt 130500 + longest output_tokens 100 = 131112",
        ),
    ],
)
def test_generated_requests_longer_than_the_context_are_refused(
    change: dict[str, object], fragment: str
) -> None:
    cfg, _ = load([])
    cfg.workloads["short"] = replace(cfg.workloads["short"], **change)  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    assert fragment in str(info.value)
    assert "at most service.max_model_len (131072) tokens per request" in str(info.value)


def test_a_request_that_fits_the_context_exactly_passes_and_unused_profiles_are_not_held_to_it() -> None:
    cfg, _ = load([])
    fits = {"prompt_tokens": LengthConfig(kind="fixed", mean=131000), "output_tokens": LengthConfig(mean=72)}
    cfg.workloads["short"] = replace(cfg.workloads["short"], **fits)  # type: ignore[arg-type]
    too_long = {
        "prompt_tokens": LengthConfig(kind="fixed", mean=200000),
        "output_tokens": LengthConfig(mean=1),
    }
    cfg.run = replace(cfg.run, profiles=[p for p in cfg.run.profiles if p != "mixed"])
    assert "mixed" not in cfg.run.recovery_profiles and cfg.capacity.profile != "mixed"  # not run
    cfg.workloads["mixed"] = replace(cfg.workloads["mixed"], **too_long)  # type: ignore[arg-type]
    validate(cfg)  # quiet
    cfg.workloads["short"] = replace(cfg.workloads["short"], **too_long)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="longest prompt 200000"):
        validate(cfg)
