"""The simulator's pure cost model: tokenizer, memory plan, startup refusals, acceptance, output plans."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest

from launch.sim.model import (
    StartupError,
    acceptance_table,
    check_startup,
    count_chat_tokens,
    count_text_tokens,
    expected_tokens_per_step,
    plan_output,
    sample_accepted,
    step_cost,
    token_ids,
)
from launch.sim.profile import PROFILE_DIR, ProfileError, load_profile, parse_profile
from tests.unit.sim_fixtures import BASE, PROFILE


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("hello", 1),
        ("hello   world\nagain", 3),
        ("a" * 12, 1),
        ("a" * 13, 2),
        ("a" * 25, 3),
        ("short " + "x" * 24, 3),
    ],
)
def test_tokenizer_counts_words(text: str, tokens: int) -> None:
    assert count_text_tokens(text) == tokens
    assert len(token_ids(text)) == tokens


def test_chat_template_adds_fixed_tokens() -> None:
    one = [{"role": "user", "content": "one two three"}]
    assert count_chat_tokens(one) == 3 + 1 + 1 + 2
    assert count_chat_tokens(one, add_generation_prompt=False) == 3 + 1 + 1
    parts = [{"role": "user", "content": [{"type": "text", "text": "one two"}, {"type": "image_url"}]}]
    assert count_chat_tokens(parts) == 2 + 4


def test_token_ids_are_deterministic() -> None:
    assert token_ids("the same words") == token_ids("the  same\twords")
    assert token_ids("the same words") != token_ids("other words here")


@pytest.mark.parametrize(("p", "k"), [(0.0, 7), (0.5, 1), (0.7, 7), (0.9, 3)])
def test_acceptance_matches_its_expectation(p: float, k: int) -> None:
    table = acceptance_table(p, k)
    assert table[-1] == 1.0 and table == sorted(table)
    rng = random.Random(1)
    n = 20_000
    mean = sum(1 + sample_accepted(table, rng) for _ in range(n)) / n
    assert mean == pytest.approx(expected_tokens_per_step(p, k), rel=0.03)


def test_memory_plan_of_the_baseline() -> None:
    plan = check_startup(PROFILE, BASE)
    assert plan.budget_gib == pytest.approx(0.81 * 79.65)
    assert 0.9 <= plan.free_gib <= 1.1
    assert plan.kv_tokens >= 64 * 10_064 // 4  # the 10K profile fits per replica
    assert plan.num_gpu_blocks * plan.block_size == plan.kv_tokens


@pytest.mark.parametrize(
    ("change", "kind", "needle"),
    [
        ({"gpu_memory_utilization": 0.85}, "out-of-memory", "CUDA out of memory"),
        ({"enable_expert_parallel": False}, "out-of-memory", "CUDA out of memory"),
        ({"max_model_len": 10_000_000}, "out-of-memory", "estimated maximum model length"),
        ({"tensor_parallel_size": 4}, "init-failed", "exceeds the 8 GPUs"),
        ({"moe_backend": "deep_gemm_mega_moe"}, "incompatible", "DeepGEMM MegaMoE requires SM100 GPUs."),
        ({"enable_eplb": True}, "init-failed", "EPLB is not supported"),
        ({"speculative_method": "medusa"}, "init-failed", "not supported for this model"),
        ({"draft_sample_method": "beam"}, "bad-args", "draft_sample_method"),
        ({"kv_cache_dtype": "int3"}, "bad-args", "Unsupported KV cache dtype"),
        ({"gpu_memory_utilization": 1.5}, "bad-args", "gpu_memory_utilization"),
    ],
)
def test_startup_refusals(change: dict[str, object], kind: str, needle: str) -> None:
    with pytest.raises(StartupError) as info:
        check_startup(PROFILE, replace(BASE, **change))  # type: ignore[arg-type]
    assert info.value.kind == kind
    assert any(needle in line for line in info.value.log)


def test_mega_moe_is_accepted_on_sm100() -> None:
    blackwell = replace(PROFILE, gpu=replace(PROFILE.gpu, compute_capability="10.0"))
    assert check_startup(blackwell, replace(BASE, moe_backend="deep_gemm_mega_moe")).free_gib > 0


def test_eager_mode_frees_graph_memory_and_slows_steps() -> None:
    eager = replace(BASE, enforce_eager=True)
    assert check_startup(PROFILE, eager).free_gib > check_startup(PROFILE, BASE).free_gib
    assert step_cost(PROFILE, eager).fixed_s > step_cost(PROFILE, BASE).fixed_s


@pytest.mark.parametrize("speed", [0.5, 0.8, 1.25])
def test_sim_speed_scales_every_step(speed: float) -> None:
    normal, scaled = step_cost(PROFILE, BASE), step_cost(PROFILE, replace(BASE, speed=speed))
    args = (1000, 256, 1e6, 33, True)
    assert scaled.seconds(*args) == pytest.approx(normal.seconds(*args) / speed)


@pytest.mark.parametrize(
    ("max_tokens", "min_tokens", "ignore_eos", "finish", "max_mode"),
    [
        (1024, 1024, True, "length", False),
        (64, 0, False, "length", False),  # the natural answer is longer than 64 tokens
        (8192, 0, False, "stop", False),
        (8192, 8000, False, "stop", False),
        (32768, 0, True, "length", False),  # ignore_eos: never max reasoning
    ],
)
def test_output_plans(
    max_tokens: int, min_tokens: int, ignore_eos: bool, finish: str, max_mode: bool
) -> None:
    plan = plan_output(
        PROFILE,
        BASE,
        prompt_digest="p",
        max_tokens=max_tokens,
        min_tokens=min_tokens,
        ignore_eos=ignore_eos,
        rng=random.Random(3),
    )
    assert plan.finish_reason == finish
    assert plan.max_reasoning is max_mode
    assert min_tokens <= plan.target <= max_tokens
    assert 0 <= plan.reasoning <= plan.target
    if ignore_eos:
        assert plan.target == max_tokens


def test_max_reasoning_depends_on_prompt_and_draft_method_only() -> None:
    def reasoning(method: str, digest: str, seed: int = 0) -> int:
        cfg = replace(BASE, draft_sample_method=method, seed=seed)
        plan = plan_output(
            PROFILE,
            cfg,
            prompt_digest=digest,
            max_tokens=10**6,
            min_tokens=0,
            ignore_eos=False,
            rng=random.Random(),
        )
        assert plan.max_reasoning
        return plan.reasoning

    assert reasoning("greedy", "a") == reasoning("greedy", "a")
    assert reasoning("greedy", "a") != reasoning("greedy", "b")
    assert reasoning("greedy", "a") != reasoning("greedy", "a", seed=1)
    # probabilistic drafts lengthen every prompt's reasoning (same rank, longer)
    assert all(reasoning("probabilistic", d) > reasoning("greedy", d) for d in "abcdef")


def test_shipped_profiles_parse() -> None:
    names = sorted(p.stem for p in PROFILE_DIR.glob("*.json"))
    assert "h100x8_deepseek_v4_flash" in names
    for name in names:
        assert load_profile(name).name == name


def test_bad_profiles_are_named(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="no simulation profile 'nope'"):
        load_profile("nope")
    data = json.loads((PROFILE_DIR / "h100x8_deepseek_v4_flash.json").read_text())
    data["gpu"]["colour"] = "green"
    with pytest.raises(ProfileError, match=r"gpu: unknown field\(s\) \['colour'\]"):
        parse_profile(data)
    del data["gpu"]
    with pytest.raises(ProfileError, match="missing field 'gpu'"):
        parse_profile(data)
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ProfileError, match="not valid JSON"):
        load_profile(str(bad))
