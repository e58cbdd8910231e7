"""The multi-node backend of a candidate spanning nodes: vLLM's multiprocessing followers, or a Ray cluster.

Pipeline position: a shared contract beside :mod:`contracts.multinode` (where the ranks sit). The
configuration's check (:func:`backend_problems`) and the launch spec (:func:`ray_commands`) ask it, so
they refuse and render the same thing. A candidate's ``multinode_backend`` chooses:

- ``mp`` (the default): a head and one ``--headless`` follower per other node, vLLM's multiprocessing
  launch (``launch.spec.node_flags``).
- ``ray``: vLLM's Ray launch. One ``ray start --head`` on the head node, ``ray start --address=HEAD:PORT``
  on every other node, and, once Ray reports every node, one ``vllm serve`` on the head with
  ``--distributed-executor-backend ray`` (one replica, its TP or its pipeline stages across nodes) or
  ``--data-parallel-backend ray`` (DP over nodes); no ``--headless`` follower. The spec's head command is
  that ``vllm serve`` (what doctor checks, what the GPUs are counted from); at launch it runs inside
  :mod:`launch.ray_head` (:func:`head_command`), which starts Ray's head on that node, waits for every
  node and then runs it.

Each node's ``ray start`` declares a custom resource ``gauntlet_node_<k>`` (:func:`node_resource`), so
``ray status -v`` says which of the candidate's nodes joined (:func:`joined_nodes`); Ray itself names
nodes only by their ids.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from contracts.placement import NodeLayout

#: The backends a candidate's ``multinode_backend`` may name.
BACKENDS = ("mp", "ray")
#: The module the head node runs: Ray's head, the wait for every node, then ``vllm serve``.
RAY_HEAD_MODULE = "launch.ray_head"
#: How long the head waits for every node to join the Ray cluster (wall seconds), at most: half the host's
#: startup timeout when that is shorter, so the wait's own message (naming the node) comes first.
RAY_JOIN_TIMEOUT_S = 120.0
#: The environment of every node's Ray (the spec's, so fingerprinted; host, service and candidate env win):
#: no drain on SIGTERM. Ray 2.60's ``ray start --block`` otherwise asks its GCS to drain the node for up to
#: 30 s, and in a teardown that signals every Ray process at once the GCS is gone, so each node waited the
#: full 30 s (measured: docs/measurements/ray-backend.md); vLLM is stopped before Ray: nothing to drain.
RAY_ENV = {"RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}
#: vLLM flags the backend owns: a candidate spanning nodes sets ``multinode_backend``, never these in
#: ``extra_args`` (a candidate within one node may: Ray on one node is vLLM's own business).
OWNED_FLAGS = ("distributed-executor-backend", "data-parallel-backend")
#: The placeholder of the head node's address (the same as ``launch.spec.HEAD_ADDRESS``).
HEAD = "{head_address}"

_RESOURCE = re.compile(r"\bgauntlet_node_(\d+)\b")


def node_resource(node: int) -> str:
    """The custom Ray resource node ``node``'s ``ray start`` declares (how ``ray status`` names it)."""
    return f"gauntlet_node_{node}"


def backend_problems(
    backend: object,
    extra_args: Sequence[Mapping[str, Any]],
    layout: NodeLayout | str,
    *,
    balancing: object = "internal",
) -> list[tuple[str, object, str]]:
    """What is wrong with a candidate's ``multinode_backend`` (field, value, allowed), given its
    ``extra_args`` (the service's, the candidate's), where its ranks sit (:func:`candidate_layout`) and
    its ``data_parallel_load_balancing`` (Ray serves one API on the head: internal only)::

        backend_problems("ray", [{}], NodeLayout(2, 1))   # []
        backend_problems("grpc", [{}], NodeLayout(2, 1))  # [('multinode_backend', 'grpc', 'one of ...')]
    """
    out: list[tuple[str, object, str]] = []
    if backend not in BACKENDS:
        allowed = "one of mp (head and --headless followers), ray (a Ray cluster, one vllm serve on the head)"
        return [("multinode_backend", backend, allowed)]
    spans = not isinstance(layout, str) and layout.nodes > 1
    for args in extra_args if spans else ():  # within one node the flags are the candidate's own to set
        for name in args:
            flag = str(name).removeprefix("--").replace("_", "-")
            if flag in OWNED_FLAGS:
                out.append((f"extra_args.{name}", args[name], "absent: set multinode_backend (mp or ray)"))
    if backend == "ray" and not isinstance(layout, str) and layout.nodes == 1:
        out.append((
            "multinode_backend", backend,
            "mp: this candidate fits one node, and a Ray cluster is started only for a candidate spanning "
            "nodes (docs/multinode.md, Ray)",
        ))  # fmt: skip
    if backend == "ray" and balancing != "internal" and not isinstance(layout, str) and layout.nodes > 1:
        out.append((
            "multinode_backend", backend,
            f"mp with data_parallel_load_balancing {balancing!r} (one API server per node runs with mp "
            "followers; under Ray one vllm serve on the head is the only API server), or ray with internal",
        ))  # fmt: skip
    return out


def vllm_ray_flags(layout: NodeLayout) -> list[str]:
    """The flags of the head's ``vllm serve`` under Ray, after the candidate's own: one replica across
    nodes (TP or PP) uses Ray's executor; DP over nodes places its engines with Ray (vLLM's
    data-parallel deployment guide: ``--data-parallel-size-local`` ranks on the head node, the rest on
    the other nodes, no ``--headless`` follower)."""
    if layout.tp_spans_nodes:
        return ["--distributed-executor-backend", "ray"]
    return ["--data-parallel-backend", "ray", "--data-parallel-size-local", str(layout.dp_local),
            "--data-parallel-address", HEAD]  # fmt: skip


def ray_start(ray: Sequence[str], node: int, port: int) -> list[str]:
    """Node ``node``'s ``ray start`` (0: the head; the others join it at ``HEAD:port``), blocking: the
    process is the node's Ray for as long as it runs, and SIGTERM ends it with Ray's processes there."""
    where = ["--head", "--node-ip-address", HEAD, "--port", str(port), "--include-dashboard=false"]
    if node:
        where = ["--address", f"{HEAD}:{port}"]
    resources = json.dumps({node_resource(node): 1}, separators=(",", ":"))
    return [*ray, "start", *where, "--resources", resources, "--disable-usage-stats", "--block"]


def ray_commands(
    ray: Sequence[str], serve: Sequence[str], layout: NodeLayout, port: int
) -> tuple[list[str], list[list[str]]]:
    """The spec's commands under Ray: the head's ``vllm serve`` (``serve`` with :func:`vllm_ray_flags`,
    the form vLLM documents) and node k's ``ray start``. At launch the head's command runs inside
    :func:`head_command`, which starts Ray's head on that node first."""
    return [*serve, *vllm_ray_flags(layout)], [ray_start(ray, node, port) for node in range(1, layout.nodes)]


def ray_port(followers: Sequence[Sequence[str]]) -> int | None:
    """The Ray cluster's port at the head, when the followers are Ray's (``ray start --address
    {head_address}:PORT``); None for vLLM's own followers (or none)."""
    if not followers or "start" not in followers[0] or "--address" not in followers[0][:-1]:
        return None
    address = followers[0][list(followers[0]).index("--address") + 1]
    if not address.startswith(f"{HEAD}:") or not address.removeprefix(f"{HEAD}:").isdigit():
        return None
    return int(address.removeprefix(f"{HEAD}:"))


def head_command(
    argv: Sequence[str], followers: Sequence[Sequence[str]], join_timeout_s: float = RAY_JOIN_TIMEOUT_S
) -> list[str]:
    """The head node's command at launch: :mod:`launch.ray_head` with the head's ``ray start --head`` (the
    same Ray CLI and port as the followers') and the spec's ``vllm serve`` (``argv``); derived from the
    spec's fingerprinted commands alone, so the same spec always launches the same way."""
    port = ray_port(followers)
    if port is None:
        raise ValueError("not a Ray spec: its followers are not `ray start --address {head_address}:PORT`")
    ray = ray_entrypoint(followers[0])
    return ["python", "-m", RAY_HEAD_MODULE, "--nodes", str(len(followers) + 1), "--address", HEAD,
            "--ray-port", str(port), "--join-timeout-s", f"{join_timeout_s:g}",
            "--", *ray_start(ray, 0, port), "--", *argv]  # fmt: skip


def joined_nodes(status: str) -> set[int]:
    """The candidate's nodes ``ray status -v`` lists (by their :func:`node_resource`)::

    joined_nodes("Node: 3f0c...\\n Usage:\\n  0.0/1.0 gauntlet_node_1\\n")  # {1}
    """
    return {int(m.group(1)) for m in _RESOURCE.finditer(status)}


def ray_entrypoint(argv: Sequence[str]) -> list[str]:
    """The Ray CLI of a node's ``ray start`` command (what comes before ``start``)."""
    return list(argv[: list(argv).index("start")]) if "start" in argv else ["ray"]
