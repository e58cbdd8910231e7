"""The simulator across nodes: a head that waits for its followers, ``--headless`` followers that join it,
and what crossing nodes costs.

Pipeline position: inside the simulated server program (:mod:`launch.sim.server`). A multi-node launch
spec (:func:`launch.spec.node_flags`) starts one simulator per node: the head with
``--data-parallel-size-local``/``--data-parallel-address``/``--data-parallel-rpc-port`` (DP over nodes)
or ``--nnodes``/``--node-rank``/``--master-addr``/``--master-port`` (TP or PP across nodes), each follower
with ``--headless`` and the same address. The head opens the RPC port, waits until every follower has joined
(its log says so, rank by rank) and only then serves; a follower that goes away afterwards kills the head's
engine, as a lost rank kills vLLM's. The head simulates every replica; a follower is a real process that
joins and holds its place, so the launcher starts, watches and stops real processes on every node. A
joined node beats on its link every :data:`BEAT_S`; a node silent for :data:`STALL_S` (stopped, as a rank
stuck in a collective) stalls the head's engine until it beats again: every request waits, as vLLM's do
behind a hung all-reduce, so a hang shows as a server that stops answering, not as a slower one.

The cost model (docs/simulator.md, "Across nodes"): data parallel over nodes adds :data:`DP_SYNC_MS` to
each step (the DP ranks' step synchronisation over the network); a replica whose TP spans nodes runs its
all-reduces over the slowest link, InfiniBand (:data:`IB_GBPS`) instead of NVLink (:data:`NVLINK_GBPS`),
so the all-reduce share of a node's widest TP step (:data:`ALLREDUCE_SHARE`) is paid
``NVLINK_GBPS / IB_GBPS`` times over while the rest of the work is split over more GPUs.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from launch.sim.pipeline import node_crossing_ms
from launch.sim.profile import Profile, TopologySpec

#: H100 SXM NVLink 4: 900 GB/s per GPU, both directions together (NVIDIA H100 datasheet): 450 one way.
NVLINK_GBPS = 450.0
#: One ConnectX-7 NDR InfiniBand port per GPU (DGX H100): 400 Gb/s = 50 GB/s one way.
IB_GBPS = 50.0
#: The share of a node-wide TP replica's per-token time spent in all-reduces over NVLink (an assumption:
#: decode on 8 x H100 spends about a tenth of its step in TP communication).
ALLREDUCE_SHARE = 0.10
#: What DP over nodes adds to each step: the ranks' step synchronisation over the network (an assumption).
DP_SYNC_MS = 0.1
#: How long a head waits for its followers, and a follower for its head, before giving up (wall seconds).
JOIN_TIMEOUT_S = 60.0
#: How often a joined node beats on its link, and how long a silent one stalls the head's engine (wall s).
BEAT_S = 0.25
STALL_S = 1.0

Log = Callable[[str, str, str], None]


@dataclass(frozen=True)
class NodeRole:
    """This process's place in a multi-node launch."""

    headless: bool
    nodes: int
    node_rank: int
    address: str
    port: int
    tp_spans: bool  # one replica's TP spans the nodes (--nnodes), not DP over them
    local_gpus: int  # GPUs this node's ranks use
    stages_span: bool = False  # one replica's pipeline stages span the nodes (--nnodes), its TP within one
    #: Hybrid or external DP load balancing: this node serves its own ranks' API (first_rank ..
    #: first_rank + local_ranks - 1) and simulates only them; the head still gathers the nodes.
    serves: bool = False
    first_rank: int = 0
    local_ranks: int = 0


def node_role(raw: Mapping[str, Any], tp: int, dp: int, pp: int = 1) -> NodeRole | str | None:
    """The node this command line runs (None: a single-node server), or why the flags do not add up."""
    nnodes = raw.get("nnodes") or 1
    if nnodes > 1:
        rank = raw.get("node_rank") or 0
        world = tp * pp * dp
        if world % nnodes or not 0 <= rank < nnodes:
            what = "TP x PP x DP" if pp > 1 else "TP x DP"
            return f"--nnodes {nnodes} --node-rank {rank} do not divide {what} = {world}"
        address, port = raw.get("master_addr") or "127.0.0.1", raw.get("master_port") or 29501
        gpus = world // nnodes
        return NodeRole(
            bool(raw.get("headless")), nnodes, rank, address, port, tp > gpus, gpus, pp > 1 and tp <= gpus
        )
    local = raw.get("data_parallel_size_local")
    address = raw.get("data_parallel_address") or "127.0.0.1"
    port = raw.get("data_parallel_rpc_port") or 29550
    if raw.get("data_parallel_external_lb") or raw.get("data_parallel_rank") is not None:
        rank = raw.get("data_parallel_rank") or 0
        if dp < 2 or not 0 <= rank < dp or local not in (None, 1):
            return f"--data-parallel-rank {rank} with --data-parallel-size {dp}: one rank of 2 or more"
        return NodeRole(False, dp, rank, address, port, False, tp * pp, serves=True, first_rank=rank,
                        local_ranks=1)  # fmt: skip
    if local is None or local >= dp:
        return None
    if local < 1 or dp % local:
        return f"--data-parallel-size-local {local} does not divide --data-parallel-size {dp}"
    start = raw.get("data_parallel_start_rank") or 0
    if raw.get("data_parallel_hybrid_lb"):
        if raw.get("headless"):
            return "data_parallel_hybrid_lb is not applicable in headless mode"
        return NodeRole(False, dp // local, start // local, address, port, False, tp * pp * local,
                        serves=True, first_rank=start, local_ranks=local)  # fmt: skip
    return NodeRole(bool(raw.get("headless")), dp // local, start // local, address, port, False, tp * local)


def cross_node_topology(node: TopologySpec, nodes: int) -> TopologySpec:
    """The step costs of a TP replica spanning ``nodes`` nodes, from a node-wide replica's ``node``.

    Per-token work: the all-reduce share runs ``NVLINK_GBPS / IB_GBPS`` times slower, the rest is split
    over ``nodes`` times the GPUs; the per-step and per-sequence synchronisation cross the same link."""
    ratio = NVLINK_GBPS / IB_GBPS
    per_token = (1 - ALLREDUCE_SHARE) / nodes + ALLREDUCE_SHARE * ratio  # x the node-wide replica's
    sync = 1 + ALLREDUCE_SHARE * (ratio - 1)
    cap = node.max_running_seqs * nodes if node.max_running_seqs is not None else None
    return TopologySpec(
        fixed_ms=node.fixed_ms * sync,
        speedup=node.speedup / per_token,
        per_seq_ms=node.per_seq_ms * sync,
        max_running_seqs=cap,
    )


def multinode_profile(profile: Profile, role: NodeRole) -> Profile:
    """The profile the head simulates the whole launch with: every node's GPUs, a TP spanning nodes priced
    by :func:`cross_node_topology`, pipeline stages spanning nodes by their boundaries over the network
    (:func:`launch.sim.pipeline.node_crossing_ms`), DP over nodes by :data:`DP_SYNC_MS` a step."""
    widest = max(profile.topology)
    topology = dict(profile.topology)
    if role.serves:  # hybrid or external: this node's own GPUs and ranks, in step with the other nodes'
        topology = {tp: replace(t, fixed_ms=t.fixed_ms + DP_SYNC_MS) for tp, t in topology.items()}
        return replace(profile, topology=topology)
    if role.tp_spans:
        for k in range(2, role.nodes + 1):
            topology[widest * k] = cross_node_topology(profile.topology[widest], k)
    elif role.stages_span:  # the pipeline's boundaries between nodes cross the network
        extra = node_crossing_ms(role.nodes)
        topology = {tp: replace(t, fixed_ms=t.fixed_ms + extra) for tp, t in topology.items()}
    else:
        topology = {tp: replace(t, fixed_ms=t.fixed_ms + DP_SYNC_MS) for tp, t in topology.items()}
    gpu = replace(profile.gpu, count=profile.gpu.count * role.nodes)
    return replace(profile, gpu=gpu, topology=topology)


# ------------------------------------------------------------------------------------------ the head


class Followers:
    """The head's side: the RPC port followers join on, and whether each is still there."""

    def __init__(self, role: NodeRole, log: Log, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.role = role
        self._log = log
        self._clock = clock
        self._joined: dict[int, asyncio.StreamReader] = {}
        self._beats: dict[int, float] = {}
        self._all = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._watch: asyncio.Task[None] | None = None
        self.lost: asyncio.Future[str] | None = None
        #: called with True when a joined node falls silent for STALL_S, with False when all beat again
        self.on_stall: Callable[[bool], None] = lambda _stalled: None
        self.stalled = False

    async def open(self) -> None:
        self.lost = asyncio.get_running_loop().create_future()
        self._server = await asyncio.start_server(self._joining, "0.0.0.0", self.role.port)
        self._watch = asyncio.ensure_future(self._watching())
        self._log("INFO", "coordinator.py", f"waiting for {self.role.nodes - 1} follower node(s) on port "
                  f"{self.role.port}")  # fmt: skip

    async def _joining(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            hello = json.loads(await reader.readline())
            rank = int(hello["node_rank"])
        except (ValueError, KeyError, TypeError):
            writer.close()
            return
        self._joined[rank] = reader
        self._log("INFO", "coordinator.py", f"node {rank} joined (pid {hello.get('pid')}); "
                  f"{len(self._joined) + 1} of {self.role.nodes} nodes")  # fmt: skip
        writer.write(b"ok\n")
        await writer.drain()
        self._beats[rank] = self._clock()
        if len(self._joined) == self.role.nodes - 1:
            self._all.set()
        while await reader.readline():  # each line a beat; EOF: the follower is gone
            self._beats[rank] = self._clock()
        self._beats.pop(rank, None)
        writer.close()
        if self.lost is not None and not self.lost.done():
            self.lost.set_result(f"follower node {rank} went away")

    async def wait_all(self, timeout_s: float = JOIN_TIMEOUT_S) -> str | None:
        """None once every follower joined; why not, when one never did within ``timeout_s``."""
        try:
            await asyncio.wait_for(self._all.wait(), timeout_s)
        except TimeoutError:
            missing = sorted(set(range(1, self.role.nodes)) - set(self._joined))
            return f"follower node(s) {missing} did not join within {timeout_s:g} s"
        self._log("INFO", "coordinator.py", f"all {self.role.nodes} nodes joined")
        return None

    def silent(self, now: float) -> list[int]:
        """The joined nodes that have not beaten for :data:`STALL_S` at ``now``."""
        return sorted(rank for rank, beat in self._beats.items() if now - beat > STALL_S)

    async def _watching(self) -> None:
        while True:
            await asyncio.sleep(BEAT_S)
            silent = self.silent(self._clock())
            if bool(silent) != self.stalled:
                self.stalled = bool(silent)
                self._log("WARNING" if silent else "INFO", "coordinator.py",
                          f"node(s) {silent} silent for over {STALL_S:g} s: the engine waits on them"
                          if silent else "every node beats again: the engine runs")  # fmt: skip
                self.on_stall(self.stalled)

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        if self._watch is not None:
            self._watch.cancel()


# ------------------------------------------------------------------------------------------ a follower


async def join(
    role: NodeRole, log: Log, *, exit_after_s: float | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | int:
    """Join the head at its RPC port: the open link (its end is the head's), or an exit code."""
    begun = time.monotonic()
    deadline = begun + JOIN_TIMEOUT_S
    while True:
        try:
            reader, writer = await asyncio.open_connection(role.address, role.port)
            break
        except OSError as exc:
            if exit_after_s is not None and time.monotonic() >= begun + exit_after_s:
                log("ERROR", "core.py", f"node {role.node_rank}: simulated node failure "
                    f"(--sim-follower-exit-s {exit_after_s:g}) before joining")  # fmt: skip
                return 1
            if time.monotonic() >= deadline:
                log("ERROR", "launcher.py", f"could not reach the head at {role.address}:{role.port}: {exc}")
                return 1
            await asyncio.sleep(0.2)
    writer.write(json.dumps({"node_rank": role.node_rank, "pid": os.getpid()}).encode() + b"\n")
    await writer.drain()
    if await reader.readline() != b"ok\n":
        log("ERROR", "launcher.py", "the head refused this node")
        return 1
    beating = asyncio.ensure_future(_beat(writer))
    _BEATING.add(beating)
    beating.add_done_callback(_BEATING.discard)
    return reader, writer


#: the joined nodes' beat tasks (held here so that none is collected while it runs)
_BEATING: set[asyncio.Task[None]] = set()


async def _beat(writer: asyncio.StreamWriter) -> None:
    """Beat on the link to the head every :data:`BEAT_S` until it closes (a stopped process beats not)."""
    while not writer.is_closing():
        try:
            writer.write(b"beat\n")
            await writer.drain()
        except (ConnectionError, RuntimeError):
            return
        await asyncio.sleep(BEAT_S)


async def follow(role: NodeRole, log: Log, *, exit_after_s: float | None = None) -> int:
    """A ``--headless`` follower: join the head, hold the place until the head goes or a signal comes.

    ``exit_after_s`` (``--sim-follower-exit-s``) makes it die with exit code 1, as a failing node would."""
    begun = time.monotonic()
    log(
        "INFO",
        "launcher.py",
        f"headless node {role.node_rank}: joining the head at {role.address}:{role.port}",
    )
    link = await join(role, log, exit_after_s=exit_after_s)
    if isinstance(link, int):
        return link
    reader, writer = link
    log("INFO", "launcher.py", f"headless node {role.node_rank} joined; {role.local_gpus} GPU(s) serving")
    gone: asyncio.Future[Any] = asyncio.ensure_future(reader.read())
    loop = asyncio.get_running_loop()
    stop: asyncio.Future[int] = loop.create_future()

    def end(code: int) -> None:
        if not stop.done():
            stop.set_result(code)

    if exit_after_s is not None:
        loop.call_later(max(0.0, begun + exit_after_s - time.monotonic()), end, 1)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, end, 0)
    done, _ = await asyncio.wait([gone, stop], return_when=asyncio.FIRST_COMPLETED)
    writer.close()
    if stop in done:
        code = stop.result()
        if code:
            log("ERROR", "core.py", f"headless node {role.node_rank}: simulated node failure "
                f"(--sim-follower-exit-s {exit_after_s:g})")  # fmt: skip
        return int(code)
    log("INFO", "launcher.py", f"headless node {role.node_rank}: the head went away; exiting")
    return 0
