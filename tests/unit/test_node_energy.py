"""The energy window of a multi-node candidate over every node's GPUs (issue 45, item 1): each node's NVML
counters read through its agent at the window's opening and close, the joules the sum of the nodes'
deltas, ``metered_nodes`` the nodes read; a node not read (its check failed, no driver, a counter reset)
leaves the run "not measured" and names it; a single-node candidate keeps the head's NVML meter."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from contracts.errors import LaunchError
from contracts.results import RunEnergy
from launch.gpu_select import node_ranks
from launch.node_agent import AgentGpu, NodeReport
from launch.node_energy import NodesEnergy, job_checker
from launch.nodecheck import LocalChecker, NodeChecker, NodeResult, SlurmChecker
from launch.nodes import NodeLauncher, SlurmNodes
from launch.nvml import NvmlEnergy, NvmlProbe
from launch.spec import LaunchSpec
from orchestrator.servers.seams import gpu_energy

NAMES = ["n1", "n2"]
GPUS = 8


def _spec(
    argv: Sequence[str] = ("-tp", "4", "--data-parallel-size-local", "1"),
    followers: int = 1,
    env: dict[str, str] | None = None,
) -> LaunchSpec:
    command = ("vllm", "serve", "m", *argv)
    return LaunchSpec(
        candidate="c", host="gpu-2x8", host_kind="gpu", argv=command, env=env or {}, pass_env=(),
        config_yaml="", bind_host="127.0.0.1", port=8000, served_model_name="m", max_model_len=1024,
        startup_timeout_s=60.0, shutdown_grace_s=5.0, gpu_release_timeout_s=5.0, time_scale=1.0,
        followers=tuple(command for _ in range(followers)),
    )  # fmt: skip


def _gpus(node: int, step: int, *, counter: bool = True) -> list[AgentGpu]:
    """Node ``node``'s 8 GPUs at reading ``step`` (0: start, 1: end): GPU i of node k draws
    (k + 1) x 100 + i J over the window."""
    return [
        AgentGpu(
            index=i, used_gib=10.0, total_gib=80.0, uuid=f"GPU-{node}{i}aa",
            energy_mj=(5_000_000 * (i + 1) + step * 1000 * ((node + 1) * 100 + i)) if counter else None,
        )
        for i in range(GPUS)
    ]  # fmt: skip


def ok(node: int, step: int) -> NodeResult:
    report = NodeReport(node=NAMES[node], processes=[], ports=[], gpus=_gpus(node, step))
    return NodeResult(node, NAMES[node], report=report)


def no_driver(node: int, step: int) -> NodeResult:
    note = "no NVIDIA driver (NVML Shared Library Not Found)"
    return NodeResult(node, NAMES[node], report=NodeReport(node=NAMES[node], processes=[], ports=[],
                                                           gpus=None, gpu_note=note))  # fmt: skip


def failed(node: int, step: int) -> NodeResult:
    return NodeResult(node, NAMES[node], error="srun exited 1: srun: error: Unable to create step")


def reset(node: int, step: int) -> NodeResult:
    """A driver reload between the readings: the counters start again near zero."""
    gpus = _gpus(node, 0)
    if step:
        gpus = [g.model_copy(update={"energy_mj": 1234}) for g in gpus]
    return NodeResult(
        node, NAMES[node], report=NodeReport(node=NAMES[node], processes=[], ports=[], gpus=gpus)
    )


def no_counter(node: int, step: int) -> NodeResult:
    report = NodeReport(node=NAMES[node], processes=[], ports=[], gpus=_gpus(node, step, counter=False))
    return NodeResult(node, NAMES[node], report=report)


Report = Callable[[int, int], NodeResult]


@dataclass
class FakeChecker:
    """Each node's report by reading: ``nodes[k](k, step)``; step 0 at the first read, 1 after."""

    nodes: list[Report] = field(default_factory=list)
    reads: int = 0

    def check(self, port: int, other_ports: Sequence[int], *, kill: bool = False) -> list[NodeResult]:
        step = min(self.reads, 1)
        self.reads += 1
        return [make(k, step) for k, make in enumerate(self.nodes)]

    def steps_left(self, port: int, nodes: int) -> list[str]:
        return []

    def cancel_steps(self, port: int, nodes: int) -> list[str]:
        return []


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _run(spec: LaunchSpec, checker: NodeChecker, *, environ: dict[str, str] | None = None) -> RunEnergy:
    clock = Clock()
    meter = NodesEnergy(spec, checker=lambda: checker, clock=clock, environ=environ or {})
    window = meter.open()
    clock.now += 10.0
    return window.close()


def _joules(node: int, gpus: Sequence[int]) -> float:
    return float(sum((node + 1) * 100 + i for i in gpus))


TP4 = [0, 1, 2, 3]
# (id, each node's reports, joules (None: not measured), metered nodes, words the reason or metering has)
ROWS = [
    (
        "both nodes read: the sum",
        [ok, ok],
        _joules(0, TP4) + _joules(1, TP4),
        2,
        "every node metered, 2 of 2",
    ),
    (
        "node 1's check fails: partial, named",
        [ok, failed],
        None,
        1,
        "node 1 (n2): its check failed: srun exited 1",
    ),
    ("the head's check fails", [failed, ok], None, 1, "node 0 (n1): its check failed"),
    ("no driver anywhere", [no_driver, no_driver], None, 0, "no NVIDIA driver on any node"),
    ("no driver on the follower only", [ok, no_driver], None, 1, "node 1 (n2): no NVIDIA driver"),
    ("node 1's counters reset", [ok, reset], None, 1, "a reset (driver reload)"),
    ("the counter is not supported on node 0", [no_counter, ok], None, 1, "has no energy counter"),
]


@pytest.mark.parametrize(
    ("nodes", "joules", "metered", "words"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_every_nodes_gpus_are_in_the_window(
    nodes: list[Report], joules: float | None, metered: int, words: str
) -> None:
    energy = _run(_spec(), FakeChecker(nodes))
    assert energy.joules == (pytest.approx(joules) if joules is not None else None)
    if joules is not None:
        assert (
            energy.method == "nvml_counter" and energy.gpus == 8 and energy.duration_s == pytest.approx(10.0)
        )
        assert energy.watts_per_gpu is not None and len(energy.watts_per_gpu) == 8
    else:
        assert (
            not energy.measured and energy.method is None and (energy.reason or "").startswith("not measured")
        )
    if metered == 0:  # nothing to meter anywhere: no metering record, the reason says why
        assert words in (energy.reason or "") and energy.metering is None
        return
    metering = energy.metering
    assert metering is not None and metering.nodes == 2 and metering.metered_nodes == metered
    assert words in f"{energy.reason} {metering.describe()}"
    assert [n.read for n in metering.per_node].count(True) == metered
    if joules is None:  # partial: never the read nodes' figure presented as the whole
        assert "PARTIAL: 1 of 2 nodes metered" in metering.describe() and "1 of 2 nodes" in metering.short()
        assert f"{metered} of 2 nodes read" in (energy.reason or "")


def test_the_read_nodes_joules_stay_in_a_partial_record() -> None:
    energy = _run(_spec(), FakeChecker([ok, failed]))
    assert energy.metering is not None
    head, follower = energy.metering.per_node
    assert head.joules == pytest.approx(_joules(0, TP4)) and head.indices == TP4 and follower.joules is None
    assert follower.problem.startswith("its check failed") and follower.label == "node 1 (n2)"


# (id, node 0's command, CUDA_VISIBLE_DEVICES, each node's GPUs read, how they were chosen)
SHARES = [
    ("DP over nodes, TP4 each", ("-tp", "4", "--data-parallel-size-local", "1"), None, TP4, "the first 4"),
    (
        "TP8 within a node, PP2 across nodes (extra_args' underscores)",
        ("-tp", "8", "--pipeline_parallel_size", "2", "--nnodes", "2"), None, list(range(8)), "the first 8",
    ),
    ("TP16 across two nodes", ("-tp", "16", "--nnodes", "2"), None, list(range(8)), "the first 8"),
    ("TP2 DP2 local on GPUs 4-7", ("-tp", "2", "-dpl", "2"), "4,5,6,7", [4, 5, 6, 7], "CUDA_VISIBLE"),
    (
        "the head's UUIDs: a follower's share cannot be told apart",
        ("-tp", "2", "-dpl", "1"), "GPU-02aa,GPU-03aa", [2, 3], "every GPU its agent reports",
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "visible", "indices", "how"), [r[1:] for r in SHARES], ids=[r[0] for r in SHARES]
)
def test_each_nodes_share_is_chosen_as_on_the_head(
    argv: tuple[str, ...], visible: str | None, indices: list[int], how: str
) -> None:
    env = {"CUDA_VISIBLE_DEVICES": visible} if visible else {}
    energy = _run(_spec(argv, env=env), FakeChecker([ok, ok]))
    assert energy.metering is not None
    head, follower = energy.metering.per_node
    assert head.indices == indices and head.joules == pytest.approx(_joules(0, indices))
    if visible and visible.startswith("GPU-"):  # node 1's agent lists no GPU-0x UUID
        assert follower.indices == list(range(8)) and how in follower.selected_by
    else:
        assert follower.indices == indices and how in follower.selected_by
    assert energy.joules == pytest.approx((head.joules or 0) + (follower.joules or 0))
    assert energy.metering.uuids[: len(indices)] == [f"GPU-0{i}aa" for i in indices]


def test_the_measured_window_edges_are_read_on_every_node() -> None:
    """The load runner's edges narrow the window: the counters at the edges, not at open and close."""
    checker, clock = FakeChecker([ok, ok]), Clock()
    window = NodesEnergy(_spec(), checker=lambda: checker, clock=clock, environ={}).open()
    checker.reads = 0  # the measured window starts later: its start is reading 0 again
    clock.now += 5.0
    window.edge("start")
    clock.now += 4.0
    window.edge("end")
    clock.now += 30.0  # teardown of the run after the window: not in it
    energy = window.close()
    assert energy.duration_s == pytest.approx(4.0) and checker.reads == 2
    assert energy.joules == pytest.approx(_joules(0, TP4) + _joules(1, TP4))


def test_nodes_that_cannot_be_found_are_not_measured() -> None:
    def nowhere() -> NodeChecker:
        raise LaunchError("a multi-node candidate on a GPU host runs inside a SLURM job of as many nodes")

    energy = NodesEnergy(_spec(), checker=nowhere, environ={}).open().close()
    assert not energy.measured and "the candidate's nodes cannot be found (a multi-node" in (
        energy.reason or ""
    )


@pytest.mark.parametrize(
    ("followers", "meter"),
    [(0, NvmlEnergy), (1, NodesEnergy), (3, NodesEnergy)],
    ids=["single node: NVML here, as before", "two nodes: every node", "four nodes: every node"],
)
def test_the_gpu_host_meter_by_nodes(followers: int, meter: type[object]) -> None:
    assert type(gpu_energy(_spec(followers=followers), NvmlProbe(), frozenset)) is meter


def _launcher(host_kind: str, environ: Mapping[str, str]) -> NodeLauncher:
    """launch.nodes.node_launcher without scontrol: a 3-node job in the environment, else refused."""
    if "SLURM_JOB_ID" not in environ:
        raise LaunchError("a multi-node candidate on a GPU host runs inside a SLURM job of as many nodes")
    return SlurmNodes(environ["SLURM_JOB_ID"], ("n1", "n2", "n3"), "10.0.0.1")


@pytest.mark.parametrize(
    ("environ", "names"),
    [({}, None), ({"SLURM_JOB_ID": "28"}, {"n1": 0, "n2": 1})],
    ids=["outside SLURM: refused", "inside a 3-node job: its first 2 nodes"],
)
def test_job_checker_reads_the_nodes_the_supervisor_starts(
    environ: dict[str, str], names: dict[str, int] | None
) -> None:
    if names is None:
        with pytest.raises(LaunchError, match="inside a SLURM job"):
            job_checker(_spec(), environ, Path("."), _launcher)
        return
    found = job_checker(_spec(), environ, Path("."), _launcher)
    assert isinstance(found, SlurmChecker) and found.job_id == "28" and dict(found.names) == names
    assert found.only_named


def test_one_local_report_holds_every_node() -> None:
    """Outside SLURM every node is this machine: its one report holds every node's share."""

    @dataclass
    class Local(LocalChecker):
        reads: int = 0

        def check(self, port: int, other_ports: Sequence[int], *, kill: bool = False) -> list[NodeResult]:
            step, self.reads = min(self.reads, 1), self.reads + 1
            report = NodeReport(node="vm", processes=[], ports=[], gpus=_gpus(0, step))
            return [NodeResult(None, "this machine (every node)", report=report)]

    energy = _run(_spec(), Local())
    assert energy.metering is not None and energy.metering.metered_nodes == 2
    assert energy.metering.indices == list(range(8)) and energy.joules == pytest.approx(_joules(0, range(8)))


@pytest.mark.parametrize(
    ("argv", "ranks"),
    [
        (["-tp", "4", "--data-parallel-size-local", "2"], 8),
        (["-tp", "8", "--pipeline-parallel-size", "2", "--nnodes", "2"], 8),
        (["-tp", "8", "--pipeline_parallel_size=2", "--nnodes=2"], 8),
        (["-tp", "16", "--nnodes", "2"], 8),
        (["-tp", "2", "-pp", "2"], 4),
    ],
)
def test_node_ranks(argv: list[str], ranks: int) -> None:
    assert node_ranks(argv) == ranks
