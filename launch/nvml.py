"""The one module that reads GPUs (NVML through pynvml): host probe and per-GPU memory snapshots.

Pipeline position: the sweep records :func:`probe_host` with every result and checks that a candidate's
TP x PP x DP fits (:func:`topology_problem`); the launcher takes :meth:`NvmlProbe.snapshot` before a launch
and polls it after teardown until GPU memory is back to the pre-launch level. On a host without an NVIDIA
driver both degrade to "no data" with the driver's own error text, recorded once, and never raise::

    probe = NvmlProbe()
    probe.snapshot()   # [GpuMemory(index=0, name='NVIDIA H100 80GB HBM3', ...), ...] or None
    probe.reason       # None, or 'no NVIDIA driver (NVML Shared Library Not Found)'

A measured run's energy (:class:`NvmlEnergy`, an :class:`~contracts.energy.EnergyMeter`): each GPU's
total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``, mJ since the driver loaded) read at the run's
start and end; where the counter is not supported (``NVMLError_NotSupported``), ``nvmlDeviceGetPowerUsage``
(mW) read every ``interval_s`` on a thread and integrated. Without a driver: "not measured", never raised::

    window = NvmlEnergy(probe).open()   # at the run's start
    window.close()                      # RunEnergy(method='nvml_counter', joules=..., ...) at its end

Given the launch spec, the meter reads only the candidate's own GPUs (:mod:`launch.gpu_select`: the spec's
``CUDA_VISIBLE_DEVICES`` or vLLM's default placement, matched to NVML by UUID), records their idle power
at the window's opening and the other programs' processes NVML lists on them (the figure is then
shared). It meters one node, this one: a multi-node candidate's window reads every node's GPUs through
each node's agent (:class:`launch.node_energy.NodesEnergy`, which the sweep's seams give a GPU host's
multi-node spec); given one here, this meter reads the head's share and its record says so
(``metered_nodes`` 1 of ``nodes``, ``RunEnergy.metering``).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol

import pynvml  # nvidia-ml-py: importing it needs no driver; nvmlInit() is what fails without one

from contracts.energy import (
    Edge,
    EnergyWindow,
    Unmeasured,
    counter_joules,
    integrate_power,
    not_measured,
    run_energy,
)
from contracts.metering import GpuMetering
from contracts.placement import placement_problem
from contracts.results import GpuMemory, HostProbe, RunEnergy
from launch.gpu_select import device_request, resolve
from launch.spec import LaunchSpec

GIB = 1024**3

Clock = Callable[[], float]


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

    def module(self) -> Any | None:
        """The initialised NVML module, or None without a driver (``reason`` says why)."""
        return self._handle()

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


def _not_supported(nvml: Any, exc: BaseException) -> bool:
    """The NVML call is not supported on this GPU (``NVMLError_NotSupported``, NVML_ERROR_NOT_SUPPORTED)."""
    kind = getattr(nvml, "NVMLError_NotSupported", None)
    if isinstance(kind, type) and isinstance(exc, kind):
        return True
    return getattr(exc, "value", None) == getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", 3)


class _CounterWindow:
    """A run read by each GPU's total-energy counter (mJ) at its start and at its end."""

    def __init__(self, nvml: Any, handles: list[Any], start_mj: list[int], t0: float, clock: Clock) -> None:
        self._nvml, self._handles, self._start, self._t0, self._clock = nvml, handles, start_mj, t0, clock
        self._end: tuple[list[int], float] | None = None

    def _read(self) -> tuple[list[int], float]:
        return [int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(h)) for h in self._handles], self._clock()

    def edge(self, which: Edge) -> None:
        """The measured window's start or end: read the counters there (a failed read keeps the run's)."""
        with contextlib.suppress(*_error_types(self._nvml)):
            if which == "start":
                self._start, self._t0 = self._read()
                self._end = None
            elif self._end is None:
                self._end = self._read()

    def close(self) -> RunEnergy:
        nvml = self._nvml
        try:
            end, t1 = self._end if self._end is not None else self._read()
        except _error_types(nvml) as exc:
            return not_measured(f"NVML stopped answering at the run's end ({exc})", gpus=len(self._handles))
        duration = t1 - self._t0
        joules = [counter_joules(a, b, duration_s=duration) for a, b in zip(self._start, end, strict=True)]
        return run_energy("nvml_counter", joules, duration, output_tps=None)


class _PowerWindow:
    """A run read by each GPU's power (mW) every ``interval_s`` on a thread, integrated at its end."""

    def __init__(self, nvml: Any, handles: list[Any], clock: Clock, interval_s: float | None) -> None:
        self._nvml, self._handles, self._clock = nvml, handles, clock
        self._readings: list[list[tuple[float, float]]] = [[] for _ in handles]
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ended = False  # the measured window ended: later readings are left out
        self.sample()
        if interval_s is not None:
            self._thread = threading.Thread(
                target=self._loop, args=(interval_s,), name="gauntlet-nvml-power", daemon=True
            )
            self._thread.start()

    def _loop(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            self.sample()

    def sample(self) -> None:
        """Read every GPU's power now; a reading NVML refuses is left out (fewer readings, not zero)."""
        nvml = self._nvml
        with self._lock:
            if self._ended:
                return
            for handle, readings in zip(self._handles, self._readings, strict=True):
                with contextlib.suppress(*_error_types(nvml)):
                    milliwatts = nvml.nvmlDeviceGetPowerUsage(handle)
                    readings.append((self._clock(), milliwatts / 1000))

    def edge(self, which: Edge) -> None:
        """The measured window's start (readings before it are dropped) or end (the last reading)."""
        if which == "start":
            with self._lock:
                self._readings = [[] for _ in self._handles]
                self._ended = False
            self.sample()
        else:
            self.sample()
            with self._lock:
                self._ended = True

    def close(self) -> RunEnergy:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()
        joules = [integrate_power(readings) for readings in self._readings]
        times = [t for readings in self._readings for t, _ in readings]
        duration = max(times) - min(times) if times else 0.0
        count = min((len(r) for r in self._readings), default=0)
        return run_energy(
            "nvml_power",
            joules,
            duration,
            output_tps=None,
            samples=count,
            note="the energy counter is not supported here: power readings integrated over the run",
        )


def other_processes(
    nvml: Any, handles: list[Any], owned: Collection[int], group_of: Callable[[int], int]
) -> list[int]:
    """Pids NVML lists on ``handles`` (compute and graphics) outside the process groups ``owned`` (the
    servers gauntlet started); a pid this process cannot look up (another container's) counts as other."""
    pids: set[int] = set()
    for handle in handles:
        for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
            call = getattr(nvml, getter, None)
            if call is not None:
                with contextlib.suppress(*_error_types(nvml)):
                    pids.update(int(p.pid) for p in call(handle))

    def ours(pid: int) -> bool:
        try:
            return group_of(pid) in owned
        except OSError:
            return False

    return sorted(p for p in pids if not ours(p))


class _Metered:
    """A window over the candidate's own GPUs: its record carries the metering, the processes that
    shared the GPUs at its opening or its close included."""

    def __init__(self, window: EnergyWindow, metering: GpuMetering, others: Callable[[], list[int]]) -> None:
        self._window, self._metering, self._others = window, metering, others

    def edge(self, which: Edge) -> None:
        self._window.edge(which)

    def close(self) -> RunEnergy:
        energy = self._window.close()
        shared = sorted({*self._metering.shared_with, *self._others()})
        return energy.model_copy(
            update={"metering": self._metering.model_copy(update={"shared_with": shared})}
        )


class NvmlEnergy:
    """Energy windows over the candidate's GPUs (with ``spec``; without it, every GPU NVML sees): the
    total-energy counter, else power readings integrated (every ``interval_s`` seconds; None: only at the
    window's open, its close and :meth:`sample` calls). ``owned`` gives the process groups of the servers
    gauntlet started (the other pids on the metered GPUs make the figure shared); ``environ`` is
    gauntlet's environment (a ``CUDA_VISIBLE_DEVICES`` passed through to the server)."""

    def __init__(
        self,
        probe: NvmlProbe,
        *,
        clock: Clock = time.monotonic,
        interval_s: float | None = 0.5,
        spec: LaunchSpec | None = None,
        environ: Mapping[str, str] | None = None,
        owned: Callable[[], Collection[int]] = frozenset,
        group_of: Callable[[int], int] = os.getpgid,
    ) -> None:
        self._probe, self._clock, self._interval_s = probe, clock, interval_s
        self._spec, self._environ = spec, os.environ if environ is None else environ
        self._owned, self._group_of = owned, group_of

    def _metering(
        self, nvml: Any, handles: list[Any], spec: LaunchSpec
    ) -> tuple[list[Any], GpuMetering] | str:
        """The candidate's handles and their metering record, or why they cannot be told apart."""
        uuids = [_text(nvml.nvmlDeviceGetUUID(h)) for h in handles]
        request = device_request(spec, self._environ)
        chosen = resolve(request, uuids)
        if isinstance(chosen, str):
            return chosen
        mine = [handles[i] for i in chosen]
        idle: list[float] = []
        with contextlib.suppress(*_error_types(nvml)):
            idle = [nvml.nvmlDeviceGetPowerUsage(h) / 1000 for h in mine]
        return mine, GpuMetering(
            selected_by=request.selected_by,
            indices=chosen,
            uuids=[uuids[i] for i in chosen],
            host_gpus=len(handles),
            shared_with=self._others(nvml, mine),
            idle_watts_per_gpu=idle if len(idle) == len(mine) else None,
            nodes=request.nodes,
            metered_nodes=1,
        )

    def _others(self, nvml: Any, handles: list[Any]) -> list[int]:
        return other_processes(nvml, handles, set(self._owned()), self._group_of)

    def open(self) -> EnergyWindow:
        nvml = self._probe.module()
        if nvml is None:
            return Unmeasured(f"not measured: {self._probe.reason or 'no NVIDIA driver'}")
        errors = _error_types(nvml)
        try:
            handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
            if not handles:
                return Unmeasured("not measured: NVML sees no GPU")
            metering: GpuMetering | None = None
            if self._spec is not None:
                found = self._metering(nvml, handles, self._spec)
                if isinstance(found, str):
                    return Unmeasured(f"not measured: the candidate's GPUs cannot be told apart ({found})")
                handles, metering = found
            window = self._window(nvml, handles)
            if metering is None:
                return window
            return _Metered(window, metering, lambda: self._others(nvml, handles))
        except errors as exc:
            return Unmeasured(f"not measured: NVML failed at the run's start ({exc})")

    def _window(self, nvml: Any, handles: list[Any]) -> EnergyWindow:
        t0 = self._clock()
        try:
            start = [int(nvml.nvmlDeviceGetTotalEnergyConsumption(h)) for h in handles]
        except _error_types(nvml) as exc:
            if not _not_supported(nvml, exc):
                raise
            return _PowerWindow(nvml, handles, self._clock, self._interval_s)
        return _CounterWindow(nvml, handles, start, t0, self._clock)


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


def topology_problem(
    probe: HostProbe, tensor_parallel_size: int, data_parallel_size: int, *, pipeline_parallel_size: int = 1
) -> str | None:
    """Why a TP x PP x DP candidate cannot be placed on the probed GPUs, or None when it fits (or no
    driver). Each replica's TP x PP workers hold a GPU each (PP: ``--pipeline-parallel-size``)."""
    if not probe.driver:
        return None
    return placement_problem(
        tensor_parallel_size,
        data_parallel_size,
        gpus=len(probe.gpus),
        placement="at_most",
        where="this host (as NVML sees it)",
        pipeline_parallel_size=pipeline_parallel_size,
    )


def free_gib(snapshot: list[GpuMemory] | None) -> list[float] | None:
    """Free memory per GPU (the figure the memory-headroom gate needs), or None without NVML."""
    return None if snapshot is None else [gpu.free_gib for gpu in snapshot]
