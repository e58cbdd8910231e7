"""The simulator's Ray: a ``ray`` command line for a simulated host, and the simulated vLLM's side of it.

Pipeline position: a simulated host's ``ray_entrypoint`` (``python -m launch.sim.ray``), so a candidate with
``multinode_backend: ray`` (:mod:`contracts.ray_backend`) runs on the simulator with the commands a GPU
host runs: the head node's ``ray start --head``, each other node's ``ray start --address=HEAD:PORT``, the
head's wait on ``ray status -v`` (:mod:`launch.ray_head`), teardown's ``ray stop``. It keeps the real
CLI's contract, which is all gauntlet relies on:

- ``start --head --node-ip-address A --port P [--resources JSON] [--block]``: the cluster's head listens
  on ``A:P`` and is a node itself; ``start --address A:P [--resources JSON] [--block]`` joins it as a node
  and holds its place. With ``--block`` each runs until SIGTERM (exit 0) or, for a node, until the head
  goes away (exit 1); a node's resources are its own (``{"gauntlet_node_1": 1}``).
- ``status --address A:P [-v]``: exit 0 with Ray's ``Node status`` block (``Active:`` one line a node)
  and, with ``-v``, a ``Node: ID`` section a node listing its resources; exit 1 with Ray's
  ``ConnectionError`` when no cluster answers there.
- ``stop [--force]``: ends this node's Ray processes (SIGTERM; ``--force``: SIGKILL), and says how many.
  "This node" is the processes carrying the same ``GAUNTLET_SERVER_NODE`` (every node of a simulated host
  is this machine), or all of the user's when it is not set.

The simulated vLLM server (``--distributed-executor-backend ray`` or ``--data-parallel-backend ray``)
asks the cluster at ``RAY_ADDRESS`` how many nodes it has (:func:`ray_role`), serves as one server
spanning them, and its engine dies when a node leaves the cluster (:class:`RayNodes`), as vLLM's Ray
workers die with their node.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import signal
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import psutil

from launch.sim.nodes import JOIN_TIMEOUT_S, NodeRole, node_role

#: What the server's environment names the cluster by (vLLM's, and Ray's own clients').
RAY_ADDRESS_ENV = "RAY_ADDRESS"
#: The node tag every process of a node carries (launch.node_agent.NODE_ENV).
NODE_ENV = "GAUNTLET_SERVER_NODE"
#: A fault for the tests: a joining node (not the head) dies with exit code 1 this many wall seconds after
#: it started, before or after joining, as a lost node would (the simulator's --sim-follower-exit-s).
NODE_EXIT_ENV = "GAUNTLET_SIM_RAY_NODE_EXIT_S"
#: A fault for the tests: a joining node that runs but never joins (a node that cannot reach the head).
NO_JOIN_ENV = "GAUNTLET_SIM_RAY_NODE_NO_JOIN"
#: Ray's own words when no cluster answers.
NOT_RUNNING = (
    "ConnectionError: Could not find any running Ray instance. Please specify the one to connect to by "
    "setting `--address` flag or `RAY_ADDRESS` environment variable."
)

Log = Callable[[str], None]


def _log(line: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    sys.stdout.write(f"{stamp}\tINFO scripts.py -- {line} (SIMULATED Ray)\n")
    sys.stdout.flush()


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host or "127.0.0.1", int(port)


# ------------------------------------------------------------------------------------------ the head


class Cluster:
    """The head's registry: every node (itself first) and who watches for a node leaving."""

    def __init__(self, resources: dict[str, Any], log: Log) -> None:
        self.nodes: dict[str, dict[str, Any]] = {secrets.token_hex(28): resources}
        self.watchers: list[asyncio.StreamWriter] = []
        self._log = log

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):  # the head's own shutdown
            await self._handle(reader, writer)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = json.loads(await reader.readline())
            op = request["op"]
        except (ValueError, KeyError, TypeError):
            writer.close()
            return
        if op == "status":
            writer.write(json.dumps({"nodes": self.nodes}).encode() + b"\n")
            await writer.drain()
            writer.close()
        elif op == "watch":
            self.watchers.append(writer)
            writer.write(json.dumps({"nodes": len(self.nodes)}).encode() + b"\n")
            await writer.drain()
            await reader.read()
        elif op == "join":
            node_id = secrets.token_hex(28)
            self.nodes[node_id] = dict(request.get("resources") or {})
            self._log(f"node {node_id} joined (pid {request.get('pid')}); {len(self.nodes)} node(s)")
            writer.write(b"ok\n")
            await writer.drain()
            await reader.read()  # EOF: the node is gone
            self.nodes.pop(node_id, None)
            self._log(f"node {node_id} is dead; {len(self.nodes)} node(s)")
            for watcher in list(self.watchers):
                with_lost = json.dumps({"lost": node_id, "resources": request.get("resources")})
                watcher.write(with_lost.encode() + b"\n")


async def _block_until_signal() -> int:
    loop = asyncio.get_running_loop()
    stop: asyncio.Future[int] = loop.create_future()

    def end() -> None:
        if not stop.done():
            stop.set_result(0)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, end)
    return await stop


async def start_head(address: str, port: int, resources: dict[str, Any], block: bool) -> int:
    cluster = Cluster(resources, _log)
    try:
        server = await asyncio.start_server(cluster.handle, address, port)
    except OSError as exc:
        sys.stderr.write(f"ConnectionError: the GCS port {address}:{port} is taken: {exc}\n")
        return 1
    _log("Ray runtime started.")
    _log(f"To add another node to this Ray cluster, run\n  ray start --address='{address}:{port}'")
    if block:
        _log("This command will now block forever until terminated by a signal.")
        code = await _block_until_signal()
        _log("received SIGTERM; shutting down local processes.")
        server.close()
        return code
    return 0


# ------------------------------------------------------------------------------------------ a node


async def start_node(
    address: str, resources: dict[str, Any], block: bool, exit_after_s: float | None = None
) -> int:
    try:
        return await asyncio.wait_for(_join_and_hold(address, resources, block), exit_after_s)
    except TimeoutError:
        sys.stderr.write(f"RuntimeError: simulated node failure ({NODE_EXIT_ENV}={exit_after_s:g})\n")
        return 1


async def _join_and_hold(address: str, resources: dict[str, Any], block: bool) -> int:
    if os.environ.get(NO_JOIN_ENV):
        _log(f"simulated: this node never joins the cluster at {address} ({NO_JOIN_ENV})")
        return await _block_until_signal()
    host, port = _split(address)
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    while True:
        try:
            reader, writer = await asyncio.open_connection(host, port)
            break
        except OSError as exc:
            if time.monotonic() >= deadline:
                sys.stderr.write(f"ConnectionError: could not reach the Ray head at {address}: {exc}\n")
                return 1
            await asyncio.sleep(0.2)
    writer.write(json.dumps({"op": "join", "resources": resources, "pid": os.getpid()}).encode() + b"\n")
    await writer.drain()
    if await reader.readline() != b"ok\n":
        sys.stderr.write("RuntimeError: the Ray head refused this node\n")
        return 1
    _log(f"Ray runtime started; this node joined the cluster at {address}")
    if not block:
        return 0
    _log("This command will now block forever until terminated by a signal.")
    gone: asyncio.Future[Any] = asyncio.ensure_future(reader.read())
    stop = asyncio.ensure_future(_block_until_signal())
    done, _ = await asyncio.wait([gone, stop], return_when=asyncio.FIRST_COMPLETED)
    writer.close()
    if stop in done:
        _log("received SIGTERM; shutting down local processes.")
        return 0
    sys.stderr.write(f"RuntimeError: the Ray head at {address} went away; this node's raylet exits\n")
    return 1


# ------------------------------------------------------------------------------------------ status, stop


def ask_nodes(address: str, timeout_s: float = 5.0) -> dict[str, dict[str, Any]] | None:
    """The cluster's nodes and their resources, or None when no cluster answers at ``address``."""
    host, port = _split(address)
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as conn:
            conn.sendall(b'{"op": "status"}\n')
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
        nodes = json.loads(data)["nodes"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return dict(nodes)


def status_text(nodes: Mapping[str, Mapping[str, Any]], verbose: bool) -> str:
    """Ray's ``ray status`` output for ``nodes`` (the parts gauntlet reads)."""
    lines = ["======== Autoscaler status (SIMULATED Ray) ========", "Node status", "-" * 63, "Active:"]
    lines += [f" 1 node_{node_id}" for node_id in nodes]
    lines += ["Pending:", " (no pending nodes)", "Recent failures:", " (no failures)", ""]
    if verbose:
        for node_id, resources in nodes.items():
            lines += [f"Node: {node_id} (node_{node_id})", " Usage:"]
            lines += [f"  0.0/{float(v):.1f} {name}" for name, v in sorted(resources.items())]
            lines.append("")
    return "\n".join(lines) + "\n"


def stop(force: bool, environ: Mapping[str, str]) -> int:
    """End this node's simulated Ray processes (those with our node tag; every one without a tag)."""
    node = environ.get(NODE_ENV)
    me = os.getpid()
    stopped = 0
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if proc.info["pid"] == me or cmdline[1:4] != ["-m", "launch.sim.ray", "start"]:
            continue
        try:
            if node is not None and proc.environ().get(NODE_ENV) != node:
                continue
            proc.send_signal(signal.SIGKILL if force else signal.SIGTERM)
            stopped += 1
        except psutil.Error:
            continue
    print(f"Stopped all {stopped} Ray processes. (SIMULATED Ray)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ray", description="gauntlet's simulated Ray CLI")
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start")
    start.add_argument("--head", action="store_true")
    start.add_argument("--address", default=None)
    start.add_argument("--node-ip-address", default="127.0.0.1")
    start.add_argument("--port", type=int, default=6379)
    start.add_argument("--resources", default="{}")
    start.add_argument("--include-dashboard", default="true")
    start.add_argument("--disable-usage-stats", action="store_true")
    start.add_argument("--block", action="store_true")
    status = sub.add_parser("status")
    status.add_argument("--address", default=None)
    status.add_argument("-v", "--verbose", action="store_true")
    halt = sub.add_parser("stop")
    halt.add_argument("-f", "--force", action="store_true")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.command == "stop":
        return stop(args.force, os.environ)
    if args.command == "status":
        address = args.address or os.environ.get(RAY_ADDRESS_ENV)
        nodes = ask_nodes(address) if address else None
        if nodes is None:
            sys.stderr.write(NOT_RUNNING + "\n")
            return 1
        sys.stdout.write(status_text(nodes, args.verbose))
        return 0
    resources = json.loads(args.resources)
    if args.head:
        return asyncio.run(start_head(args.node_ip_address, args.port, resources, args.block))
    if not args.address:
        sys.stderr.write("ray start: give --head or --address\n")
        return 2
    exit_after = os.environ.get(NODE_EXIT_ENV)
    return asyncio.run(
        start_node(args.address, resources, args.block, float(exit_after) if exit_after else None)
    )


# ------------------------------------------------------------------------------------------ the server


def ray_role(
    raw: Mapping[str, Any], tp: int, dp: int, pp: int, environ: Mapping[str, str]
) -> tuple[NodeRole | str | None, str | None]:
    """A simulated vLLM under Ray: its place (the nodes the cluster at ``RAY_ADDRESS`` has, or why it cannot
    start) and the cluster's address; ``(None, None)`` when the command line chose no Ray backend."""
    executor = raw.get("distributed_executor_backend") == "ray"
    if not executor and raw.get("data_parallel_backend") != "ray":
        return None, None
    address = environ.get(RAY_ADDRESS_ENV)
    nodes = ask_nodes(address) if address else None
    if nodes is None:
        return f"the Ray backend found no Ray cluster ({RAY_ADDRESS_ENV}={address or '(not set)'})", None
    if executor:  # one replica over the cluster's nodes, as --nnodes places it
        if len(nodes) < 2:
            return None, address
        return node_role(
            {**raw, "nnodes": len(nodes), "node_rank": 0, "headless": False}, tp, dp, pp
        ), address
    return node_role({**raw, "headless": False}, tp, dp, pp), address


class RayNodes:
    """The simulated vLLM's side of the Ray cluster, in place of :class:`launch.sim.nodes.Followers`: the
    nodes are there already (the head waited for them); a node leaving the cluster kills the engine."""

    def __init__(self, role: NodeRole, address: str, log: Callable[[str, str, str], None]) -> None:
        self.role = role
        self._address = address
        self._log = log
        self._writer: asyncio.StreamWriter | None = None
        self._count = 0
        self._watch: asyncio.Task[None] | None = None
        self.lost: asyncio.Future[str] | None = None

    async def open(self) -> None:
        self.lost = asyncio.get_running_loop().create_future()
        host, port = _split(self._address)
        reader, self._writer = await asyncio.open_connection(host, port)
        self._writer.write(b'{"op": "watch"}\n')
        await self._writer.drain()
        self._count = int(json.loads(await reader.readline())["nodes"])
        self._watch = asyncio.ensure_future(self._watching(reader))

    async def _watching(self, reader: asyncio.StreamReader) -> None:
        line = await reader.readline()
        why = f"Ray node lost: {json.loads(line).get('resources')}" if line else "the Ray head went away"
        if self.lost is not None and not self.lost.done():
            self.lost.set_result(why)

    async def wait_all(self, timeout_s: float = JOIN_TIMEOUT_S) -> str | None:
        if self._count < self.role.nodes:
            return f"the Ray cluster at {self._address} has {self._count} node(s); {self.role.nodes} needed"
        self._log("INFO", "ray_utils.py", f"Ray cluster at {self._address}: all {self._count} nodes placed")
        return None

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._watch is not None:
            self._watch.cancel()


if __name__ == "__main__":
    raise SystemExit(main())
