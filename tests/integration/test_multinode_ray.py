"""A Ray candidate (``multinode_backend: ray``) on the simulated 2 x 8 host, both nodes on this machine: the
supervisor starts the head node's program (Ray's head, the wait for every node, then one simulated ``vllm
serve`` spanning the nodes) and the other node's ``ray start``; it serves, is torn down with nothing left,
a node that dies at startup fails the start naming it, one that dies under load is the server's death; and
a sweep with a Ray candidate runs end to end (docs/multinode.md, Ray). The ``ray`` is the simulator's
(launch/sim/ray.py), a stand-in keeping the real CLI's contract."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from contracts.errors import StartupFailure
from launch.spec import LaunchSpec, render_spec
from launch.supervisor import Server, Supervisor, follower_log
from orchestrator.config.compose import load
from tests.integration.sweep_helpers import completion_tokens, sim_servers, sweep_dir
from tests.ports import free_port, port_is_free

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ["candidate.tensor_parallel_size=8", "candidate.data_parallel_size=1",
            "+candidate.extra_args.pipeline-parallel-size=2"]  # fmt: skip
DP_OVER_NODES = ["candidate.tensor_parallel_size=8", "candidate.data_parallel_size=2"]


def ray_spec(port: int, rpc: int, *extra: str) -> LaunchSpec:
    cfg, _ = load(
        [
            "host=sim_2x8", "candidate=tp4_dp2", "candidate.multinode_backend=ray", f"service.port={port}",
            f"host.rpc_port={rpc}", "+host.sim_args.sim-startup-s=0.3", *extra,
        ]
    )  # fmt: skip
    return render_spec(cfg.service, cfg.candidate, cfg.host)


def sim_ray_processes(port: int) -> list[int]:
    """The simulated Ray processes of the server on ``port`` still running on this machine."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            ours = proc.environ().get("GAUNTLET_SERVER_PORT") == str(port)
            if (proc.info["cmdline"] or [])[1:3] == ["-m", "launch.sim.ray"] and ours:
                found.append(proc.info["pid"])
    return found


@pytest.mark.parametrize(
    ("shape", "flag"),
    [(PIPELINE, "--distributed-executor-backend"), (DP_OVER_NODES, "--data-parallel-backend")],
)
def test_a_ray_candidate_starts_its_cluster_serves_across_the_nodes_and_leaves_nothing(
    sup: Supervisor, started: list[Server], tmp_path: Path, shape: list[str], flag: str
) -> None:
    port, rpc = free_port(), free_port()
    spec = ray_spec(port, rpc, *shape)
    assert flag in spec.argv and "--headless" not in spec.argv and "--headless" not in spec.followers[0]
    log = tmp_path / "server.log"
    server = sup.start(spec, log)
    started.append(server)
    sup.wait_ready(server)
    head_log = log.read_text()
    # Ray's head first, every node joined, then one vLLM on the head that spans them
    assert head_log.index("starting Ray's head") < head_log.index("all 2 nodes joined the Ray cluster")
    assert head_log.index("all 2 nodes joined") < head_log.index("starting vLLM with RAY_ADDRESS=127.0.0.1:")
    assert "all 2 nodes placed" in head_log and "Application startup complete" in head_log
    assert "this node joined the cluster at 127.0.0.1:" in follower_log(log, 1).read_text()
    with urllib.request.urlopen(f"{spec.base_url}/sim/gpu_memory", timeout=10) as answer:
        assert len(json.load(answer)) == 16  # one server over both nodes' GPUs
    assert completion_tokens(spec.base_url, spec.served_model_name) > 0
    assert len(sim_ray_processes(port)) == 2  # the head's Ray and the other node's
    record = sup.teardown(server)
    assert record.survivors == [] and record.port_free
    assert any("every node checked: nothing of" in note for note in record.notes), record.notes
    assert sim_ray_processes(port) == [] and sim_servers(port) == []
    assert port_is_free(port) and port_is_free(rpc)  # the API port and Ray's


def test_a_ray_node_that_dies_at_startup_fails_the_start_naming_it(
    sup: Supervisor, started: list[Server], tmp_path: Path
) -> None:
    port, rpc = free_port(), free_port()
    spec = ray_spec(port, rpc, *PIPELINE, "+candidate.env.GAUNTLET_SIM_RAY_NODE_EXIT_S='0.2'")
    server = sup.start(spec, tmp_path / "server.log")
    started.append(server)
    with pytest.raises(StartupFailure) as caught:
        sup.wait_ready(server)
    # the node's own exit, quoted from its log: not the join bound's message, nor the startup timeout
    assert "node 1" in str(caught.value) and "simulated node failure" in str(caught.value)
    started.clear()
    assert sim_ray_processes(port) == [] and port_is_free(rpc)


def test_a_ray_node_that_never_joins_ends_the_start_naming_it_within_the_bound(
    sup: Supervisor, started: list[Server], tmp_path: Path
) -> None:
    port, rpc = free_port(), free_port()
    # a startup timeout of 12 s bounds the join at 6 s (half of it); the progress lines are the unit tests'
    # (their timing depends on the machine's load)
    spec = ray_spec(port, rpc, *PIPELINE, "+candidate.env.GAUNTLET_SIM_RAY_NODE_NO_JOIN='1'",
                    "host.startup_timeout_s=12")  # fmt: skip
    server = sup.start(spec, tmp_path / "server.log")
    started.append(server)
    with pytest.raises(StartupFailure) as caught:
        sup.wait_ready(server)
    text = str(caught.value) + (tmp_path / "server.log").read_text()
    assert f"node 1 (localhost) never joined the Ray cluster at 127.0.0.1:{rpc} within 6 s" in text
    started.clear()
    assert sim_ray_processes(port) == [] and port_is_free(rpc)


def test_a_teardown_while_the_head_waits_for_the_nodes_is_no_failure_of_the_cluster(
    sup: Supervisor, started: list[Server], tmp_path: Path
) -> None:
    port, rpc = free_port(), free_port()
    spec = ray_spec(port, rpc, *PIPELINE, "+candidate.env.GAUNTLET_SIM_RAY_NODE_NO_JOIN='1'")
    log = tmp_path / "server.log"
    server = sup.start(spec, log)
    started.append(server)
    deadline = time.monotonic() + 60
    while "Ray runtime started" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)  # Ray's head is up; the wait for node 1 (which never joins) goes on
    record = sup.teardown(server)
    started.clear()
    assert record.survivors == [] and "RuntimeError" not in log.read_text()
    assert sim_ray_processes(port) == [] and port_is_free(rpc)


def test_a_ray_node_lost_under_load_is_the_servers_death(
    sup: Supervisor, started: list[Server], tmp_path: Path
) -> None:
    port, rpc = free_port(), free_port()
    spec = ray_spec(port, rpc, *PIPELINE)
    server = sup.start(spec, tmp_path / "server.log")
    started.append(server)
    sup.wait_ready(server)
    os.kill(server.followers[0].pid, signal.SIGKILL)  # node 1's `ray start`: the node is lost
    deadline = time.monotonic() + 30
    events = []
    while time.monotonic() < deadline and not any(e.kind == "died" for e in events):
        events += sup.check(server)
        time.sleep(0.2)
    died = next(e for e in events if e.kind == "died")
    assert "node 1" in died.detail, died


def test_a_sweep_with_a_ray_candidate_runs_end_to_end(tmp_path: Path) -> None:
    sweeps, port = tmp_path / "sweeps", free_port()
    command = [
        sys.executable, "-m", "orchestrator", "-m", "candidate=dp_nodes,tp8_pp2_ray", "+experiment=sim_small",
        "host=sim_2x8", "candidate@baseline=dp_nodes", f"host.rpc_port={free_port()}",
        "hydra.searchpath=[file://tests/integration/conf,file://examples/multinode]",
        f"run.sweeps_dir={sweeps}", f"service.port={port}", "run.retained_after_sweep=stop",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        command, check=False, cwd=ROOT, capture_output=True, text=True, timeout=400, env=env
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    sweep = sweep_dir(sweeps)
    head_log = (sweep / "candidates" / "tp8_pp2_ray" / "server.log").read_text()
    assert (
        "all 2 nodes joined the Ray cluster" in head_log and "--distributed-executor-backend ray" in head_log
    )
    assert (
        "this node joined the cluster"
        in (sweep / "candidates" / "tp8_pp2_ray" / "server.node1.log").read_text()
    )
    verdicts = json.loads((sweep / "verdicts.json").read_text())["verdicts"]
    judged = {v["candidate"]: v["decision"] for v in verdicts}
    # served and measured: any verdict but "never started" (incompatible) or "evidence missing" (incomplete);
    # a TP8 x PP2 point on the simulated 2 x 8 host lands near the baseline, and a run read it NEUTRAL
    measured = ("keep", "reject", "neutral", "inconclusive")
    assert judged["tp8_pp2_ray"] in measured, verdicts
    assert sim_servers(port) == [] and sim_ray_processes(port) == []
