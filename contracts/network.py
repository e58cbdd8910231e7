"""Network settings of a multi-node host: the interface its nodes' ranks talk over.

Pipeline position: a shared contract, a field of :class:`contracts.schema.HostConfig` (``host.network``).
The launch spec turns it into the environment vLLM's ranks read on every node (:func:`network_env`:
Gloo's and NCCL's socket interface) and a wrapper that sets each node's own ``VLLM_HOST_IP``, its address
on that interface (:mod:`launch.netif`); the head's address the followers meet it at is the head's
address on the same interface. ``doctor`` checks, before anything is stopped, that every node resolves
and reaches the head's RPC port (:mod:`launch.netcheck`). docs/multinode-layouts.md, "Network".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

#: A Linux network interface name: at most 15 characters (IFNAMSIZ - 1), no '/' or whitespace.
INTERFACE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,14}")
#: The variables that name the interface for PyTorch's Gloo (vLLM's CPU-side groups) and NCCL.
SOCKET_IFNAME_VARS = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
#: The variable vLLM reads its own node's address from (else it guesses from the default route).
HOST_IP_VAR = "VLLM_HOST_IP"
#: The module that sets a node's VLLM_HOST_IP from the interface, then runs the server (launch/netif.py).
WRAPPER_MODULE = "launch.netif"


@dataclass
class NetworkConfig:
    """How a multi-node host's nodes reach each other."""

    # The network interface (e.g. ib0, eth1) every node's ranks use: GLOO_SOCKET_IFNAME,
    # NCCL_SOCKET_IFNAME and VLLM_HOST_IP (the node's address on it) are set from it, and the followers
    # meet the head at its address there. None: each library's own choice, the head at its NodeAddr.
    interface: str | None = None


def interface_problem(value: object) -> str | None:
    """What is allowed instead of ``value`` as ``host.network.interface``, or None when it is one.

    >>> interface_problem("ib0"), interface_problem(None), interface_problem("eth 0") is not None
    (None, None, True)
    """
    if value is None or (isinstance(value, str) and INTERFACE_NAME.fullmatch(value)):
        return None
    return "a network interface name (1-15 letters, digits, '_', '.', ':', '-'; e.g. ib0), or null"


def network_env(network: NetworkConfig) -> dict[str, str]:
    """The environment every node's ranks get from ``network`` (empty: no interface set).

    >>> network_env(NetworkConfig("ib0"))
    {'GLOO_SOCKET_IFNAME': 'ib0', 'NCCL_SOCKET_IFNAME': 'ib0'}
    """
    if network.interface is None:
        return {}
    return dict.fromkeys(SOCKET_IFNAME_VARS, network.interface)


def wrap(argv: Sequence[str], interface: str) -> list[str]:
    """``argv`` run through the wrapper that sets ``VLLM_HOST_IP`` from ``interface`` on its node.

    >>> wrap(["vllm", "serve", "m"], "ib0")
    ['python', '-m', 'launch.netif', '--interface', 'ib0', '--', 'vllm', 'serve', 'm']
    """
    return ["python", "-m", WRAPPER_MODULE, "--interface", interface, "--", *argv]


def wrapped_interface(argv: Sequence[str]) -> str | None:
    """The interface a wrapped command names (None: not wrapped).

    >>> wrapped_interface(wrap(["vllm"], "ib0")), wrapped_interface(["vllm", "serve"])
    ('ib0', None)
    """
    if list(argv[1:4]) == ["-m", WRAPPER_MODULE, "--interface"] and len(argv) > 4:
        return argv[4]
    return None
