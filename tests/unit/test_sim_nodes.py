"""The simulator across nodes (launch/sim/nodes.py): a command line's place in a multi-node launch, and
what crossing nodes costs: TP16 over two nodes loses to TP8 x DP2, DP over nodes costs little."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import launch.sim.nodes as nodes_module
from launch.sim.cli import parse_args
from launch.sim.model import EngineConfig, step_cost
from launch.sim.nodes import DP_SYNC_MS, STALL_S, Followers, NodeRole, join, multinode_profile, node_role
from launch.sim.profile import load_profile
from launch.sim.runtime import Runtime
from tests.ports import free_port

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


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("beats", "now", "silent"),
    [
        ({1: 100.0}, 100.5, []),  # beat half a second ago
        ({1: 100.0}, 100.0 + STALL_S, []),  # at the bound: not yet
        ({1: 100.0}, 101.5, [1]),  # stopped: silent past the bound
        ({1: 101.4, 2: 99.0, 3: 98.0}, 101.5, [2, 3]),
        ({}, 200.0, []),  # nobody joined
    ],
)
def test_a_node_silent_past_the_bound_is_named(
    beats: dict[int, float], now: float, silent: list[int]
) -> None:
    followers = Followers(NodeRole(False, 4, 0, "n1", 29550, True, 8), lambda *_: None)
    followers._beats = dict(beats)
    assert followers.silent(now) == silent


@pytest.mark.parametrize(
    ("held_s", "after_s", "expected_v"),
    [
        (0.0, 1.0, 2.0),  # never held: 1 wall s at scale 2
        (3.0, 1.0, 2.0),  # held 3 wall s: none of it is virtual time
        (10.0, 0.0, 0.0),
    ],
)
def test_a_held_runtime_stands_still_and_runs_on_from_where_it_stopped(
    held_s: float, after_s: float, expected_v: float
) -> None:
    clock = _Clock()
    runtime = Runtime(Any, 2.0, clock=clock)  # no engine: only the clock is read
    if held_s:
        runtime.hold()
        clock.now += held_s
        assert runtime.vnow() == 0.0  # frozen while held
        runtime.release()
    clock.now += after_s
    assert runtime.vnow() == pytest.approx(expected_v)


def test_a_stopped_follower_stalls_the_heads_engine_until_it_beats_again() -> None:
    """A real head and follower over loopback: SIGSTOP-like silence (the follower's beat task paused)
    holds the engine; beats again release it."""

    async def scenario() -> list[bool]:
        port = free_port()
        head = Followers(NodeRole(False, 2, 0, "127.0.0.1", port, True, 8), lambda *_: None)
        seen: list[bool] = []
        head.on_stall = seen.append
        await head.open()
        link = await join(NodeRole(True, 2, 1, "127.0.0.1", port, True, 8), lambda *_: None)
        assert not isinstance(link, int)
        assert await head.wait_all(5.0) is None
        (beating,) = nodes_module._BEATING
        beating.cancel()  # the follower stops beating, as a stopped process does
        for _ in range(40):
            await asyncio.sleep(0.1)
            if seen:
                break
        link[1].write(b"beat\n")  # it beats again
        for _ in range(40):
            await asyncio.sleep(0.1)
            if len(seen) == 2:
                break
        link[1].close()
        await link[1].wait_closed()
        assert head.lost is not None
        assert await asyncio.wait_for(head.lost, 5.0) == "follower node 1 went away"
        head.close()
        await asyncio.sleep(0.05)  # the head's side of the link closes
        return seen

    assert asyncio.run(scenario()) == [True, False]
