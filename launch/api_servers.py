"""One API server per node: the flags of hybrid and external DP load balancing, and the servers a spec runs.

Pipeline position: beside :mod:`launch.spec`, whose :func:`~launch.spec.node_flags` renders a node's flags
here when the candidate's ``data_parallel_load_balancing`` is not ``internal`` (:mod:`contracts.dp_balance`),
and under the readiness poll and the load runner, which read a spec's API servers back from its command
lines (:func:`api_servers`): nothing of the mode is stored beside the commands, so a recorded spec says it
by itself. vLLM's documented commands (docs/serving/data_parallel_deployment.md), node k of N with d ranks
each, the head's address A and RPC port P::

    hybrid:   --data-parallel-hybrid-lb --data-parallel-size-local d --data-parallel-start-rank k*d
              --data-parallel-address A --data-parallel-rpc-port P     (and --port PORT+k)
    external: --data-parallel-external-lb --data-parallel-rank k
              --data-parallel-address A --data-parallel-rpc-port P     (and --port PORT+k; d = 1)

No ``--headless`` anywhere: every node serves. ``--api-server-count`` is left to vLLM (``vllm serve``
starts d API server processes on a hybrid node's port, one on an external rank's).
"""

from __future__ import annotations

from collections.abc import Sequence

from contracts.dp_balance import api_port
from contracts.placement import NodeLayout

#: The flags that make a follower serve its own API (a node of a hybrid or external launch).
SERVING_FLAGS = ("--data-parallel-hybrid-lb", "--data-parallel-external-lb")


def balanced_flags(layout: NodeLayout, node: int, rpc_port: int, mode: str, head_address: str) -> list[str]:
    """Node ``node``'s placement flags under ``mode`` (``hybrid`` or ``external``), after the candidate's."""
    meet = ["--data-parallel-address", head_address, "--data-parallel-rpc-port", str(rpc_port)]
    if mode == "external":
        return ["--data-parallel-external-lb", "--data-parallel-rank", str(node), *meet]
    return [
        "--data-parallel-hybrid-lb",
        "--data-parallel-size-local", str(layout.dp_local),
        "--data-parallel-start-rank", str(node * layout.dp_local),
        *meet,
    ]  # fmt: skip


def with_port(argv: Sequence[str], port: int) -> list[str]:
    """``argv`` with its ``--port`` value set to ``port`` (the flag added at the end when absent)."""
    out = list(argv)
    if "--port" in out[:-1]:
        out[out.index("--port") + 1] = str(port)
        return out
    return [*out, "--port", str(port)]


def serves(argv: Sequence[str]) -> bool:
    """A follower's command line that serves its own API (hybrid or external load balancing)."""
    return any(flag in argv for flag in SERVING_FLAGS)


def port_of(argv: Sequence[str], default: int) -> int:
    """The ``--port`` of a command line (``default`` where it is not given)."""
    parts = list(argv)
    return int(parts[parts.index("--port") + 1]) if "--port" in parts[:-1] else default


def api_servers(head_port: int, followers: Sequence[Sequence[str]]) -> list[tuple[int, int]]:
    """The (node, API port) of every server a launch runs: the head's, then each serving follower's.

    >>> api_servers(8000, [["vllm", "--headless"]])
    [(0, 8000)]
    >>> api_servers(8000, [["vllm", "--data-parallel-hybrid-lb", "--port", "8001"]])
    [(0, 8000), (1, 8001)]
    """
    out = [(0, head_port)]
    for node, argv in enumerate(followers, start=1):
        if serves(argv):
            out.append((node, port_of(argv, api_port(head_port, node))))
    return out


def server_urls(base_url: str, followers: Sequence[Sequence[str]], node_names: Sequence[str]) -> list[str]:
    """The base URL of every API server of a launch, the head's (``base_url``) first. A serving follower is
    reached on its node (``node_names[k]``, a SLURM node's name) at its own port; a node on this machine
    (``localhost``, or no name) at the head's host.

    >>> server_urls("http://127.0.0.1:8000", [["--data-parallel-hybrid-lb", "--port", "8001"]], ["localhost"])
    ['http://127.0.0.1:8000', 'http://127.0.0.1:8001']
    >>> server_urls("http://n1:8000", [["--data-parallel-hybrid-lb", "--port", "8001"]], ["n2"])
    ['http://n1:8000', 'http://n2:8001']
    """
    scheme, _, rest = base_url.partition("://")
    head_host = rest.rsplit(":", 1)[0]
    head_port = int(rest.rsplit(":", 1)[1].split("/")[0])
    out = [base_url]
    for node, port in api_servers(head_port, followers)[1:]:
        name = node_names[node - 1] if node - 1 < len(node_names) else ""
        host = head_host if name in ("", "localhost") else name
        out.append(f"{scheme}://{host}:{port}")
    return out
