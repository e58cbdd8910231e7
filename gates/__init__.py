"""Acceptance gates: stored results -> gate results -> a verdict per candidate (keep, reject, neutral,
incompatible, inconclusive), with numbers, intervals and evidence.

Pipeline position: after the load runner, before the report. Pure apart from reading the sweep's result
files and writing ``verdicts.json``. Importing the package registers every gate (one module each).
"""

from contracts.verdicts import (
    Comparison,
    DriftResult,
    Evidence,
    GateResult,
    SweepVerdict,
    Verdict,
)
from gates import (  # noqa: F401  (imported to register the gates, in evaluation order)
    answer_reliability,
    compatibility,
    concurrency,
    latency_gain,
    memory_headroom,
    stability,
)
from gates.registry import REGISTRY, Gate, GateContext, register
from gates.verdict import VERDICTS_FILE, decide, evaluate_sweep, read_verdicts, write_verdicts

__all__ = [
    "REGISTRY",
    "VERDICTS_FILE",
    "Comparison",
    "DriftResult",
    "Evidence",
    "Gate",
    "GateContext",
    "GateResult",
    "SweepVerdict",
    "Verdict",
    "decide",
    "evaluate_sweep",
    "read_verdicts",
    "register",
    "write_verdicts",
]
