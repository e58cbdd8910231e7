"""host.network.interface on the simulated 2 x 8 host, both nodes on this machine: every node's server runs
through launch.netif, which sets its VLLM_HOST_IP to its address on the interface (here lo) beside the
spec's GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME; the head is met at its address there; all torn down."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from launch.spec import render_spec
from launch.supervisor import Server, Supervisor
from orchestrator.config.compose import load
from tests.ports import free_port, port_is_free

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("layout", [(8, 2, 1), (8, 1, 2)])  # TP, DP, PP: DP over nodes; PP across nodes
def test_every_node_runs_with_its_address_on_the_interface(
    sup: Supervisor, started: list[Server], tmp_path: Path, layout: tuple[int, int, int]
) -> None:
    tp, dp, pp = layout
    port, rpc = free_port(), free_port()
    cfg, _ = load(
        [
            "host=sim_2x8", "candidate=tp4_dp2", f"candidate.tensor_parallel_size={tp}",
            f"candidate.data_parallel_size={dp}", f"+candidate.extra_args.pipeline-parallel-size={pp}",
            f"service.port={port}", f"host.rpc_port={rpc}", "+host.sim_args.sim-startup-s=0.3",
            "+host.network.interface=lo",
        ]
    )  # fmt: skip
    spec = render_spec(cfg.service, cfg.candidate, cfg.host)
    server = sup.start(spec, tmp_path / "server.log")
    started.append(server)
    sup.wait_ready(server)
    for pid in (server.pid, server.followers[0].pid):
        process = psutil.Process(pid)
        env = process.environ()
        assert (env["VLLM_HOST_IP"], env["GLOO_SOCKET_IFNAME"], env["NCCL_SOCKET_IFNAME"]) == (
            "127.0.0.1",
            "lo",
            "lo",
        )
        assert "launch.sim" in process.cmdline() and "launch.netif" not in process.cmdline()  # exec'd
    assert "127.0.0.1" in psutil.Process(server.followers[0].pid).cmdline()  # the head at its lo address
    record = sup.teardown(server)
    assert record.survivors == [] and record.port_free
    assert port_is_free(port) and port_is_free(rpc)
