"""The one module that reads GPUs (NVML through pynvml): host probe and per-GPU memory snapshots.

Pipeline position: the sweep records :func:`probe_host` with every result and checks that a candidate's
TP x DP fits (:func:`topology_problem`); the launcher takes :meth:`NvmlProbe.snapshot` before a launch and
polls it after teardown until GPU memory is back to the pre-launch level. On a host without an NVIDIA
driver both degrade to "no data" with the driver's own error text, recorded once, and never raise::

    probe = NvmlProbe()
    probe.snapshot()   # [GpuMemory(index=0, name='NVIDIA H100 80GB HBM3', ...), ...] or None
    probe.reason       # None, or 'no NVIDIA driver (NVML Shared Library Not Found)'
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol

import pynvml  # nvidia-ml-py: importing it needs no driver; nvmlInit() is what fails without one

from contracts.results import GpuMemory, HostProbe
from contracts.schema import placement_problem

GIB = 1024**3


class GpuProbe(Protocol):
    """Per-GPU memory now, or None when there is no NVIDIA driver."""

    def snapshot(self) -> list[GpuMemory] | None: ...


def _error_types(nvml: Any) -> tuple[type[BaseException], ...]:
    error = getattr(nvml, "NVMLError", None)
    base: tuple[type[BaseException], ...] = (OSError,)
    return (error, *base) if isinstance(error, type) and issubclass(error, BaseException) else base


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _memory(nvml: Any, index: int) -> GpuMemory:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    info = nvml.nvmlDeviceGetMemoryInfo(handle)
    return GpuMemory(
        index=index,
        name=_text(nvml.nvmlDeviceGetName(handle)),
        total_gib=round(info.total / GIB, 3),
        used_gib=round(info.used / GIB, 3),
        free_gib=round(info.free / GIB, 3),
    )


class NvmlProbe:
    """GPU memory snapshots through NVML; initialises once, degrades to None without a driver."""

    def __init__(self, nvml_module: Any | None = None) -> None:
        self._nvml_module = nvml_module
        self._nvml: Any | None = None
        self.reason: str | None = None  # why there is no data (set once)

    def _handle(self) -> Any | None:
        if self._nvml is not None:
            return self._nvml
        if self.reason is not None:
            return None
        nvml = self._nvml_module if self._nvml_module is not None else pynvml
        try:
            nvml.nvmlInit()
        except _error_types(nvml) as exc:
            self.reason = f"no NVIDIA driver ({exc})"
            return None
        self._nvml = nvml
        return nvml

    def snapshot(self) -> list[GpuMemory] | None:
        nvml = self._handle()
        if nvml is None:
            return None
        try:
            return [_memory(nvml, i) for i in range(nvml.nvmlDeviceGetCount())]
        except _error_types(nvml) as exc:
            self.reason = f"NVML stopped answering ({exc})"
            self.close()
            return None

    def close(self) -> None:
        if self._nvml is not None:
            with contextlib.suppress(*_error_types(self._nvml)):
                self._nvml.nvmlShutdown()
            self._nvml = None


def probe_host(nvml_module: Any | None = None) -> HostProbe:
    """GPU count, names, compute capability and memory (or why there are none); never raises."""
    nvml = nvml_module if nvml_module is not None else pynvml
    errors = _error_types(nvml)
    try:
        nvml.nvmlInit()
    except errors as exc:
        return HostProbe(driver=False, reason=f"no NVIDIA driver ({exc})")
    try:
        gpus: list[GpuMemory] = []
        capability: list[str] = []
        for index in range(nvml.nvmlDeviceGetCount()):
            gpus.append(_memory(nvml, index))
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(nvml.nvmlDeviceGetHandleByIndex(index))
            capability.append(f"{major}.{minor}")
        return HostProbe(
            driver=True,
            driver_version=_text(nvml.nvmlSystemGetDriverVersion()),
            gpus=gpus,
            compute_capability=capability,
        )
    except errors as exc:
        return HostProbe(driver=False, reason=f"NVML failed while probing ({exc})")
    finally:
        with contextlib.suppress(*errors):
            nvml.nvmlShutdown()


def topology_problem(probe: HostProbe, tensor_parallel_size: int, data_parallel_size: int) -> str | None:
    """Why a TP x DP candidate cannot be placed on the probed GPUs, or None when it fits (or no driver)."""
    if not probe.driver:
        return None
    return placement_problem(
        tensor_parallel_size,
        data_parallel_size,
        gpus=len(probe.gpus),
        placement="at_most",
        where="this host (as NVML sees it)",
    )


def free_gib(snapshot: list[GpuMemory] | None) -> list[float] | None:
    """Free memory per GPU (the figure the memory-headroom gate needs), or None without NVML."""
    return None if snapshot is None else [gpu.free_gib for gpu in snapshot]
