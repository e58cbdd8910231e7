"""Acceptance gates and the judge: stored results -> gate results -> a verdict per candidate (keep,
reject, neutral, incompatible, inconclusive), with numbers, intervals and evidence -> ``verdicts.json``.

Pipeline position: after the load runner, before the report, joined to both by files. Pure apart from
reading the sweep's result files and (the judge, :mod:`gates.judge`) writing ``verdicts.json``.
Importing the package registers every gate (one module each).
"""

from contracts.layout import VERDICTS_FILE
from contracts.verdicts import (
    Comparison,
    DriftResult,
    Evidence,
    GateResult,
    SweepVerdict,
    Verdict,
    read_verdicts,
    write_verdicts,
)
from gates import (  # noqa: F401  (imported to register the gates, in evaluation order)
    answer_accuracy,
    answer_reliability,
    capacity,
    compatibility,
    concurrency,
    cost,
    latency_gain,
    lm_eval_gate,
    memory_headroom,
    spec_acceptance,
    stability,
)
from gates.judge import judge_sweep
from gates.registry import REGISTRY, Gate, GateContext, register
from gates.verdict import decide, evaluate_sweep

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
    "judge_sweep",
    "read_verdicts",
    "register",
    "write_verdicts",
]
