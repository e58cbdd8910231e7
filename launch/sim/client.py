"""Client side of the simulator's extra endpoints, for gauntlet's stages.

Pipeline position: the sweep calls :func:`sim_gpu_memory` after warmup where it would read NVML on a real
host (the simulated host has no driver). The HTTP transport is injectable (``httpx.MockTransport`` in tests).

Example::

    gpus = sim_gpu_memory("http://127.0.0.1:8000")
    [g.free_gib for g in gpus]   # [1.03, 0.99, ...]
"""

from __future__ import annotations

import httpx
from pydantic import ValidationError

from contracts.errors import LaunchError
from contracts.results import GpuMemory

GPU_MEMORY_PATH = "/sim/gpu_memory"


def sim_gpu_memory(
    base_url: str, transport: httpx.BaseTransport | None = None, *, timeout_s: float = 10.0
) -> list[GpuMemory]:
    """Per-GPU memory the simulated host reports after warmup (``GET /sim/gpu_memory``)."""
    url = base_url.rstrip("/") + GPU_MEMORY_PATH
    try:
        with httpx.Client(transport=transport, timeout=timeout_s) as client:
            response = client.get(url)
            response.raise_for_status()
            data = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise LaunchError(
            f"could not read simulated GPU memory from {url}: {type(exc).__name__}: {exc}",
            hint="is the server a gauntlet simulator (python -m launch.sim) and is it ready?",
        ) from exc
    if not isinstance(data, list):
        raise LaunchError(f"{url} returned {type(data).__name__}, expected a JSON list of GPUs")
    try:
        return [GpuMemory.model_validate(item) for item in data]
    except ValidationError as exc:
        raise LaunchError(
            f"{url} returned a GPU entry that is not valid", evidence=str(exc).splitlines()[:6]
        ) from exc
