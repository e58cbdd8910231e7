"""The simulator across nodes (launch/sim/nodes.py): a command line's place in a multi-node launch, and
what crossing nodes costs: TP16 over two nodes loses to TP8 x DP2, DP over nodes costs little."""

from __future__ import annotations

from typing import Any

import pytest

from launch.sim.cli import parse_args
from launch.sim.model import EngineConfig, step_cost
from launch.sim.nodes import DP_SYNC_MS, NodeRole, multinode_profile, node_role
from launch.sim.profile import load_profile

PROFILE = load_profile("h100x8_deepseek_v4_flash")
DP = ["--data-parallel-address", "n1", "--data-parallel-rpc-port", "29550"]
TP = ["--master-addr", "n1", "--master-port", "29550"]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["-tp", "8", "-dp", "2"], None),  # one node
        (["-tp", "4", "-dp", "2", "--data-parallel-size-local", "2", *DP], None),  # all ranks local
        (["-tp", "8", "-dp", "2", "--data-parallel-size-local", "1", *DP],
         NodeRole(False, 2, 0, "n1", 29550, False, 8)),
        (["-tp", "8", "-dp", "2", "--data-parallel-size-local", "1", "--headless",
          "--data-parallel-start-rank", "1", *DP], NodeRole(True, 2, 1, "n1", 29550, False, 8)),
        (["-tp", "4", "-dp", "4", "--data-parallel-size-local", "2", "--headless",
          "--data-parallel-start-rank", "2", *DP], NodeRole(True, 2, 1, "n1", 29550, False, 8)),
        (["-tp", "16", "--nnodes", "2", "--node-rank", "0", *TP],
         NodeRole(False, 2, 0, "n1", 29550, True, 8)),
        (["-tp", "16", "--nnodes", "2", "--node-rank", "1", "--headless", *TP],
         NodeRole(True, 2, 1, "n1", 29550, True, 8)),
        (["-tp", "8", "-dp", "3", "--data-parallel-size-local", "2", *DP], "does not divide"),
        (["-tp", "16", "--nnodes", "2", "--node-rank", "2", *TP], "do not divide"),
    ],
)  # fmt: skip
def test_node_role(flags: list[str], expected: NodeRole | str | None) -> None:
    args = parse_args(["--model", "m", *flags])
    role = node_role(args.raw, args.engine.tensor_parallel_size, args.engine.data_parallel_size)
    if isinstance(expected, str):
        assert isinstance(role, str) and expected in role
    else:
        assert role == expected


def _decode_tokens_per_s(tp: int, dp: int, role: NodeRole | None, seqs: int) -> float:
    """Decode throughput of ``dp`` replicas each stepping ``seqs`` sequences (one token each per step)."""
    profile = multinode_profile(PROFILE, role) if role else PROFILE
    cost = step_cost(profile, EngineConfig(tensor_parallel_size=tp, data_parallel_size=dp))
    topo = profile.topo(tp)
    running = min(seqs, topo.max_running_seqs or seqs)
    step = cost.seconds(0, running, running * 2000.0, running, decoding=True)
    return dp * running / step


def test_tp16_across_nodes_loses_to_tp8_x_dp2_and_dp_over_nodes_costs_little() -> None:
    dp_role = NodeRole(False, 2, 0, "n1", 1, False, 8)
    tp_role = NodeRole(False, 2, 0, "n1", 1, True, 8)
    one_node = _decode_tokens_per_s(8, 1, None, 32)
    dp_over_nodes = _decode_tokens_per_s(8, 2, dp_role, 32)
    tp16 = _decode_tokens_per_s(16, 1, tp_role, 32)
    assert tp16 < dp_over_nodes
    assert 1.9 * one_node < dp_over_nodes <= 2 * one_node  # two replicas, a small sync cost each step
    # the same batch on one TP16 replica steps slower than on one TP8 replica: IB, not NVLink
    tp8_step = step_cost(PROFILE, EngineConfig(tensor_parallel_size=8)).seconds(0, 16, 0.0, 16, False)
    tp16_step = step_cost(multinode_profile(PROFILE, tp_role), EngineConfig(tensor_parallel_size=16))
    assert tp16_step.seconds(0, 16, 0.0, 16, False) > tp8_step


def test_the_head_simulates_every_nodes_gpus() -> None:
    dp = multinode_profile(PROFILE, NodeRole(False, 2, 0, "n1", 1, False, 8))
    assert dp.gpu.count == 2 * PROFILE.gpu.count
    assert dp.topo(8).fixed_ms == pytest.approx(PROFILE.topo(8).fixed_ms + DP_SYNC_MS)
    tp: Any = multinode_profile(PROFILE, NodeRole(False, 2, 0, "n1", 1, True, 8))
    assert 16 in tp.topology and tp.topo(8) == PROFILE.topo(8)
