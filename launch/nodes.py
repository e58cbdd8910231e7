"""Where a multi-node server's followers run: on this machine, or as SLURM job steps on the job's nodes.

Pipeline position: under :mod:`launch.supervisor`, which starts a multi-node spec's head here and each
follower (:attr:`launch.spec.LaunchSpec.followers`) through a :class:`NodeLauncher`: the head's address
goes into every command in place of :data:`launch.spec.HEAD_ADDRESS`, and a follower's command is wrapped
so that it runs on its node. Inside a SLURM allocation of several nodes (``SLURM_JOB_ID``,
``SLURM_JOB_NODELIST``), node k is the job's k-th node and a follower is a job step there
(``srun --nodes=1 --ntasks=1 --nodelist=NODE --overlap``); ending the local ``srun`` ends the step, and a
step left behind is found and cancelled by its name (:func:`step_name`) through ``scancel``. Elsewhere a
simulated or CPU host runs its followers on this machine, as separate processes.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from contracts.errors import LaunchError
from launch.node_agent import NODE_ENV

#: The prefix of a follower's job-step name: ``gauntlet-node<k>-<port>``.
STEP_PREFIX = "gauntlet-node"

Run = Callable[[Sequence[str]], str]


def _run(argv: Sequence[str]) -> str:
    return subprocess.run(list(argv), check=True, capture_output=True, text=True, timeout=30).stdout


def step_name(node: int, port: int) -> str:
    """The SLURM job-step name of node ``node``'s follower of the server on ``port``."""
    return f"{STEP_PREFIX}{node}-{port}"


class NodeLauncher(Protocol):
    """Where node k of a multi-node server runs."""

    def names(self, nodes: int) -> list[str]:
        """The node names of nodes 0 .. nodes-1 (0: the head, this machine)."""
        ...

    def head_address(self) -> str: ...

    def command(self, argv: Sequence[str], node: int, port: int) -> list[str]:
        """``argv`` wrapped so that it runs on node ``node``."""
        ...


@dataclass(frozen=True)
class LocalNodes:
    """Every node on this machine (a simulated or CPU host without SLURM)."""

    address: str = "127.0.0.1"

    def names(self, nodes: int) -> list[str]:
        return ["localhost"] * nodes

    def head_address(self) -> str:
        return self.address

    def command(self, argv: Sequence[str], node: int, port: int) -> list[str]:
        return list(argv)


@dataclass(frozen=True)
class SlurmNodes:
    """The nodes of the SLURM job this process runs in; followers are job steps on them."""

    job_id: str
    #: The job's nodes, this one (the head's) first.
    hostnames: tuple[str, ...]
    address: str

    def names(self, nodes: int) -> list[str]:
        if nodes > len(self.hostnames):
            raise LaunchError(
                f"the server needs {nodes} nodes; SLURM job {self.job_id} has {len(self.hostnames)} "
                f"({','.join(self.hostnames)})",
                hint="submit the sweep with as many nodes as its widest candidate (hydra.launcher.nodes)",
            )
        return list(self.hostnames[:nodes])

    def head_address(self) -> str:
        return self.address

    def command(self, argv: Sequence[str], node: int, port: int) -> list[str]:
        return [
            "srun",
            f"--jobid={self.job_id}",
            "--nodes=1",
            "--ntasks=1",
            f"--nodelist={self.hostnames[node]}",
            "--overlap",
            "--kill-on-bad-exit=1",
            f"--job-name={step_name(node, port)}",
            "env",
            f"{NODE_ENV}={self.hostnames[node]}",
            *argv,
        ]  # fmt: skip  (env execs argv: the task's command line is argv's, its node tag its own node's)


def _address(name: str) -> str:
    """``name``'s IPv4 address (vLLM binds its sockets at the head's address: a name will not do)."""
    try:
        return socket.gethostbyname(name)
    except OSError:
        return name


def slurm_nodes(
    environ: Mapping[str, str], run: Run = _run, resolve: Callable[[str], str] = _address
) -> SlurmNodes | None:
    """The SLURM job of ``environ`` with more than one node, or None (not in one, or one node); the
    head's address is its node's ``NodeAddr``, resolved to an IP address."""
    job, nodelist = environ.get("SLURM_JOB_ID"), environ.get("SLURM_JOB_NODELIST")
    if not job or not nodelist:
        return None
    hostnames = tuple(run(["scontrol", "show", "hostnames", nodelist]).split())
    if len(hostnames) < 2:
        return None
    here = environ.get("SLURMD_NODENAME", hostnames[0])
    hostnames = (here, *(name for name in hostnames if name != here))
    address = hostnames[0]
    for field in run(["scontrol", "show", "node", hostnames[0]]).split():
        if field.startswith("NodeAddr="):
            address = field.removeprefix("NodeAddr=")
    return SlurmNodes(job, hostnames, resolve(address))


def node_launcher(host_kind: str, environ: Mapping[str, str], run: Run = _run) -> NodeLauncher:
    """Followers as SLURM job steps inside a multi-node job; on this machine for a sim or cpu host;
    refused for a GPU host outside one (its followers need the other nodes' GPUs)."""
    slurm = slurm_nodes(environ, run)
    if slurm is not None:
        return slurm
    if host_kind in ("sim", "cpu"):
        return LocalNodes()
    raise LaunchError(
        "a multi-node candidate on a GPU host runs inside a SLURM job of as many nodes "
        "(SLURM_JOB_ID and SLURM_JOB_NODELIST are not set here)",
        hint="run the sweep with hydra/launcher=gauntlet_slurm and hydra.launcher.nodes (docs/multinode.md)",
    )
