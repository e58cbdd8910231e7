"""Client side of the simulator's extra endpoints, for gauntlet's stages.

Pipeline position: the sweep calls :func:`sim_gpu_memory` after warmup where it would read NVML on a real
host (the simulated host has no driver), and opens a :class:`SimEnergy` window around each measured run
where it would read NVML's energy counter (``/sim/energy``: the simulator's stated power model, labelled
simulated). The HTTP transport is injectable (``httpx.MockTransport`` in tests).

Example::

    gpus = sim_gpu_memory("http://127.0.0.1:8000")
    [g.free_gib for g in gpus]   # [1.03, 0.99, ...]
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import httpx
from pydantic import ValidationError

from contracts.energy import Edge, EnergyWindow, counter_joules, not_measured, run_energy
from contracts.errors import LaunchError
from contracts.http_tls import default_verify
from contracts.results import GpuMemory, RunEnergy

GPU_MEMORY_PATH = "/sim/gpu_memory"
ENERGY_PATH = "/sim/energy"


def sim_gpu_memory(
    base_url: str, transport: httpx.BaseTransport | None = None, *, timeout_s: float = 10.0
) -> list[GpuMemory]:
    """Per-GPU memory the simulated host reports after warmup (``GET /sim/gpu_memory``)."""
    url = base_url.rstrip("/") + GPU_MEMORY_PATH
    try:
        with httpx.Client(transport=transport, timeout=timeout_s, verify=default_verify()) as client:
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


def _energy_reading(
    base_url: str, transport: httpx.BaseTransport | None, others: Sequence[str] = ()
) -> tuple[float, list[int], str]:
    """The simulator's virtual clock, each GPU's energy counter (mJ) and its power model, in words; with
    ``others`` (the other nodes' servers of a hybrid or external launch, each simulating its own node's
    GPUs), every node's GPUs, the head's first, on the head's clock."""
    readings = []
    with httpx.Client(transport=transport, timeout=10.0, verify=default_verify()) as client:
        for url in (base_url, *others):
            response = client.get(url.rstrip("/") + ENERGY_PATH)
            response.raise_for_status()
            readings.append(response.json())
    gpus = [int(v) for data in readings for v in data["gpus_mj"]]
    return float(readings[0]["virtual_s"]), gpus, str(readings[0]["model"])


Reading = tuple[float, list[int], str]
_FAILED = (httpx.HTTPError, ValueError, KeyError, TypeError)


class _SimWindow:
    def __init__(self, meter: SimEnergy, start: Reading | None, error: str) -> None:
        self._meter, self._start, self._error = meter, start, error
        self._end: Reading | None = None

    def edge(self, which: Edge) -> None:
        """The measured window's start or end: read the counters there (a failed read keeps the run's)."""
        with contextlib.suppress(*_FAILED):
            if which == "start":
                self._start = _energy_reading(self._meter.base_url, self._meter.transport, self._meter.others)
                self._end = None
            elif self._start is not None and self._end is None:
                self._end = _energy_reading(self._meter.base_url, self._meter.transport, self._meter.others)

    def close(self) -> RunEnergy:
        if self._start is None:
            return not_measured(self._error)
        try:
            t1, end, model = self._end or _energy_reading(
                self._meter.base_url, self._meter.transport, self._meter.others
            )
        except _FAILED as exc:
            return not_measured(f"not measured: {ENERGY_PATH} failed at the run's end ({exc})")
        t0, start, _ = self._start
        duration = t1 - t0  # virtual seconds: the host seconds the load runner reports
        joules = [counter_joules(a, b, duration_s=duration) for a, b in zip(start, end, strict=True)]
        return run_energy("simulated", joules, duration, output_tps=None, note=model)


class SimEnergy:
    """Energy windows read from the simulator's power model (``GET /sim/energy``); never raises."""

    def __init__(
        self, base_url: str, transport: httpx.BaseTransport | None = None, others: Sequence[str] = ()
    ) -> None:
        self.base_url, self.transport, self.others = base_url, transport, tuple(others)

    def open(self) -> EnergyWindow:
        try:
            return _SimWindow(self, _energy_reading(self.base_url, self.transport, self.others), "")
        except _FAILED as exc:
            return _SimWindow(self, None, f"not measured: {ENERGY_PATH} failed at the run's start ({exc})")
