"""``status`` on every node (orchestrator/recovery/node_status.py): a job's multi-node server is checked on
its nodes through the per-node check (a fake one here), and what runs is said per node, where ``status``
said "(not checked from here)" before (issue 45, items 1 and 6)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from launch.nodecheck import NodeChecker, NodeResult
from launch.tracking import NodeProcess
from orchestrator.ledger.events import JobStarted, Started
from orchestrator.ledger.journal import Journal
from orchestrator.ledger.nodes import Place
from orchestrator.recovery.status import status
from tests.unit.fakes import FakeLoad, FakeSupervisor, fake_seams
from tests.unit.test_nodecheck import ScriptedChecker, proc, report

pytestmark = pytest.mark.unit

FOLLOWER = NodeProcess(node=1, name="n2", pid=300, pgid=300, create_time=2.0, log_path="l", slurm_job="61")
HEAD = [NodeResult(None, "n1", report("n1", procs=[proc(200, "61.batch")]))]
TWO = [*HEAD, NodeResult(1, "n2", report(procs=[proc(4242, "61.0")], ports={29550: [4242]}))]
ENDED = [NodeResult(1, "n2", note="job 61 ended: SLURM ended its steps there")]
BROKEN = [*HEAD, NodeResult(1, "n2", error="srun exited 1: Unable to contact slurm controller")]


@pytest.mark.parametrize(
    ("results", "lines"),
    [
        (TWO, ["    node n1: pid 200 (python -m vllm --headless, step 61.batch, sleeping) runs",
               "    node 1 (n2): pid 4242 (python -m vllm --headless, step 61.0, sleeping) runs",
               "    node 1 (n2): port 29550 still taken by pid 4242"]),
        (ENDED, ["    every node checked: nothing of tp16 runs, no step listed",
                 "    node 1 (n2): job 61 ended: SLURM ended its steps there"]),
        (BROKEN, ["    node n1: pid 200 (python -m vllm --headless, step 61.batch, sleeping) runs",
                  "    node 1 (n2): not checked: srun exited 1: Unable to contact slurm controller"]),
    ],
)  # fmt: skip
def test_status_says_what_of_a_jobs_multi_node_server_runs_on_which_node(
    tmp_path: Path, results: list[NodeResult], lines: list[str]
) -> None:
    Journal.of_sweep(tmp_path, Place("head")).append(JobStarted(candidate="tp16", executor="slurm"))
    job = Journal.of_sweep(tmp_path, Place("n1", "61_0", "slurm"))
    job.append(JobStarted(candidate="tp16", executor="slurm"))
    job.append(
        Started(candidate="tp16", fingerprint="sha256:t", port=8000, pid=200, pgid=200, create_time=1.0,
                spec_file=str(tmp_path / "missing.json"), followers=[FOLLOWER])
    )  # fmt: skip
    asked: list[Sequence[tuple[int, str, str]]] = []

    def checker(nodes: Sequence[tuple[int, str, str]]) -> NodeChecker:
        asked.append(nodes)
        return ScriptedChecker([results])

    seams = replace(fake_seams(FakeSupervisor(), FakeLoad()), node_checker=checker)
    out = io.StringIO()
    status(tmp_path, seams, out=out)
    text = out.getvalue().splitlines()
    (job_line,) = [line for line in text if line.startswith("  job 61_0")]
    assert job_line.endswith("1 server(s) per its journal checked on its nodes:"), text
    at = text.index(job_line)
    assert text[at + 1 : at + 1 + len(lines)] == lines, text
    assert asked == [[(0, "", "61"), (1, "n2", "61")]]
