"""A Ray candidate inside a 2-node job of this machine's SLURM cluster (``scripts/slurm-local.sh start --nodes
2``): the job's first task (this test process, as in tests/e2e/test_multinode_vllm_cpu.py) starts Ray's head
here on n1, the other node's ``ray start`` is a job step on n2, the simulated vLLM serves once Ray lists both
nodes, and teardown runs ``ray stop`` as a step on each node and finds nothing left on either. The ``ray`` is
the simulator's (launch/sim/ray.py: a stand-in keeping the real CLI's contract; real Ray is not a
dependency). Skipped without the cluster, failed instead under ``GAUNTLET_REQUIRE_SLURM=1``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from launch.supervisor import Supervisor, follower_log
from tests.integration.test_multinode_ray import PIPELINE, ray_spec, sim_ray_processes
from tests.ports import free_port, port_is_free
from tests.slurm_cluster import squeue, two_node_allocation

pytestmark = [pytest.mark.integration, pytest.mark.slurm]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def two_nodes() -> Iterator[tuple[str, str]]:
    with two_node_allocation("gauntlet-ray-sim") as allocated:
        yield allocated


def test_the_job_starts_the_ray_cluster_on_both_nodes_and_stops_it_on_both(
    two_nodes: tuple[str, str], tmp_path: Path
) -> None:
    job, nodelist = two_nodes
    port, rpc = free_port(), free_port()
    spec = ray_spec(port, rpc, *PIPELINE)
    environ = {**os.environ, "SLURM_JOB_ID": job, "SLURM_JOB_NODELIST": nodelist, "SLURMD_NODENAME": "n1"}
    sup = Supervisor(project_root=ROOT, environ=environ, poll_interval_s=0.1)
    log = tmp_path / "server.log"
    server = sup.start(spec, log)
    try:
        sup.wait_ready(server)
        (follower,) = server.followers
        assert (server.node_name, follower.node_name, follower.slurm_job) == ("n1", "n2", job)
        assert f"gauntlet-node1-{port} n2" in squeue("-s", "-j", job, "-o", "%j %N").split("\n")
        assert "all 2 nodes joined the Ray cluster" in log.read_text()
        assert "srun --jobid=" in follower_log(log, 1).read_text()
    finally:
        record = sup.teardown(server)
    notes = "\n".join(record.notes)
    assert "node 0 (n1): ray stop: Stopped all" in notes and "node 1 (n2): ray stop: Stopped all" in notes
    assert "every node checked: nothing of" in notes and record.survivors == []
    assert sim_ray_processes(port) == [] and port_is_free(port) and port_is_free(rpc)
    steps = squeue("-s", "-j", job, "-o", "%j").split("\n")
    assert not [s for s in steps if s.startswith(("gauntlet-node", "gauntlet-raystop"))], steps
