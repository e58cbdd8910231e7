"""Cost a fleet owner reads (issue 44, item 7): $/Mtok priced on the GPUs the candidate uses (a TP4
replica on an 8-GPU host on 4, saying what the figure assumes), input and output tokens priced apart, and
the cost gate judged at the capacity the SLO allows, not at a fixed load where every candidate reads 1.0x."""

from __future__ import annotations

import functools
from dataclasses import replace

import pytest

from contracts.cost import input_usd_per_mtok, price_basis, pricing_of, usd_per_mtok
from contracts.results import CandidateRun, CapacityPoint, CapacityResult, Pricing, StartupRecord
from contracts.schema import CostGateConfig, GatesConfig, HostConfig
from contracts.sweepdir import Repeat, Results
from gates.cost import Cost
from gates.registry import GateContext
from launch.gpu_select import used_gpus
from launch.spec import LaunchSpec, render_spec
from orchestrator.config.compose import load
from report.cost import cost_cell, cost_row
from tests.unit.fakes import summary


@functools.cache
def _base_spec() -> LaunchSpec:
    cfg, _ = load(["host=h100x8"])  # composed once: Hydra takes seconds on a loaded 2-core machine
    return render_spec(cfg.service, cfg.candidate, cfg.host)


def _argv(tp: int, dp: int) -> tuple[str, ...]:
    argv = list(_base_spec().argv)
    argv[argv.index("--tensor-parallel-size") + 1] = str(tp)
    argv[argv.index("--data-parallel-size") + 1] = str(dp)
    return tuple(argv)


# (id, TP, DP, GPUs priced, $/Mtok at 1000 output tok/s and 2.5 $/GPU-hour, what the figure assumes)
PRICED = [
    ("TP4 on an 8-GPU host: priced on 4", 4, 1, 4, 2.778, "the host as 2 replicas costs the same per token"),
    ("TP4 DP2: the host's 8", 4, 2, 8, 5.556, "priced on the host's 8 GPUs (one replica uses them all)"),
    (
        "TP3: 2 replicas on 6 of 8, 2 idle",
        3,
        1,
        3,
        2.083,
        "2 replica(s) on 6 GPUs, 2 idle: 1.33x this figure",
    ),
    ("TP1: 8 replicas", 1, 1, 1, 0.694, "priced on the 1 GPUs one replica uses, of the host's 8"),
]


@pytest.mark.parametrize(
    ("tp", "dp", "gpus", "cost", "basis"), [r[1:] for r in PRICED], ids=[r[0] for r in PRICED]
)
def test_priced_on_the_gpus_the_candidate_uses(tp: int, dp: int, gpus: int, cost: float, basis: str) -> None:
    spec = replace(_base_spec(), argv=_argv(tp, dp), config_yaml="")
    pricing = pricing_of(HostConfig(name="h100x8", gpu_count=8, gpu_hour_price=2.5), used_gpus(spec.argv))
    assert pricing is not None and pricing.gpus == gpus and pricing.host_gpus == 8
    assert usd_per_mtok(1000.0, gpus=pricing.gpus, gpu_hour_price=2.5) == pytest.approx(cost, abs=1e-3)
    assert basis in price_basis(pricing)


@pytest.mark.parametrize(
    ("argv", "config_yaml", "gpus"),
    [
        (["-tp", "4", "-dp", "2"], "", 8),
        (["-tp", "4", "--pipeline-parallel-size", "2"], "", 8),  # TP4 x PP2: 8 GPUs, not TP's 4
        (
            ["-tp", "8", "--pipeline_parallel_size", "2", "--nnodes", "2"],
            "",
            16,
        ),  # a stage on each of 2 nodes
        (["-tp", "2", "-pp", "2", "-dp", "2"], "", 8),
        ([], "tensor-parallel-size: 2\npipeline-parallel-size: 4\n", 8),
    ],
)
def test_a_candidate_is_priced_on_every_gpu_of_its_pipeline(
    argv: list[str], config_yaml: str, gpus: int
) -> None:
    assert used_gpus(["vllm", "serve", "m", *argv], config_yaml) == gpus


# (id, input price ratio, input tok/s, $/Mtok of output tokens, of input tokens) at 1000 output tok/s on 4
# GPUs at 2.5 $/GPU-hour (10 $/hour)
SPLIT = [
    ("not priced apart: every $ on output", None, 4000.0, 2.778, None),
    ("input a quarter of output", 0.25, 4000.0, 1.389, 0.347),  # 10 $/h over (1000 + 0.25 x 4000) tok/s
    ("input as dear as output", 1.0, 1000.0, 1.389, 1.389),
    ("no input tokens", 0.25, 0.0, 2.778, 0.694),
]


@pytest.mark.parametrize(
    ("ratio", "input_tps", "output_cost", "input_cost"), [r[1:] for r in SPLIT], ids=[r[0] for r in SPLIT]
)
def test_input_and_output_tokens_priced_apart(
    ratio: float | None, input_tps: float, output_cost: float, input_cost: float | None
) -> None:
    pricing = Pricing(gpus=4, gpu_hour_price=2.5, host_gpus=8, input_price_ratio=ratio)
    out = usd_per_mtok(1000.0, gpus=4, gpu_hour_price=2.5, input_tps=input_tps, input_price_ratio=ratio)
    assert out == pytest.approx(output_cost, abs=1e-3)
    got = input_usd_per_mtok(pricing, out)
    assert got == (None if input_cost is None else pytest.approx(input_cost, abs=1e-3))


def _point(level: float, attempt: int, met: bool, tps: float) -> CapacityPoint:
    return CapacityPoint(
        level=level,
        attempt=attempt,
        summary_file="",
        met=met,
        margin=1.2 if met else 0.8,
        attainment=1.0,
        goodput_rps=0.0,
        goodput_tps=tps,
        output_tps=tps,
        tps_per_user=None,
    )


def _results(name: str, gpus: int, capacity: float | None, at_capacity: list[float]) -> Results:
    """``name`` on ``gpus`` GPUs: three runs of decode_heavy at a fixed load, 1000 output tok/s each (below
    every candidate's capacity: they all read the same), and a capacity search whose runs at its capacity
    made ``at_capacity`` output tok/s."""
    reps = [
        Repeat(summary(name, "decode_heavy", k, "f", output_tps=1000.0), [], f"{name}/r{k}/summary.json", "")
        for k in (1, 2, 3)
    ]
    points = [_point(capacity or 1.0, k, capacity is not None, t) for k, t in enumerate(at_capacity, start=1)]
    cap = CapacityResult(
        candidate=name,
        profile="decode_heavy",
        mode="concurrency",
        unit="concurrent",
        slo="interactive",
        slo_text="",
        capacity=capacity,
        low=capacity,
        high=None,
        resolution=0.25,
        gpus=gpus,
        points=points,
    )
    run = CandidateRun(
        candidate=name,
        fingerprint="f",
        backend="vllm",
        host="gpu-01",
        is_baseline=name == "baseline",
        startup=StartupRecord(ok=True),
        pricing=Pricing(gpus=gpus, gpu_hour_price=2.5, host_gpus=8),
    )
    return Results(name, f"candidates/{name}", run, {"decode_heavy": reps}, capacity=cap)


TOL = CostGateConfig(tolerance=0.05)

# (id, candidate's GPUs, capacity, tok/s at it, baseline's, bounds, status, words)
AT_SLO = [
    (
        "half the capacity: twice the cost at the SLO, though 1.0x at the fixed load",
        8,
        32.0,
        [2000.0, 2050.0, 1950.0],
        (8, 64.0, [4000.0, 4100.0, 3900.0]),
        TOL,
        "fail",
        "decode_heavy at the SLO capacity 2.78 $/Mtok vs 1.39 $/Mtok (2.00x",
    ),
    (
        "the same capacity on the same GPUs",
        8,
        64.0,
        [4000.0, 4050.0, 3950.0],
        (8, 64.0, [4000.0, 4100.0, 3900.0]),
        TOL,
        "pass",
        "at the SLO capacity",
    ),
    (
        "TP4 on 4 GPUs at half the TP8's throughput: the same cost",
        4,
        32.0,
        [2000.0, 2020.0, 1980.0],
        (8, 64.0, [4000.0, 4040.0, 3960.0]),
        TOL,
        "pass",
        "1.39 $/Mtok vs 1.39 $/Mtok",
    ),
    (
        "no level held the SLO for the candidate",
        8,
        None,
        [500.0],
        (8, 64.0, [4000.0, 4100.0, 3900.0]),
        TOL,
        "inconclusive",
        "no level held the SLO",
    ),
    (
        "a budget at the SLO",
        8,
        64.0,
        [4000.0, 4050.0, 3950.0],
        (8, 64.0, [4000.0, 4100.0, 3900.0]),
        CostGateConfig(max_usd_per_mtok=1.0),
        "fail",
        "at the SLO capacity 1.39 $/Mtok against the budget 1 $/Mtok",
    ),
]


@pytest.mark.parametrize(
    ("gpus", "capacity", "tps", "base", "bounds", "status", "words"),
    [r[1:] for r in AT_SLO],
    ids=[r[0] for r in AT_SLO],
)
def test_the_cost_gate_judges_at_the_slo_capacity(  # noqa: PLR0917  (one parameter per column of the table)
    gpus: int,
    capacity: float | None,
    tps: list[float],
    base: tuple[int, float, list[float]],
    bounds: CostGateConfig,
    status: str,
    words: str,
) -> None:
    ctx = GateContext(
        GatesConfig(loaded_profiles=["decode_heavy"], cost=bounds),
        _results("baseline", *base),
        _results("tp4", gpus, capacity, tps),
    )
    result = Cost().evaluate(ctx)
    assert result.status == status, result.message
    assert words in result.message


def test_the_report_says_what_the_figure_assumes_and_prices_input_apart() -> None:
    res = _results("tp4", 4, 32.0, [2000.0])
    assert res.run is not None and res.run.pricing is not None
    pricing = res.run.pricing.model_copy(update={"input_price_ratio": 0.25})
    res = replace(res, run=res.run.model_copy(update={"pricing": pricing}))
    row = cost_row("tp4", res, "decode_heavy")
    assert row is not None
    assert "priced on the 4 GPUs one replica uses, of the host's 8" in row.priced_on
    assert row.priced_on in row.note
    assert "/Mtok out" in cost_cell(row) and "/Mtok in" in cost_cell(row)


@pytest.mark.parametrize(
    ("value", "refused"), [("0.25", False), ("null", False), ("-1", True), ("inf", True)]
)
def test_the_input_price_ratio_is_checked_at_compose(value: str, refused: bool) -> None:
    from contracts.errors import ConfigError

    overrides = ["host=h100x8", "host.gpu_hour_price=2.5", f"host.input_token_price_ratio={value}"]
    if not refused:
        cfg, _ = load(overrides)
        assert pricing_of(cfg.host, 4) is not None
        return
    with pytest.raises(ConfigError) as info:
        load(overrides)
    assert "host.input_token_price_ratio" in str(info.value) and "a number >= 0" in str(info.value)
