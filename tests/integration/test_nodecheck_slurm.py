"""The per-node check on this machine's 2-node SLURM cluster (issue 45, item 1): a follower that leaves a
process behind on its node (one that left its job step's process tree, as a daemon does, so neither the
local ``srun`` nor ``scancel`` reaches it) is found by that node's agent, named with its node, killed, and
teardown proves the node clean. Each node of the cluster has a PID namespace of its own
(``scripts/slurm-local.sh``): the process's pid is n2's, which only n2's agent can name; a check of this
machine's process table would name another pid (or none). Skipped without a cluster of 2 idle nodes, unless
``GAUNTLET_REQUIRE_SLURM=1`` (CI)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from launch.node_agent import TAG_ENV
from tests.integration.test_multinode_local import ROOT, spec_for
from tests.ports import free_port
from tests.slurm_cluster import (
    NodeSupervisor,
    assert_nodes_isolated,
    on_node,
    ppid_on,
    squeue,
    two_node_allocation,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.slurm]


@pytest.fixture
def two_nodes() -> Iterator[tuple[str, str]]:
    """A job holding the local cluster's nodes n1 and n2 (its id and node list); cancelled afterwards."""
    with two_node_allocation("gauntlet-nodecheck") as allocated:
        assert_nodes_isolated(allocated[0])
        yield allocated


def test_a_follower_left_running_on_a_node_is_found_by_that_nodes_check_named_and_stopped(
    two_nodes: tuple[str, str], tmp_path: Path
) -> None:
    """The supervisor runs on n1 (as a job's gauntlet does), where n2's processes are invisible: only n2's
    agent can find, name and kill what the follower left there; a check of n1's (or this machine's)
    process table would pass it over or name another pid."""
    job, nodelist = two_nodes
    pidfile = tmp_path / "escaped.pid"
    spec = spec_for(free_port(), free_port())
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(spec.to_json())
    on_n1 = NodeSupervisor(job, nodelist, spec_file, "--escape", str(pidfile))
    escaped = 0
    try:
        ready = on_n1.ready()
        (follower,) = ready["followers"]
        assert (follower["name"], follower["slurm_job"]) == ("n2", job), follower
        escaped = int(pidfile.read_text())  # its pid on n2, as the process itself saw it
        assert ppid_on(job, "n2", escaped) == 1  # outside the step's tree: srun and scancel miss it
        # n1, where the supervisor runs, cannot see it: that pid there is no process of the server, or none
        seen_on_n1 = on_node(job, "n1", "cat", f"/proc/{escaped}/environ").stdout
        assert f"{TAG_ENV}={spec.port}" not in seen_on_n1.split("\0")
        finished = on_n1.finish()
    finally:
        left = bool(escaped) and ppid_on(job, "n2", escaped) is not None
        if left:
            on_node(job, "n2", "kill", "-9", str(escaped))
        if on_n1.proc.poll() is None:
            on_n1.proc.kill()
    assert not left, f"pid {escaped} left behind on n2 after the teardown from n1: {finished}"
    record, error = finished["record"], finished["error"]
    assert error == "", error
    killed = [n for n in record["notes"] if n.startswith("node 1 (n2): SIGKILL to pid(s) ")]
    pids = killed[0].split("pid(s) ")[1].split(" (")[0].split(", ") if killed else []
    assert str(escaped) in pids, record["notes"]
    assert f"every node checked: nothing of {spec.candidate} left, no step listed" in record["notes"]
    assert f"gauntlet-node1-{spec.port}" not in squeue("-s", "-j", job, "-o", "%j")


def test_status_of_a_job_whose_orchestrator_is_gone_says_what_runs_on_which_node(
    two_nodes: tuple[str, str], tmp_path: Path
) -> None:
    """The state kill -9 of a job's gauntlet leaves (issue 45, item 6): the job's journal records a 2-node
    server that still runs, its head on n1 and its follower a step on n2. ``status`` (a process of its
    own, in neither node's PID namespace) checks the job's nodes and says what runs where; it said
    "(not checked from here)" before."""
    job, nodelist = two_nodes
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    spec = spec_for(free_port(), free_port())
    spec_file = sweep / "spec.json"
    spec_file.write_text(spec.to_json())
    on_n1 = NodeSupervisor(job, nodelist, spec_file, "--journal", str(sweep))
    try:
        ready = on_n1.ready()
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")} | {"PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            [sys.executable, "-m", "orchestrator", "status", str(sweep)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    finally:
        finished = on_n1.finish()
    assert finished["error"] == "", finished
    out = done.stdout
    head_pid, (follower,) = ready["pid"], ready["followers"]
    assert (
        f"job {job} on n1 (slurm): running or interrupted, 1 server(s) per its journal checked on its nodes:"
        in out
    ), out
    head = re.search(rf"^    node n1: pid {head_pid} \(.*launch\.sim.* runs$", out, re.MULTILINE)
    remote = re.search(
        r"^    node 1 \(n2\): pid (\d+) \(.*launch\.sim.*step " + job + r"\.\d+.* runs$", out, re.MULTILINE
    )
    assert head and remote, out
    assert int(remote.group(1)) == follower["node_pid"]  # the process on n2 as n2 sees it, not the srun
    assert f"node n1: port {spec.port} still taken by pid {head_pid}" in out
    srun = [line for line in out.splitlines() if "(srun --jobid" in line]
    assert srun and all(line.startswith("    node n1: ") for line in srun), out  # srun runs on n1
