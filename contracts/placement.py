"""Where a candidate's ranks sit: TP x DP (x PP) against a host's GPUs and nodes.

Pipeline position: part of the typed config (:mod:`contracts.schema`), pure. :func:`placement_problem` is
the one rule behind the config check (the configured host) and NVML's (the GPUs the driver sees);
:func:`node_layout` / :func:`host_layout` place TP x DP on a host's nodes (:mod:`contracts.multinode`
adds pipeline parallelism and the layouts vLLM documents across nodes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from contracts.schema import HostConfig


def placement_problem(
    tensor_parallel_size: int,
    data_parallel_size: int,
    *,
    gpus: int,
    placement: str,
    where: str,
    pipeline_parallel_size: int = 1,
) -> str | None:
    """Why TP x DP (x PP, :mod:`contracts.pipeline`) does not fit ``gpus`` devices under ``placement``,
    or None when it does.

    The one rule behind the config check (the configured host) and the NVML check (the GPUs the driver
    sees): ``exact`` means every GPU serves (TP x DP == gpus), ``at_most`` that TP x DP may leave some idle.
    """
    used = tensor_parallel_size * data_parallel_size * pipeline_parallel_size
    what = "TP x PP x DP" if pipeline_parallel_size != 1 else "TP x DP"
    if placement == "exact" and used != gpus:
        return f"{what} = {used} must equal the {gpus} GPUs of {where} (every GPU serves; change TP or DP)"
    if placement == "at_most" and used > gpus:
        return f"{what} = {used} exceeds the {gpus} devices of {where}"
    return None


@dataclass(frozen=True)
class NodeLayout:
    """How a candidate's TP x DP ranks sit on a host's nodes (:func:`node_layout`)."""

    #: Nodes the candidate uses; 1 is a single-node launch, rendered exactly as on a one-node host.
    nodes: int
    #: Data-parallel ranks on each node (0 when one replica's TP spans several nodes).
    dp_local: int
    #: Nodes one replica spans (1 unless TP exceeds a node's GPUs).
    nodes_per_replica: int = 1

    @property
    def tp_spans_nodes(self) -> bool:
        return self.nodes_per_replica > 1


def node_layout(
    tensor_parallel_size: int, data_parallel_size: int, *, nodes: int, gpus_per_node: int, where: str
) -> NodeLayout | str:
    """Where TP x DP sits on ``nodes`` nodes of ``gpus_per_node`` GPUs, or why it cannot sit there.

    TP x DP within one node is a single-node launch. Beyond it, replicas fill whole nodes: a node holds
    ``gpus_per_node // TP`` replicas and DP must be a multiple of that (each node runs the same number of
    ranks, as ``--data-parallel-size-local`` says); a TP larger than a node must be a multiple of it (a
    replica spans ``TP / gpus_per_node`` nodes)::

        node_layout(8, 2, nodes=2, gpus_per_node=8, where="h")   # NodeLayout(nodes=2, dp_local=1)
        node_layout(16, 1, nodes=2, gpus_per_node=8, where="h")  # NodeLayout(2, 0, nodes_per_replica=2)
        node_layout(4, 2, nodes=2, gpus_per_node=8, where="h")   # NodeLayout(nodes=1, dp_local=2)
    """
    tp, dp, per = tensor_parallel_size, data_parallel_size, gpus_per_node
    if tp * dp <= per:
        return NodeLayout(1, dp)
    if tp <= per:
        local = per // tp
        if dp % local:
            return (
                f"DP = {dp} over nodes of {per} GPUs of {where}: each node holds {local} TP{tp} "
                f"replica(s), so DP must be a multiple of {local} (every node runs the same ranks)"
            )
        layout = NodeLayout(dp // local, local)
    elif tp % per:
        return f"TP = {tp} spans nodes of {per} GPUs of {where}: it must be a multiple of {per}"
    else:
        layout = NodeLayout(dp * (tp // per), 0, tp // per)
    if layout.nodes > nodes:
        return f"TP x DP = {tp * dp} needs {layout.nodes} nodes of {per} GPUs; {where} has {nodes}"
    return layout


def host_layout(tensor_parallel_size: int, data_parallel_size: int, host: HostConfig) -> NodeLayout | str:
    """:func:`node_layout` on ``host``'s nodes (a one-node host: every layout is one node)."""
    if host.nodes <= 1:
        return NodeLayout(1, data_parallel_size)
    return node_layout(
        tensor_parallel_size,
        data_parallel_size,
        nodes=host.nodes,
        gpus_per_node=host.gpus_per_node or host.gpu_count,
        where=f"host '{host.name}'",
    )
