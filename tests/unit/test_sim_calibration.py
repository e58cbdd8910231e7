"""Calibration of the simulator against the case study, with the shipped profile and candidates.

Each candidate is composed with Hydra, rendered to its launch argv, parsed by the simulator's own command
line, and replayed in virtual time in-process (no HTTP), so the whole case study runs in seconds.
"""

from __future__ import annotations

import json
from functools import cache

import pytest

from contracts.paths import CONF_DIR
from contracts.schema import WorkloadConfig
from launch.sim.cli import parse_args
from launch.sim.model import EngineConfig, StartupError, chat_text, check_startup
from launch.sim.profile import Profile, load_profile
from launch.sim.replay import ReplayRequest, ReplayResult, replay_closed_loop
from launch.spec import render_spec
from tests.unit.composed import load


@cache
def _profile() -> Profile:
    return load_profile("h100x8_deepseek_v4_flash")


@cache
def engine(candidate: str) -> EngineConfig:
    """The EngineConfig the simulator builds from the shipped candidate's rendered command line."""
    cfg, _ = load([f"candidate={candidate}", "host=sim"])
    spec = render_spec(cfg.service, cfg.candidate, cfg.host)
    assert spec.argv[:3] == ("python", "-m", "launch.sim")
    return parse_args(list(spec.argv[3:])).engine


@cache
def workload(name: str) -> WorkloadConfig:
    cfg, _ = load([])
    return cfg.workloads[name]


def requests(name: str, tag: str) -> tuple[list[ReplayRequest], int, list[ReplayRequest]]:
    wl = workload(name)
    assert wl.prompt_tokens.kind == "fixed" and wl.output_tokens.kind == "fixed"
    n = wl.output_tokens.mean
    min_tokens = n if wl.ignore_eos else 0

    def make(i: int, key: str) -> ReplayRequest:
        return ReplayRequest(wl.prompt_tokens.mean, n, min_tokens, wl.ignore_eos, f"{tag}-{key}-{i}")

    measured = [make(i, "m") for i in range(wl.num_requests)]
    warm = [make(i, "w") for i in range(wl.warmup_requests)]
    return measured, wl.concurrency, warm


@cache
def run(candidate: str, profile: str) -> ReplayResult:
    measured, concurrency, warm = requests(profile, candidate)
    cfg = engine(candidate)
    return replay_closed_loop(_profile(), cfg, measured, concurrency, warmup=warm)


@cache
def answer_gate(candidate: str) -> ReplayResult:
    wl = workload("answer_gate")
    prompts = json.loads((CONF_DIR / "workload" / str(wl.prompts_file)).read_text())
    reqs = [
        ReplayRequest(200, wl.output_tokens.mean, 0, False, chat_text([{"role": "user", "content": p}]))
        for p in prompts
    ]
    return replay_closed_loop(_profile(), engine(candidate), reqs, wl.concurrency)


def test_tp4_dp2_wins_the_empty_road() -> None:
    base, tp4 = run("baseline", "serial"), run("tp4_dp2", "serial")
    # A clear win, not a tie: the reversal is only a lesson when the empty road really favours TP4.
    assert tp4.e2e_p50 < 0.9 * base.e2e_p50
    assert tp4.ttft_p50 < base.ttft_p50


def test_tp4_dp2_loses_the_shared_road() -> None:
    base, tp4 = run("baseline", "decode_heavy"), run("tp4_dp2", "decode_heavy")
    assert base.output_tps >= 4 * tp4.output_tps
    assert tp4.ttft_p50 >= 10 * base.ttft_p50
    # near the case study: ~10,039 -> ~1,197 tok/s, TTFT p50 0.347 s -> 22.45 s
    assert base.output_tps == pytest.approx(10_039, rel=0.08)
    assert tp4.output_tps == pytest.approx(1_197, rel=0.2)
    assert base.ttft_p50 == pytest.approx(0.347, rel=0.25)
    assert tp4.ttft_p50 == pytest.approx(22.45, rel=0.15)
    assert all(r.completion_tokens == 1024 for r in base.records + tp4.records)


def test_probabilistic_drafts_are_throughput_neutral() -> None:
    base, prob = run("baseline", "decode_heavy"), run("spec_probabilistic", "decode_heavy")
    assert prob.output_tps == pytest.approx(base.output_tps, rel=0.05)
    assert prob.ttft_p50 == pytest.approx(0.322, rel=0.25)
    prefill = run("spec_probabilistic", "prefill_10k")
    prompt_tps = 10_000 * len(prefill.records) / prefill.duration
    assert prompt_tps == pytest.approx(34_652, rel=0.1)
    assert prefill.ttft_p50 == pytest.approx(8.89, rel=0.1)


@pytest.mark.parametrize(
    ("candidate", "visible", "median_s"), [("baseline", 4, 43.95), ("spec_probabilistic", 3, 76.85)]
)
def test_answer_gate_visible_answers(candidate: str, visible: int, median_s: float) -> None:
    result = answer_gate(candidate)
    assert result.visible == visible
    assert result.censored_visible_median == pytest.approx(median_s, rel=0.05)
    for record in result.records:
        if record.first_visible is None:
            assert record.finish_reason == "length"
            assert record.completion_tokens == 32768


def test_baseline_prefill_10k_completes_without_preemption() -> None:
    result = run("baseline", "prefill_10k")
    assert len(result.records) == 64
    assert all(r.finish_reason == "length" and r.completion_tokens == 64 for r in result.records)
    assert result.preemptions == 0


@pytest.mark.parametrize(
    ("candidate", "kind", "line"),
    [
        ("mega_moe", "incompatible", "RuntimeError: DeepGEMM MegaMoE requires SM100 GPUs."),
        ("eplb", "init-failed", "NotImplementedError: EPLB is not supported for DeepseekV4ForCausalLM"),
    ],
)
def test_unsupported_candidates_fail_at_startup(candidate: str, kind: str, line: str) -> None:
    with pytest.raises(StartupError) as info:
        check_startup(_profile(), engine(candidate))
    assert info.value.kind == kind
    assert any(entry.startswith(line) for entry in info.value.log)


def test_baseline_keeps_about_one_gib_free_per_gpu() -> None:
    plan = check_startup(_profile(), engine("baseline"))
    assert 0.9 <= plan.free_gib <= 1.1
