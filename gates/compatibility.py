"""Compatibility: a candidate that never started is incompatible, never a latency or throughput loss.

Pipeline position: the first gate; it reads only the candidate's ``run.json`` (the launcher's startup
record). When it fails, the verdict is ``incompatible`` and no performance gate is evaluated.
"""

from __future__ import annotations

from contracts.verdicts import Evidence, GateResult
from gates.registry import Gate, GateContext, register


@register
class Compatibility(Gate):
    """The server started and became ready."""

    name = "compatibility"
    order = 0
    requirement = "compatibility (the candidate starts on this host)"
    failure = "incompatible"

    def evaluate(self, ctx: GateContext) -> GateResult:
        run = ctx.candidate.run
        evidence = [Evidence(file=ctx.candidate.run_file)]
        if run is None:
            return GateResult(
                gate=self.name,
                role=self.role,
                status="inconclusive",
                # The verdict is incomplete (gates.evidence.not_measured): resuming the sweep launches it.
                message=f"no {ctx.candidate.run_file}: not measured (stopped during its launch, or never "
                "reached)",
            )
        startup = run.startup
        if startup.ok:
            ready = startup.time_to_ready_s
            took = f" in {ready:.1f} s" if ready is not None else ""
            return GateResult(
                gate=self.name,
                role=self.role,
                status="pass",
                observed=ready,
                unit="s",
                message=f"started and became ready{took}",
                evidence=evidence,
            )
        kind = startup.kind or "unclassified"
        code = f", exit code {startup.exit_code}" if startup.exit_code is not None else ""
        line = startup.matched_line or (startup.evidence[-1] if startup.evidence else "no log line")
        return GateResult(
            gate=self.name,
            role=self.role,
            status="fail",
            unit="",
            message=f"startup failed: {kind}{code}: {line.strip()}",
            evidence=evidence,
        )
