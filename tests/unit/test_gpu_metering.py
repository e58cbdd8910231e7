"""Energy on the candidate's GPUs only (issue 44, item 6): the server's devices found in its launch spec
(``CUDA_VISIBLE_DEVICES`` by index or UUID, else vLLM's default placement: the first TP x DP), mapped to
NVML handles by UUID and metered alone; other programs' processes on them mark the figure shared; idle
power at the window's opening; a multi-node candidate marked head-only; no driver: "not measured"."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from contracts.energy import run_energy
from contracts.metering import GpuMetering
from contracts.results import CandidateRun, Pricing, StartupRecord
from contracts.sweepdir import Repeat, Results
from launch.gpu_select import device_request, head_ranks
from launch.nvml import NvmlEnergy, NvmlProbe
from launch.spec import LaunchSpec, render_spec
from orchestrator.config.compose import load
from report.cost import cost_cell, cost_row
from tests.unit.fakes import summary

UUIDS = [f"GPU-{i}a{i}b-0000-1111-2222-33334444555{i}" for i in range(8)]
SERVER_GROUP = 4242  # the process group of the server gauntlet started


@dataclass
class FakeHost:
    """pynvml over an 8-GPU host: GPU i's counter advances (i + 1) x 100 J over the run, idles at 70 W."""

    processes: dict[int, list[int]] = field(default_factory=dict)  # GPU index -> pids NVML lists
    driver: bool = True
    ended: bool = False
    NVMLError: type[Exception] = pynvml.NVMLError
    NVMLError_NotSupported: type[Exception] = pynvml.NVMLError_NotSupported

    def nvmlInit(self) -> None:
        if not self.driver:
            raise pynvml.NVMLError_LibraryNotFound(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    def nvmlShutdown(self) -> None:
        return None

    def nvmlDeviceGetCount(self) -> int:
        return len(UUIDS)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        return ("handle", index)

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        return UUIDS[handle[1]]

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:
        i = handle[1]
        return 1_000_000 * i + (100_000 * (i + 1) if self.ended else 0)

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        return 70_000

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:
        return [SimpleNamespace(pid=p) for p in self.processes.get(handle[1], [])]


class Clock:
    def __init__(self) -> None:
        self.now = 10.0

    def __call__(self) -> float:
        return self.now


@functools.cache
def _base_spec() -> LaunchSpec:
    cfg, _ = load(["host=h100x8"])  # composed once: Hydra takes seconds on a loaded 2-core machine
    return render_spec(cfg.service, cfg.candidate, cfg.host)


def _spec(tp: int, dp: int = 1, env: dict[str, str] | None = None, followers: int = 0) -> LaunchSpec:
    spec = _base_spec()
    argv = list(spec.argv)
    argv[argv.index("--tensor-parallel-size") + 1] = str(tp)
    argv[argv.index("--data-parallel-size") + 1] = str(dp)
    if followers:
        argv += ["--data-parallel-size-local", str(dp // (followers + 1))]
    return replace(
        spec,
        argv=tuple(argv),
        config_yaml="",
        env=env or {},
        followers=tuple(tuple(argv) for _ in range(followers)),
    )


def _group_of(pid: int) -> int:
    if pid >= 90_000:
        raise ProcessLookupError(pid)  # a pid of another container: not visible here
    return SERVER_GROUP if pid < 5000 else pid


# (id, spec, NVML's processes per GPU, metered GPUs, joules, shared with, head only)
ROWS = [
    ("TP4 on an 8-GPU host: its 4 GPUs, not 8", _spec(4), {}, [0, 1, 2, 3], 1000.0, [], False),
    ("TP4 DP2: all 8", _spec(4, 2), {}, list(range(8)), 3600.0, [], False),
    (
        "TP4 on CUDA_VISIBLE_DEVICES=4,5,6,7",
        _spec(4, env={"CUDA_VISIBLE_DEVICES": "4,5,6,7"}),
        {},
        [4, 5, 6, 7],
        2600.0,
        [],
        False,
    ),
    (
        "TP2 on GPUs named by UUID prefix",
        _spec(2, env={"CUDA_VISIBLE_DEVICES": "GPU-6a6b,GPU-1a1b"}),
        {},
        [6, 1],
        900.0,
        [],
        False,
    ),
    (
        "the server's own workers on its GPUs: not shared",
        _spec(4),
        {0: [1001, 1002], 3: [1003]},
        [0, 1, 2, 3],
        1000.0,
        [],
        False,
    ),
    (
        "another program on GPU 2 and one on GPU 6 (not metered): shared with the first only",
        _spec(4),
        {2: [7777], 6: [8888]},
        [0, 1, 2, 3],
        1000.0,
        [7777],
        False,
    ),
    ("a pid of another container: shared", _spec(4), {1: [95_000]}, [0, 1, 2, 3], 1000.0, [95_000], False),
    ("DP4 over 2 nodes: the head's 2 GPUs, head only", _spec(1, 4, followers=1), {}, [0, 1], 300.0, [], True),
]


@pytest.mark.parametrize(
    ("spec", "processes", "indices", "joules", "shared", "head_only"),
    [r[1:] for r in ROWS],
    ids=[r[0] for r in ROWS],
)
def test_the_candidates_gpus_only(  # noqa: PLR0917  (one parameter per column of the table)
    spec: LaunchSpec,
    processes: dict[int, list[int]],
    indices: list[int],
    joules: float,
    shared: list[int],
    head_only: bool,
) -> None:
    fake, clock = FakeHost(processes=processes), Clock()
    meter = NvmlEnergy(
        NvmlProbe(nvml_module=fake),
        clock=clock,
        interval_s=None,
        spec=spec,
        environ={},
        owned=lambda: {SERVER_GROUP},
        group_of=_group_of,
    )
    window = meter.open()
    fake.ended, clock.now = True, clock.now + 1.0
    energy = window.close()
    assert energy.method == "nvml_counter" and energy.joules == pytest.approx(joules)
    assert energy.gpus == len(indices)
    metering = energy.metering
    assert metering is not None
    assert metering.indices == indices and metering.uuids == [UUIDS[i] for i in indices]
    assert metering.host_gpus == 8 and metering.idle_watts_per_gpu == [70.0] * len(indices)
    assert metering.shared_with == shared and metering.shared == bool(shared)
    assert metering.head_only == head_only
    text = metering.describe()
    assert f"{len(indices)} of 8 GPUs" in text and ("SHARED" in text) == bool(shared)
    assert ("HEAD NODE ONLY" in text) == head_only


# (id, spec, environ, why it is not measured)
REFUSED = [
    ("a MIG instance", _spec(1, env={"CUDA_VISIBLE_DEVICES": "MIG-0a0b"}), {}, "MIG instance"),
    ("a UUID NVML does not list", _spec(1, env={"CUDA_VISIBLE_DEVICES": "GPU-ffff"}), {}, "matches no GPU"),
    ("an index past the host's", _spec(1, env={"CUDA_VISIBLE_DEVICES": "9"}), {}, "NVML sees 8 GPU(s)"),
    ("fewer devices than ranks", _spec(4, env={"CUDA_VISIBLE_DEVICES": "0,1"}), {}, "lists 2 device(s)"),
    ("more ranks than GPUs", _spec(4, 4), {}, "need 16 GPUs; NVML sees 8"),
]


@pytest.mark.parametrize(("spec", "environ", "why"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_devices_that_cannot_be_mapped_are_not_measured(
    spec: LaunchSpec, environ: dict[str, str], why: str
) -> None:
    meter = NvmlEnergy(NvmlProbe(nvml_module=FakeHost()), interval_s=None, spec=spec, environ=environ)
    energy = meter.open().close()
    assert not energy.measured and energy.joules is None
    assert "the candidate's GPUs cannot be told apart" in (energy.reason or "") and why in (
        energy.reason or ""
    )


def test_no_driver_is_a_clear_not_measured_record() -> None:
    meter = NvmlEnergy(NvmlProbe(nvml_module=FakeHost(driver=False)), interval_s=None, spec=_spec(4))
    energy = meter.open().close()
    assert not energy.measured and (energy.reason or "").startswith("not measured: no NVIDIA driver")


@pytest.mark.parametrize(
    ("argv", "config_yaml", "environ", "passthrough", "ranks", "visible"),
    [
        (["--tensor-parallel-size", "4"], "", {}, (), 4, None),
        (["-tp", "2", "-dp", "2"], "", {}, (), 4, None),
        ([], "tensor-parallel-size: 4\ndata-parallel-size: 2\n", {}, (), 8, None),
        (["--tensor-parallel-size=8", "--nnodes", "2"], "", {}, (), 4, None),  # TP spans 2 nodes
        (["-tp", "4", "--pipeline-parallel-size", "2"], "", {}, (), 8, None),  # PP within the node
        (
            ["-tp", "8", "--pipeline_parallel_size", "2", "--nnodes", "2"],
            "",
            {},
            (),
            8,
            None,
        ),  # a stage a node
        ([], "tensor_parallel_size: 2\npipeline_parallel_size: 2\n", {}, (), 4, None),
        (["--tensor-parallel-size", "2"], "", {"CUDA_VISIBLE_DEVICES": "2,3"}, ("CUDA_*",), 2, ("2", "3")),
        (["--tensor-parallel-size", "2"], "", {"CUDA_VISIBLE_DEVICES": "2,3"}, (), 2, None),  # not passed on
    ],
)
def test_device_request_reads_the_spec(  # noqa: PLR0917  (one parameter per column of the table)
    argv: list[str],
    config_yaml: str,
    environ: dict[str, str],
    passthrough: tuple[str, ...],
    ranks: int,
    visible: tuple[str, ...] | None,
) -> None:
    assert head_ranks(argv, config_yaml) == ranks
    spec = replace(
        _spec(1), argv=("vllm", "serve", "m", *argv), config_yaml=config_yaml, env_passthrough=passthrough
    )
    assert device_request(spec, environ).visible == visible


@pytest.mark.parametrize(
    ("shared", "nodes", "cell", "recorded"),
    [
        ([], 1, "tok/J on 4 of 8 GPUs,", True),
        ([7777], 1, "tok/J on 4 of 8 GPUs, shared,", True),
        ([], 2, "tok/J on 4 of 8 GPUs, head node only,", True),
        ([], 1, "tok/J on 4 GPUs,", False),  # the simulator's record: its GPUs are the candidate's
    ],
)
def test_the_report_says_which_gpus_were_metered(
    shared: list[int], nodes: int, cell: str, recorded: bool
) -> None:
    metering = GpuMetering(
        selected_by="vLLM's default placement (the first 4 devices)",
        indices=[0, 1, 2, 3],
        uuids=UUIDS[:4],
        host_gpus=8,
        shared_with=shared,
        idle_watts_per_gpu=[70.0] * 4,
        nodes=nodes,
    )
    energy = run_energy("nvml_counter", [400.0] * 4, 1.0, output_tps=1000.0).model_copy(
        update={"metering": metering if recorded else None}
    )
    run = CandidateRun(
        candidate="tp4",
        fingerprint="f",
        backend="vllm",
        host="gpu-01",
        is_baseline=False,
        startup=StartupRecord(ok=True),
        energy={"decode_heavy/r1": energy},
        pricing=Pricing(gpus=4, gpu_hour_price=2.5),
    )
    rep = Repeat(
        summary("tp4", "decode_heavy", 1, "f"), [], "candidates/tp4/decode_heavy/r1/summary.json", ""
    )
    row = cost_row("tp4", Results("tp4", "candidates/tp4", run, {"decode_heavy": [rep]}), "decode_heavy")
    assert row is not None
    assert cell in cost_cell(row) and ("idle 70 W per GPU" in row.note) == recorded
    assert ("SHARED" in row.note) == bool(shared) and ("HEAD NODE ONLY" in row.note) == (nodes > 1)
