"""Pipeline parallelism across nodes on the simulated 2 x 8 host, both nodes on this machine: the supervisor
starts the head and the ``--headless`` follower of vLLM's ``--nnodes`` layout, the head serves once the
follower joined, every stage's GPUs hold weights, a request is served, and every node is torn down."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import psutil
import pytest

from launch.spec import render_spec
from launch.supervisor import Server, Supervisor, follower_log
from orchestrator.config.compose import load
from tests.integration.sweep_helpers import completion_tokens
from tests.ports import free_port, port_is_free

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("tp", "pp"), [(8, 2), (4, 4)])  # one TP8 stage a node; two TP4 stages a node
def test_pipeline_stages_across_nodes_start_serve_and_are_torn_down(
    sup: Supervisor, started: list[Server], tmp_path: Path, tp: int, pp: int
) -> None:
    port, rpc = free_port(), free_port()
    cfg, _ = load(
        [
            "host=sim_2x8", "candidate=tp4_dp2", f"candidate.tensor_parallel_size={tp}",
            "candidate.data_parallel_size=1", f"+candidate.extra_args.pipeline-parallel-size={pp}",
            f"service.port={port}", f"host.rpc_port={rpc}", "+host.sim_args.sim-startup-s=0.3",
        ]
    )  # fmt: skip
    spec = render_spec(cfg.service, cfg.candidate, cfg.host)
    assert spec.nodes == 2 and "--nnodes" in spec.argv and "--headless" in spec.followers[0]
    server = sup.start(spec, tmp_path / "server.log")
    started.append(server)
    sup.wait_ready(server)
    assert "all 2 nodes joined" in (tmp_path / "server.log").read_text()
    assert "joined; 8 GPU(s) serving" in follower_log(tmp_path / "server.log", 1).read_text()
    with urllib.request.urlopen(f"{spec.base_url}/sim/gpu_memory", timeout=10) as answer:
        gpus = json.load(answer)
    assert len(gpus) == 16 and all(g["used_gib"] > 40 for g in gpus)  # every stage's GPUs hold weights, KV
    assert completion_tokens(spec.base_url, spec.served_model_name) > 0
    record = sup.teardown(server)
    assert record.survivors == [] and record.port_free
    assert not psutil.pid_exists(server.followers[0].pid)
    assert port_is_free(port) and port_is_free(rpc)
