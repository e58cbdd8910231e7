"""Loopback ports for tests that start real servers: one free now, and whether one is free again."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nobody listens on right now (bind port 0 and read it back)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int) -> bool:
    """True when a new listener could bind the port (what teardown must leave behind)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
