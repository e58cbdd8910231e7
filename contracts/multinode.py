"""The multi-node layouts vLLM documents: where a candidate's TP x PP x DP ranks sit on a host's nodes.

Pipeline position: a shared contract beside :mod:`contracts.schema` (whose
:func:`~contracts.placement.node_layout` places TP x DP) and :mod:`contracts.pipeline` (which reads
``--pipeline-parallel-size`` from ``extra_args``). The configuration's check, ``plan``, ``doctor`` and
the launch spec ask :func:`candidate_layout`, so they refuse and render the same layouts. What vLLM
documents across nodes (docs/multinode-layouts.md):

- DP over nodes, each replica (TP x PP) within a node: a head and ``--headless`` followers with
  ``--data-parallel-size-local``/``--data-parallel-start-rank``/``--data-parallel-address``.
- One replica across nodes (DP = 1): TP within a node and PP across nodes (vLLM's multi-node advice: TP
  the GPUs of a node, PP the nodes), or TP across nodes; ``--nnodes``/``--node-rank``/``--master-addr``/
  ``--master-port``, ``--headless`` on the followers.

A replica across nodes with DP > 1 is refused with the alternatives: vLLM's multi-node guides never
launch it, and gauntlet has not run it on real vLLM.
"""

from __future__ import annotations

from contracts.placement import NodeLayout, host_layout
from contracts.schema import HostConfig


def _alternatives(tp: int, pp: int, dp: int, per: int) -> str:
    """The supported layouts of the same GPUs, in words (the refusal's "allowed")."""
    gpus = tp * pp * dp
    within = f"TP x PP <= {per} (a replica within a node) and DP over nodes"
    one = f"DP = 1 with TP <= {per} and extra_args.pipeline_parallel_size = {gpus // min(tp, per)}"
    return (
        f"supported instead: {within} (e.g. TP = {min(tp, per)}, DP = {gpus // min(tp, per)}); one replica "
        f"across nodes: {one} (TP within a node, PP across nodes), or TP = {tp * pp} with DP = 1"
    )


def candidate_layout(
    tensor_parallel_size: int, data_parallel_size: int, host: HostConfig, *, pipeline_parallel_size: int = 1
) -> NodeLayout | str:
    """Where TP x PP x DP sits on ``host``'s nodes, or why vLLM cannot run it there (the reason names the
    rule, the values and the supported alternatives).

    A replica is TP x PP GPUs. On one node, or within one: as :func:`contracts.placement.host_layout` (PP
    on one node is one more factor of the replica). A replica across nodes (``nodes_per_replica > 1``)
    needs DP = 1, and with PP > 1 a TP that divides a node's GPUs::

        candidate_layout(8, 1, sim_2x8, pipeline_parallel_size=2)  # NodeLayout(2, 0, nodes_per_replica=2)
        candidate_layout(4, 2, sim_2x8, pipeline_parallel_size=2)  # NodeLayout(2, 1): DP over nodes
        candidate_layout(16, 2, sim_4x8)  # 'TP x DP = 32: one replica (TP16) spans 2 nodes ...'
    """
    tp, dp, pp = tensor_parallel_size, data_parallel_size, pipeline_parallel_size
    per = host.gpus_per_node or host.gpu_count
    if host.nodes <= 1 or tp * pp * dp <= per:
        return NodeLayout(1, dp)
    replica = tp * pp
    what = "TP x PP x DP" if pp > 1 else "TP x DP"
    shape = f"TP{tp} x PP{pp}" if pp > 1 else f"TP{tp}"
    where = f"host '{host.name}'"
    if replica > per and dp > 1:
        return (
            f"{what} = {tp * pp * dp}: one replica ({shape}) spans {-(-replica // per)} nodes of {per} GPUs "
            f"of {where} with DP = {dp}; vLLM documents a replica across nodes only with DP = 1 "
            f"(not run on real vLLM here); {_alternatives(tp, pp, dp, per)}"
        )
    if pp == 1:
        return host_layout(tp, dp, host)
    if replica <= per:  # DP over nodes, each replica's stages within a node
        local = per // replica
        if dp % local:
            return (
                f"DP = {dp} over nodes of {per} GPUs of {where}: each node holds {local} {shape} replica(s), "
                f"so DP must be a multiple of {local} (every node runs the same ranks)"
            )
        layout = NodeLayout(dp // local, local)
    elif tp > per or per % tp:
        return (
            f"PP = {pp} across nodes of {per} GPUs of {where} needs TP within a node: TP = {tp} must divide "
            f"{per} (vLLM: TP the GPUs of a node, PP the nodes)"
        )
    elif replica % per:
        return (
            f"TP x PP = {replica} spans nodes of {per} GPUs of {where}: it must be a multiple of {per} "
            f"(every node runs whole pipeline stages)"
        )
    else:
        layout = NodeLayout(replica // per, 0, replica // per)
    if layout.nodes > host.nodes:
        return f"{what} = {tp * pp * dp} needs {layout.nodes} nodes of {per} GPUs; {where} has {host.nodes}"
    return layout
