"""The per-node check on this machine's 2-node SLURM cluster (issue 45, item 1): a follower that leaves a
process behind on its node (one that left its job step's process tree, as a daemon does, so neither the
local ``srun`` nor ``scancel`` reaches it) is found by that node's agent, named with its node, killed, and
teardown proves the node clean. Skipped without a cluster of 2 idle nodes, unless
``GAUNTLET_REQUIRE_SLURM=1`` (CI)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from launch.supervisor import Supervisor
from orchestrator.ledger.events import JobStarted, Launching
from orchestrator.ledger.journal import Journal
from orchestrator.ledger.nodes import Place, launching_place
from tests.integration.test_multinode_local import ROOT, spec_for
from tests.ports import free_port
from tests.slurm_cluster import squeue, two_node_allocation

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.slurm]

#: A follower that first leaves a process of its own behind, outside its step's tree (double fork and
#: setsid: reparented to init), then runs the real follower.
ESCAPE = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open({pidfile!r}, "w").write(str(os.getpid()))
        time.sleep(600)
        os._exit(0)
    os._exit(0)
os.wait()
os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
"""


@pytest.fixture
def two_nodes() -> Iterator[tuple[str, str]]:
    """A job holding the local cluster's nodes n1 and n2 (its id and node list); cancelled afterwards."""
    with two_node_allocation("gauntlet-nodecheck") as allocated:
        yield allocated


def test_a_follower_left_running_on_a_node_is_found_by_that_nodes_check_named_and_stopped(
    two_nodes: tuple[str, str], tmp_path: Path
) -> None:
    job, nodelist = two_nodes
    pidfile = tmp_path / "escaped.pid"
    spec = spec_for(free_port(), free_port())
    (follower_argv,) = spec.followers
    escaping = ("python", "-c", ESCAPE.format(pidfile=str(pidfile)), *follower_argv[1:])
    spec = replace(spec, followers=(escaping,))
    environ = {**os.environ, "SLURM_JOB_ID": job, "SLURM_JOB_NODELIST": nodelist, "SLURMD_NODENAME": "n1"}
    sup = Supervisor(project_root=ROOT, environ=environ, poll_interval_s=0.1)
    server = sup.start(spec, tmp_path / "server.log")
    escaped = 0
    try:
        sup.wait_ready(server)
        assert server.followers[0].node_name == "n2" and server.followers[0].slurm_job == job
        escaped = int(pidfile.read_text())
        assert psutil.Process(escaped).ppid() == 1  # outside the step's tree: srun and scancel miss it
        record = sup.teardown(server)
    finally:
        if escaped and psutil.pid_exists(escaped):
            with contextlib.suppress(psutil.Error):
                psutil.Process(escaped).kill()
            left = True
        else:
            left = False
    assert not left, f"pid {escaped} left behind on n2 after the teardown: {sup.last_teardown}"
    killed = [n for n in record.notes if n.startswith("node 1 (n2): SIGKILL to pid(s) ")]
    assert killed and str(escaped) in killed[0].split("pid(s) ")[1].split(" (")[0].split(", "), record.notes
    assert f"every node checked: nothing of {spec.candidate} left, no step listed" in record.notes
    assert f"gauntlet-node1-{spec.port}" not in squeue("-s", "-j", job, "-o", "%j")


def test_status_of_a_job_whose_orchestrator_is_gone_says_what_runs_on_which_node(
    two_nodes: tuple[str, str], tmp_path: Path
) -> None:
    """The state kill -9 of a job's gauntlet leaves (issue 45, item 6): the job's journal records a 2-node
    server that still runs, its head on n1 and its follower a step on n2. ``status`` (a process of its
    own, on neither node's process table) checks the job's nodes and says what runs where; it said
    "(not checked from here)" before."""
    job, nodelist = two_nodes
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    spec = spec_for(free_port(), free_port())
    spec_file = sweep / "spec.json"
    spec_file.write_text(spec.to_json())
    environ = {**os.environ, "SLURM_JOB_ID": job, "SLURM_JOB_NODELIST": nodelist, "SLURMD_NODENAME": "n1"}
    sup = Supervisor(project_root=ROOT, environ=environ, poll_interval_s=0.1)
    server = sup.start(spec, sweep / "server.log")
    try:
        sup.wait_ready(server)
        Journal.of_sweep(sweep, launching_place()).append(
            JobStarted(candidate=spec.candidate, executor="slurm")
        )
        journal = Journal.of_sweep(sweep, Place("n1", job, "slurm"))
        journal.append(JobStarted(candidate=spec.candidate, executor="slurm"))
        launch = Launching(candidate=spec.candidate, fingerprint=spec.fingerprint, port=spec.port,
                           spec_file=str(spec_file))  # fmt: skip
        log = str(sweep / "server.log")
        started = launch.started(pid=server.pid, pgid=server.pgid, create_time=server.create_time,
                                 log_path=log, followers=server.node_processes())  # fmt: skip
        journal.append(started)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")} | {"PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            [sys.executable, "-m", "orchestrator", "status", str(sweep)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        follower = [p for p in psutil.Process(server.followers[0].pid).children(recursive=True)]
    finally:
        sup.teardown(server)
    out = done.stdout
    assert (
        f"job {job} on n1 (slurm): running or interrupted, 1 server(s) per its journal checked on its nodes:"
        in out
    )
    head = re.search(rf"^    node n1: pid {server.pid} \(.*launch\.sim.* runs$", out, re.MULTILINE)
    remote = re.search(
        r"^    node 1 \(n2\): pid (\d+) \(.*launch\.sim.*step " + job + r"\.\d+.* runs$", out, re.MULTILINE
    )
    assert head and remote, out
    assert int(remote.group(1)) != server.followers[0].pid  # the process on n2, not the local srun
    assert not [p for p in follower if p.pid == int(remote.group(1))]  # and not one of srun's own children
    assert f"node n1: port {spec.port} still taken by pid {server.pid}" in out
    srun = [line for line in out.splitlines() if "(srun --jobid" in line]
    assert srun and all(line.startswith("    node n1: ") for line in srun), out  # srun runs here, on n1
