"""Pipeline parallelism as a search field (issue 43 item 6, ``extra_args.pipeline_parallel_size``): the
search's pruning, the configuration's placement check, doctor's memory fit and the simulator's start count
a replica's TP x PP GPUs and split its layers over the PP stages, as vLLM does on one node. Before, PP was
an opaque flag: a TP2 x DP4 x PP2 point (16 GPUs) on an 8-GPU host was launched (the simulator ignored
the flag and started it), and a TP2 x DP2 x PP2 point (8 GPUs) was pruned with its layout (TP x DP = 4)."""

from __future__ import annotations

import pytest

from contracts.schema import CandidateConfig, GauntletConfig, HostConfig, ServiceConfig
from contracts.search import SearchConfig
from launch.memfit import ModelShape, fit
from launch.sim.model import EngineConfig, StartupError, check_startup
from launch.sim.profile import load_profile
from orchestrator.config.space import parse_space
from orchestrator.config.validate import placement_refusal
from orchestrator.search.prune import prune

pytestmark = pytest.mark.unit

LAYOUTS = {
    f"tp{tp}_dp{dp}": {"tensor_parallel_size": tp, "data_parallel_size": dp, "enable_expert_parallel": True}
    for tp, dp in ((2, 4), (2, 2), (4, 1), (8, 1))
}
PROFILE = load_profile("h100x8_deepseek_v4_flash")  # the simulator's 8-GPU host


def _cfg() -> GauntletConfig:
    baseline = CandidateConfig(
        name="baseline", tensor_parallel_size=2, data_parallel_size=4, enable_expert_parallel=True
    )
    space = {"layout": "choice(tp2_dp4, tp2_dp2, tp4_dp1, tp8_dp1)"}
    search = SearchConfig(space={**space, "extra_args": {"pipeline_parallel_size": "choice(1, 2)"}})
    search.layouts = LAYOUTS
    return GauntletConfig(
        service=ServiceConfig(model="m", served_model_name="m"),
        host=HostConfig(name="h", kind="sim", gpu_count=8, placement="exact", entrypoint=["srv"]),
        candidate=baseline,
        baseline=baseline,
        search=search,
    )


def _starts(tp: int, dp: int, pp: int) -> bool:
    """Whether the simulated vLLM starts TP x DP x PP on its 8 GPUs."""
    try:
        check_startup(
            PROFILE, EngineConfig(tp, dp, pp, enable_expert_parallel=True, gpu_memory_utilization=0.81)
        )
    except StartupError as exc:
        assert exc.kind == "init-failed" and "exceeds the 8 GPUs" in exc.log[0], exc.log
        return False
    return True


@pytest.mark.parametrize(
    ("layout", "pp", "refused"),
    [
        ("tp2_dp4", 1, None),
        # 16 GPUs: launched before (the simulator ignored the flag), refused now by both
        ("tp2_dp4", 2, "TP x PP x DP = 16 must equal the 8 GPUs of h"),
        ("tp8_dp1", 2, "TP x PP x DP = 16 must equal the 8 GPUs of h"),
        # 8 GPUs with PP 2: pruned with its layout before (TP x DP = 4), a point to launch now
        ("tp2_dp2", 2, None),
        ("tp4_dp1", 2, None),
        # 4 GPUs: the host's placement rule (every GPU serves) refuses it; vLLM would start it
        ("tp2_dp2", 1, "TP x DP = 4 must equal the 8 GPUs of h"),
    ],
)
def test_a_pipeline_parallel_point_is_placed_as_vllm_places_it(
    layout: str, pp: int, refused: str | None
) -> None:
    cfg = _cfg()
    assert cfg.search is not None
    pruned = prune(parse_space(cfg.search), cfg)
    point = {"layout": layout, "extra_args.pipeline_parallel_size": pp}
    why = pruned.refusal(point)
    assert (why is None) is (refused is None), why
    assert refused is None or refused in (why or ""), why
    # the configuration's own check of the candidate says the same (plan, doctor and the sweep)
    tp, dp = (LAYOUTS[layout][k] for k in ("tensor_parallel_size", "data_parallel_size"))
    cand = CandidateConfig(
        name="c", tensor_parallel_size=tp, data_parallel_size=dp, extra_args={"pipeline-parallel-size": pp}
    )
    assert (placement_refusal(cand, cfg.host) is None) is (refused is None)
    # what the search launches, the simulated vLLM starts; what it refuses for GPUs, vLLM cannot start
    if refused is None:
        assert _starts(tp, dp, pp)
    elif "PP" in refused:
        assert not _starts(tp, dp, pp)


@pytest.mark.parametrize("pp", [1, 2, 4])
def test_the_memory_fit_splits_weights_and_kv_cache_over_the_stages(pp: int) -> None:
    shape = ModelShape(
        weight_bytes=64 * 1024**3,
        expert_fraction=0.5,
        kv_elements_per_token=1e6,
        kv_heads=8,
        latent_kv=False,
        dtype_bytes=2,
    )
    kw = {"tp": 2, "dp": 2, "ep": True, "gpu_gib": 80.0, "utilization": 0.9, "max_model_len": 8192}
    one = fit(shape, **kw, kv_cache_dtype="auto")
    staged = fit(shape, **kw, kv_cache_dtype="auto", pp=pp)
    assert staged.weights_gib == pytest.approx(one.weights_gib / pp)
    assert staged.kv_one_sequence_gib == pytest.approx(one.kv_one_sequence_gib / pp)
