"""Real vLLM on CPU across two SLURM nodes (issue 35, item 6): one DP=2 server, its head with one local rank
here (the job's node n1, where gauntlet's job task runs) and its ``--headless`` follower a job step on n2,
started by the supervisor as a sweep's job would start it, served, measured by the load runner, and torn
down with nothing left on either node (docs/multinode.md, "Real vLLM across nodes").

Needs the local 2-node cluster (``scripts/slurm-local.sh start --nodes 2``): skipped without it, failed
instead under ``GAUNTLET_REQUIRE_SLURM=1`` (CI). The allocation is ``salloc --no-shell``: the test process
plays the job's first task, with the job's id and node list in the supervisor's environment.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from contracts.schema import LengthConfig, WorkloadConfig
from launch.supervisor import Supervisor, follower_log
from load import run_profile
from tests.e2e.conftest import ROOT, cpu_spec
from tests.ports import free_port, port_is_free
from tests.slurm_cluster import squeue, two_node_allocation

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

#: One replica a node: a 1-core "GPU" on each of the cluster's two nodes.
DP_OVER_TWO_NODES = [
    "host.nodes=2", "host.gpus_per_node=1", "host.gpu_count=2",
    "candidate.tensor_parallel_size=1", "candidate.data_parallel_size=2",
]  # fmt: skip


@pytest.fixture
def two_nodes() -> Iterator[tuple[str, str]]:
    """A job holding the local cluster's nodes n1 and n2 (its id and node list); cancelled afterwards."""
    with two_node_allocation("gauntlet-e2e-dp2") as allocated:
        yield allocated


def generated_tokens(base_url: str) -> dict[str, float]:
    """``vllm:generation_tokens_total`` by DP rank (the ``engine`` label)."""
    text = httpx.get(f"{base_url}/metrics", timeout=10).text
    pattern = r'^vllm:generation_tokens_total\{engine="(\d+)"[^}]*\} ([0-9.e+]+)$'
    return {m.group(1): float(m.group(2)) for m in re.finditer(pattern, text, re.MULTILINE)}


def test_dp2_over_two_slurm_nodes_serves_is_measured_and_leaves_nothing_on_either_node(
    vllm_cpu: Path, two_nodes: tuple[str, str], tmp_path: Path
) -> None:
    job, nodelist = two_nodes
    rpc = free_port()
    spec = cpu_spec(overrides=[*DP_OVER_TWO_NODES, f"host.rpc_port={rpc}"])
    assert spec.nodes == 2 and "scripts/vllm_serve.py" in spec.followers[0]
    environ = {**os.environ, "SLURM_JOB_ID": job, "SLURM_JOB_NODELIST": nodelist, "SLURMD_NODENAME": "n1"}
    sup = Supervisor(project_root=ROOT, environ=environ)
    log = tmp_path / "server.log"
    server = sup.start(spec, log)
    try:
        ready_s = sup.wait_ready(server)
        print(f"\nDP2 over n1 and n2 ready in {ready_s:.1f} s")
        (follower,) = server.followers
        assert (server.node_name, follower.node_name, follower.slurm_job) == ("n1", "n2", job)
        steps = squeue("-s", "-j", job, "-o", "%j %N").split("\n")
        assert f"gauntlet-node1-{spec.port} n2" in steps, steps
        # every rank joined before the head served (vLLM's own word), the follower headless
        assert "All engine subscriptions received by DP coordinator" in log.read_text()
        assert "data parallel engine(s) in headless mode" in follower_log(log, 1).read_text()

        workload = WorkloadConfig(
            name="dp2", concurrency=4, num_requests=12, warmup_requests=0,
            prompt_tokens=LengthConfig(kind="fixed", mean=32),
            output_tokens=LengthConfig(kind="fixed", mean=16),
            ignore_eos=True, temperature=0.0, time_limit_s=120, request_timeout_s=60,
        )  # fmt: skip
        measured = time.monotonic()
        summary = run_profile(
            server.base_url, spec.served_model_name, workload, candidate=spec.candidate,
            fingerprint=spec.fingerprint, repeat=0, out_dir=tmp_path / "run", backend="vllm", host="cpu",
            progress=False,
        )  # fmt: skip
        assert summary.completed == 12 and summary.errors == {}, summary
        by_rank = generated_tokens(server.base_url)
        assert sorted(by_rank) == ["0", "1"] and sum(by_rank.values()) == 12 * 16, by_rank
        assert all(tokens > 0 for tokens in by_rank.values()), by_rank  # both nodes' ranks served
        print(f"measured in {time.monotonic() - measured:.1f} s: {by_rank}")
    finally:
        record = sup.teardown(server)
    print(f"torn down in {record.duration_s:.1f} s: {record.signal_sequence} {record.notes}")
    assert record.survivors == [] and record.port_free, record
    assert sup.pids_of(server) == []
    assert f"gauntlet-node1-{spec.port}" not in squeue("-s", "-j", job, "-o", "%j")
    assert port_is_free(spec.port) and port_is_free(rpc)
    left = [p.pid for p in psutil.process_iter(["cmdline"]) if str(rpc) in " ".join(p.info["cmdline"] or [])]
    assert left == [], left
