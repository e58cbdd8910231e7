"""Data-parallel load balancing across nodes: one API server for all ranks, one per node, or one per rank.

Pipeline position: a shared contract beside :mod:`contracts.multinode` (where a candidate's ranks sit on
the nodes). The configuration's check refuses what vLLM (0.32) or gauntlet cannot run
(:func:`balance_problems`), the launch spec renders each node's flags from the mode
(:mod:`launch.api_servers`), and the load runner reads the servers back from the rendered command lines.
A candidate's ``data_parallel_load_balancing`` (docs/multinode.md, "One API server per node"):

- ``internal`` (vLLM's default): the head serves the API for every rank; followers run ``--headless``.
- ``hybrid`` (``--data-parallel-hybrid-lb``): every node serves the API for the ranks on it (vLLM runs
  ``--data-parallel-size-local`` API server processes there, on one port); something in front spreads the
  requests over the nodes (here: the load runner).
- ``external`` (``--data-parallel-external-lb --data-parallel-rank R``): every rank is its own server with
  its own API. gauntlet runs one process per node, so this is the layout of one rank per node.

Node k's API server listens on the service's port plus k (:func:`api_port`): vLLM's documented external
launch gives co-located ranks ports 8000, 8001, and the same rule keeps the nodes of the local test cluster,
which share one machine, apart.

Each rank is an *engine* in the servers' ``/metrics`` (``engine="0"`` .. ``engine="D-1"``):
:func:`engines_in` reads them, for the head's readiness (every rank joined: :mod:`launch.engines`) and for
the load runner's sum over several servers (no engine counted twice: :mod:`load.spread`).
"""

from __future__ import annotations

import re

from contracts.multinode import candidate_layout
from contracts.pipeline import pipeline_parallel_size
from contracts.placement import NodeLayout
from contracts.schema import CandidateConfig, HostConfig

#: The candidate field's values, vLLM's default first.
MODES = ("internal", "hybrid", "external")
#: The candidate field (``candidate.<FIELD>``).
FIELD = "data_parallel_load_balancing"
#: vLLM's own load-balancing flags: rendered from the field, never taken from ``extra_args``.
LB_FLAGS = (
    "data-parallel-hybrid-lb",
    "data-parallel-external-lb",
    "data-parallel-multi-port-external-lb",
    "data-parallel-rank",
)


def api_port(port: int, node: int) -> int:
    """The API port of node ``node``'s server (0: the head, on the service's port).

    >>> api_port(8000, 0), api_port(8000, 1)
    (8000, 8001)
    """
    return port + node


def mode_refusal(mode: str, layout: NodeLayout, where: str) -> str | None:
    """Why ``mode`` cannot balance a candidate placed as ``layout`` on ``where`` (a host), or None.

    The reason says what is allowed: ``internal`` always; ``hybrid`` with DP over nodes; ``external`` with
    DP over nodes and one rank on a node. vLLM 0.32 decides the rest at startup (a refusal there is
    classified as any startup failure): it refuses external balancing for a dense model ("Non-MoE models
    do not support external data parallel mode"), and runs ``hybrid`` with one rank on a node as external
    balancing ("autoswitch to data_parallel_external_lb"), which with a dense model failed at startup on
    CPU (docs/multinode.md)."""
    if mode not in MODES:
        return f"one of {', '.join(MODES)}"
    if mode == "internal":
        return None
    if layout.nodes <= 1:
        return (
            f"internal: {mode} load balancing runs an API server per node of a candidate across nodes, and "
            f"this candidate's ranks fit one node of {where} (one API server)"
        )
    if layout.tp_spans_nodes:
        return (
            f"internal: {mode} load balancing needs DP over nodes; this candidate is one replica across "
            f"{layout.nodes} nodes of {where}, which has one API server"
        )
    if mode == "external" and layout.dp_local > 1:
        return (
            f"hybrid, or internal: external load balancing runs an API server per rank, gauntlet one process "
            f"per node, and this candidate puts {layout.dp_local} ranks on each node of {where}"
        )
    return None


def lb_flag_in(extra_args: dict[str, object]) -> str | None:
    """The ``extra_args`` key that sets one of vLLM's load-balancing flags (:data:`LB_FLAGS`), or None."""
    for name in extra_args:
        if str(name).removeprefix("--").replace("_", "-") in LB_FLAGS:
            return str(name)
    return None


def balance_problems(candidate: CandidateConfig, host: HostConfig) -> list[tuple[list[str], object, str]]:
    """The candidate's load-balancing problems on ``host``: (field path, value, what is allowed) each. A
    layout the host refuses is said by the placement check, not here."""
    out: list[tuple[list[str], object, str]] = []
    mode = getattr(candidate, FIELD)
    if (flag := lb_flag_in(candidate.extra_args)) is not None:
        out.append(
            (
                ["extra_args", flag],
                candidate.extra_args[flag],
                f"not set here: set {FIELD} ({', '.join(MODES)})",
            )
        )
    pp = pipeline_parallel_size(candidate.extra_args)
    layout = candidate_layout(
        candidate.tensor_parallel_size, candidate.data_parallel_size, host, pipeline_parallel_size=pp
    )
    if mode not in MODES:
        out.append(([FIELD], mode, f"one of {', '.join(MODES)}"))
    elif not isinstance(layout, str) and (why := mode_refusal(mode, layout, f"host '{host.name}'")):
        out.append(([FIELD], mode, why))
    return out


#: An ``engine`` label of a Prometheus sample line (the value between its quotes).
_ENGINE = re.compile(r'[{,]\s*engine="([^"]*)"')


def engines_in(metrics: str) -> set[str]:
    """Every ``engine`` label value of the exposition's sample lines (comments skipped; a label's value is
    read in the sample's label set only, never in its number).

    >>> sorted(engines_in('vllm:x{engine="1",model_name="m"} 2')), engines_in('# vllm:x{engine="0"} 1')
    (['1'], set())
    """
    out: set[str] = set()
    for line in metrics.splitlines():
        if line.startswith("#") or "{" not in line:
            continue
        out.update(found.group(1) for found in _ENGINE.finditer(line[: line.find("}") + 1]))
    return out
