"""The simulator under hybrid and external DP load balancing (issue 45 item 3c): every node is a server of
its own ranks (no --headless), numbered from its first global rank in /metrics, and simulates only its own
node's GPUs; a bad combination exits as vLLM's parser would."""

from __future__ import annotations

import re
from dataclasses import replace

import httpx
import pytest

from launch.sim.cli import parse_args
from launch.sim.client import SimEnergy
from launch.sim.engine import Host
from launch.sim.metrics import render_metrics
from launch.sim.model import check_startup
from launch.sim.nodes import NodeRole, multinode_profile, node_role
from launch.sim.profile import load_profile

pytestmark = pytest.mark.unit

PROFILE = load_profile("h100x8_deepseek_v4_flash")
MEET = ["--data-parallel-address", "n1", "--data-parallel-rpc-port", "29550"]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        # hybrid, TP4 x DP4 over 2 nodes: node k serves ranks 2k, 2k+1 on 8 GPUs
        (["-tp", "4", "-dp", "4", "--data-parallel-hybrid-lb", "--data-parallel-size-local", "2",
          "--data-parallel-start-rank", "0", *MEET], (2, 0, 8, 0, 2)),
        (["-tp", "4", "-dp", "4", "--data-parallel-hybrid-lb", "--data-parallel-size-local", "2",
          "--data-parallel-start-rank", "2", *MEET], (2, 1, 8, 2, 2)),
        # external, TP8 x DP2: rank r is node r
        (["-tp", "8", "-dp", "2", "--data-parallel-external-lb", "--data-parallel-rank", "1", *MEET],
         (2, 1, 8, 1, 1)),
        (["-tp", "8", "-dp", "4", "--data-parallel-rank", "3", *MEET], (4, 3, 8, 3, 1)),
        # what vLLM refuses
        (["-tp", "4", "-dp", "4", "--data-parallel-hybrid-lb", "--headless",
          "--data-parallel-size-local", "2", *MEET], "not applicable in headless mode"),
        (["-tp", "8", "-dp", "2", "--data-parallel-rank", "2", *MEET], "one rank of 2 or more"),
        (["-tp", "8", "-dp", "4", "--data-parallel-rank", "1", "--data-parallel-size-local", "2", *MEET],
         "one rank of 2 or more"),
    ],
)  # fmt: skip
def test_a_serving_nodes_role(flags: list[str], expected: tuple[int, int, int, int, int] | str) -> None:
    args = parse_args(["--model", "m", *flags])
    eng = args.engine
    role = node_role(args.raw, eng.tensor_parallel_size, eng.data_parallel_size, eng.pipeline_parallel_size)
    if isinstance(expected, str):
        assert isinstance(role, str) and expected in role
        return
    nodes, rank, gpus, first, local = expected
    assert role == NodeRole(
        False, nodes, rank, "n1", 29550, False, gpus, serves=True, first_rank=first, local_ranks=local
    )


@pytest.mark.parametrize(
    ("first", "local", "engines"), [(0, 2, ["0", "1"]), (2, 2, ["2", "3"]), (3, 1, ["3"])]
)
def test_a_serving_node_reports_its_own_ranks_and_simulates_its_own_gpus(
    first: int, local: int, engines: list[str]
) -> None:
    role = NodeRole(False, 2, 1, "n1", 29550, False, 8, serves=True, first_rank=first, local_ranks=local)
    profile = multinode_profile(PROFILE, role)
    assert profile.gpu.count == PROFILE.gpu.count  # one node's GPUs, not every node's
    flags = [
        "--model",
        "m",
        "-tp",
        str(8 // local),
        "--enable-expert-parallel",
        "--kv-cache-dtype",
        "fp8",
        "--gpu-memory-utilization",
        "0.81",
    ]
    cfg = replace(parse_args(flags).engine, data_parallel_size=local, max_model_len=8192)
    memory = check_startup(profile, cfg)
    text = render_metrics(Host(profile, cfg, memory), "m", memory, first)
    assert sorted(set(re.findall(r'engine="(\d+)"', text))) == engines


@pytest.mark.parametrize(
    ("others", "gpus", "joules"),
    [
        ([], 2, 1200.0),  # the head alone (internal: the head simulates every node)
        (["http://n2:8001"], 4, 1200.0 + 600.0),  # hybrid: the other node's own GPUs too
    ],
)
def test_simulated_energy_reads_every_serving_nodes_gpus(others: list[str], gpus: int, joules: float) -> None:
    reads = {"http://n1:8000": [[0, 0], [800_000, 400_000]], "http://n2:8001": [[0, 0], [300_000, 300_000]]}
    clock = {"http://n1:8000": [10.0, 14.0], "http://n2:8001": [3.0, 7.0]}

    def answer(request: httpx.Request) -> httpx.Response:
        url = f"http://{request.url.host}:{request.url.port}"
        gpus_mj, now = reads[url].pop(0), clock[url].pop(0)
        return httpx.Response(200, json={"virtual_s": now, "gpus_mj": gpus_mj, "model": "simulated"})

    energy = SimEnergy("http://n1:8000", httpx.MockTransport(answer), others=others).open().close()
    assert (energy.gpus, energy.joules, energy.duration_s) == (gpus, joules, 4.0)
