"""The side effects of a sweep, injectable: the launcher, the load runner, GPU memory, the process table.

Pipeline position: the orchestrator's edge. Everything that starts processes, opens sockets or reads the
host goes through :class:`Seams`; :func:`real_seams` wires the real stages (imported lazily, so ``plan``
never loads process or network code), and tests pass fakes (``tests/unit/fakes.py``).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

import httpx

from contracts.energy import EnergyMeter, Unmeasured
from contracts.results import GpuMemory, HostProbe, ProfileSummary, TeardownRecord, WatchEvent
from contracts.schema import LoadConfig, SloConfig, WorkloadConfig
from contracts.secrets import redacted
from launch.spec import LaunchSpec

if TYPE_CHECKING:
    from launch.nodecheck import NodeChecker
    from launch.nvml import NvmlProbe
    from launch.preflight import Probes
    from launch.supervisor import Server  # a frozen record; the supervisor itself is imported lazily
    from launch.tracking import NodeProcess
    from orchestrator.ledger.journal import RemoteJob


class SupervisorLike(Protocol):
    """The launcher's surface the orchestrator uses (:class:`launch.supervisor.Supervisor`; tests fake it)."""

    def start(self, spec: LaunchSpec, log_path: Path) -> Server: ...
    def wait_ready(self, server: Server, timeout_s: float | None = None) -> float: ...
    def locate(self, server: Server) -> Server: ...
    def check(self, server: Server) -> list[WatchEvent]: ...
    def health(self, server: Server) -> int | str: ...
    def teardown(self, server: Server) -> TeardownRecord: ...
    def adopt(
        self,
        pid: int,
        pgid: int,
        create_time: float,
        spec: LaunchSpec,
        log_path: Path,
        *,
        followers: Sequence[NodeProcess] = (),
    ) -> Server | None: ...


class RunProfile(Protocol):
    """One profile's run against a server (:func:`load.runner.run_profile`): what the sweep passes it."""

    def __call__(
        self,
        base_url: str,
        served_model: str,
        workload: WorkloadConfig,
        *,
        candidate: str,
        fingerprint: str,
        repeat: int,
        out_dir: Path,
        backend: Literal["vllm", "sim"],
        host: str,
        time_scale: float = 1.0,
        scale: float = 1.0,
        slo: SloConfig | None = None,
        load_level: float | None = None,
        stop: threading.Event | None = None,
        api_key: str | None = None,
        load: LoadConfig | None = None,
        on_window: Callable[[Literal["start", "end"]], None] | None = None,
        servers: Sequence[str] = (),
    ) -> ProfileSummary: ...


class Say(Protocol):
    def __call__(self, message: str, /) -> None: ...


def say_stderr(message: str) -> None:
    """A line for the user on stderr; a URL's password in it is shown as ``***`` (contracts.secrets)."""
    print(f"gauntlet: {redacted(message)}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class ProcessInfo:
    """A process as seen by :func:`list_processes` (pid, its argv and its start time)."""

    pid: int
    pgid: int
    cmdline: tuple[str, ...]
    create_time: float  # seconds after boot (launch.process.started_since_boot): its identity
    wall_start: float  # epoch seconds: only compared with the journal's wall-clock announcement


def list_processes() -> list[ProcessInfo]:
    """Every process of this host with its argv and start time (psutil)."""
    import psutil  # noqa: PLC0415

    from launch.process import started_since_boot  # noqa: PLC0415

    out: list[ProcessInfo] = []
    for proc in psutil.process_iter(["pid", "cmdline", "create_time"]):
        try:
            cmd = tuple(proc.info["cmdline"] or ())
            pid = proc.info["pid"]
            out.append(
                ProcessInfo(pid, os.getpgid(pid), cmd, started_since_boot(proc), proc.info["create_time"])
            )
        except (psutil.Error, ProcessLookupError):
            continue
    return out


@dataclass
class Seams:
    """Side effects of a sweep, injectable for tests (real defaults from :func:`real_seams`)."""

    supervisor: SupervisorLike
    run_profile: RunProfile
    gpu_memory: Callable[[LaunchSpec], list[GpuMemory] | None]
    host_probe: Callable[[str], HostProbe]
    say: Say = say_stderr
    transport: httpx.BaseTransport | None = None  # for the restore's /v1/models and /metrics checks
    watch_interval_s: float = 1.0
    stop: threading.Event = field(default_factory=threading.Event)
    processes: Callable[[], list[ProcessInfo]] = field(default_factory=lambda: list_processes)
    #: Cancels a job of this sweep on another node (orchestrator.servers.scheduler.cancel_job); returns what
    #: it did.
    cancel_job: Callable[[RemoteJob, Path], str] = field(default_factory=lambda: _cancel_job)
    #: The pre-flight checks' probes (launch.preflight.real_probes), run when the sweep opens, before the
    #: live service is stopped; None: no pre-flight (the unit tests' fakes launch nothing real).
    doctor_probes: Callable[[], Probes] | None = None
    #: The energy meter of a launch's measured runs (launch.nvml.NvmlEnergy on a GPU host, the simulator's
    #: power model on the simulated one); by default nothing is read: "not measured".
    energy: Callable[[LaunchSpec], EnergyMeter] = field(default_factory=lambda: _no_energy)
    #: The per-node check of a recorded multi-node server's nodes, given (node, node name, SLURM job) per
    #: process (launch.nodecheck.checker_for): what ``status`` asks each node.
    node_checker: Callable[[Sequence[tuple[int, str, str]]], NodeChecker] = field(
        default_factory=lambda: _node_checker
    )
    #: Which of these SLURM jobs are still queued (pending, running, completing): rollback waits for the
    #: jobs it cancelled to leave before it restores.
    jobs_queued: Callable[[Sequence[str]], list[str]] = field(default_factory=lambda: _jobs_queued)
    #: Whether a port is taken on this machine (bound by anything): rollback waits for the old ports too.
    port_taken: Callable[[int], bool] = field(default_factory=lambda: _port_taken)


def _no_energy(spec: LaunchSpec) -> EnergyMeter:
    return Unmeasured("not measured: no energy meter")


def gpu_energy(spec: LaunchSpec, nvml: NvmlProbe, owned: Callable[[], Collection[int]]) -> EnergyMeter:
    """The meter of a launch on a GPU host: NVML here for one node; for a candidate spanning nodes, every
    node's GPUs through its per-node agent (launch.node_energy.NodesEnergy, the job's nodes as the
    supervisor starts them)."""
    if spec.nodes == 1:
        from launch.nvml import NvmlEnergy  # noqa: PLC0415  (keeps `plan` free of NVML)

        return NvmlEnergy(nvml, spec=spec, owned=owned)
    from contracts.paths import PROJECT_ROOT  # noqa: PLC0415
    from launch.node_energy import NodesEnergy, job_checker  # noqa: PLC0415

    return NodesEnergy(spec, checker=lambda: job_checker(spec, os.environ, PROJECT_ROOT))


def _node_checker(nodes: Sequence[tuple[int, str, str]]) -> NodeChecker:
    from contracts.paths import PROJECT_ROOT  # noqa: PLC0415
    from launch.nodecheck import checker_for  # noqa: PLC0415

    return checker_for(nodes, PROJECT_ROOT)


def _jobs_queued(jobs: Sequence[str]) -> list[str]:
    from orchestrator.servers.scheduler import slurm_states  # noqa: PLC0415

    return [job for job, state in slurm_states(jobs).items() if state.queued]


def _port_taken(port: int) -> bool:
    from launch.process import PsutilProcesses  # noqa: PLC0415

    return PsutilProcesses().port_in_use("0.0.0.0", port)


def _cancel_job(job: RemoteJob, sweep_dir: Path) -> str:
    from orchestrator.servers.scheduler import cancel_job  # noqa: PLC0415

    return cancel_job(job, sweep_dir)


def real_seams() -> Seams:
    """The production wiring: the real supervisor, load runner, NVML and the simulator's memory endpoint."""
    from launch.api_servers import server_urls  # noqa: PLC0415
    from launch.nvml import NvmlProbe, probe_host  # noqa: PLC0415  (keeps `plan` free of it)
    from launch.sim.client import SimEnergy, sim_gpu_memory  # noqa: PLC0415
    from launch.supervisor import Supervisor  # noqa: PLC0415
    from load.runner import run_profile  # noqa: PLC0415

    nvml = NvmlProbe()
    supervisor = Supervisor(gpu=nvml)

    def gpu_memory(spec: LaunchSpec) -> list[GpuMemory] | None:
        if spec.host_kind == "sim":
            return sim_gpu_memory(spec.base_url)
        if spec.host_kind == "gpu":
            return nvml.snapshot()
        return None

    def energy(spec: LaunchSpec) -> EnergyMeter:
        if spec.host_kind == "sim":  # with an API server per node, every node's simulated GPUs
            return SimEnergy(spec.base_url, others=server_urls(spec.base_url, spec.followers, [])[1:])
        if spec.host_kind == "gpu":
            return gpu_energy(spec, nvml, supervisor.server_groups)
        return Unmeasured(f"not measured: host.kind is {spec.host_kind} (no GPU energy to read)")

    def host_probe(kind: str) -> HostProbe:
        if kind == "sim":
            return HostProbe(
                driver=False, reason="simulated host (launch.sim): no GPU is used", simulated=True
            )
        return probe_host()

    def doctor_probes() -> Probes:
        from contracts.paths import PROJECT_ROOT  # noqa: PLC0415
        from launch.preflight import real_probes  # noqa: PLC0415

        return real_probes(PROJECT_ROOT)

    return Seams(
        supervisor=supervisor,
        run_profile=run_profile,
        gpu_memory=gpu_memory,
        host_probe=host_probe,
        doctor_probes=doctor_probes,
        energy=energy,
    )


def backend_of(spec: LaunchSpec) -> Literal["vllm", "sim"]:
    return "sim" if spec.host_kind == "sim" else "vllm"
