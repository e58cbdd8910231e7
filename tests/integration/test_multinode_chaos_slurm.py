"""Chaos on the isolated 2-node SLURM cluster (issue 45, item 2): a simulated 2-node candidate runs as a
SLURM job whose gauntlet and head run on n1 and whose follower is a step on n2, each node in a PID
namespace of its own (``scripts/slurm-local.sh start --nodes 2``), so the job's gauntlet cannot see n2's
processes and learns of them only through n2's agent. Faults are dealt on the node, through SLURM (``srun
--overlap`` on n2 with the pid the journal recorded there, ``scancel``, SIGKILL of the launching process):

- kill -9 of a follower under load: the server ``died``, naming node 1 (n2) and its pid there; REJECT
  (the candidate's simulated hardware is 5x slower, so that its loaded profile outlasts the kill's srun);
- SIGSTOP of a follower under load (a hung collective): ``hung`` through n2's agent, naming the node;
  REJECT on stability (the candidate's simulated hardware is 5x slower, so that its loaded profile
  outlasts the detection bound on SLURM, about 2 x 5 s);
- ``scancel`` of a job while its 2-node server starts: the job ends CANCELLED, its journal ``interrupted``,
  the candidate INCOMPLETE (the sweep exits 1 naming the command that completes it);
- kill -9 of the orchestrator while a 2-node candidate runs, then ``rollback``: the job is cancelled, the
  2-node retained configuration restored and validated.

Each ends with nothing left on any node, as each node's agent reports it (a fresh job's task on n1 and
n2), and no step of the sweep's jobs listed by ``squeue``. One sweep takes the first three faults (one
candidate each), one the last. Skipped without a cluster of 2 nodes, unless ``GAUNTLET_REQUIRE_SLURM=1``.
Rows of ``docs/multinode.md``, "The isolated test cluster"."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contracts.layout import journals_dir
from orchestrator.servers.scheduler import sweep_job_ids
from tests.integration.sweep_helpers import ROOT, run_cli, sim_servers, sweep_dir
from tests.integration.test_multinode_slurm import two_node_cluster  # noqa: F401 (a fixture)
from tests.ports import free_port
from tests.slurm_cluster import assert_nodes_isolated, left_on_nodes, on_node, squeue

pytest.importorskip(
    "hydra_plugins.hydra_submitit_launcher", reason="the .[slurm] extra (make setup installs it)"
)
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.slurm]

SWEEP_ARGS = (
    "host=sim_2x8", "candidate@baseline=dp_nodes", "+experiment=sim_small", "run.repeats=1",
    "hydra.searchpath=[file://tests/integration/conf,file://examples/multinode]",
    "run.retained_after_sweep=stop", "hydra/launcher=gauntlet_slurm", "hydra.launcher.gpus_per_node=null",
    "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=1", "workloads.decode_heavy.num_requests=200",
)  # fmt: skip


@pytest.fixture(scope="module")
def isolated_cluster(request: pytest.FixtureRequest) -> None:
    """The 2-node cluster, its nodes in PID namespaces of their own (else these tests prove nothing)."""
    request.getfixturevalue("two_node_cluster")  # skipped (or failed, in CI) without a 2-node cluster
    assert_nodes_isolated()


def events(sweep: Path) -> list[dict[str, Any]]:
    """Every journal line of the sweep: the launching process's and each job's."""
    out: list[dict[str, Any]] = []
    for path in [sweep / "journal.jsonl", *sorted(journals_dir(sweep).glob("*.jsonl"))]:
        if path.exists():
            for line in path.read_text().splitlines():
                with contextlib.suppress(json.JSONDecodeError):  # a line being written as we read
                    out.append(json.loads(line))
    return out


def first(sweep: Path, event: str, candidate: str, **match: object) -> dict[str, Any] | None:
    """The first ``event`` of ``candidate`` (a job writes ``tp16@n1``) whose fields equal ``match``."""
    return next(
        (e for e in events(sweep) if e.get("event") == event
         and str(e.get("candidate", "")).split("@")[0] == candidate
         and all(e.get(k) == v for k, v in match.items())),
        None,
    )  # fmt: skip


def follower_on_n2(sweep: Path, candidate: str) -> tuple[str, int]:
    """The candidate's job and its follower's pid on n2, as the job's journal recorded it at ``ready``
    (n2's agent located it: n2's pid, which means nothing on this machine)."""
    ready = first(sweep, "ready", candidate)
    assert ready is not None and ready.get("followers"), ready
    (follower,) = ready["followers"]
    assert follower["name"] == "n2" and follower["node_pid"], follower
    return follower["slurm_job"], int(follower["node_pid"])


def sweep_command(sweeps: Path, port: int, rpc_port: int, candidates: str) -> list[str]:
    return [sys.executable, "-m", "orchestrator", "-m", f"candidate={candidates}", *SWEEP_ARGS,
            f"host.rpc_port={rpc_port}", f"run.sweeps_dir={sweeps}", f"service.port={port}"]  # fmt: skip


def drive(proc: subprocess.Popen[str], sweeps: Path, faults: dict[str, Callable[[Path], bool]]) -> str:
    """Wait for the sweep to end, dealing each candidate's fault once its moment comes (``fault(sweep)``
    returns True once dealt); the sweep's output."""
    deadline = time.monotonic() + 600
    pending = dict(faults)
    while proc.poll() is None and time.monotonic() < deadline:
        if pending and list(sweeps.glob("*/journal.jsonl")):
            sweep = sweep_dir(sweeps)
            for name, fault in list(pending.items()):
                if fault(sweep):
                    del pending[name]
        time.sleep(0.2)
    if proc.poll() is None:
        proc.kill()
    out, _ = proc.communicate(timeout=60)
    assert not pending, f"faults never dealt: {sorted(pending)}\n{out[-3000:]}"
    return out


def signal_follower_under_load(candidate: str, sig: str) -> Callable[[Path], bool]:
    def fault(sweep: Path) -> bool:
        if first(sweep, "load_started", candidate, profile="decode_heavy") is None:
            return False
        job, pid = follower_on_n2(sweep, candidate)
        done = on_node(job, "n2", "kill", f"-{sig}", str(pid))
        assert done.returncode == 0, done.stderr
        return True

    return fault


def cancel_during_startup(candidate: str) -> Callable[[Path], bool]:
    def fault(sweep: Path) -> bool:
        started = first(sweep, "started", candidate)
        if started is None:
            return False
        assert first(sweep, "ready", candidate) is None  # its startup takes 60 s
        subprocess.run(["scancel", str(started["job"])], timeout=20, check=True)
        return True

    return fault


def assert_nothing_left(sweep: Path, port: int, rpc_port: int) -> None:
    """Each node's agent reports nothing of the sweep's servers, squeue no job or step of it."""
    assert left_on_nodes(port, [rpc_port]) == []
    jobs = sweep_job_ids(sweep)
    steps = squeue("-s", "-o", "%i").split()
    assert not [s for s in steps if s.split(".")[0] in jobs], steps
    assert sim_servers(port) == []  # nor on this machine (whose namespace is the nodes' parent)


def verdict_line(out: str, candidate: str) -> str:
    (line,) = [x for x in out.splitlines() if x.startswith(f"| {candidate} ")]
    return line


@pytest.mark.usefixtures("isolated_cluster")
def test_a_killed_a_stopped_follower_and_a_cancelled_startup_end_as_promised_with_nothing_left(
    tmp_path: Path,
) -> None:
    sweeps, port, rpc_port = tmp_path / "sweeps", free_port(), free_port()
    proc = subprocess.Popen(
        sweep_command(sweeps, port, rpc_port, "dp_nodes,slow_tp16,slow_tp4_dp4,slow_start_tp16"), cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    out = drive(proc, sweeps, {
        "slow_tp16": signal_follower_under_load("slow_tp16", "KILL"),
        "slow_tp4_dp4": signal_follower_under_load("slow_tp4_dp4", "STOP"),
        "slow_start_tp16": cancel_during_startup("slow_start_tp16"),
    })  # fmt: skip
    sweep = sweep_dir(sweeps)
    # the cancelled job's candidate was never measured: the sweep is INCOMPLETE (exit 1), says so and how
    # to complete it
    assert proc.returncode == 1, out[-4000:]
    line = verdict_line(out, "slow_start_tp16")
    assert re.search(r"\| INCOMPLETE +\| not measured: resuming the sweep measures it", line), line
    # (a) kill -9 of the follower on n2 under load (its hardware 5x slower, so that the kill lands while its
    # profile runs): died, naming n2 and its pid there, not the local srun
    _, killed = follower_on_n2(sweep, "slow_tp16")
    run = json.loads((sweep / "candidates" / "slow_tp16" / "run.json").read_text())
    died = [e for e in run["watch"] if e["kind"] == "died"]
    assert died and (died[0]["node"], died[0]["node_name"]) == (1, "n2"), run["watch"]
    assert died[0]["detail"].startswith(f"node 1 (n2) pid {killed} (srun pid "), died[0]["detail"]
    line = verdict_line(out, "slow_tp16")
    assert "REJECT" in line and "the server died under load (node 1, n2: follower" in line, line
    # (b) SIGSTOP of the follower on n2 under load: hung, seen through n2's agent, named, killed (its
    # hardware 5x slower: a profile shorter than the bound, about 2 x 5 s on SLURM, would end first)
    _, stopped = follower_on_n2(sweep, "slow_tp4_dp4")
    run = json.loads((sweep / "candidates" / "slow_tp4_dp4" / "run.json").read_text())
    hung = [e for e in run["watch"] if e["kind"] == "hung"]
    assert hung and (hung[0]["node"], hung[0]["node_name"]) == (1, "n2"), run["watch"]
    assert hung[0]["detail"].startswith(f"node 1 (n2) pid {stopped} is stopped for "), hung[0]["detail"]
    line = verdict_line(out, "slow_tp4_dp4")
    assert "REJECT" in line and "the server hung under load (node 1, n2: follower" in line, line
    # (c) scancel of the job during its server's startup: CANCELLED, interrupted, never ready
    cancelled = first(sweep, "started", "slow_start_tp16")
    assert cancelled is not None and first(sweep, "ready", "slow_start_tp16") is None
    job = str(cancelled["job"])
    finished = first(sweep, "job_finished", "slow_start_tp16")
    assert finished and finished["outcome"].startswith("interrupted: signal SIGTERM"), finished
    assert any(line.split()[1:3] == ["job", job] and "CANCELLED" in line for line in out.splitlines()), out
    assert "recovery validation passed: restored dp_nodes byte-for-byte" in out
    assert_nothing_left(sweep, port, rpc_port)


@pytest.mark.usefixtures("isolated_cluster")
def test_kill_9_of_the_orchestrator_then_rollback_restores_with_nothing_left_on_any_node(
    tmp_path: Path,
) -> None:
    sweeps, port, rpc_port = tmp_path / "sweeps", free_port(), free_port()
    proc = subprocess.Popen(
        sweep_command(sweeps, port, rpc_port, "dp_nodes,tp16"), cwd=ROOT, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip

    def kill_orchestrator(sweep: Path) -> bool:
        if first(sweep, "load_started", "tp16", profile="decode_heavy") is None:
            return False
        proc.send_signal(signal.SIGKILL)  # the launching process only: its SLURM jobs run on
        return True

    drive(proc, sweeps, {"orchestrator": kill_orchestrator})
    sweep = sweep_dir(sweeps)
    job, _ = follower_on_n2(sweep, "tp16")
    assert squeue("-j", job, "-o", "%i").strip(), f"job {job} ended with its gauntlet"  # it runs on
    try:
        done = run_cli(["rollback", str(sweep)], timeout=300)
        out = done.stdout + done.stderr
        assert done.returncode == 0, out[-4000:]
        assert "restored dp_nodes" in out and "validation passed" in out, out[-4000:]
        state = [e for e in events(sweep) if e.get("event") in ("restored", "validated")]
        assert [e["event"] for e in state][-2:] == ["restored", "validated"], state
    finally:
        stop = run_cli(["stop", str(sweep)], timeout=300)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert_nothing_left(sweep, port, rpc_port)
