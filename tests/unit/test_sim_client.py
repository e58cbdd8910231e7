"""sim_gpu_memory: the simulator's stand-in for NVML, read through an injected transport."""

from __future__ import annotations

import httpx
import pytest

from contracts.errors import LaunchError
from launch.sim.client import sim_gpu_memory

GPU = {
    "index": 0,
    "name": "NVIDIA H100 80GB HBM3 (simulated)",
    "total_gib": 79.65,
    "used_gib": 78.6,
    "free_gib": 1.05,
}


def transport(status: int, payload: object) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/sim/gpu_memory"
        return httpx.Response(status, json=payload)

    return httpx.MockTransport(handler)


def test_reads_gpus() -> None:
    gpus = sim_gpu_memory("http://sim:1/", transport(200, [GPU, {**GPU, "index": 1}]))
    assert [g.index for g in gpus] == [0, 1]
    assert gpus[0].free_gib == 1.05


@pytest.mark.parametrize(
    ("status", "payload", "needle"),
    [
        (404, {"detail": "Not Found"}, "could not read simulated GPU memory"),
        (200, {"gpus": []}, "expected a JSON list"),
        (200, [{"index": 0}], "not valid"),
    ],
)
def test_errors_say_what_was_seen(status: int, payload: object, needle: str) -> None:
    with pytest.raises(LaunchError, match=needle):
        sim_gpu_memory("http://sim:1", transport(status, payload))
