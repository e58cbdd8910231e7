"""vLLM's multi-node layouts (issue 45 item 3): TP across nodes with DP > 1 refused with the alternatives,
pipeline parallelism across nodes (TP within a node) placed, rendered with vLLM's --nnodes flags, counted
by doctor's NVML check, and modelled by the simulator (its start, memory endpoint, energy and step time)."""

from __future__ import annotations

import pytest

from contracts.errors import ConfigError
from contracts.results import GpuMemory, HostProbe
from launch.nvml import topology_problem
from launch.preflight import node_ranks
from launch.sim.cli import parse_args
from launch.sim.engine import Host
from launch.sim.model import EngineConfig, check_startup, step_cost
from launch.sim.nodes import NodeRole, multinode_profile, node_role
from launch.sim.profile import load_profile
from launch.spec import HEAD_ADDRESS, render_spec
from tests.unit.composed import load

TWO_BY_8 = ["host=sim_2x8"]
FOUR_BY_8 = ["host=sim_2x8", "host.nodes=4", "host.gpu_count=32"]
PROFILE = load_profile("h100x8_deepseek_v4_flash")


def _cand(tp: int, dp: int, pp: int | None = None) -> list[str]:
    out = [f"candidate.tensor_parallel_size={tp}", f"candidate.data_parallel_size={dp}"]
    return [*out, f"+candidate.extra_args.pipeline-parallel-size={pp}"] if pp else out


@pytest.mark.parametrize(
    ("host", "tp", "dp", "pp", "allowed"),
    [
        # a replica across nodes with DP > 1: not a layout vLLM documents (rendered before this change)
        (FOUR_BY_8, 16, 2, None, "vLLM documents a replica across nodes only with DP = 1"),
        (FOUR_BY_8, 8, 2, 2, "vLLM documents a replica across nodes only with DP = 1"),
        # PP across nodes needs TP within a node, and whole stages on every node
        (FOUR_BY_8, 16, 1, 2, "needs TP within a node: TP = 16 must divide 8"),
        (TWO_BY_8, 3, 1, 4, "needs TP within a node: TP = 3 must divide 8"),
        (FOUR_BY_8, 4, 1, 3, "TP x PP = 12 spans nodes of 8 GPUs of host 'sim_2x8': it must be a multiple"),
        (TWO_BY_8, 2, 3, 2, "each node holds 2 TP2 x PP2 replica(s), so DP must be a multiple of 2"),
    ],
)  # fmt: skip
def test_layouts_vllm_does_not_document_are_refused_naming_file_field_value_and_alternatives(
    host: list[str], tp: int, dp: int, pp: int | None, allowed: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load([*host, "candidate=tp4_dp2", *_cand(tp, dp, pp)])
    line = next(
        ln for ln in str(caught.value).splitlines() if "tensor_parallel_size x data_parallel_size" in ln
    )
    assert f"'{tp} x {dp}'" in line and allowed in line
    assert "tp4_dp2.yaml" in line or "override" in line  # the file (or the override) that set it
    if "DP = 1" in allowed:
        assert "supported instead: TP x PP <= 8 (a replica within a node) and DP over nodes" in line


H = ["--master-addr", HEAD_ADDRESS, "--master-port", "29550"]


@pytest.mark.parametrize(
    ("host", "layout", "head_tail", "followers"),
    [
        # TP8 x PP2: vLLM's advice for two nodes (TP the GPUs of a node, PP the nodes)
        (TWO_BY_8, (8, 1, 2), ["--nnodes", "2", "--node-rank", "0", *H],
         [["--headless", "--nnodes", "2", "--node-rank", "1", *H]]),
        (FOUR_BY_8, (8, 1, 4), ["--nnodes", "4", "--node-rank", "0", *H],
         [["--headless", "--nnodes", "4", "--node-rank", str(k), *H] for k in (1, 2, 3)]),
        (TWO_BY_8, (4, 1, 4), ["--nnodes", "2", "--node-rank", "0", *H],
         [["--headless", "--nnodes", "2", "--node-rank", "1", *H]]),  # two TP4 stages a node
        # a TP4 x PP2 replica within a node, DP over nodes: vLLM's multi-node data parallel
        (TWO_BY_8, (4, 2, 2), ["--data-parallel-size-local", "1", "--data-parallel-address", HEAD_ADDRESS,
                             "--data-parallel-rpc-port", "29550"],
         [["--headless", "--data-parallel-start-rank", "1", "--data-parallel-size-local", "1",
           "--data-parallel-address", HEAD_ADDRESS, "--data-parallel-rpc-port", "29550"]]),
        (TWO_BY_8, (4, 1, 2), [], []),  # TP4 x PP2 fits one node: a single-node launch
    ],
)  # fmt: skip
def test_pipeline_parallel_across_nodes_renders_vllms_nnodes_flags(
    host: list[str], layout: tuple[int, int, int], head_tail: list[str], followers: list[list[str]]
) -> None:
    tp, dp, pp = layout
    cfg, _ = load([*host, "candidate=tp4_dp2", *_cand(tp, dp, pp)])
    spec = render_spec(cfg.service, cfg.candidate, cfg.host)
    assert spec.nodes == 1 + len(followers)
    assert list(spec.argv[len(spec.argv) - len(head_tail) :]) == head_tail
    assert spec.argv[spec.argv.index("--pipeline-parallel-size") + 1] == str(pp)
    for argv, tail in zip(spec.followers, followers, strict=True):
        assert list(argv[len(argv) - len(tail) :]) == tail
    if followers:
        assert spec.rpc_port == 29550


GPUS = [GpuMemory(index=i, name="H100", total_gib=80.0, used_gib=1.0, free_gib=79.0) for i in range(8)]


@pytest.mark.parametrize(
    ("tp", "dp", "pp", "problem"),
    [
        (2, 2, 2, None),
        (2, 4, 2, "TP x PP x DP = 16 exceeds the 8 devices of this host (as NVML sees it)"),
        (4, 1, 4, "TP x PP x DP = 16 exceeds the 8 devices of this host (as NVML sees it)"),
        (8, 1, 1, None),
    ],
)
def test_topology_problem_counts_pipeline_stages(tp: int, dp: int, pp: int, problem: str | None) -> None:
    probe = HostProbe(driver=True, gpus=GPUS)
    assert topology_problem(probe, tp, dp, pipeline_parallel_size=pp) == problem


@pytest.mark.parametrize(
    ("host", "tp", "dp", "pp", "ranks"),
    [
        (TWO_BY_8, 8, 1, 2, (8, 1, 1)),  # one stage of TP8 on this node
        (TWO_BY_8, 4, 1, 4, (4, 2, 1)),  # two TP4 stages on this node
        (TWO_BY_8, 2, 2, 2, (2, 2, 2)),  # fits one node: all of it
        (TWO_BY_8, 4, 2, 2, (4, 2, 1)),  # a TP4 x PP2 replica a node
        (TWO_BY_8, 16, 1, None, (8, 1, 1)),  # TP16: half its TP on this node
    ],
)
def test_doctor_checks_one_nodes_share_of_a_pipeline(
    host: list[str], tp: int, dp: int, pp: int | None, ranks: tuple[int, int, int]
) -> None:
    cfg, _ = load([*host, "candidate=tp4_dp2", *_cand(tp, dp, pp)])
    assert node_ranks(cfg.candidate, cfg.host) == ranks


PP_FLAGS = ["--master-addr", "n1", "--master-port", "29550", "-pp", "2"]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["-tp", "8", "--nnodes", "2", "--node-rank", "0", *PP_FLAGS],
         (False, 2, 0, 8)),
        (["-tp", "8", "--nnodes", "2", "--node-rank", "1", "--headless", *PP_FLAGS], (True, 2, 1, 8)),
        (["-tp", "4", "--nnodes", "4", "--node-rank", "3", "--headless", *PP_FLAGS, "-pp", "8"],
         (True, 4, 3, 8)),
        (["-tp", "8", "--nnodes", "3", "--node-rank", "0", *PP_FLAGS], "do not divide TP x PP x DP = 16"),
    ],
)  # fmt: skip
def test_the_simulators_node_role_counts_pipeline_stages(
    flags: list[str], expected: tuple[bool, int, int, int] | str
) -> None:
    args = parse_args(["--model", "m", *flags])
    eng = args.engine
    role = node_role(args.raw, eng.tensor_parallel_size, eng.data_parallel_size, eng.pipeline_parallel_size)
    if isinstance(expected, str):
        assert isinstance(role, str) and expected in role
    else:  # the stages span the nodes, each node's TP within it
        headless, nodes, rank, local = expected
        assert role == NodeRole(headless, nodes, rank, "n1", 29550, False, local, stages_span=True)


def _cfg(tp: int, dp: int, pp: int) -> EngineConfig:
    return EngineConfig(
        tensor_parallel_size=tp,
        data_parallel_size=dp,
        pipeline_parallel_size=pp,
        enable_expert_parallel=True,
        gpu_memory_utilization=0.81,
        max_num_batched_tokens=16384,
        max_model_len=131072,
        kv_cache_dtype="fp8",
    )


@pytest.mark.parametrize(
    ("tp", "dp", "pp", "busy"),
    [(2, 2, 2, 8), (4, 1, 2, 8), (2, 1, 4, 8), (8, 1, 1, 8), (2, 4, 1, 8), (4, 2, 1, 8)],
)
def test_the_simulators_memory_endpoint_and_energy_count_every_stages_gpus(
    tp: int, dp: int, pp: int, busy: int
) -> None:
    from launch.sim.server import SimServer

    cfg = _cfg(tp, dp, pp)
    memory = check_startup(PROFILE, cfg)
    server = SimServer(parse_args(["--model", "m"]), PROFILE, cfg, memory)
    gpus = server.gpu_memory()
    idle = PROFILE.gpu.total_gib - PROFILE.memory.cuda_context_gib
    assert sum(1 for g in gpus if g["free_gib"] < idle - 1) == busy  # GPUs holding weights and KV
    host = Host(PROFILE, cfg, memory)
    for replica in host.replicas:
        replica.busy_s = 1.0
    counters = host.energy_mj(2.0)
    idle_mj = round(PROFILE.gpu.idle_w * 2.0 * 1000)
    assert sum(1 for c in counters if c > idle_mj) == busy  # GPUs whose replica ran


def _step(tp: int, pp: int, seqs: int, role: NodeRole | None = None) -> float:
    """Seconds of one decode step of one replica stepping ``seqs`` sequences."""
    profile = multinode_profile(PROFILE, role) if role else PROFILE
    return step_cost(profile, _cfg(tp, 1, pp)).seconds(0, seqs, seqs * 2000.0, seqs, decoding=True)


@pytest.mark.parametrize(
    ("pp", "across", "hops_ms"),
    [
        (2, None, 2 * 0.02),  # two stages on one node: two NVLink hops a round (STAGE_HOP_MS)
        (4, None, 4 * 0.02),
        (2, (2, 8), 2 * 0.1),  # two nodes: both boundaries cross the network (NODE_HOP_MS)
    ],
)
def test_the_simulators_step_time_counts_pipeline_stages(
    pp: int, across: tuple[int, int] | None, hops_ms: float
) -> None:
    from launch.sim.pipeline import NODE_HOP_MS, STAGE_HOP_MS

    assert (STAGE_HOP_MS, NODE_HOP_MS) == (0.02, 0.1)  # the rows' figures
    role = NodeRole(False, across[0], 0, "n1", 1, False, across[1], True) if across else None
    # a lone request is one micro-batch: TP alone's step plus the round's hops
    assert _step(8, pp, 1, role) - _step(8, 1, 1) == pytest.approx(hops_ms / 1e3)
    # loaded, the stages work on PP micro-batches at once: the per-token work is spread over them
    loaded, alone = _step(8, pp, 256, role), _step(8, 1, 256)
    fixed = _step(8, 1, 0)
    assert loaded - fixed - hops_ms / 1e3 == pytest.approx((alone - fixed) / pp)
    assert 256 / loaded > 256 / alone  # more tokens a second


def test_tp8_x_pp2_over_two_nodes_sits_between_tp16_and_tp8_x_dp2() -> None:
    """docs/simulator.md's figures: decode tokens/s of 32 sequences over two nodes of 8 H100s."""
    from tests.unit.test_sim_nodes import _decode_tokens_per_s

    pp_role = NodeRole(False, 2, 0, "n1", 1, False, 8, True)
    running = min(32, PROFILE.topo(8).max_running_seqs or 32)  # PP leaves the topology's cap as it is
    pp = running / _step(8, 2, running, pp_role)
    tp16 = _decode_tokens_per_s(16, 1, NodeRole(False, 2, 0, "n1", 1, True, 8), 32)
    dp2 = _decode_tokens_per_s(8, 2, NodeRole(False, 2, 0, "n1", 1, False, 8), 32)
    assert (round(tp16), round(pp), round(dp2)) == (67, 215, 231)
