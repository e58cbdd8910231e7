"""Profiles to planned requests and prompts that hit their token targets (deterministic from the seed)."""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from contracts.errors import ConfigError, HarnessError, LoadError
from contracts.schema import LengthConfig
from load.workload import (
    PROMPT_TOLERANCE,
    PromptBuilder,
    load_prompts,
    make_salt,
    parse_prompts,
    plan_requests,
    sample_lengths,
    scaled_counts,
)
from orchestrator.config.validate import validate
from tests.unit.composed import load
from tests.unit.load_fixtures import workload

CONF = Path(__file__).resolve().parents[2] / "conf" / "workload"


@pytest.mark.parametrize(
    ("num", "warm", "scale", "want"),
    [
        (10, 2, 1.0, (10, 2)),
        (10, 2, 0.1, (1, 0)),
        (128, 4, 0.05, (6, 0)),
        (1, 1, 0.01, (1, 0)),
        (8, 1, 2.0, (16, 2)),
    ],
)
def test_scaled_counts(num: int, warm: int, scale: float, want: tuple[int, int]) -> None:
    assert scaled_counts(workload(num_requests=num, warmup_requests=warm), scale) == want


def test_a_fixed_prompt_set_is_never_scaled() -> None:
    gate = workload(num_requests=5, warmup_requests=0, prompts_file="answer_gate_prompts.json")
    assert scaled_counts(gate, 0.25) == (5, 0)


def test_scale_must_be_positive() -> None:
    with pytest.raises(LoadError, match="scale"):
        scaled_counts(workload(), 0)


@pytest.mark.parametrize(
    ("config", "low", "high"),
    [
        (LengthConfig(kind="fixed", mean=512), 512, 512),
        (LengthConfig(kind="uniform", mean=256, min=128, max=384), 128, 384),
        (LengthConfig(kind="lognormal", mean=2000, std=2500, min=64, max=16000), 64, 16000),
    ],
)
def test_sample_lengths_stay_in_range(config: LengthConfig, low: int, high: int) -> None:
    values = sample_lengths(config, 2000, random.Random(1))
    assert low <= min(values) and max(values) <= high


def test_lognormal_mean_is_roughly_the_configured_mean() -> None:
    values = sample_lengths(
        LengthConfig(kind="lognormal", mean=400, std=400, min=1, max=100_000), 20_000, random.Random(2)
    )
    assert sum(values) / len(values) == pytest.approx(400, rel=0.05)


def test_unknown_distribution() -> None:
    with pytest.raises(LoadError, match="unknown length distribution"):
        sample_lengths(LengthConfig(kind="zipf", mean=3), 1, random.Random(0))


def test_plan_is_deterministic_with_warmup_first() -> None:
    w = workload(prompt_tokens=LengthConfig(kind="uniform", mean=100, min=50, max=150))
    first, second = plan_requests(w), plan_requests(w)
    assert first == second
    assert [p.warmup for p in first] == [True, True] + [False] * 10
    assert plan_requests(workload(seed=4, prompt_tokens=w.prompt_tokens)) != first


def test_open_loop_arrivals_increase_within_each_phase() -> None:
    plan = plan_requests(workload(mode="open", rate=8.0, num_requests=200, warmup_requests=3))
    measured = [p.arrival_s or 0.0 for p in plan if not p.warmup]
    assert measured == sorted(measured) and measured[0] > 0
    assert len(measured) / measured[-1] == pytest.approx(8.0, rel=0.25)


@pytest.mark.parametrize(("mode", "rate"), [("open", None), ("open", 0.0), ("burst", None)])
def test_bad_modes(mode: str, rate: float | None) -> None:
    with pytest.raises(LoadError):
        plan_requests(workload(mode=mode, rate=rate))


def test_answer_gate_prompts_ship_with_the_project() -> None:
    prompts = load_prompts(workload(prompts_file="answer_gate_prompts.json"), CONF)
    assert prompts is not None and len(prompts) == 5
    plan = plan_requests(workload(num_requests=7, warmup_requests=0), prompts=prompts)
    assert plan[5].fixed_prompt == prompts[0]


def test_bad_prompts_file(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text('{"not": "a list"}')
    with pytest.raises(HarnessError, match="a JSON object: expected a JSON list of non-empty strings"):
        load_prompts(workload(prompts_file="p.json"), tmp_path)


BAD_PROMPTS = [
    ("[]", "p.json:1: an empty list: no prompt to send"),
    ("\n\n  [\n  ]\n", "p.json:3: an empty list: no prompt to send"),
    ('{"prompts": ["a"]}', "p.json:1: a JSON object: expected a JSON list of non-empty strings"),
    ('"just one prompt"', "p.json:1: a JSON string: expected a JSON list"),
    ('[\n  "first",\n  "",\n  "third"\n]', 'p.json:3: prompt 2 is "": expected a non-empty string'),
    ('[\n  "first",\n  {"text": "x"}\n]', "p.json:3: prompt 2 is a JSON object: expected a non-empty string"),
    ('[\n  "a",\n  ["b"]]', "p.json:3: prompt 2 is a JSON list: expected a non-empty string"),
    ('[\n  "a",\n  null\n]', "p.json:3: prompt 2 is null: expected a non-empty string"),
    ('[\n  "a",\n  "b"\n', "p.json:4: not JSON"),
    ("", "p.json:1: not JSON"),
]


@pytest.mark.parametrize(("text", "fragment"), BAD_PROMPTS)
def test_a_bad_prompts_file_is_named_with_its_line(text: str, fragment: str) -> None:
    with pytest.raises(HarnessError) as info:
        parse_prompts(text, "p.json")
    assert fragment in str(info.value)


@pytest.mark.parametrize(("text", "fragment"), BAD_PROMPTS[:3])
def test_a_bad_prompts_file_under_load_is_the_harness_not_the_server(
    tmp_path: Path, text: str, fragment: str
) -> None:
    """Read at run time (a file edited after compose): a harness fault (the candidate INCOMPLETE), never a
    load error the sweep records as the server being unhealthy."""
    (tmp_path / "p.json").write_text(text)
    with pytest.raises(HarnessError) as info:
        load_prompts(workload(prompts_file="p.json"), tmp_path)
    assert f"{tmp_path / 'p.json'}{fragment.removeprefix('p.json')}" in str(info.value)


def test_prompts_files_parse_with_their_texts() -> None:
    assert parse_prompts('[\n  "a",\n  "b c"\n]\n', "p.json") == ["a", "b c"]


@pytest.mark.parametrize(("text", "fragment"), BAD_PROMPTS)
def test_a_bad_prompts_file_is_refused_when_the_config_is_validated(
    tmp_path: Path, text: str, fragment: str
) -> None:
    path = tmp_path / "p.json"
    path.write_text(text)
    cfg, _ = load([])
    cfg.workloads["short"] = replace(cfg.workloads["short"], prompts_file=str(path))
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    message = str(info.value)
    assert f"workloads.short.prompts_file = '{path}': a JSON list of non-empty strings: " in message
    assert f"{path}{fragment.removeprefix('p.json')}" in message


@pytest.mark.parametrize(
    ("run_salt", "ok"), [("gauntlet-ab12", True), ("a/b", False), ("x@y", False), ("s" * 130, False)]
)
def test_cache_salt_rules(run_salt: str, ok: bool) -> None:
    if ok:
        assert make_salt(run_salt, 7) == f"{run_salt}-7"
    else:
        with pytest.raises(LoadError, match="cache_salt"):
            make_salt(run_salt, 7)


def subword_counter(overhead: int) -> object:
    """A tokenizer whose cost per word varies (long words split), plus a chat-template overhead."""

    async def count(text: str) -> int | None:
        return overhead + sum(1 + len(word) // 6 for word in text.split())

    return count


@pytest.mark.parametrize("target", [16, 64, 200, 512, 2000, 10_000])
def test_prompts_hit_their_target_within_tolerance(target: int) -> None:
    count = subword_counter(overhead=9)
    builder = PromptBuilder(count=count, seed=11)  # type: ignore[arg-type]
    built = asyncio.run(builder.build(3, target))
    assert built.counted is not None
    assert abs(built.counted - target) <= max(PROMPT_TOLERANCE * target, 1)
    assert asyncio.run(count(built.text)) == built.counted  # type: ignore[operator]


def test_prompts_differ_per_request_and_repeat_per_seed() -> None:
    builder = PromptBuilder(count=subword_counter(3), seed=5)  # type: ignore[arg-type]
    a, b = asyncio.run(builder.build(0, 100)), asyncio.run(builder.build(1, 100))
    again = asyncio.run(PromptBuilder(count=subword_counter(3), seed=5).build(0, 100))  # type: ignore[arg-type]
    assert a.text != b.text and a.text == again.text


def test_without_tokenize_prompts_are_estimates_with_a_note() -> None:
    async def none(text: str) -> int | None:
        return None

    builder = PromptBuilder(count=none, seed=1)
    built = asyncio.run(builder.build(0, 130))
    assert built.counted is None and len(built.text.split()) == 92  # (130 - 10) / 1.3
    assert "no usable /tokenize" in builder.notes[0]


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (
            lambda: sample_lengths(LengthConfig(kind="lognormal", mean=10, std=-1), 3, random.Random(0)),
            "std >= 0",
        ),
        (lambda: sample_lengths(LengthConfig(kind="zipf", mean=10), 3, random.Random(0)), "unknown length"),
        (lambda: plan_requests(workload(mode="open", rate=0.0)), "open loop needs rate > 0"),
        (lambda: plan_requests(workload(mode="open", rate=2.0, arrivals="bursty")), "arrivals 'bursty'"),
        (lambda: plan_requests(workload(mode="bursty")), "mode 'bursty'"),
        (lambda: scaled_counts(workload(), 0.0), "scale must be > 0"),
        (lambda: make_salt("a/b", 1), "not accepted by vLLM"),
    ],
)
def test_a_workload_the_runner_cannot_plan_is_a_harness_fault_not_the_server(
    call: Callable[[], object], fragment: str
) -> None:
    """Validation refuses these before anything starts; one that reaches the runner (a profile edited in a
    recorded summary, ``python -m load``) is the harness's fault: never recorded as the server unhealthy."""
    with pytest.raises(HarnessError, match=re.escape(fragment)):
        call()


def test_a_lognormal_length_with_a_negative_std_is_refused_when_the_config_is_validated() -> None:
    cfg, _ = load([])
    lengths = LengthConfig(kind="lognormal", mean=10, std=-1, min=1, max=20)
    cfg.workloads["short"] = replace(cfg.workloads["short"], output_tokens=lengths)
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    assert "workloads.short.output_tokens.std = -1: a standard deviation in tokens >= 0" in str(info.value)
