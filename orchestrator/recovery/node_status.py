"""``status`` on every node: what of a recorded multi-node server runs where, from each node's check.

Pipeline position: under :mod:`.status`. A follower (and, on SLURM, the head in the job's batch step) runs
on another node, where this machine's process table says nothing; the same per-node check as teardown's
(:mod:`launch.nodecheck`, the agent as a step of the server's job) looks there, without stopping anything.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from contracts.errors import SpecError
from launch.nodecheck import NodesTeardown
from orchestrator.ledger.events import LiveServer
from orchestrator.servers.leftovers import read_for_stopping
from orchestrator.servers.seams import Seams


def where_it_runs(live: LiveServer, seams: Seams, *, indent: str = "    ") -> list[str]:
    """Per node, what runs of ``live`` (a multi-node server; [] for a single-node one): the processes,
    ports and GPU memory its nodes report, the steps SLURM lists, or why a node could not say."""
    followers = live.followers or []
    if not followers:
        return []
    others: list[int] = []
    try:
        rpc = read_for_stopping(live.spec_file).rpc_port
        others = [rpc] if rpc is not None else []
    except (OSError, SpecError):
        pass  # the ranks' port is then not asked about; the processes and the API port still are
    nodes = [(0, "", next((f.slurm_job for f in followers if f.slurm_job), ""))]
    nodes += [(f.node, f.name, f.slurm_job) for f in followers]
    checker = seams.node_checker(nodes)
    look = NodesTeardown(clock=time.monotonic, sleep=time.sleep)
    verdict = look.look(checker, live.port, others, 1 + len(followers))
    lines = [
        f"node {f.node} ({f.name}): the follower was recorded as pid {f.node_pid} (its srun: pid {f.pid})"
        for f in followers
        if f.node_pid is not None
    ]
    lines += [*verdict.left, *verdict.notes]
    if verdict.done:
        lines.insert(0, f"every node checked: nothing of {live.candidate} runs, no step listed")
    return [f"{indent}{line.replace(' still runs', ' runs')}" for line in lines]


def job_nodes(servers: Sequence[LiveServer], seams: Seams) -> list[str]:
    """:func:`where_it_runs` for each server a job's journal says may still run."""
    return [line for live in servers for line in where_it_runs(live, seams)]
