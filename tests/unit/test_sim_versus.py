"""The simulator against a measured sweep (launch/sim/versus.py) and the cpu host's profile: what it reads
from a recorded launch, what the profile predicts for the real-vLLM sweep's candidates, how it is shown."""

from __future__ import annotations

from dataclasses import replace

import pytest

from launch.sim.model import EngineConfig, StartupError, check_startup
from launch.sim.profile import load_profile
from launch.sim.replay import ReplayRequest, ReplayResult, replay_closed_loop
from launch.sim.versus import FigureRow, SimVersusReal, StartupRow, _relative, engine_config, render
from launch.spec import render_spec
from tests.unit.composed import load

CPU = [
    "host=cpu", "service=tiny_cpu", "service.model=models/tiny-head80",
    "candidate.enable_expert_parallel=false", "baseline.tensor_parallel_size=1",
    "baseline.data_parallel_size=1", "baseline.speculative=null", "baseline.enable_expert_parallel=false",
    # tiny_cpu's context is 2048 tokens: prefill_10k and mixed would be refused (issue 21), so not run here
    "run.profiles=[serial,short,decode_heavy]", "run.recovery_profiles=[decode_heavy]",
]  # fmt: skip
NGRAM = [
    "candidate.speculative.method=ngram", "candidate.speculative.num_speculative_tokens=3",
    "+candidate.speculative.extra.prompt_lookup_max=3",
]  # fmt: skip
BASE = ["candidate.tensor_parallel_size=1", "candidate.data_parallel_size=2", "candidate.speculative=null"]


def _engine(overrides: list[str]) -> EngineConfig:
    cfg, _ = load([*CPU, *overrides])
    return engine_config(render_spec(cfg.service, cfg.candidate, cfg.host))


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (BASE, {"tensor_parallel_size": 1, "data_parallel_size": 2, "speculative_method": None}),
        (
            [*BASE, "candidate.tensor_parallel_size=2", "candidate.data_parallel_size=1"],
            {"tensor_parallel_size": 2, "data_parallel_size": 1},
        ),
        (
            ["candidate.tensor_parallel_size=1", "candidate.data_parallel_size=2", *NGRAM],
            {"speculative_method": "ngram", "num_speculative_tokens": 3, "draft_sample_method": "greedy"},
        ),
        ([*BASE, "candidate.max_num_seqs=1"], {"max_num_seqs": 1, "enforce_eager": True}),
        ([*BASE, "candidate.kv_cache_dtype=fp8"], {"kv_cache_dtype": "fp8"}),
    ],
)
def test_a_recorded_launch_reads_as_the_engine_vllm_would_run(
    overrides: list[str], expected: dict[str, object]
) -> None:
    engine = _engine(overrides)
    assert {name: getattr(engine, name) for name in expected} == expected


def test_the_cpu_profile_refuses_fp8_and_fits_both_layouts() -> None:
    profile = load_profile("cpu2_tiny_head80")
    for layout in (BASE, [*BASE, "candidate.tensor_parallel_size=2", "candidate.data_parallel_size=1"]):
        check_startup(profile, _engine(layout))
    with pytest.raises(StartupError) as refused:
        check_startup(profile, _engine([*BASE, "candidate.kv_cache_dtype=fp8"]))
    assert "FP8 KV cache requires head_size divisible by 32 on CPU" in refused.value.log[-1]
    with pytest.raises(StartupError):  # four ranks on two cores
        check_startup(profile, replace(_engine(BASE), tensor_parallel_size=2))


def test_the_cpu_profile_predicts_the_regression_and_the_drafts() -> None:
    """8-way load of 24-token answers: one running sequence per replica queues the rest (TTFT), and ngram
    drafts advance a sequence by more than one token per step."""
    profile = load_profile("cpu2_tiny_head80")
    requests = [ReplayRequest(prompt_tokens=96, max_tokens=24, min_tokens=24, ignore_eos=True)] * 16

    def run(overrides: list[str]) -> ReplayResult:
        return replay_closed_loop(profile, _engine(overrides), requests, 8)

    base, seqs1 = run(BASE), run([*BASE, "candidate.max_num_seqs=1"])
    ngram = run(["candidate.tensor_parallel_size=1", "candidate.data_parallel_size=2", *NGRAM])
    assert seqs1.ttft_p50 > 3 * base.ttft_p50
    assert seqs1.output_tps < base.output_tps
    assert ngram.e2e_p50 < base.e2e_p50


def test_render_labels_simulation_and_measurement_and_summarises_each_figure() -> None:
    result = SimVersusReal(
        sweep="/s",
        sim_profile="cpu2_tiny_head80",
        sim_profile_description="d",
        host="cpu",
        note="n",
        startups=[
            StartupRow(
                candidate="cpu_fp8",
                simulated_starts=False,
                simulated_reason="ValueError: FP8",
                measured_starts=False,
                measured_kind="incompatible",
                agree=True,
            )
        ],
        figures=[
            FigureRow(candidate="a", profile="short", figure="output_tps", simulated=500.0, measured=1000.0,
                      ratio=0.5, repeats=2),
            FigureRow(candidate="b", profile="short", figure="output_tps", simulated=2000.0, measured=1000.0,
                      ratio=2.0, repeats=2),
            FigureRow(candidate="a", profile="short", figure="ttft_p50_s", simulated=0.1, measured=None,
                      ratio=None, repeats=2),
        ],
    )  # fmt: skip
    text = render(result)
    assert text.startswith("# Simulation vs measurement: cpu2_tiny_head80 against the sweep on cpu")
    assert "| cpu_fp8 | no (ValueError: FP8) | no (incompatible) | yes |" in text
    assert "| a | short | output_tps | 500.0 | 1,000.0 | 0.50x |" in text
    assert "| a | short | ttft_p50_s | 0.100 | - | - |" in text
    assert "output_tps: simulated / measured from 0.50x to 2.00x (geometric mean 1.00x, 2 rows)" in text
    assert "ttft_p50_s:" not in text.split("\n\n")[-1]
    assert result.ratios("output_tps") == [0.5, 2.0]


def test_relative_rows_divide_each_side_by_the_baseline() -> None:
    def row(candidate: str, simulated: float, measured: float) -> FigureRow:
        return FigureRow(candidate=candidate, profile="short", figure="output_tps", simulated=simulated,
                         measured=measured, ratio=simulated / measured, repeats=5)  # fmt: skip

    rows = _relative([row("base", 600.0, 1000.0), row("tp2", 420.0, 720.0)], "base")
    assert [(r.candidate, r.figure) for r in rows] == [("tp2", "output_tps/baseline")]
    assert (rows[0].simulated, rows[0].measured) == pytest.approx((0.70, 0.72))
    assert rows[0].ratio == pytest.approx(0.70 / 0.72)
    assert _relative([row("tp2", 420.0, 720.0)], None) == []
