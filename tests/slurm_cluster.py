"""The local SLURM cluster's two nodes for a test (`scripts/slurm-local.sh start --nodes 2`): an allocation
of n1 and n2, cancelled afterwards; skipped without the cluster, failed with GAUNTLET_REQUIRE_SLURM=1."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from launch.node_agent import NodeReport, parse_report

ROOT = Path(__file__).resolve().parents[1]


def squeue(*args: str) -> str:
    return subprocess.run(
        ["squeue", "-h", *args], capture_output=True, text=True, timeout=20, check=True
    ).stdout


@contextmanager
def two_node_allocation(job_name: str) -> Iterator[tuple[str, str]]:
    """A job holding the local cluster's nodes n1 and n2 (its id and node list); cancelled, and waited for
    until SLURM no longer lists it (at most 60 s), afterwards."""
    try:
        sinfo = ["sinfo", "-h", "-N", "-o", "%N %T"]
        nodes = subprocess.run(sinfo, capture_output=True, text=True, timeout=20, check=True).stdout.split(
            "\n"
        )
    except (OSError, subprocess.SubprocessError) as exc:
        nodes = [f"sinfo: {exc}"]
    # A node still completing (or running) an earlier test's job is up: salloc waits for it (a node reads
    # `completing` for a moment after the previous test's scancel).
    up = r"n[12] (idle|mixed|allocated|completing)"
    usable = sorted({line.split()[0] for line in nodes if re.fullmatch(up, line.strip())})
    if usable != ["n1", "n2"]:
        message = (
            f"no 2-node SLURM cluster with n1 and n2 up (sinfo: {[n for n in nodes if n]}); "
            "start one: `scripts/slurm-local.sh start --nodes 2` (root)"
        )
        if os.environ.get("GAUNTLET_REQUIRE_SLURM") == "1":
            pytest.fail(f"GAUNTLET_REQUIRE_SLURM=1: {message}")
        pytest.skip(message)
    done = subprocess.run(
        ["salloc", "--nodes=2", "--ntasks-per-node=1", "--no-shell", "--immediate=120",
         f"--job-name={job_name}"],
        capture_output=True, text=True, timeout=150, check=False,
    )  # fmt: skip
    granted = re.search(r"Granted job allocation (\d+)", done.stderr)
    assert done.returncode == 0 and granted, done.stderr
    job = granted.group(1)
    try:
        yield job, squeue("-j", job, "-o", "%N").strip()
    finally:
        subprocess.run(["scancel", job], timeout=20, check=False)
        deadline = time.monotonic() + 60
        while job in squeue("-o", "%i").split() and time.monotonic() < deadline:
            time.sleep(0.5)


def on_node(job: str, node: str, *argv: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    """``argv`` run on ``node`` as a step of ``job`` (``srun --overlap``): what that node's own process table
    says (the local cluster's nodes have PID namespaces of their own: a pid of n2 means nothing here)."""
    command = ["srun", f"--jobid={job}", "--nodes=1", "--ntasks=1", f"--nodelist={node}", "--overlap",
               "--quiet", *argv]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)


def ppid_on(job: str, node: str, pid: int) -> int | None:
    """The parent of ``pid`` as ``node`` sees it; None where no such process runs there (or a zombie)."""
    done = on_node(job, node, "cat", f"/proc/{pid}/stat")
    fields = done.stdout.rsplit(")", 1)[-1].split()
    if done.returncode != 0 or len(fields) < 2 or fields[0] == "Z":
        return None
    return int(fields[1])


def cluster_nodes() -> list[str]:
    """The local cluster's node names (sinfo)."""
    return sorted(set(subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, timeout=20, check=True
    ).stdout.split()))  # fmt: skip


def node_reports(port: int, other_ports: Sequence[int] = ()) -> dict[str, NodeReport]:
    """Each node's agent (``launch.node_agent``, a task of a fresh job on every node) on the server of
    ``port``: what each node holds of it, as the per-node check sees it (each in its own PID namespace)."""
    nodes = cluster_nodes()
    command = ["srun", f"--nodes={len(nodes)}", "--ntasks-per-node=1", "--immediate=120",
               "--job-name=gauntlet-test-check", f"--export=ALL,PYTHONPATH={ROOT}", f"--chdir={ROOT}",
               sys.executable, "-m", "launch.node_agent", f"--port={port}",
               *(f"--rpc-port={p}" for p in other_ports)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr
    reports = {r.node: r for r in (parse_report(x, node="?") for x in done.stdout.splitlines() if x.strip())}
    assert sorted(reports) == nodes, (reports, nodes)
    return reports


def left_on_nodes(port: int, other_ports: Sequence[int] = ()) -> list[str]:
    """What the cluster's nodes still hold of the server of ``port`` (processes, ports), per node; [] when
    nothing."""
    reports = sorted(node_reports(port, other_ports).items())
    left = [f"{n}: {p.describe()}" for n, r in reports for p in r.processes]
    return left + [f"{n}: port {h.port} held by {h.pids}" for n, r in reports for h in r.ports]


class NodeSupervisor:
    """``tests.integration.node_supervisor`` on n1 as a step of ``job``: the 2-node server of ``spec_file``
    started, watched and torn down from n1's own PID namespace (:meth:`ready`, then :meth:`finish`)."""

    def __init__(self, job: str, nodelist: str, spec_file: Path, *extra: str) -> None:
        command = ["srun", f"--jobid={job}", "--nodes=1", "--ntasks=1", "--nodelist=n1", "--overlap",
                   "--quiet", f"--export=ALL,PYTHONPATH={ROOT}", f"--chdir={ROOT}", sys.executable, "-m",
                   "tests.integration.node_supervisor", str(spec_file), "--job-nodelist", nodelist,
                   *extra]  # fmt: skip
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def ready(self) -> dict[str, Any]:
        """The server's head pid and followers (n1's pids; a follower's ``node_pid``: n2's)."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            _, err = self.proc.communicate(timeout=60)
            raise AssertionError(f"the supervisor on n1 printed nothing: {err[-3000:]}")
        ready: dict[str, Any] = json.loads(line)
        return ready

    def finish(self) -> dict[str, Any]:
        """Tear the server down (stdin closed); the teardown's record and error message."""
        out, err = self.proc.communicate(input="", timeout=180)
        lines = [line for line in out.splitlines() if line.startswith('{"record"')]
        assert lines, f"no teardown record from n1 (exit {self.proc.returncode}): {out[-2000:]} {err[-3000:]}"
        finished: dict[str, Any] = json.loads(lines[-1])
        return finished


def assert_nodes_isolated(job: str = "") -> None:
    """The local cluster's nodes have PID namespaces of their own, neither this process's
    (``scripts/slurm-local.sh start --nodes N``): a test that must pass through the per-node check fails
    here, not vacuously, on a cluster whose nodes see each other. ``job``: look as steps of that job
    (which holds every node), else as a fresh job."""
    nodes = cluster_nodes()
    if job:
        said = [on_node(job, node, "readlink", "/proc/self/ns/pid") for node in nodes]
        assert all(done.returncode == 0 for done in said), [done.stderr for done in said]
        namespaces = {done.stdout.strip() for done in said}
    else:
        command = ["srun", f"--nodes={len(nodes)}", "--ntasks-per-node=1", "--immediate=120", "--label",
                   "--job-name=gauntlet-test-ns", "readlink", "/proc/self/ns/pid"]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
        assert done.returncode == 0, done.stderr
        namespaces = {line.split(": ", 1)[1] for line in done.stdout.splitlines() if ": " in line}
    here = os.readlink("/proc/self/ns/pid")
    assert len(namespaces) == len(nodes) and here not in namespaces, (
        f"the nodes {nodes} share PID namespaces ({sorted(namespaces)}; this process: {here}): restart the "
        "cluster with `scripts/slurm-local.sh stop && scripts/slurm-local.sh start --nodes 2`"
    )
