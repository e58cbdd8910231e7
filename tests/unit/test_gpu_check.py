"""Ready for a lent GPU (issue 44, item 8): scripts/gpu_check.py's three checks over a fake NVML host, one
line each, and its exit codes (0 passed, 1 a check failed, 3 no NVIDIA driver)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from launch.spec import LaunchSpec, render_spec
from orchestrator.config.compose import load

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import gpu_check


@dataclass
class FakeGpus:
    """pynvml over ``n`` GPUs whose counters advance by ``step_mj`` at every read (0: they do not)."""

    n: int = 4
    step_mj: int = 50_000
    driver: bool = True
    reads: int = 0
    NVMLError: type[Exception] = pynvml.NVMLError
    NVMLError_NotSupported: type[Exception] = pynvml.NVMLError_NotSupported

    def nvmlInit(self) -> None:
        if not self.driver:
            raise pynvml.NVMLError_LibraryNotFound(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    def nvmlShutdown(self) -> None:
        return None

    def nvmlDeviceGetCount(self) -> int:
        return self.n

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        return ("h", index)

    def nvmlDeviceGetUUID(self, handle: Any) -> bytes:
        return f"GPU-{handle[1]:04d}-aaaa".encode()  # older pynvml returns bytes

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:
        self.reads += 1
        return 1_000_000 + self.reads * self.step_mj

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        return 70_000

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:
        return [SimpleNamespace(pid=1)]


@functools.cache
def _spec() -> LaunchSpec:
    cfg, _ = load(["host=h100x8"])
    spec = render_spec(cfg.service, cfg.candidate, cfg.host)
    argv = list(spec.argv)
    for flag in ("--tensor-parallel-size", "--data-parallel-size"):
        i = argv.index(flag)
        del argv[i : i + 2]
    return replace(spec, argv=tuple(argv), config_yaml="")


def _doctor(text: str, code: int = 0) -> gpu_check.Runner:
    def run(argv: Sequence[str], timeout_s: float) -> tuple[int, str]:
        assert "doctor" in argv and any(a.startswith("host.gpu_count=") for a in argv)
        return code, text

    return run


OK_DOCTOR = (
    "  ok  GPUs: 4 x NVIDIA H100 80GB HBM3 (driver 570.1)\n  PROBLEM  host: program: vLLM is not installed\n"
)

# (id, fake host, doctor's output, exit code, each check's line starts)
ROWS = [
    (
        "no driver: a clear line per check, exit 3",
        FakeGpus(driver=False),
        OK_DOCTOR,
        3,
        ["energy: no NVIDIA driver", "mapping: no NVIDIA driver", "doctor: no NVIDIA driver"],
    ),
    ("every check passes", FakeGpus(), OK_DOCTOR, 0, ["energy: ok: 4 GPU(s)", "mapping: ok", "doctor: ok"]),
    (
        "counters that do not advance",
        FakeGpus(step_mj=0),
        OK_DOCTOR,
        1,
        ["energy: FAILED: GPU 0, 1, 2, 3 did not advance", "mapping: ok", "doctor: ok"],
    ),
    (
        "doctor without the GPUs' line",
        FakeGpus(),
        "  PROBLEM  host: gpu: no NVIDIA driver\n",
        1,
        ["energy: ok", "mapping: ok", "doctor: FAILED: no 'GPUs: 4 x' line"],
    ),
    (
        "doctor sees fewer GPUs than NVML",
        FakeGpus(),
        "  ok  GPUs: 2 x NVIDIA H100\n",
        1,
        ["energy: ok", "mapping: ok", "doctor: FAILED"],
    ),
]


@pytest.mark.parametrize(("fake", "doctor", "code", "lines"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_gpu_check(fake: FakeGpus, doctor: str, code: int, lines: list[str]) -> None:
    said: list[str] = []
    now = [100.0]

    def load_for(seconds: float) -> str:
        now[0] += 10.0  # the load's 10 s, on the meter's clock
        return "no load (test)"

    got = gpu_check.main(
        nvml_module=fake,
        load=load_for,
        clock=lambda: now[0],
        run=_doctor(doctor),
        spec_for=lambda gpus: _spec(),
        seconds=0.0,
        out=said.append,
    )
    assert got == code
    assert len(said) == 4 and said[-1].startswith("gpu-check:")
    for line, start in zip(said, lines, strict=False):
        assert line.startswith(start), line


def test_the_mapping_check_meters_the_named_gpu() -> None:
    probe = gpu_check.NvmlProbe(FakeGpus(n=8))
    check = gpu_check.check_mapping(probe, _spec(), [f"GPU-{i:04d}-aaaa" for i in range(8)])
    assert check.ok and "by UUID -> GPU 7" in check.text and "default placement -> GPU 0, 1, 2" in check.text
