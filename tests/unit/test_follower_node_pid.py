"""A SLURM follower's recorded pid is its process on its node, as that node's agent reports it, not only the
local ``srun`` (issue 45, item 6): the supervisor locates it once the server is ready, the journal's
``ready`` line records it beside the srun's pid (replay keeps it with the live server, adopt hands it
back), the watcher's ``died`` names it, and ``status`` prints it. The srun stays the follower's ``pid``:
the handle teardown signals."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from launch.nodecheck import NodeChecker, NodeResult
from launch.spec import LaunchSpec
from launch.supervisor import Server, Supervisor
from launch.tracking import Tracked, Tracker
from launch.watch import Watcher
from orchestrator.ledger.journal import Journal
from orchestrator.recovery.node_status import where_it_runs
from orchestrator.servers.session import Servers
from tests.unit.fakes import FakeLoad, fake_seams
from tests.unit.test_multinode_journal import SPEC, NodeSupervisor
from tests.unit.test_nodecheck import ScriptedChecker, proc, report

pytestmark = pytest.mark.unit

SEEN = [
    NodeResult(0, "n1", report("n1", procs=[proc(200, "42.batch")])),
    NodeResult(1, "n2", report("n2", procs=[proc(4250, "42.0"), proc(4242, "42.0")])),  # 4242 started first
]
FAILED = [SEEN[0], NodeResult(1, "n2", error="srun exited 1: Unable to contact slurm controller")]
EMPTY = [SEEN[0], NodeResult(1, "n2", report("n2"))]


@dataclass
class LocatingSupervisor(NodeSupervisor):
    """The fake head + SLURM follower (srun pid 1501 on n1), located by the real supervisor's rule."""

    results: list[NodeResult] = field(default_factory=list)
    slurm: bool = True
    asked: list[Sequence[tuple[int, str, str]]] = field(default_factory=list)
    real: Supervisor | None = None

    def start(self, spec: LaunchSpec, log_path: Path) -> Server:
        server = super().start(spec, log_path)
        if not self.slurm:  # a follower on this machine: its pid is the process
            server = replace(server, followers=tuple(replace(f, slurm_job="") for f in server.followers))
            self.alive[server.pid] = server
        return server

    def locate(self, server: Server) -> Server:
        def checker(nodes: Sequence[tuple[int, str, str]]) -> NodeChecker:
            self.asked.append(nodes)
            return ScriptedChecker([self.results])

        self.real = Supervisor(node_checker=checker)
        return self.real.locate(server)


ROWS = [
    # where the follower runs, what the nodes' agents report, the node pid recorded, a note said
    ("slurm", SEEN, 4242, ""),
    ("slurm", FAILED, None, "node 1 (n2): its process not located: srun exited 1: Unable to contact"),
    ("slurm", EMPTY, None, ""),
    ("local", SEEN, None, ""),
]


@pytest.mark.parametrize(("where", "results", "node_pid", "note"), ROWS)
def test_the_followers_node_pid_is_recorded_beside_its_srun(
    tmp_path: Path, where: str, results: list[NodeResult], node_pid: int | None, note: str
) -> None:
    journal = Journal(tmp_path / "journal.jsonl", clock=lambda: "T")
    sup = LocatingSupervisor(results=results, slurm=where == "slurm")
    seams = fake_seams(sup, FakeLoad())
    servers = Servers(journal, seams)
    with servers.launch(SPEC, tmp_path / "spec.json", tmp_path / "server.log", role="retained") as session:
        session.keep()
    (follower,) = session.running.followers
    assert (follower.pid, follower.node_pid) == (1501, node_pid)  # the srun stays the handle
    (live,) = journal.replay().live.values()
    assert live.followers is not None
    assert (live.followers[0].pid, live.followers[0].node_pid) == (1501, node_pid)
    assert sup.asked == ([[(0, "n1", ""), (1, "n2", "42")]] if where == "slurm" else [])
    said = sup.real.notes if sup.real is not None else []
    assert [n for n in said if n.startswith(note)] if note else not said
    # adopting it (rollback, stop) hands the node's pid back with the record
    assert servers.adopt(live, SPEC) is not None and sup.adopted[-1][0].node_pid == node_pid
    # status prints it beside the srun's
    lines = where_it_runs(live, replace(seams, node_checker=lambda nodes: ScriptedChecker([results])))
    recorded = [line for line in lines if "recorded" in line]
    if node_pid is None:
        assert recorded == []
    else:
        assert recorded == [
            f"    node 1 (n2): the follower was recorded as pid {node_pid} (its srun: pid 1501)"
        ]
    # and the watcher's death of the follower names it
    detail = _died(follower, tmp_path)
    pid = f"pid {node_pid} (srun pid 1501)" if node_pid is not None else "pid 1501"
    assert detail.startswith(f"node 1 (n2) {pid} exited with code 137"), detail


class _Child:
    pid = 0

    def __init__(self, code: int | None) -> None:
        self.code = code

    def poll(self) -> int | None:
        return self.code


def _died(follower: Server, tmp_path: Path) -> str:
    spec = cast(LaunchSpec, SimpleNamespace(candidate="dp_nodes", port=8000))
    log = tmp_path / "server.log"
    log.write_text("")
    follower = replace(follower, spec=spec, log_path=log)
    head = Server(spec, 100, 100, 1.0, log, 0.0, followers=(follower,), node_name="n1")
    alive = SimpleNamespace(zombie=False, create_time=1.0, state="sleeping")
    procs = SimpleNamespace(
        info=lambda pid: None if pid == follower.pid else alive, port_holders=lambda p: []
    )
    tracker = Tracker(procs, clock=lambda: 0.0, sleep=lambda _s: None)
    tracker.add(head, Tracked(_Child(None), 0.0, None))
    tracker.add(follower, Tracked(_Child(137), 0.0, None))
    watcher = Watcher(
        tracker,
        procs,
        lambda _s, _t: 200,
        clock=lambda: 0.0,
        now=lambda: datetime(2026, 12, 6, tzinfo=UTC),
    )
    (event,) = watcher.check(head)
    assert event.kind == "died" and (event.node, event.node_name, event.exit_code) == (1, "n2", 137)
    return event.detail
