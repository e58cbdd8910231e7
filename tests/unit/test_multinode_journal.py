"""A multi-node server in the journal (issue 35, item 3): the started line records every follower's node,
pid and start time, replay keeps them with the live server, and adopting it (rollback, stop) hands them to
the supervisor; a single-node server's line is written as before."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from launch.spec import LaunchSpec, render_spec, resolve_head
from launch.supervisor import Server
from launch.tracking import NodeProcess
from orchestrator.ledger.events import Launching
from orchestrator.ledger.journal import Journal
from orchestrator.servers.leftovers import find_unrecorded, find_unrecorded_followers
from orchestrator.servers.scheduler import job_lines
from orchestrator.servers.seams import ProcessInfo
from orchestrator.servers.session import Servers
from tests.unit.composed import load
from tests.unit.fakes import FakeLoad, FakeSupervisor, fake_seams

SPEC = LaunchSpec(
    candidate="dp_nodes", host="sim_2x8", host_kind="sim", argv=("python", "-m", "launch.sim"), env={},
    pass_env=(), config_yaml="", bind_host="127.0.0.1", port=8000, served_model_name="m", max_model_len=1,
    startup_timeout_s=1.0, shutdown_grace_s=1.0, gpu_release_timeout_s=0.0, time_scale=1.0,
    followers=(("python", "-m", "launch.sim", "--headless"),),
)  # fmt: skip


@dataclass
class NodeSupervisor(FakeSupervisor):
    """Starts a head with one follower (pid + 500) and records the followers it is asked to adopt."""

    adopted: list[list[NodeProcess]] = field(default_factory=list)

    def start(self, spec: LaunchSpec, log_path: Path) -> Server:
        head = super().start(spec, log_path)
        follower = Server(spec, head.pid + 500, head.pid + 500, 7.5, log_path.with_name("server.node1.log"),
                          started_at=0.0, node=1, node_name="n2", slurm_job="42")  # fmt: skip
        server = replace(head, followers=(follower,), node_name="n1")
        self.alive[head.pid] = server
        return server

    def adopt(
        self,
        pid: int,
        pgid: int,
        create_time: float,
        spec: LaunchSpec,
        log_path: Path,
        *,
        followers: Sequence[NodeProcess] = (),
    ) -> Server | None:
        self.adopted.append(list(followers))
        return super().adopt(pid, pgid, create_time, spec, log_path)


def _launch(tmp_path: Path, spec: LaunchSpec) -> tuple[Journal, NodeSupervisor, Servers]:
    journal = Journal(tmp_path / "journal.jsonl", clock=lambda: "T")
    sup = NodeSupervisor()
    servers = Servers(journal, fake_seams(sup, FakeLoad()))
    with servers.launch(spec, tmp_path / "spec.json", tmp_path / "server.log", role="retained") as session:
        session.keep()
    return journal, sup, servers


def test_the_started_line_records_every_follower_and_adopting_hands_them_back(tmp_path: Path) -> None:
    journal, sup, servers = _launch(tmp_path, SPEC)
    started = [json.loads(line) for line in journal.path.read_text().splitlines() if '"started"' in line]
    assert started[0]["followers"] == [
        {"node": 1, "name": "n2", "pid": 1501, "pgid": 1501, "create_time": 7.5,
         "log_path": str(tmp_path / "server.node1.log"), "slurm_job": "42"}
    ]  # fmt: skip
    (live,) = journal.replay().live.values()
    assert live.followers is not None and live.followers[0].pid == 1501
    assert servers.adopt(live, SPEC) is not None
    follower = NodeProcess(node=1, name="n2", pid=1501, pgid=1501, create_time=7.5,
                           log_path=str(tmp_path / "server.node1.log"), slurm_job="42")  # fmt: skip
    assert sup.adopted == [[follower]]
    assert sup.adopted[0][0] is live.followers[0]  # the journal's record itself: no conversion


def test_a_single_node_started_line_is_written_as_before(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.jsonl", clock=lambda: "T")
    servers = Servers(journal, fake_seams(FakeSupervisor(), FakeLoad()))
    with servers.launch(
        replace(SPEC, followers=()), tmp_path / "s.json", tmp_path / "l.log", role="candidate"
    ):
        pass
    started = [json.loads(line) for line in journal.path.read_text().splitlines() if '"started"' in line]
    assert len(started) == 1 and "followers" not in started[0]


def test_the_sweeps_job_lines_name_every_node_of_a_multi_node_job(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    (sweep / "journals").mkdir(parents=True)
    (sweep / "multirun.yaml").write_text(
        "hydra:\n  launcher:\n    _target_: hydra_plugins.gauntlet_submitit_slurm.SubmititSlurmLauncher\n"
    )
    (sweep / ".submitit" / "7_0").mkdir(parents=True)
    (sweep / ".submitit" / "7_0" / "7_0_submitted.pkl").write_bytes(b"")
    follower = {"node": 1, "name": "n2", "pid": 2, "pgid": 2, "create_time": 1.0, "log_path": "x"}
    lines = [
        {"event": "job_started", "candidate": "tp16", "job": "7_0", "node": "n1", "executor": "slurm"},
        {"event": "started", "candidate": "tp16", "job": "7_0", "node": "n1", "fingerprint": "f", "port": 1,
         "pid": 1, "pgid": 1, "create_time": 1.0, "followers": [follower]},
    ]  # fmt: skip
    (sweep / "journals" / "n1-7_0.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))

    def run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        if argv[0] == "squeue":
            return subprocess.CompletedProcess(argv, 0, "", "")
        if argv[:3] == ["scontrol", "show", "job"]:
            return subprocess.CompletedProcess(argv, 0, "JobId=7 JobState=COMPLETED NodeList=n[1-2]\n", "")
        return subprocess.CompletedProcess(argv, 1, "", "")

    (line,) = job_lines(sweep, run=run, wait_s=0.0)[1:]
    assert line.split()[:5] == ["job", "7_0", "tp16", "nodes:", "n1,n2"]


def test_an_unrecorded_multi_node_launch_is_found_with_its_followers(tmp_path: Path) -> None:
    cfg, _ = load(["host=sim_2x8", "candidate=tp4_dp2", "candidate.tensor_parallel_size=16",
                   "candidate.data_parallel_size=1"])  # fmt: skip
    spec = render_spec(cfg.service, cfg.candidate, cfg.host)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(spec.to_json())
    pending = Launching(candidate="tp4_dp2", fingerprint=spec.fingerprint, port=8000,
                        spec_file=str(spec_file), at_epoch=100.0)  # fmt: skip
    head = ("/venv/bin/python", *resolve_head(spec.argv, "10.0.0.1")[1:])
    follower = ("/venv/bin/python", *resolve_head(spec.followers[0], "10.0.0.1")[1:])
    step = ("srun", "--jobid=7", "--nodelist=n2", "--overlap", *follower)

    def proc(pid: int, cmdline: tuple[str, ...], wall: float = 101.0) -> ProcessInfo:
        return ProcessInfo(pid=pid, pgid=pid, cmdline=cmdline, create_time=float(pid), wall_start=wall)

    processes = [
        proc(11, head), proc(12, follower), proc(13, step), proc(14, head, wall=50.0),  # 14: before it
        proc(15, (*head[:-1], "29551")),  # another port: not this launch
    ]  # fmt: skip
    assert find_unrecorded(pending, processes) == [(11, 11.0)]
    assert [(n, p.pid) for n, p in find_unrecorded_followers(pending, spec, processes)] == [(1, 12), (1, 13)]


@pytest.mark.parametrize(
    ("recorded", "expected"),
    [
        ({"node": 1, "name": "n2", "pid": 7, "pgid": 7, "create_time": 1.5, "log_path": "l",
          "slurm_job": "42"},
         NodeProcess(node=1, name="n2", pid=7, pgid=7, create_time=1.5, log_path="l", slurm_job="42")),
        ({"node": 2, "name": "", "pid": 8, "pgid": 8, "create_time": 2.0, "log_path": "m"},  # on this machine
         NodeProcess(node=2, name="", pid=8, pgid=8, create_time=2.0, log_path="m")),
    ],
)  # fmt: skip
def test_the_journals_follower_is_the_supervisors_record(
    tmp_path: Path, recorded: dict[str, object], expected: NodeProcess
) -> None:
    journal = Journal(tmp_path / "journal.jsonl", clock=lambda: "T")
    line = {"event": "started", "at": "T", "candidate": "c", "role": "retained", "fingerprint": "sha256:c",
            "port": 8000, "spec_file": "", "pid": 1, "pgid": 1, "create_time": 1.0,
            "followers": [recorded]}  # fmt: skip
    journal.path.write_text(json.dumps(line) + "\n")
    (live,) = journal.replay().live.values()
    assert live.followers == [expected] and type(live.followers[0]) is NodeProcess
    sup = NodeSupervisor()
    Servers(journal, fake_seams(sup, FakeLoad())).adopt(live, SPEC)
    assert sup.adopted == [[expected]] and sup.adopted[0][0] is live.followers[0]
