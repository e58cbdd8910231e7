"""The NVML probe: a fake pynvml for the GPU path, the real pynvml for this machine's no-driver path."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from contracts.results import GpuMemory, HostProbe
from launch.nvml import GIB, NvmlProbe, free_gib, probe_host, topology_problem


class FakeNVMLError(Exception):
    pass


@dataclass
class FakeNvml:
    """The slice of pynvml the probe uses; memory in bytes as NVML reports it."""

    gpus: list[tuple[str | bytes, float, float, tuple[int, int]]]  # name, total GiB, used GiB, capability
    fail_init: bool = False
    fail_after: int | None = None  # device queries before NVML stops answering
    calls: dict[str, int] = field(default_factory=dict)
    NVMLError: type[Exception] = FakeNVMLError

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def nvmlInit(self) -> None:
        self._count("init")
        if self.fail_init:
            raise FakeNVMLError("NVML Shared Library Not Found")

    def nvmlShutdown(self) -> None:
        self._count("shutdown")

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        self._count("handle")
        if self.fail_after is not None and self.calls["handle"] > self.fail_after:
            raise FakeNVMLError("GPU is lost")
        return index

    def nvmlDeviceGetName(self, handle: int) -> str | bytes:
        return self.gpus[handle][0]

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:
        _, total, used, _ = self.gpus[handle]
        return SimpleNamespace(total=int(total * GIB), used=int(used * GIB), free=int((total - used) * GIB))

    def nvmlDeviceGetCudaComputeCapability(self, handle: int) -> tuple[int, int]:
        return self.gpus[handle][3]

    def nvmlSystemGetDriverVersion(self) -> bytes:
        return b"550.54.15"


H100 = ("NVIDIA H100 80GB HBM3", 79.6, 78.6, (9, 0))


def test_probe_host_reads_count_names_capability_and_memory() -> None:
    fake = FakeNvml([H100, (b"NVIDIA H100 80GB HBM3", 79.6, 0.5, (9, 0))])
    probe = probe_host(nvml_module=fake)
    assert probe.driver and probe.reason is None
    assert probe.driver_version == "550.54.15"
    assert [g.name for g in probe.gpus] == ["NVIDIA H100 80GB HBM3"] * 2  # bytes from old pynvml decoded
    assert probe.compute_capability == ["9.0", "9.0"]
    assert probe.gpus[0].total_gib == pytest.approx(79.6, abs=0.001)
    assert probe.gpus[0].free_gib == pytest.approx(1.0, abs=0.001)
    assert fake.calls["shutdown"] == 1


def test_probe_host_without_a_driver_says_why_and_never_raises() -> None:
    probe = probe_host(nvml_module=FakeNvml([], fail_init=True))
    assert probe == HostProbe(driver=False, reason="no NVIDIA driver (NVML Shared Library Not Found)")
    lost = probe_host(nvml_module=FakeNvml([H100], fail_after=0))
    assert not lost.driver and lost.reason == "NVML failed while probing (GPU is lost)"


def test_snapshot_initialises_once_and_reads_every_gpu() -> None:
    fake = FakeNvml([H100, ("NVIDIA H100 80GB HBM3", 79.6, 10.0, (9, 0))])
    probe = NvmlProbe(nvml_module=fake)
    first = probe.snapshot()
    second = probe.snapshot()
    assert first == second
    assert first is not None and [g.index for g in first] == [0, 1]
    assert first[1].used_gib == 10.0
    assert fake.calls["init"] == 1 and probe.reason is None


def test_snapshot_without_a_driver_records_the_reason_once_and_stops_trying() -> None:
    fake = FakeNvml([], fail_init=True)
    probe = NvmlProbe(nvml_module=fake)
    assert probe.snapshot() is None
    assert probe.snapshot() is None
    assert probe.reason == "no NVIDIA driver (NVML Shared Library Not Found)"
    assert fake.calls["init"] == 1


def test_snapshot_degrades_when_nvml_stops_answering() -> None:
    fake = FakeNvml([H100], fail_after=1)
    probe = NvmlProbe(nvml_module=fake)
    assert probe.snapshot() is not None
    assert probe.snapshot() is None
    assert probe.reason == "NVML stopped answering (GPU is lost)"
    assert fake.calls["shutdown"] == 1


def _has_driver() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


@pytest.mark.skipif(_has_driver(), reason="this machine has an NVIDIA driver; the no-driver path needs none")
def test_real_pynvml_on_a_machine_without_a_driver() -> None:
    probe = NvmlProbe()
    assert probe.snapshot() is None
    assert probe.reason is not None and probe.reason.startswith("no NVIDIA driver (")
    host = probe_host()
    assert not host.driver and host.gpus == []
    assert host.reason is not None and host.reason.startswith("no NVIDIA driver (")


@pytest.mark.skipif(not _has_driver(), reason="needs an NVIDIA driver")
def test_real_pynvml_on_a_gpu_host() -> None:
    host = probe_host()
    assert host.driver and host.gpus and len(host.compute_capability) == len(host.gpus)
    snapshot = NvmlProbe().snapshot()
    assert snapshot is not None and len(snapshot) == len(host.gpus)


GPUS = [GpuMemory(index=i, name="H100", total_gib=80.0, used_gib=79.0, free_gib=1.0) for i in range(8)]


@pytest.mark.parametrize(
    ("probe", "tp", "dp", "problem"),
    [
        (HostProbe(driver=True, gpus=GPUS), 2, 4, None),
        (
            HostProbe(driver=True, gpus=GPUS),
            4,
            4,
            "TP x DP = 16 exceeds the 8 devices of this host (as NVML sees it)",
        ),
        (HostProbe(driver=True, gpus=GPUS[:1]), 1, 1, None),
        (HostProbe(driver=False, reason="no NVIDIA driver"), 8, 8, None),  # nothing to check against
    ],
)
def test_topology_problem(probe: HostProbe, tp: int, dp: int, problem: str | None) -> None:
    assert topology_problem(probe, tp, dp) == problem


def test_free_gib() -> None:
    assert free_gib(GPUS[:2]) == [1.0, 1.0]
    assert free_gib(None) is None
