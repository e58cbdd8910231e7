"""The energy window of a multi-node candidate: every node's GPUs, read through each node's agent.

Pipeline position: the GPU meter of a multi-node server on a ``gpu`` host (wired by
:func:`orchestrator.servers.seams.real_seams`; a single-node one keeps :class:`launch.nvml.NvmlEnergy`).
At the window's opening, at each edge of the measured window and at its close, every node's agent
(:mod:`launch.node_agent`, run on each node of the SLURM job as an ``srun --overlap`` step by
:class:`launch.nodecheck.SlurmChecker`; outside SLURM, this machine's) reports its GPUs' NVML
total-energy counters (mJ). A node's joules are its chosen GPUs' counter deltas; the run's are the sum
over the nodes, and ``metered_nodes`` counts the nodes read. A node whose check failed, that reports no
NVIDIA driver, a GPU without the counter, or a counter that went back (a driver reload) is not read; the
run is then "not measured", and its metering names each node and why (never one node's figure presented
as the whole)::

    meter = NodesEnergy(spec, checker=lambda: job_checker(spec, os.environ, PROJECT_ROOT))
    window = meter.open()     # every node read now
    window.close()            # RunEnergy(method='nvml_counter', joules=<sum>, metering.metered_nodes=2)

On each node the GPUs are the node's share of the ranks (:func:`launch.gpu_select.node_ranks` of that
node's command), chosen as on the head (:func:`launch.gpu_select.resolve`: ``CUDA_VISIBLE_DEVICES`` by
index or UUID, else the first devices); where the entries match nothing the node's agent lists, every GPU
it reports is read, and the node's metering says so. The core (:func:`node_reading`, :func:`nodes_energy`)
is pure; the reads are the injected checker's.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from contracts.energy import Edge, EnergyWindow, Unmeasured, counter_joules, not_measured, run_energy
from contracts.errors import LaunchError
from contracts.metering import GpuMetering, NodeMetering
from contracts.results import RunEnergy
from launch.gpu_select import DeviceRequest, device_request, node_ranks, resolve
from launch.node_agent import AgentGpu
from launch.nodecheck import NodeChecker, NodeResult, checker_for
from launch.nodes import NodeLauncher, SlurmNodes, node_launcher
from launch.spec import LaunchSpec

Clock = Callable[[], float]
NO_DRIVER = "no NVIDIA driver"


@dataclass(frozen=True)
class Snapshot:
    """Every node's report at one reading, and when (the middle of the reads: they run one node after
    another, each an ``srun`` step)."""

    results: tuple[NodeResult, ...]
    t: float


def node_requests(spec: LaunchSpec, environ: Mapping[str, str]) -> list[DeviceRequest]:
    """Each node's devices: the spec's device request with that node's share of the ranks (pure)."""
    base = device_request(spec, environ)
    out = []
    for k in range(spec.nodes):
        count = node_ranks(spec.node_argv(k), spec.config_yaml)
        default = f"vLLM's default placement (the first {count} devices)"
        out.append(replace(base, count=count, selected_by=base.selected_by if base.visible else default))
    return out


def choose(gpus: Sequence[AgentGpu], request: DeviceRequest) -> tuple[list[AgentGpu], str]:
    """The node's GPUs of ``request`` among those its agent reports (matched by index or UUID), and how
    they were chosen; every GPU reported where they cannot be told apart there (pure)."""
    uuids = [g.uuid or f"index-{g.index}" for g in gpus]
    chosen = resolve(request, uuids)
    if isinstance(chosen, str):
        return list(gpus), f"every GPU its agent reports (its share cannot be told apart there: {chosen})"
    return [gpus[i] for i in chosen], request.selected_by


def _problem(result: NodeResult) -> str:
    """Why a node's reading has no GPU counters ("" where it has them)."""
    if result.error:
        return f"its check failed: {result.error}"
    if result.report is None:
        return result.note or "no report"
    if result.report.gpus is None:
        return result.report.gpu_note or NO_DRIVER
    return ""


def node_reading(
    start: NodeResult, end: NodeResult, request: DeviceRequest, duration_s: float
) -> tuple[NodeMetering, list[float]]:
    """One node over the window: its metering and its GPUs' joules (empty where it was not read; pure)."""
    blank = NodeMetering(node=start.node, name=start.name)
    for result in (start, end):
        if problem := _problem(result):
            return blank.model_copy(update={"problem": problem}), []
    assert start.report is not None and start.report.gpus is not None  # _problem said so
    assert end.report is not None and end.report.gpus is not None
    mine, selected_by = choose(start.report.gpus, request)
    seen = blank.model_copy(
        update={
            "selected_by": selected_by,
            "indices": [g.index for g in mine],
            "uuids": [g.uuid for g in mine],
            "host_gpus": len(start.report.gpus),
        }
    )
    joules = gpu_joules(mine, {g.index: g for g in end.report.gpus}, duration_s)
    if isinstance(joules, str):
        return seen.model_copy(update={"problem": joules}), []
    return seen.model_copy(update={"joules": sum(joules)}), joules


def gpu_joules(
    first: Sequence[AgentGpu], last: Mapping[int, AgentGpu], duration_s: float
) -> list[float] | str:
    """Each GPU's joules between its two counter readings, or why one cannot be energy (pure)."""
    out: list[float] = []
    for gpu in first:
        end = last.get(gpu.index)
        if end is None:
            return f"GPU {gpu.index} is missing from its report at the window's end"
        if gpu.energy_mj is None or end.energy_mj is None:
            return f"GPU {gpu.index} has no energy counter (NVML: not supported)"
        got = counter_joules(gpu.energy_mj, end.energy_mj, duration_s=duration_s)
        if got is None:
            return (
                f"GPU {gpu.index}'s energy counter went from {gpu.energy_mj} to {end.energy_mj} mJ in "
                f"{duration_s:.1f} s: a reset (driver reload) or an implausible step, not energy"
            )
        out.append(got)
    return out


def _pairs(start: Snapshot, end: Snapshot, nodes: int) -> list[tuple[NodeResult, NodeResult]]:
    """The nodes' start and end results, matched by node; a node absent from either is named as such."""
    if len(start.results) == 1 and start.results[0].node is None:  # this machine holds every node
        return [(start.results[0], end.results[0] if end.results else start.results[0])]
    by_node = {r.node: r for r in end.results if r.node is not None}
    first = {r.node: r for r in start.results if r.node is not None}
    pairs = []
    for k in range(nodes):
        a = first.get(k) or NodeResult(k, f"node{k}", note="the job lists no such node (no report)")
        b = by_node.get(k) or NodeResult(k, a.name, note="no report at the window's end")
        pairs.append((a, b))
    return pairs


def nodes_energy(start: Snapshot, end: Snapshot, requests: Sequence[DeviceRequest], nodes: int) -> RunEnergy:
    """The run's energy over every node (pure): the sum of each node's counter deltas when every node was
    read; otherwise "not measured", its metering naming the nodes not read and why."""
    duration = end.t - start.t
    pairs = _pairs(start, end, nodes)
    every = len(pairs) == 1 and pairs[0][0].node is None and nodes > 1
    per_node: list[NodeMetering] = []
    per_gpu: list[float] = []
    for i, (a, b) in enumerate(pairs):
        request = requests[i] if not every else replace(requests[0], count=sum(r.count for r in requests))
        node, joules = node_reading(a, b, request, duration)
        per_node.append(node)
        per_gpu.extend(joules)
    read = [n for n in per_node if n.read]
    metered = nodes if every and read else len(read)
    metering = GpuMetering(
        selected_by="each node's agent (launch.node_agent): "
        + "; ".join(f"{n.label}: {n.selected_by}" for n in read),
        indices=[i for n in read for i in n.indices],
        uuids=[u for n in read for u in n.uuids],
        host_gpus=sum(n.host_gpus for n in read),
        nodes=nodes,
        metered_nodes=metered,
        per_node=per_node,
    )
    if len(read) == len(per_node):
        energy = run_energy("nvml_counter", per_gpu, duration, output_tps=None)
        return energy.model_copy(update={"metering": metering})
    if not read and all(NO_DRIVER in n.problem for n in per_node):
        where = "; ".join(f"{n.label}: {n.problem}" for n in per_node)
        return not_measured(f"not measured: {NO_DRIVER} on any node ({where})")
    missing = "; ".join(f"{n.label}: {n.problem}" for n in per_node if not n.read)
    reason = (
        f"not measured: {metered} of {nodes} nodes read, the others' GPUs would be missing from the "
        f"figure ({missing})"
    )
    return not_measured(reason, gpus=len(metering.indices)).model_copy(update={"metering": metering})


class _NodesWindow:
    """A run read on every node at its opening and close (narrowed by the measured window's edges)."""

    def __init__(self, meter: NodesEnergy, start: Snapshot) -> None:
        self._meter, self._start = meter, start
        self._end: Snapshot | None = None

    def edge(self, which: Edge) -> None:
        if which == "start":
            self._start, self._end = self._meter.snapshot(), None
        elif self._end is None:
            self._end = self._meter.snapshot()

    def close(self) -> RunEnergy:
        end = self._end if self._end is not None else self._meter.snapshot()
        return self._meter.energy(self._start, end)


class NodesEnergy:
    """Energy windows over a multi-node candidate's GPUs on every node (an
    :class:`~contracts.energy.EnergyMeter`; never raises). ``checker`` gives the per-node check of the
    candidate's nodes (:func:`job_checker`); ``environ`` is gauntlet's environment (a
    ``CUDA_VISIBLE_DEVICES`` passed through to the server)."""

    def __init__(
        self,
        spec: LaunchSpec,
        checker: Callable[[], NodeChecker],
        *,
        clock: Clock = time.monotonic,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._spec, self._factory, self._clock = spec, checker, clock
        self._requests = node_requests(spec, os.environ if environ is None else environ)
        self._checker: NodeChecker | None = None

    def snapshot(self) -> Snapshot:
        """Every node's report now (a failed check is that node's error, never raised)."""
        t0 = self._clock()
        if self._checker is None:
            return Snapshot((), t0)
        try:
            results = tuple(self._checker.check(self._spec.port, []))
        except (OSError, subprocess.SubprocessError) as exc:
            results = (NodeResult(None, "every node", error=f"{type(exc).__name__}: {exc}"),)
        return Snapshot(results, (t0 + self._clock()) / 2)

    def energy(self, start: Snapshot, end: Snapshot) -> RunEnergy:
        return nodes_energy(start, end, self._requests, self._spec.nodes)

    def open(self) -> EnergyWindow:
        try:
            self._checker = self._factory()
        except (LaunchError, OSError, subprocess.SubprocessError) as exc:
            return Unmeasured(f"not measured: the candidate's nodes cannot be found ({exc})")
        return _NodesWindow(self, self.snapshot())


def job_checker(
    spec: LaunchSpec,
    environ: Mapping[str, str],
    project_root: Path,
    launcher: Callable[[str, Mapping[str, str]], NodeLauncher] = node_launcher,
) -> NodeChecker:
    """The per-node check of ``spec``'s nodes as the supervisor starts them (``launcher``:
    :func:`launch.nodes.node_launcher`): the SLURM job's first ``spec.nodes`` nodes, each checked by an
    agent step there; outside SLURM, this machine. Raises :class:`~contracts.errors.LaunchError` where
    there are none (a GPU host outside SLURM)."""
    nodes = launcher(spec.host_kind, environ)
    job = nodes.job_id if isinstance(nodes, SlurmNodes) else ""
    names = nodes.names(spec.nodes)
    return checker_for([(k, name, job) for k, name in enumerate(names)], project_root, only_named=True)
