"""Where a sweep's code runs: the node, the scheduler's job, and the simulated nodes of a local "cluster".

Pipeline position: under the orchestrator's sweep and journal. A sweep may run its candidates as Hydra
jobs on other machines (``hydra/launcher=submitit_slurm``) or in parallel processes on this one
(``submitit_local``). Every journal line then names its node and job (:class:`Place`), so ``rollback`` and
``stop`` act only on the processes of their own node and cancel the sweep's jobs elsewhere instead of
signalling pids that belong to another machine.

The node is ``GAUNTLET_NODE`` when set (the simulated cluster sets it per job), else SLURM's node name,
else the host name. The job is the scheduler's id (``hydra.job.id`` as the submitit plugin sets it), with
the executor that can cancel it (``SUBMITIT_EXECUTOR``: ``slurm`` or ``local``).

A simulated cluster (``run.simulated_nodes: N``) gives a job one of N node *slots* on this machine: the slot
is an exclusive ``flock`` on ``<sweep>/nodes/sim-node-K.lock`` (released by the kernel when the job's
process dies, so a crash frees it), its node name is ``sim-node-K`` and its port is
``service.port + 1 + K``. Slot 0 of the real cluster, the serving host, keeps ``service.port``.
"""

from __future__ import annotations

import fcntl
import os
import re
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from contracts.layout import SweepPaths

#: Environment variables that name this process's node, in order of precedence.
NODE_VARIABLES = ("GAUNTLET_NODE", "SLURMD_NODENAME")
#: A simulated node's speed factor: ``GAUNTLET_SIM_SPEED_<K>`` (read by the job, passed to the simulator).
SIM_SPEED_VARIABLE = "GAUNTLET_SIM_SPEED"

_UNSAFE = re.compile(r"[^A-Za-z0-9_.@-]+")


def this_node(environ: Mapping[str, str] | None = None) -> str:
    """The node this process runs on (see the module docstring for the order)."""
    env = os.environ if environ is None else environ
    for name in NODE_VARIABLES:
        if env.get(name):
            return env[name]
    return socket.gethostname()


@dataclass(frozen=True)
class Place:
    """Where a journal's writer runs: its node, and its scheduler job when it is a job of a launcher."""

    node: str
    job: str | None = None
    executor: str | None = None  # "slurm" | "local" (submitit), None for the launching process

    @property
    def is_job(self) -> bool:
        return self.job is not None

    def journal_name(self) -> str:
        """The file name of this job's journal under ``<sweep>/journals/`` (safe on any filesystem)."""
        return _UNSAFE.sub("_", f"{self.node}-{self.job}") + ".jsonl"


def launching_place(environ: Mapping[str, str] | None = None) -> Place:
    """The process that runs ``python -m orchestrator`` (or rollback/stop/status)."""
    return Place(node=this_node(environ))


def job_place(job_id: str | None, environ: Mapping[str, str] | None = None) -> Place | None:
    """The place of a Hydra job run by a launcher in its own process; None for an in-process job.

    The submitit plugin sets ``hydra.job.id`` to the scheduler's id and runs the job with
    ``SUBMITIT_EXECUTOR`` set; the basic launcher runs jobs inside the launching process.
    """
    env = os.environ if environ is None else environ
    executor = env.get("SUBMITIT_EXECUTOR") or None
    if executor is None or not job_id:
        return None
    return Place(node=this_node(env), job=str(job_id), executor=executor)


@dataclass
class NodeSlot:
    """One simulated node held by this process (an exclusive lock; closing releases it)."""

    index: int
    name: str
    handle: IO[str]

    def release(self) -> None:
        if not self.handle.closed:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()


def sim_node_name(index: int) -> str:
    """The name of a simulated cluster's node ``index`` (what its jobs' node baselines are named after)."""
    return f"sim-node-{index}"


def acquire_slot(
    sweep_dir: Path,
    nodes: int,
    *,
    prefer: int = 0,
    wait_s: float = 24 * 3600.0,
    poll_s: float = 0.2,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    on_wait: Callable[[], None] | None = None,
) -> NodeSlot:
    """Hold one of ``nodes`` simulated node slots, waiting while all are busy (a bounded local cluster).

    The search starts at slot ``prefer % nodes`` (the job's number), so jobs started together spread over
    the nodes in job order rather than by who won a race.
    """
    if nodes < 1:
        raise ValueError(f"a simulated cluster needs at least one node, got {nodes}")
    folder = SweepPaths(sweep_dir).nodes
    folder.mkdir(parents=True, exist_ok=True)
    deadline = clock() + wait_s
    told = False
    while True:
        for index in [(prefer + k) % nodes for k in range(nodes)]:
            name = sim_node_name(index)
            handle = (folder / f"{name}.lock").open("a+")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
            return NodeSlot(index, name, handle)
        if clock() >= deadline:
            raise TimeoutError(f"no simulated node of {nodes} became free within {wait_s:.0f} s")
        if not told and on_wait is not None:
            on_wait()
            told = True
        sleep(poll_s)
