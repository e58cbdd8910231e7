"""Memory headroom: free GPU memory per GPU after warmup at or above the configured minimum.

Pipeline position: reads ``free_gpu_gib_after_warmup`` from the candidate's ``run.json`` (the NVML probe
the launcher ran after warmup). Without NVML (CPU or simulated host) the gate is not run, with the reason.
"""

from __future__ import annotations

from contracts.verdicts import Evidence, GateResult
from gates.registry import Gate, GateContext, register


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
            if run and run.probe and run.probe.reason:
                reason += f" ({run.probe.reason})"
            return GateResult(
                gate=self.name,
                role=self.role,
                status="not_run",
                threshold=minimum,
                unit="GiB",
                message=f"{reason}: headroom not judged",
                evidence=[Evidence(file=ctx.candidate.run_file)],
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
