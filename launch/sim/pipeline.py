"""The simulator's pipeline stages: what ``--pipeline-parallel-size`` does to a replica's step time.

Pipeline position: inside the simulated server program, read by the step-time model
(:func:`launch.sim.model.step_cost`, :class:`launch.sim.model.StepCost`) and, for stages on several
nodes, by :mod:`launch.sim.nodes`.

The model (docs/simulator.md, "Pipeline stages"; the hop times are assumptions, not measurements): a
replica of TP x PP GPUs splits its layers over PP stages of TP GPUs each and keeps up to PP micro-batches
in flight, as vLLM does. In a steady pipeline each stage runs every micro-batch once per round, so a
round advances the whole batch one step: its per-token work (prefill, decode, attention, per-sequence)
is spread over ``min(PP, sequences)`` micro-batches working at once, while the per-step fixed cost
(launches, per-layer latency) is paid once along the pipeline, plus one hop per stage boundary of a
round (activations to the next stage, the sampled tokens back to the first): :data:`STAGE_HOP_MS`
within a node, :data:`NODE_HOP_MS` where a boundary crosses nodes. So PP raises a loaded replica's
throughput up to PP times, and a lone request (one micro-batch) is slower per token than TP alone by the
hops. Bubbles between rounds and uneven micro-batches are not modelled.
"""

from __future__ import annotations

#: One stage boundary within a node: a micro-batch's activations over NVLink (an assumption).
STAGE_HOP_MS = 0.02
#: One stage boundary across nodes: the same over InfiniBand, with the network's latency (an assumption).
NODE_HOP_MS = 0.1


def pipeline_hops_ms(stages: int) -> float:
    """What a round of ``stages`` pipeline stages on one node adds to the step's fixed cost (1: nothing).

    >>> pipeline_hops_ms(1), pipeline_hops_ms(4)
    (0.0, 0.08)
    """
    return stages * STAGE_HOP_MS if stages > 1 else 0.0


def micro_batches(stages: int, seqs: int) -> int:
    """How many micro-batches of a round work at once: one per stage, at most one per sequence.

    >>> micro_batches(1, 64), micro_batches(4, 64), micro_batches(4, 1)
    (1, 4, 1)
    """
    return max(1, min(stages, seqs))


def node_crossing_ms(nodes: int) -> float:
    """What a round pays more when its stages sit on ``nodes`` nodes: ``nodes`` of its boundaries (one
    into each next node, and the sampled tokens back to the first) cross the network instead of NVLink."""
    return nodes * (NODE_HOP_MS - STAGE_HOP_MS) if nodes > 1 else 0.0
