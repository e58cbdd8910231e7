"""Memory headroom: free GPU memory per GPU after warmup at or above the configured minimum.

Pipeline position: reads ``free_gpu_gib_after_warmup`` from the candidate's ``run.json`` (the NVML probe
the launcher ran after warmup). Without a reading the gate is not run, with the reason: by design where the
host says the figure does not exist (the simulator, a CPU host: ``host.kind``, else the host probe has no
NVIDIA driver), else as missing evidence (a GPU host without the reading: the verdict is incomplete).
"""

from __future__ import annotations

from contracts.verdicts import Evidence, GateResult
from gates.registry import Gate, GateContext, register


def no_such_figure(ctx: GateContext) -> str:
    """Why this host has no GPU memory to judge, in words; "" when it should have (a GPU host, or a host
    whose NVML answered). The configured ``host.kind`` decides first: a GPU host whose NVML fails is
    missing evidence, not a host without GPUs. Without the config, the probe's word (run.json's, else the
    sweep's ``host.json``): simulated, or no NVIDIA driver."""
    run = ctx.candidate.run
    if ctx.host_kind is not None:
        return "" if ctx.host_kind == "gpu" else f"host.kind is {ctx.host_kind}: no GPU memory to judge"
    if run is not None and run.backend == "sim":
        return "simulated host: no GPU memory to judge"
    probe = (run.probe if run is not None else None) or ctx.host
    if probe is not None and (probe.simulated or not probe.driver):
        return f"no NVML on this host ({probe.reason or 'no NVIDIA driver'})"
    return ""


@register
class MemoryHeadroom(Gate):
    """Every GPU keeps at least ``min_free_gpu_memory_gib`` free after warmup."""

    name = "memory_headroom"
    order = 40
    requirement = "memory headroom"
    failure = "memory headroom"

    def evaluate(self, ctx: GateContext) -> GateResult:
        run = ctx.candidate.run
        minimum = ctx.cfg.min_free_gpu_memory_gib
        free = run.free_gpu_gib_after_warmup if run else None
        base_free = ctx.baseline.run.free_gpu_gib_after_warmup if ctx.baseline.run else None
        base_min = min(base_free) if base_free else None
        if not free:
            reason = "no per-GPU free memory recorded"
            probe = (run.probe if run else None) or ctx.host
            if probe and probe.reason:
                reason += f" ({probe.reason})"
            absent = no_such_figure(ctx)
            return GateResult(
                gate=self.name,
                role=self.role,
                status="not_run",
                threshold=minimum,
                unit="GiB",
                message=f"{reason}: headroom not judged"
                + ("" if absent else " (a GPU host: the reading after warmup is missing)"),
                evidence=[Evidence(file=ctx.candidate.run_file)],
                not_applicable=absent,
            )
        lowest = min(free)
        short = [i for i, gib in enumerate(free) if gib < minimum]
        per_gpu = ", ".join(f"{gib:.2f}" for gib in free)
        if short:
            message = (
                f"GPU {', '.join(map(str, short))} below {minimum:.2f} GiB free after warmup "
                f"(lowest {lowest:.2f} GiB; per GPU: {per_gpu})"
            )
        else:
            message = (
                f"lowest free memory after warmup {lowest:.2f} GiB >= {minimum:.2f} GiB (per GPU: {per_gpu})"
            )
        return GateResult(
            gate=self.name,
            role=self.role,
            status="fail" if short else "pass",
            observed=lowest,
            threshold=minimum,
            baseline=base_min,
            unit="GiB",
            message=message,
            evidence=[Evidence(file=ctx.candidate.run_file)],
        )
