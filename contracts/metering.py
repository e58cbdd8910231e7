"""Which GPUs a run's energy was read on: the candidate's own devices, mapped by UUID, and what shares them.

Pipeline position: a shared contract, pure. The GPU meter (:class:`launch.nvml.NvmlEnergy`, through
:mod:`launch.gpu_select`) maps the server's devices (``CUDA_VISIBLE_DEVICES`` of its launch spec, else
vLLM's default: the first TP x DP devices) to NVML handles by UUID and meters only those; the record
travels inside each run's :class:`~contracts.results.RunEnergy` (``run.json``), and the report says it
beside the figures::

    GpuMetering(selected_by="vLLM's default placement (the first 4 devices)", indices=[0, 1, 2, 3],
                uuids=[...], host_gpus=8).describe()
    # '4 of 8 GPUs (0, 1, 2, 3; vLLM's default placement (the first 4 devices))'

A multi-node candidate (:class:`launch.node_energy.NodesEnergy`) is metered on every node through its
per-node agent: ``per_node`` says, node by node, which GPUs were read and their joules, or why that node
was not read; ``metered_nodes`` counts the nodes read. A run with a node not read is "not measured" (its
figure would be some nodes' alone), and its metering names the node and why.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class NodeMetering(BaseModel):
    """One node of a multi-node candidate as its energy was read: its GPUs and joules, or why not."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    node: int | None  # 0: the head's node; None: this machine holds every node
    name: str  # the node's name (SLURM's), as its agent reports it
    selected_by: str = ""  # how its GPUs were chosen, in words
    indices: list[int] = Field(default_factory=list)  # NVML indices of the GPUs read on it
    uuids: list[str] = Field(default_factory=list)  # their UUIDs as its agent reports them ("": unknown)
    host_gpus: int = 0  # GPUs its agent reports
    joules: float | None = None  # its GPUs together over the window; None: not read
    problem: str = ""  # why it was not read ("": read)

    @property
    def read(self) -> bool:
        return not self.problem

    @property
    def label(self) -> str:
        return f"node {self.node} ({self.name})" if self.node is not None else f"node {self.name}"


class GpuMetering(BaseModel):
    """The GPUs one run was metered on, and what may make the figure more than the candidate's own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    selected_by: str  # how the devices were found, in words (CUDA_VISIBLE_DEVICES, vLLM's default placement)
    indices: list[int]  # NVML indices of the metered GPUs (PCI bus order)
    uuids: list[str]  # their UUIDs (GPU-...), the key they were matched by
    host_gpus: int  # GPUs NVML sees on the metered node
    # Processes of other programs on the metered GPUs (pids; another tenant, a leftover server): their
    # draw is in the figure, which is then "shared", not the candidate's alone.
    shared_with: list[int] = Field(default_factory=list)
    # Each metered GPU's power at the run's opening, before its requests (the server idle, its model
    # loaded), W; None where NVML gave no reading.
    idle_watts_per_gpu: list[float] | None = None
    nodes: int = 1  # nodes the candidate runs on
    metered_nodes: int = 1  # of them, nodes whose GPUs were read (NvmlEnergy: the head's only)
    # Each node as read by the multi-node meter (empty: one node's NVML read here, NvmlEnergy).
    per_node: list[NodeMetering] = Field(default_factory=list)

    @property
    def shared(self) -> bool:
        return bool(self.shared_with)

    @property
    def head_only(self) -> bool:
        """The head's NVML alone read a multi-node candidate (NvmlEnergy given one)."""
        return not self.per_node and self.metered_nodes < self.nodes

    @property
    def partial(self) -> bool:
        """Fewer nodes read than the candidate runs on (head-only, or a node the multi-node meter missed)."""
        return self.metered_nodes < self.nodes

    def short(self) -> str:
        """``4 of 8 GPUs``, with ``shared`` and ``head node only`` where they hold: the terminal's words."""
        words = [f"{len(self.indices)} of {self.host_gpus} GPUs"]
        words += ["shared"] if self.shared else []
        if self.per_node:
            words += [f"{self.metered_nodes} of {self.nodes} nodes"]
        else:
            words += ["head node only"] if self.head_only else []
        return ", ".join(words)

    def describe(self) -> str:
        """The metering in a few words, for the report and the terminal."""
        parts = [
            f"{len(self.indices)} of {self.host_gpus} GPUs ({', '.join(map(str, self.indices))}; "
            f"{self.selected_by})"
        ]
        if self.idle_watts_per_gpu:
            idle = sum(self.idle_watts_per_gpu) / len(self.idle_watts_per_gpu)
            parts.append(f"idle {idle:.0f} W per GPU")
        if self.shared:
            pids = ", ".join(map(str, self.shared_with[:5])) + (", ..." if len(self.shared_with) > 5 else "")
            parts.append(f"SHARED with other processes (pid {pids}): their draw is in the figure")
        if self.per_node:
            parts.append(self._nodes_text())
        elif self.head_only:
            parts.append(
                f"HEAD NODE ONLY: 1 of {self.nodes} nodes metered, the followers' GPUs are not in the figure"
            )
        return "; ".join(parts)

    def _nodes_text(self) -> str:
        read = [n for n in self.per_node if n.read]
        where = "; ".join(
            f"{n.label}: GPU {', '.join(map(str, n.indices))}"
            if n.read
            else f"{n.label}: NOT READ ({n.problem})"
            for n in self.per_node
        )
        if len(read) == len(self.per_node) and self.metered_nodes >= self.nodes:
            return f"every node metered, {self.metered_nodes} of {self.nodes} ({where})"
        return (
            f"PARTIAL: {self.metered_nodes} of {self.nodes} nodes metered ({where}); the run is not "
            "measured, its figure would leave out the nodes not read"
        )
