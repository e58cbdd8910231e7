"""One API server per node on the simulated 2 x 8 host, both nodes on this machine (issue 45 item 3c): a
TP4 x DP4 candidate with hybrid DP load balancing starts a head and a follower that each serve their own
two ranks on their own port, is ready only when both servers answer and together report engines 0..3, and
the load runner spreads the requests over both (request i to server i mod 2) and sums their /metrics."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from contracts.schema import LengthConfig, LoadConfig, WorkloadConfig
from launch.api_servers import server_urls
from launch.spec import render_spec
from launch.supervisor import Server, Supervisor
from load.runner import run_profile
from orchestrator.config.compose import load
from tests.ports import free_port, port_is_free

ROOT = Path(__file__).resolve().parents[2]
SUCCESS = re.compile(r'^vllm:request_success_total\{[^}]*engine="(\d+)"[^}]*\} (\S+)$', re.M)


@pytest.fixture
def sup() -> Iterator[Supervisor]:
    yield Supervisor(project_root=ROOT, poll_interval_s=0.05)


def _served(url: str) -> dict[str, float]:
    """Requests each engine of the server at ``url`` finished, from its /metrics."""
    out: dict[str, float] = {}
    for engine, value in SUCCESS.findall(httpx.get(f"{url}/metrics", timeout=5).text):
        out[engine] = out.get(engine, 0.0) + float(value)
    return out


@pytest.mark.parametrize("workers", [1, 2])  # the runner's own loop, and two worker processes
def test_hybrid_candidate_serves_on_every_node_and_the_runner_spreads_and_sums(
    sup: Supervisor, tmp_path: Path, workers: int
) -> None:
    port, rpc = free_port(), free_port()
    assert port_is_free(port + 1)
    cfg, _ = load(
        [
            "host=sim_2x8", "candidate=tp4_dp2", "candidate.data_parallel_size=4",
            "candidate.data_parallel_load_balancing=hybrid", f"service.port={port}", f"host.rpc_port={rpc}",
            "+host.sim_args.sim-startup-s=0.3",
        ]
    )  # fmt: skip
    spec = render_spec(cfg.service, cfg.candidate, cfg.host)
    server: Server = sup.start(spec, tmp_path / "server.log")
    try:
        sup.wait_ready(server)
        urls = server_urls(spec.base_url, spec.followers, [f.node_name for f in server.followers])
        assert urls == [f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}"]
        before = [_served(url) for url in urls]
        assert [sorted(b) for b in before] == [["0", "1"], ["2", "3"]]  # each serves its own ranks
        workload = WorkloadConfig(
            name="spread", concurrency=4, num_requests=12, warmup_requests=2,
            prompt_tokens=LengthConfig(kind="fixed", mean=32),
            output_tokens=LengthConfig(kind="fixed", mean=8),
            ignore_eos=True, seed=3, time_limit_s=120, request_timeout_s=60,
        )  # fmt: skip
        summary = run_profile(
            spec.base_url, spec.served_model_name, workload, candidate=spec.candidate,
            fingerprint=spec.fingerprint, repeat=0, out_dir=tmp_path / "run", backend="sim", host="sim_2x8",
            time_scale=spec.time_scale, progress=False, load=LoadConfig(workers=workers), servers=urls,
        )  # fmt: skip
        after = [_served(url) for url in urls]
        done = [sum(a.values()) - sum(b.values()) for a, b in zip(after, before, strict=True)]
        assert done == [7.0, 7.0]  # 14 requests, warmup included: indexes 0, 2, .. on node 0; 1, 3, .. on 1
        assert summary.completed == 12 and summary.failed == 0
        server_side = summary.server  # the measured window, summed over both servers' engines
        assert server_side is not None and server_side.generation_tokens == 12 * 8
        assert sum(server_side.request_success.values()) == 12 and not server_side.token_mismatch
        assert any("spread round-robin by index over 2 API servers" in note for note in summary.notes)
        metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
        assert metrics["servers"] == urls and metrics["errors"] == []
    except BaseException:
        with contextlib.suppress(Exception):
            sup.teardown(server)
        raise
    record = sup.teardown(server)
    assert record.survivors == [] and record.port_free
    assert port_is_free(port) and port_is_free(port + 1) and port_is_free(rpc)
