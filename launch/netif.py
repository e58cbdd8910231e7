"""A node's address on the host's network interface, and the wrapper that gives each node's server it.

Pipeline position: under :mod:`launch.spec` and :mod:`launch.supervisor`. With ``host.network.interface``
set (:mod:`contracts.network`), every node's command of a multi-node spec starts as
``python -m launch.netif --interface IF -- <the server's command>``: on its node, this sets
``VLLM_HOST_IP`` to the node's own IPv4 address on ``IF`` and executes the server's command, so each rank
announces the address its peers reach it at. The supervisor puts the head's address on ``IF`` in place of
the spec's ``{head_address}`` (:func:`interface_address`), where the followers meet the head. Reading
the interfaces is an injected seam (``psutil.net_if_addrs`` by default)::

    interface_address("lo")   # '127.0.0.1'
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil

from contracts.errors import LaunchError
from contracts.network import HOST_IP_VAR
from launch.command import resolve_argv

Interfaces = Callable[[], Mapping[str, Sequence[Any]]]


def interface_address(interface: str, interfaces: Interfaces = psutil.net_if_addrs) -> str:
    """This node's IPv4 address on ``interface``; refuses a missing interface or one without IPv4, naming
    the interfaces that are there."""
    found = interfaces()
    for addr in found.get(interface, ()):
        if getattr(addr, "family", None) == socket.AF_INET:
            return str(addr.address)
    have = ", ".join(sorted(found)) or "none"
    what = "has no IPv4 address" if interface in found else "does not exist"
    raise LaunchError(
        f"host.network.interface {interface!r} {what} on {socket.gethostname()} (interfaces: {have})",
        hint="set host.network.interface to the interface every node's ranks use (e.g. ib0), or null",
    )


def head_address(
    interface: str | None, node_address: Callable[[], str], interfaces: Interfaces = psutil.net_if_addrs
) -> str:
    """Where the followers meet the head (this node): its address on ``interface``, else the node's
    address (``node_address``: its SLURM NodeAddr, or 127.0.0.1 for nodes on this machine)."""
    return interface_address(interface, interfaces) if interface is not None else node_address()


def main(argv: Sequence[str] | None = None, interfaces: Interfaces = psutil.net_if_addrs) -> int:
    """``python -m launch.netif --interface IF -- COMMAND...``: execute COMMAND with ``VLLM_HOST_IP`` set to
    this node's address on IF (``python`` in COMMAND is this interpreter, a relative path the project's)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 4 or args[0] != "--interface" or args[2] != "--":
        sys.stderr.write("usage: python -m launch.netif --interface IF -- COMMAND...\n")
        return 2
    try:
        address = interface_address(args[1], interfaces)
        command = resolve_argv(args[3:], Path.cwd())
    except LaunchError as exc:
        sys.stderr.write(f"launch.netif: error: {exc}\n")
        return 1
    os.environ[HOST_IP_VAR] = address
    os.execv(command[0], command)  # never returns


if __name__ == "__main__":
    raise SystemExit(main())
