"""Doctor's network check of a multi-node candidate: every node resolves and reaches the head's RPC port.

Pipeline position: under ``orchestrator.doctor``, which runs it before anything is started or stopped. For
a spec that spans nodes (:attr:`launch.spec.LaunchSpec.followers`) it takes the nodes the launch would use
(:func:`launch.nodes.node_launcher`: the SLURM job's, or this machine's), the head's address (its
address on ``host.network.interface`` when one is set, :func:`launch.netif.head_address`), and asks, node
by node, whether the node's name resolves and whether a connection from that node reaches the head's RPC
port (``host.rpc_port``), on which the check listens meanwhile. Every side effect is a seam
(:class:`NodeNetwork`); :func:`network_problems` is pure over them.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from contracts.errors import LaunchError
from launch.netif import head_address
from launch.nodes import node_launcher
from launch.spec import LaunchSpec

#: What a node runs to reach the head: connect to argv[1]:argv[2] within 5 s (exit 1 with the reason).
PROBE = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()\n"
    "except OSError as exc:\n"
    "    sys.exit(f'{type(exc).__name__}: {exc}')\n"
)


@dataclass(frozen=True)
class NodeNetwork:
    """The seams of the check: the nodes' names, the head's address, name resolution and reachability."""

    #: The names of nodes 0 .. n-1 (0: the head); raises LaunchError when the launch could not run here.
    names: Callable[[LaunchSpec], list[str]]
    #: The head's address the followers would meet it at; raises LaunchError (a missing interface).
    head: Callable[[LaunchSpec], str]
    #: A node name's address, or None when it does not resolve.
    resolve: Callable[[str], str | None]
    #: Whether node k (named) reaches ``address:port``: None when it does, else why not.
    reach: Callable[[LaunchSpec, int, str, str, int], str | None]


def network_problems(spec: LaunchSpec, net: NodeNetwork) -> tuple[list[str], list[str]]:
    """The problems of ``spec``'s nodes' network (none for a single-node spec), and notes of what was
    checked or why it could not be."""
    if not spec.followers or spec.rpc_port is None:
        return [], []
    port = spec.rpc_port
    try:
        names = net.names(spec)
        head = net.head(spec)
    except LaunchError as exc:
        return [], [f"network of {spec.candidate}'s {spec.nodes} nodes: not checked here ({exc})"]
    problems: list[str] = []
    for node, name in enumerate(names):
        if net.resolve(name) is None:
            problems.append(f"node {node} ({name}) does not resolve: the launch could not place its ranks")
            continue
        if node and (why := net.reach(spec, node, name, head, port)) is not None:
            problems.append(
                f"node {node} ({name}) cannot reach the head's RPC port {head}:{port} "
                f"(host.rpc_port{', on ' + spec.interface if spec.interface else ''}): {why}"
            )
    nodes = f"{spec.nodes} nodes of {spec.candidate} ({', '.join(names)})"
    return problems, [] if problems else [f"network: {nodes} resolve and reach {head}:{port}"]


def _resolve(name: str) -> str | None:
    try:
        return socket.gethostbyname(name)
    except OSError:
        return None


@contextlib.contextmanager
def listening(address: str, port: int) -> Iterator[str | None]:
    """Listen on ``address:port`` while the nodes try it; yields why it cannot (taken, not an address
    here) or None."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((address, port))
            sock.listen(16)
        except OSError as exc:
            yield f"the head cannot listen on {address}:{port} ({exc})"
            return
        yield None
    finally:
        sock.close()


def real_network(environ: Mapping[str, str] | None = None) -> NodeNetwork:
    """The check's seams on this machine: the nodes the supervisor would use, a probe run on each node (a
    SLURM job step there, else here) against a listener on the head's RPC port."""
    env = dict(os.environ if environ is None else environ)

    def names(spec: LaunchSpec) -> list[str]:
        return node_launcher(spec.host_kind, env).names(spec.nodes)

    def head(spec: LaunchSpec) -> str:
        return head_address(spec.interface, node_launcher(spec.host_kind, env).head_address)

    def reach(spec: LaunchSpec, node: int, name: str, address: str, port: int) -> str | None:
        with listening(address, port) as refused:
            if refused is not None:
                return refused
            argv = node_launcher(spec.host_kind, env).command(
                [sys.executable, "-c", PROBE, address, str(port)], node, spec.port
            )
            try:
                done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                return f"the probe on {name} did not run ({exc})"
            return None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["?"])[-1]

    return NodeNetwork(names=names, head=head, resolve=_resolve, reach=reach)
