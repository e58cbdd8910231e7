"""Verdict files: what the gates decided, with the numbers and the evidence behind each decision.

Pipeline position: :func:`gates.evaluate_sweep` turns stored result files (:mod:`contracts.results`)
into a :class:`SweepVerdict`; :func:`gates.write_verdicts` stores it as ``<sweep>/verdicts.json`` and the
report reads it back with :func:`gates.read_verdicts`. Ratios are candidate / baseline; infinite values
(right-censored answer times) are written as JSON ``Infinity``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

VERDICTS_SCHEMA_VERSION = 1

GateStatus = Literal["pass", "fail", "inconclusive", "not_run"]
GateRole = Literal["requirement", "gain"]
Decision = Literal["keep", "reject", "neutral", "incompatible", "inconclusive"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="constants")


class Evidence(_Model):
    """A result file (relative to the sweep directory) and the request indices in it that matter."""

    file: str
    requests: list[int] = Field(default_factory=list)  # RequestRecord.index values; empty = the whole file


class Comparison(_Model):
    """One metric of one profile, candidate against baseline."""

    metric: str  # e.g. "output_tps", "ttft_p50", "serial_e2e_p50", "visible_answers"
    profile: str
    status: GateStatus
    observed: float | None  # the candidate's value
    baseline: float | None  # the baseline's value
    ratio: float | None = None  # the estimate of candidate / baseline the decision used
    interval: tuple[float, float] | None = None  # confidence interval of the ratio
    threshold: float | None = None  # the ratio (or absolute value) the rule compares against
    unit: str = ""
    method: str = ""  # how the interval was computed
    n_candidate: int = 0  # repeats or requests behind the candidate's value
    n_baseline: int = 0
    more_repeats: int | None = None  # when inconclusive: repeats per side to add (estimate)
    message: str = ""


class GateResult(_Model):
    """One requirement (or the gain) judged for one candidate."""

    gate: str  # registered name
    role: GateRole  # a failed requirement rejects; a gain decides keep against neutral
    status: GateStatus
    observed: float | None = None  # the deciding comparison's candidate value
    threshold: float | None = None
    baseline: float | None = None
    interval: tuple[float, float] | None = None
    unit: str = ""
    message: str  # one line with numbers
    evidence: list[Evidence] = Field(default_factory=list)
    comparisons: list[Comparison] = Field(default_factory=list)
    more_repeats: int | None = None


class Verdict(_Model):
    """The decision for one candidate, and every gate result behind it."""

    candidate: str
    decision: Decision
    reason: str  # one line with numbers
    failed: list[str] = Field(default_factory=list)  # names of the failed requirement gates
    gains: list[str] = Field(default_factory=list)  # improvements beyond noise, with numbers
    gates: list[GateResult] = Field(default_factory=list)
    more_repeats: int | None = None  # when inconclusive: repeats per side that would likely settle it
    reversal: str | None = None  # serial and loaded rankings against the baseline disagree
    decision_before_drift: Decision | None = None  # set when baseline drift overrode the decision


class DriftResult(_Model):
    """The baseline measured at the start against the same profiles measured again at the end."""

    status: GateStatus  # fail = drift beyond noise (every measured verdict becomes inconclusive)
    message: str
    comparisons: list[Comparison] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)


class SweepVerdict(_Model):
    """Every verdict of one sweep, the configuration to retain, drift and the reversal lesson."""

    schema_version: int = VERDICTS_SCHEMA_VERSION
    baseline: str
    retained: str  # the baseline unless some candidate is keep
    retained_reason: str
    drift: DriftResult
    verdicts: list[Verdict]
    reversal: str | None = None  # sweep-level: serial and loaded rankings disagree
    gates_evaluated: list[str] = Field(default_factory=list)
