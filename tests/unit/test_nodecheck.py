"""The per-node check (launch/node_agent.py, launch/nodecheck.py): the agent's report from a process table,
its parsing, the teardown decision across nodes (one node erroring), the SLURM checker with a fake
``srun``/``squeue``, and a multi-node teardown that goes on past one node's error."""

from __future__ import annotations

import io
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from contracts.errors import TeardownError
from launch.node_agent import (
    TAG_ENV,
    AgentGpu,
    AgentPort,
    AgentProcess,
    NodeReport,
    Seen,
    check,
    main,
    node_report,
    parse_report,
)
from launch.nodecheck import LocalChecker, NodeResult, NodesTeardown, SlurmChecker, decide
from launch.nodes import LocalNodes, step_name
from tests.unit.test_supervisor import FakeSystem, Scenario, make, make_spec

pytestmark = pytest.mark.unit


def seen(pid: int, port: str | None = "8000", state: str = "sleeping", **env: str) -> Seen:
    environ = {**({TAG_ENV: port} if port is not None else {}), **env}
    return Seen(pid, 1, pid, 100.0 + pid, state, ("python", "-m", "vllm", "--headless"), environ)


def proc(pid: int, step: str = "") -> AgentProcess:
    return AgentProcess(pid=pid, pgid=pid, create_time=100.0 + pid, state="sleeping",
                        cmdline="python -m vllm --headless", slurm_step=step)  # fmt: skip


def report(name: str = "n2", procs: Sequence[AgentProcess] = (), ports: Mapping[int, list[int]] | None = None,
           gpus: list[AgentGpu] | None = None, killed: Sequence[int] = ()) -> NodeReport:  # fmt: skip
    held = [AgentPort(port=p, pids=pids) for p, pids in (ports or {}).items()]
    note = "" if gpus is not None else "no NVIDIA driver (test)"
    return NodeReport(
        node=name, processes=list(procs), ports=held, gpus=gpus, gpu_note=note, killed=list(killed)
    )


# ------------------------------------------------------------------------------------------------ the agent


@pytest.mark.parametrize(
    ("table", "ports", "exclude", "pids", "held"),
    [
        ([seen(10), seen(11, port="9000"), seen(12, port=None)], {}, set(), [10], []),  # only port 8000's tag
        ([seen(10), seen(11)], {}, {11}, [10], []),  # the agent and its ancestors are never reported
        (
            [seen(10, state="zombie"), seen(11, state="stopped")],
            {},
            set(),
            [11],
            [],
        ),  # a zombie holds nothing
        ([seen(10)], {8000: [10], 29550: []}, set(), [10], [8000]),  # a free port is not listed
        ([], {8000: [0]}, set(), [], [8000]),  # held by a process the agent cannot see
        ([seen(11, GAUNTLET_SERVER_NODE="n1")], {8000: [11]}, set(), [], []),  # n1's port, seen from n2
        (
            [seen(10, GAUNTLET_SERVER_NODE="n2"), seen(11, GAUNTLET_SERVER_NODE="n1")],
            {},
            set(),
            [10],
            [],
        ),  # n1's: not here
    ],
)
def test_the_agent_reports_the_servers_processes_by_its_tag_and_the_ports_held(
    table: list[Seen], ports: dict[int, list[int]], exclude: set[int], pids: list[int], held: list[int]
) -> None:
    got = node_report("n2", table, ports, None, "no NVIDIA driver (x)", port=8000, exclude=exclude, node="n2")
    assert [p.pid for p in got.processes] == pids
    assert [p.port for p in got.ports] == held
    assert got.gpus is None and got.gpu_note == "no NVIDIA driver (x)"


def test_a_process_in_a_slurm_step_carries_its_step() -> None:
    got = node_report(
        "n2", [seen(10, SLURM_JOB_ID="42", SLURM_STEP_ID="1")], {}, [], "", port=8000, exclude=set()
    )
    assert got.processes[0].slurm_step == "42.1" and got.gpus == [] and got.gpu_note == ""


@dataclass
class FakeHost:
    table: list[Seen]
    listening: dict[int, list[int]] = field(default_factory=dict)
    killed: list[int] = field(default_factory=list)
    gpu: list[AgentGpu] | None = None

    def name(self) -> str:
        return "n2"

    def processes(self) -> list[Seen]:
        return [p for p in self.table if p.pid not in self.killed]

    def listeners(self, ports: Sequence[int]) -> dict[int, list[int]]:
        return {p: self.listening.get(p, []) for p in ports}

    def gpus(self) -> tuple[list[AgentGpu] | None, str]:
        return self.gpu, "" if self.gpu is not None else "no NVIDIA driver (NVML Shared Library Not Found)"

    def kill(self, pid: int) -> bool:
        self.killed.append(pid)
        return True

    def own_lineage(self) -> set[int]:
        return {99}


@pytest.mark.parametrize(("kill", "left", "killed"), [(False, [10, 11], []), (True, [], [10, 11])])
def test_the_agents_command_prints_one_json_report_and_kills_on_request(
    kill: bool, left: list[int], killed: list[int]
) -> None:
    host = FakeHost([seen(10), seen(11), seen(99)])
    out = io.StringIO()
    assert (
        main(["--port", "8000", "--rpc-port", "29550", *(["--kill"] if kill else [])], host=host, out=out)
        == 0
    )
    got = parse_report(out.getvalue(), node="n2")
    assert [p.pid for p in got.processes] == left and got.killed == killed
    assert got.gpus is None and got.gpu_note.startswith("no NVIDIA driver")


@pytest.mark.parametrize(("node", "pids"), [("", [10, 11]), ("n2", [10])])
def test_a_check_for_no_node_in_particular_reports_every_nodes_process(node: str, pids: list[int]) -> None:
    """Outside SLURM every node is this machine (LocalChecker asks for no node): each node's counts."""
    table = [seen(10, GAUNTLET_SERVER_NODE="n2"), seen(11, GAUNTLET_SERVER_NODE="localhost")]
    assert [p.pid for p in check(FakeHost(table), port=8000, node=node).processes] == pids
    if not node:
        (result,) = LocalChecker(FakeHost(table)).check(8000, [])
        assert result.report is not None and [p.pid for p in result.report.processes] == pids


def test_energy_counters_come_with_the_gpus() -> None:
    gpus = [AgentGpu(index=0, used_gib=1.5, total_gib=80.0, energy_mj=123_456), AgentGpu(
        index=1, used_gib=0.5, total_gib=80.0, energy_mj=None)]  # fmt: skip
    got = check(FakeHost([], gpu=gpus), port=8000)
    assert got.gpus == gpus and got.gpu_note == ""


@pytest.mark.parametrize(
    ("stdout", "message"),
    [
        ("", "node n2's check printed no report: the report: Invalid JSON"),
        ("srun: error: n2: task 0: Killed\n", "stdout: srun: error: n2: task 0: Killed"),
        ('{"node": "n2"}', "processes: Field required"),
        ('{"node": "n2", "processes": [], "ports": [], "gpus": null, "extra": 1}', "extra: Extra inputs"),
    ],
)
def test_a_report_that_is_not_one_is_refused_naming_the_node_and_quoting_it(
    stdout: str, message: str
) -> None:
    with pytest.raises(TeardownError, match="node n2's check printed no report") as caught:
        parse_report(stdout, node="n2")
    assert message in caught.value.message


def test_a_report_after_other_output_is_read_from_its_last_line() -> None:
    text = "a warning from the interpreter\n" + report().model_dump_json() + "\n"
    assert parse_report(text, node="n2") == report()


# ---------------------------------------------------------------------------------------------- the decision

GPU = [AgentGpu(index=0, used_gib=0.4, total_gib=80.0, energy_mj=1)]
GPU_HELD = [AgentGpu(index=0, used_gib=30.4, total_gib=80.0, energy_mj=2)]


@pytest.mark.parametrize(
    ("results", "steps", "steps_error", "done", "left"),
    [
        ([NodeResult(0, "n1", report("n1")), NodeResult(1, "n2", report())], [], "", True, []),
        (  # one node errors: the other's leftovers are still named, and the error is named as its own
            [NodeResult(0, "n1", error="srun exited 1: Unable to contact slurm controller"),
             NodeResult(1, "n2", report(procs=[proc(4242, "42.1")]))],
            [], "", False,
            ["node 0 (n1): not checked: srun exited 1: Unable to contact slurm controller",
             "node 1 (n2): pid 4242 (python -m vllm --headless, step 42.1, sleeping) still runs"],
        ),
        (
            [NodeResult(1, "n2", report(ports={29550: [4242, 0]}))], [], "", False,
            ["node 1 (n2): port 29550 still taken by pid 4242, a process the agent cannot see"],
        ),
        (
            [NodeResult(1, "n2", report(gpus=GPU_HELD))], [], "", False,
            ["node 1 (n2): GPU 0 holds 30.40 GiB, 0.40 GiB before the launch (its memory is not back)"],
        ),
        ([NodeResult(1, "n2", report(gpus=GPU))], [], "", True, []),
        ([NodeResult(1, "n2", report())], ["42.1 gauntlet-node1-8000"], "", False,
         ["SLURM: step 42.1 gauntlet-node1-8000 still listed by squeue"]),
        ([NodeResult(1, "n2", report())], [], "squeue: exit 1", False,
         ["SLURM: the step list could not be read (squeue: exit 1)"]),
        ([NodeResult(None, "n2", note="job 42 ended: SLURM ended its steps there")], [], "", True, []),
    ],
)  # fmt: skip
def test_teardown_is_done_only_when_every_node_is_clean_and_no_step_is_listed(
    results: list[NodeResult], steps: list[str], steps_error: str, done: bool, left: list[str]
) -> None:
    verdict = decide(results, steps, steps_error=steps_error, gpus_before={"n2": GPU})
    assert (verdict.done, verdict.left) == (done, left)


def test_what_the_agent_killed_and_a_job_that_ended_are_noted() -> None:
    verdict = decide(
        [NodeResult(1, "n2", report(killed=[4242, 4243])), NodeResult(None, "n3", note="job 42 ended")], []
    )
    assert verdict.done
    assert verdict.notes == [
        "node 1 (n2): SIGKILL to pid(s) 4242, 4243 (left behind)",
        "node n3: job 42 ended",
    ]


@dataclass
class ScriptedChecker:
    """Each look's results in turn (the last repeats); records whether each look asked to kill."""

    looks: list[list[NodeResult]]
    kills: list[bool] = field(default_factory=list)

    def check(self, port: int, other_ports: Sequence[int], *, kill: bool = False) -> list[NodeResult]:
        self.kills.append(kill)
        return self.looks[min(len(self.kills) - 1, len(self.looks) - 1)]

    def steps_left(self, port: int, nodes: int) -> list[str]:
        return []

    def cancel_steps(self, port: int, nodes: int) -> list[str]:
        return []


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def sleep(self, s: float) -> None:
        self.t += s


LEFT = [NodeResult(1, "n2", report(procs=[proc(4242)]))]
KILLED = [NodeResult(1, "n2", report(killed=[4242]))]
CLEAN = [NodeResult(1, "n2", report())]
BROKEN = [NodeResult(0, "n1", error="srun: Job 42 has expired"), NodeResult(1, "n2", report())]


@pytest.mark.parametrize(
    ("looks", "kills", "done", "left", "notes"),
    [
        ([CLEAN], [False], True, [], []),
        ([LEFT, KILLED], [False, True], True, [], ["node 1 (n2): SIGKILL to pid(s) 4242 (left behind)"]),
        ([LEFT, LEFT, CLEAN], [False, True, False], True, [], []),  # killed, then seen gone
        ([BROKEN], None, False, ["node 0 (n1): not checked: srun: Job 42 has expired"], []),
    ],
)  # fmt: skip
def test_verify_kills_what_a_node_still_holds_and_names_what_stays(
    looks: list[list[NodeResult]], kills: list[bool] | None, done: bool, left: list[str], notes: list[str]
) -> None:
    clock = Clock()
    checker = ScriptedChecker(looks)
    verdict = NodesTeardown(clock=lambda: clock.t, sleep=clock.sleep, wait_s=3.0).verify(checker, 8000, [], 2)
    assert (verdict.done, verdict.left, verdict.notes) == (done, left, notes)
    if kills is not None:
        assert checker.kills == kills
    else:  # bounded: it looked until the wait was spent, and gave up
        assert clock.t >= 3.0 and not any(checker.kills)


# ------------------------------------------------------------------------------------------------ SLURM


STEP_ERROR = "srun: error: Unable to create step for job 42: Job/step already completing"


class FakeSlurm:
    """``squeue``/``scontrol``/``srun`` answers; ``srun`` on a node in ``failing`` exits 1."""

    def __init__(self, *, state: str = "RUNNING n[1-2]", failing: str = "", listed: str = "") -> None:
        self.state, self.failing, self.listed = state, failing, listed
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str], timeout_s: float) -> tuple[int, str, str]:
        self.calls.append(list(argv))
        if argv[:2] == ["squeue", "-h"]:
            if not self.state:
                return 1, "", "slurm_load_jobs error: Invalid job id specified"
            return 0, self.state + "\n", ""
        if argv[:3] == ["scontrol", "show", "hostnames"]:
            return 0, "n1\nn2\n", ""
        if argv[:2] == ["squeue", "--steps"]:
            return 0, self.listed, ""
        if argv[0] == "scancel":
            return 0, "", ""
        node = next(a.removeprefix("--nodelist=") for a in argv if a.startswith("--nodelist="))
        if node == self.failing:
            return 1, "", STEP_ERROR
        return 0, report(node, procs=[proc(7)] if node == "n2" else []).model_dump_json() + "\n", ""


@pytest.mark.parametrize(
    ("slurm", "expected"),
    [
        (FakeSlurm(), [("n1", 0, ""), ("n2", 1, "")]),
        (FakeSlurm(failing="n1"), [("n1", None, f"srun exited 1: {STEP_ERROR}"), ("n2", 1, "")]),
        (FakeSlurm(state=""), [("n1", None, ""), ("n2", None, "")]),  # the job ended: nothing to ask
    ],
)  # fmt: skip
def test_the_slurm_checker_asks_every_node_and_one_nodes_error_stays_its_own(
    slurm: FakeSlurm, expected: list[tuple[str, int | None, str]]
) -> None:
    checker = SlurmChecker("42", {"n1": 0, "n2": 1}, Path("/srv/g"), "/usr/bin/python3", slurm)
    results = checker.check(8000, [29550])
    got = [(r.name, len(r.report.processes) if r.report else None, r.error) for r in results]
    assert got == expected
    srun = [c for c in slurm.calls if c[0] == "srun"]
    if srun:
        assert "--overlap" in srun[0] and srun[0][-4:-1] == ["launch.node_agent", "--port=8000", "--node=n1"]
        assert srun[0][-1] == "--rpc-port=29550"


def test_the_slurm_checker_lists_only_this_servers_follower_steps() -> None:
    listed = "42.0 gauntlet-node1-8000\n42.1 gauntlet-node1-9000\n42.2 gauntlet-check-8000\n"
    assert SlurmChecker("42", run=FakeSlurm(listed=listed)).steps_left(8000, 2) == [
        "42.0 gauntlet-node1-8000"
    ]


# -------------------------------------------------------------------------------------------- the supervisor


@dataclass
class BrokenSignals(FakeSystem):
    """The fake host of test_supervisor, where signalling one process group fails (a node's error)."""

    broken_pgid: int = 0

    def signal_group(self, pgid: int, sig: signal.Signals) -> bool:
        if pgid == self.broken_pgid:
            raise OSError(f"the node of group {pgid} does not answer")
        return super().signal_group(pgid, sig)


def test_an_error_on_one_node_never_stops_the_teardown_of_the_others(tmp_path: Path) -> None:
    system = BrokenSignals(Scenario(ready_after=0.0))
    checker = ScriptedChecker([[NodeResult(None, "this machine", report("here"))]])
    sup, _, _ = make(system=system, node_checker=lambda server: checker)
    argv = make_spec().argv
    spec = make_spec(followers=((*argv, "--headless", "1"), (*argv, "--headless", "2")))
    server = sup.start(spec, tmp_path / "server.log")
    first, second = server.followers
    system.broken_pgid = first.pgid
    with pytest.raises(TeardownError, match="node 1 \\(localhost\\): its teardown failed: OSError"):
        sup.teardown(server)
    assert sup.last_teardown is not None
    assert not sup.is_alive(second) and not sup.is_alive(server)  # the head and node 2 were stopped
    assert checker.kills  # and every node was checked after it


NOT_BACK = "node 1 (n2): GPU 0 holds 30.40 GiB, 0.40 GiB before the launch (its memory is not back)"


@pytest.mark.parametrize(
    ("kind", "after", "left"),
    [
        ("gpu", GPU, None),  # every node's GPU memory back: done
        ("gpu", GPU_HELD, NOT_BACK),
        ("cpu", GPU_HELD, None),  # no GPU host: nothing taken before, nothing compared
    ],
)  # fmt: skip
def test_teardown_compares_every_nodes_gpu_memory_with_its_own_before_the_launch(
    tmp_path: Path, kind: str, after: list[AgentGpu], left: str | None
) -> None:
    before = [NodeResult(1, "n2", report(gpus=GPU))]
    checker = ScriptedChecker([before, [NodeResult(1, "n2", report(gpus=after))]])
    sup, _, _ = make(Scenario(ready_after=0.0), node_checker=lambda nodes: checker, nodes=LocalNodes())
    spec = make_spec(host_kind=kind, followers=((*make_spec().argv, "--headless"),))
    server = sup.start(spec, tmp_path / "server.log")
    if left is None:
        sup.teardown(server)
        return
    with pytest.raises(TeardownError, match="left 1 thing\\(s\\) on its nodes") as caught:
        sup.teardown(server)
    assert caught.value.evidence == [left]


def test_cancel_steps_cancels_only_this_servers_followers() -> None:
    listed = f"42.0 batch\n42.3 {step_name(1, 8000)}\n42.4 {step_name(1, 9000)}\n"
    slurm = FakeSlurm(listed=listed)
    assert SlurmChecker("42", run=slurm).cancel_steps(8000, 2) == ["42.3"]
    assert ["scancel", "42.3"] in slurm.calls and ["scancel", "42.4"] not in slurm.calls
    assert LocalChecker().cancel_steps(8000, 2) == []  # outside SLURM: no step to cancel
