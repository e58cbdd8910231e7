"""A multi-node candidate on the simulated 2 x 8 host, both nodes on this machine (launch.nodes.LocalNodes):
the supervisor starts the head and a real ``--headless`` follower, is ready only once the follower joined,
tears every node down, and a follower that dies is a startup failure quoting its log, not a hang."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from contracts.errors import StartupFailure
from contracts.results import WatchEvent
from launch.spec import LaunchSpec, render_spec
from launch.supervisor import Server, Supervisor, follower_log
from orchestrator.config.compose import load
from tests.ports import free_port, port_is_free

ROOT = Path(__file__).resolve().parents[2]


def spec_for(port: int, rpc: int, *extra: str, startup_s: float = 0.3) -> LaunchSpec:
    cfg, _ = load(
        [
            "host=sim_2x8", "candidate=tp4_dp2", "candidate.tensor_parallel_size=8",
            "candidate.data_parallel_size=2", f"service.port={port}", f"host.rpc_port={rpc}",
            f"+host.sim_args.sim-startup-s={startup_s}", *extra,
        ]
    )  # fmt: skip
    return render_spec(cfg.service, cfg.candidate, cfg.host)


def test_head_and_follower_start_serve_and_are_torn_down(
    sup: Supervisor, started: list[Server], tmp_path: Path
) -> None:
    port, rpc = free_port(), free_port()
    spec = spec_for(port, rpc)
    server = sup.start(spec, tmp_path / "server.log")
    started.append(server)
    assert [p.node for p in server.processes] == [0, 1]
    sup.wait_ready(server)
    head_log = (tmp_path / "server.log").read_text()
    assert "all 2 nodes joined" in head_log and "node 1 joined" in head_log
    assert "joined; 8 GPU(s) serving" in follower_log(tmp_path / "server.log", 1).read_text()
    follower = psutil.Process(server.followers[0].pid)
    assert "--headless" in follower.cmdline() and "127.0.0.1" in follower.cmdline()
    assert server.followers[0].pid in sup.pids_of(server)
    record = sup.teardown(server)
    assert record.survivors == [] and record.port_free
    assert not psutil.pid_exists(server.pid) or psutil.Process(server.pid).status() == psutil.STATUS_ZOMBIE
    assert not psutil.pid_exists(server.followers[0].pid)
    assert port_is_free(port) and port_is_free(rpc)


def test_a_follower_that_dies_is_a_startup_failure_quoting_its_log(
    sup: Supervisor, started: list[Server], tmp_path: Path
) -> None:
    port, rpc = free_port(), free_port()
    # the follower dies 0.2 s in, before the head (2 s of startup) opens its RPC port; the head would wait
    # 60 s for it to join
    spec = spec_for(port, rpc, "+candidate.sim_args.sim-follower-exit-s=0.2", startup_s=2.0)
    server = sup.start(spec, tmp_path / "server.log")
    started.append(server)
    with pytest.raises(StartupFailure) as caught:
        sup.wait_ready(server, timeout_s=30)
    message = str(caught.value)
    assert "node 1" in message and "server.node1.log" in message and "exited with code 1" in message
    assert not psutil.pid_exists(server.followers[0].pid)
    assert port_is_free(port) and port_is_free(rpc)


def test_a_follower_lost_under_load_is_the_servers_death(
    sup: Supervisor, started: list[Server], tmp_path: Path
) -> None:
    port, rpc = free_port(), free_port()
    server = sup.start(spec_for(port, rpc), tmp_path / "server.log")
    started.append(server)
    sup.wait_ready(server)
    assert sup.check(server) == []
    os.kill(server.followers[0].pid, signal.SIGKILL)
    events: list[WatchEvent] = []
    deadline = time.monotonic() + 30
    while not any(e.kind == "died" for e in events) and time.monotonic() < deadline:
        events += sup.check(server)  # the head may answer 503 first: its engine died with the rank
        time.sleep(0.05)
    died = [e for e in events if e.kind == "died"]
    assert len(died) == 1 and {e.kind for e in events} <= {"unhealthy", "died"}
    assert f"node 1 (localhost) pid {server.followers[0].pid} exited with code -9" in died[0].detail
    record = sup.teardown(server)
    assert record.survivors == [] and port_is_free(port) and port_is_free(rpc)
