"""Loopback ports for tests that start real servers: one free now, and whether one is free again."""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Mapping
from pathlib import Path

#: Ports a sweep serves on from its ``service.port``: the port itself, then ``port + 1 + k`` for the
#: parallel jobs' simulated nodes and trials (orchestrator/app/jobs.py); more than any test asks.
SPAN = 8
#: The lowest port handed out: above the well-known and registered services most hosts run.
LOWEST = 20000


def _ephemeral_low(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> int:
    """The first port of the kernel's ephemeral range (Linux's default 32768 where it cannot be read)."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def port_is_free(port: int) -> bool:
    """True when a new listener could bind the port (what teardown must leave behind)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def worker_range(low: int, high: int, env: Mapping[str, str] = os.environ) -> tuple[int, int]:
    """This pytest-xdist worker's own slice of ``[low, high)`` (the whole range outside xdist).

    Two workers each check that a port is free and then start a sweep on it and the ports after it: with
    one shared range, both could pick overlapping blocks in the instant between one's check and its
    server's bind (an integration run once had one worker's simulated node on ``port + 1`` taken by the
    other worker's sweep, failing three tests). Disjoint slices make that impossible.
    """
    worker = env.get("PYTEST_XDIST_WORKER", "")
    count = int(env.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if count <= 1 or not worker.startswith("gw") or not worker[2:].isdigit():
        return low, high
    width = (high - low) // count
    index = int(worker[2:]) % count
    return low + index * width, low + (index + 1) * width


def free_port(span: int = SPAN) -> int:
    """A port nobody listens on right now, with the ``span - 1`` ports after it free too.

    Chosen below the kernel's ephemeral range: a port from it (``bind(0)``) can be taken by any client
    connection's source port on the machine before the sweep's simulated node binds ``port + 1`` (an
    integration run at load 4 once failed on ``PortInUseError: port 46158 ... already taken``).
    """
    low, high = worker_range(LOWEST, _ephemeral_low() - span)
    picker = random.Random()
    for _ in range(1000):
        base = picker.randrange(low, high)
        if all(port_is_free(base + k) for k in range(span)):
            return base
    raise RuntimeError(f"no {span} free consecutive ports in [{low}, {high + span})")
