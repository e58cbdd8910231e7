"""Ready across ranks (issue 45, item 4): a multi-node server is ready only when ``/metrics`` reports every
data-parallel rank's engine (``engine="0"`` .. ``"D-1"``), not on ``/health`` and ``/v1/models`` alone; a
single-node server's readiness is unchanged."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from contracts.dp_balance import engines_in
from launch.readiness import NotReady, ready_once
from launch.tracking import Server, Tracker
from tests.unit.test_multinode_journal import SPEC

pytestmark = pytest.mark.unit


def _metrics(*engines: str) -> str:
    lines = ["# HELP vllm:num_requests_running Number of requests.", "# TYPE vllm:num_requests_running gauge"]
    lines += [f'vllm:num_requests_running{{engine="{e}",model_name="m"}} 0.0' for e in engines]
    return "\n".join(lines) + "\n"


ROWS = [
    # nodes, --data-parallel-size, /metrics' status and body, what the poll says (None: ready)
    (2, 2, (200, _metrics("0", "1")), None),
    (2, 2, (200, _metrics("0")), "/metrics reports no engine 1 of 2"),
    (2, 4, (200, _metrics("0", "2")), "/metrics reports no engine 1, 3 of 4"),
    (2, 2, (503, ""), "/metrics 503"),
    (2, 1, (200, _metrics("0")), None),  # TP across nodes: one engine
    (2, 2, (200, 'other{x="engine=\\"1\\""} 0\nvllm:x{engine="0"} 1'), "/metrics reports no engine 1 of 2"),
    (1, 2, (200, _metrics("0")), None),  # a single-node server: /metrics is not asked
]


def assert_ready_once(
    server: Server, answer: Callable[[httpx.Request], httpx.Response], base_url: str, said: str | None
) -> None:
    """One readiness poll of ``server`` (its processes alive) against the mock ``answer``: ready when
    ``said`` is None, else :class:`NotReady` saying it."""
    alive = SimpleNamespace(zombie=False, create_time=1.0)
    tracker = Tracker(SimpleNamespace(info=lambda pid: alive), clock=lambda: 0.0, sleep=lambda _s: None)
    with httpx.Client(base_url=base_url, transport=httpx.MockTransport(answer)) as client:
        if said is None:
            ready_once(server, client, tracker)
        else:
            with pytest.raises(NotReady, match=said):
                ready_once(server, client, tracker)


@pytest.mark.parametrize(("nodes", "dp", "metrics", "said"), ROWS)
def test_a_multi_node_server_is_ready_once_every_engine_reports(
    tmp_path: Path, nodes: int, dp: int, metrics: tuple[int, str], said: str | None
) -> None:
    status, body = metrics
    spec = replace(SPEC, argv=(*SPEC.argv, "--data-parallel-size", str(dp)), served_model_name="m")
    asked: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        if request.url.path == "/metrics":
            return httpx.Response(status, text=body)
        return httpx.Response(200)

    follower = Server(spec, 2, 2, 1.0, tmp_path / "f.log", 0.0, node=1, node_name="n2")
    server = Server(spec, 1, 1, 1.0, tmp_path / "s.log", 0.0, followers=(follower,) if nodes > 1 else ())
    assert_ready_once(server, answer, "http://s", said)
    assert ("/metrics" in asked) == (nodes > 1)


def test_engines_are_read_from_label_sets_only() -> None:
    text = '# HELP x engine="9"\nx{engine="0",model_name="m"} 1\ny{a="1", engine="1"} 2\nz 3\n'
    assert engines_in(text) == {"0", "1"}
