"""The watcher's rule for a follower alive but stopped (launch.stopped, launch.watch): seen stopped for
STOPPED_AFTER_S, the server is hung, naming the node; a shorter stop, or a follower that runs, is nothing;
a SLURM follower is looked at through its node's agent, at most every NODE_LOOK_S."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from launch.node_agent import AgentProcess
from launch.nodecheck import NodeChecker, NodeResult, SlurmChecker, checker_for
from launch.spec import LaunchSpec
from launch.stopped import NODE_LOOK_S, STOPPED_AFTER_S, StoppedLook, stopped_in
from launch.tracking import Server, Tracked, Tracker
from launch.watch import Watcher
from tests.unit.test_nodecheck import FakeSlurm, ScriptedChecker, report

pytestmark = pytest.mark.unit


def _agent(pid: int, state: str) -> AgentProcess:
    return AgentProcess(pid=pid, pgid=pid, create_time=1.0, state=state, cmdline="vllm serve --headless")


class Clock:
    t = 0.0

    def __call__(self) -> float:
        return self.t


ROWS = [
    # where, the follower's state at each 1 s check, the check (1-based) at which it is hung (None: never)
    ("local", ["sleeping"] * 6, None),
    ("local", ["stopped"] * 6, 3),  # seen at t=0, hung once seen stopped for 2 s (t=2)
    ("local", ["stopped", "stopped", "sleeping", "stopped", "stopped", "sleeping"], None),  # resumed
    ("local", ["sleeping", "tracing-stop", "tracing-stop", "tracing-stop", "sleeping", "sleeping"], 4),
    ("slurm", ["stopped"] * 12, 6),  # its agent looks at t=0 and t=5: stopped between two looks
    ("slurm", ["sleeping"] * 12, None),
]


@pytest.mark.parametrize(("where", "states", "hung_at"), ROWS)
def test_a_stopped_follower_is_hung_naming_its_node(
    tmp_path: Path, where: str, states: list[str], hung_at: int | None
) -> None:
    clock = Clock()
    spec = cast(LaunchSpec, SimpleNamespace(candidate="tp16", port=8000))
    log = tmp_path / "server.log"
    log.write_text("")
    slurm = "61" if where == "slurm" else ""
    follower = Server(spec, 200, 200, 1.0, log, 0.0, node=1, node_name="n2", slurm_job=slurm)
    head = Server(spec, 100, 100, 1.0, log, 0.0, followers=(follower,), node_name="n1")
    now = {"state": states[0]}

    def info(pid: int) -> SimpleNamespace:
        state = now["state"] if pid == 200 and not slurm else "sleeping"
        return SimpleNamespace(pid=pid, zombie=False, create_time=1.0, state=state)

    procs = SimpleNamespace(info=info, descendants=lambda pid: [], port_holders=lambda p: [])
    looks: list[float] = []

    def checker(nodes: Sequence[tuple[int, str, str]]) -> NodeChecker:
        assert list(nodes) == [(1, "n2", "61")]
        looks.append(clock.t)
        seen = [
            NodeResult(0, "n1", report("n1")),
            NodeResult(1, "n2", report("n2", [_agent(4242, now["state"])])),
        ]
        return ScriptedChecker([seen])

    tracker = Tracker(procs, clock=clock, sleep=lambda _s: None)
    for p in head.processes:
        tracker.add(p, Tracked(SimpleNamespace(pid=p.pid, poll=lambda: None), 0.0, None))
    look = StoppedLook(procs, checker, clock)
    watcher = Watcher(
        tracker, procs, lambda _s, _t: 200, clock=clock, now=lambda: datetime(2026, 12, 6, tzinfo=UTC),
        stopped=look,
    )  # fmt: skip
    found = None
    for k, state in enumerate(states, start=1):
        now["state"], clock.t = state, float(k - 1)
        events = watcher.check(head)
        if events and found is None:
            found = (k, events)
    if hung_at is None:
        assert found is None, found
        assert not watcher.is_hung(head)
    else:
        assert found is not None and found[0] == hung_at, found
        (event,) = found[1]
        pid = 4242 if slurm else 200
        assert event.kind == "hung" and (event.node, event.node_name) == (1, "n2")
        assert event.detail.startswith(f"node 1 (n2) pid {pid} is {states[hung_at - 1]} for "), event.detail
        assert (
            watcher.is_hung(head) and tracker.track(follower).watch.state == "hung"
        )  # both: SIGKILL at once
    if slurm:  # one srun per NODE_LOOK_S, not one per check
        assert looks == [t for t in (0.0, 5.0, 10.0) if t < (hung_at or len(states))], looks
        assert tracker.track(follower).watch.silent_since is not None or hung_at is None


@pytest.mark.parametrize(
    ("states", "said"),
    [([], None), ([(1, "sleeping"), (2, "running")], None),
     ([(1, "sleeping"), (2, "stopped")], "pid 2 is stopped"),
     ([(3, "tracing-stop")], "pid 3 is tracing-stop"), ([(4, "zombie")], None)],
)  # fmt: skip
def test_stopped_in(states: list[tuple[int, str]], said: str | None) -> None:
    assert stopped_in(states) == said


def test_the_bounds_hold_together() -> None:
    assert STOPPED_AFTER_S < NODE_LOOK_S < 15


@pytest.mark.parametrize(
    ("only_named", "asked"),
    [(True, ["n2"]), (False, ["n1", "n2"])],  # the watch's look: n2's agent alone; teardown's: every node's
)
def test_the_watchs_look_on_slurm_asks_the_followers_node_only(only_named: bool, asked: list[str]) -> None:
    slurm = FakeSlurm()
    checker = checker_for([(1, "n2", "42")], Path("/srv/g"), only_named=only_named)
    assert isinstance(checker, SlurmChecker)
    checker.run = slurm
    results = checker.check(8000, [])
    nodelists = [
        a.removeprefix("--nodelist=") for c in slurm.calls if c[0] == "srun" for a in c if "--nodelist=" in a
    ]
    assert nodelists == asked and [r.name for r in results] == asked
