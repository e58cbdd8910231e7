"""Verdict files: what the gates decided, with the numbers and the evidence behind each decision.

Pipeline position: the judge (``python -m orchestrator judge``, :func:`gates.judge.judge_sweep`) turns
stored result files (:mod:`contracts.results`) into a :class:`SweepVerdict` and stores it with
:func:`write_verdicts` as ``<sweep>/verdicts.json``; the report reads it back with :func:`read_verdicts`
and computes nothing of its own: the key figures, rankings and reversals it shows are in the file.
Ratios are candidate / baseline; infinite values (right-censored answer times) are written as JSON
``Infinity``. Schema 2 added the key figures, rankings, reversals and each gate's failure label; schema
3 the ``incomplete`` decision (a verdict read from partial evidence: what is missing and the command that
completes it). Older files still read (those fields empty).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from contracts.files import read_model, write_model
from contracts.layout import SweepPaths

VERDICTS_SCHEMA_VERSION = 3

GateStatus = Literal["pass", "fail", "inconclusive", "not_run"]
GateRole = Literal["requirement", "gain"]
Decision = Literal["keep", "reject", "neutral", "incompatible", "inconclusive", "incomplete"]

#: How a decision is printed wherever a person reads it (the search's line, the verdict table, the sweep's
#: last lines, ``judge``, the report, a reason's first word): one spelling, upper case, for every verdict;
#: the baseline's own row is no verdict. Read it through :func:`decision_label`.
DECISION_LABELS: dict[str, str] = {
    "baseline": "baseline",
    "keep": "KEEP",
    "reject": "REJECT",
    "neutral": "NEUTRAL",
    "incompatible": "INCOMPATIBLE",
    "inconclusive": "INCONCLUSIVE",
    "incomplete": "INCOMPLETE",
}


def decision_label(decision: str) -> str:
    """A decision as it is printed (:data:`DECISION_LABELS`; an unknown word in upper case).

    >>> decision_label("neutral"), decision_label("baseline")
    ('NEUTRAL', 'baseline')
    """
    return DECISION_LABELS.get(decision, decision.upper())


def spelled_reason(decision: str, reason: str) -> str:
    """``reason`` with its first word, the decision (``"neutral: ..."``), spelled as the decision's label
    (``"NEUTRAL: ..."``); a reason that does not start with it is returned as it is.

    >>> spelled_reason("keep", "keep: latency gain"), spelled_reason("keep", "KEEP: latency gain")
    ('KEEP: latency gain', 'KEEP: latency gain')
    """
    head = f"{decision}: "
    return f"{decision_label(decision)}: {reason[len(head) :]}" if reason.startswith(head) else reason


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="constants")


class Evidence(_Model):
    """A result file (relative to the sweep directory) and the request indices in it that matter."""

    file: str
    requests: list[int] = Field(default_factory=list)  # RequestRecord.index values; empty = the whole file


class MoreRepeats(_Model):
    """How many more repeats per side might settle an inconclusive comparison, and how sure that is. The
    interval narrows like 1/sqrt(repeats), but the effect it must clear is itself estimated from a few
    runs (an estimate of 2 became 21 after 5 more repeats per side): a count if the effect is as large as
    measured, a scale if it is only as large as what counts, and never a promise, since an interval that
    is still inconclusive allows no effect at all."""

    runs: int  # runs per side the estimate rests on
    if_measured: int  # more repeats per side if the true effect is as large as measured
    # ... if it is only as large as what counts (``threshold``: the tolerance or the minimum gain); None:
    # beyond 200, or nothing short of "no change" counts (a tolerance of 0)
    if_least: int | None = None
    threshold: float | None = None  # the ratio that counts

    def words(self) -> str:
        """In words, e.g. ``2 or more repeat(s) per side may settle it: 2 if the effect is as large as
        measured, about 17 if it is only as large as what counts (0.950x), and no number can be given if
        it is smaller (the interval still allows no effect at all); estimated from 3 run(s) per side, it
        may be far off``."""
        least = (
            f", about {self.if_least} if it is only as large as what counts ({self.threshold:.3f}x)"
            if self.if_least is not None and self.if_least > self.if_measured and self.threshold is not None
            else ""
        )
        return (
            f"{self.if_measured} or more repeat(s) per side may settle it: {self.if_measured} if the effect "
            f"is as large as measured{least}, and no number can be given if it is smaller (the interval "
            f"still allows no effect at all); estimated from {self.runs} run(s) per side, it may be far off"
        )


class SetAside(_Model):
    """A slow outlier run one side's comparison left out (more than 2x slower than the others' median)."""

    side: Literal["candidate", "baseline"]
    repeat: int  # the run's repeat number (``r<k>``)
    value: float  # its figure (the comparison's unit)
    factor: float  # how much slower than the median of the side's other runs (> 1)


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
    settle: MoreRepeats | None = None  # with ``more_repeats``: its range and what it rests on
    message: str = ""
    # Set when the evidence cannot decide this comparison whatever the repeats (``client_lag``: the
    # difference is within the load client's dispatch lag); the candidate is then ``incomplete``.
    undecidable: Literal["client_lag"] | None = None
    client_lag_s: float | None = None  # the dispatch lag (p99, s) that left it undecidable
    # The slow outlier runs left out of this comparison (gates.compare.set_aside_runs); a KEEP names them.
    set_aside: list[SetAside] = Field(default_factory=list)
    # The ratio's interval at this comparison's share of the gain family (a capacity gain: it is a gain when
    # the lower end is above 1; gates.gain_family); None where the comparison claims no gain of its own.
    gain_interval: tuple[float, float] | None = None
    # A non-inferiority comparison (answer accuracy): the interval of the paired drop, baseline minus
    # candidate, as a fraction; it passes when the upper end is at most the tolerance (baseline - threshold).
    drop_interval: tuple[float, float] | None = None


class Gap(_Model):
    """One piece of evidence a verdict needed and did not get (the verdict is then ``incomplete``)."""

    kind: Literal[
        "interrupted",  # a run was stopped early (Ctrl-C, the time bound): cancelled requests
        "missing_repeats",  # fewer repeats on disk than the sweep's configuration asks for
        "baseline_died",  # the baseline's server died or became unhealthy under load
        "harness",  # the load runner itself failed (bad workload data, a bug): not the server's fault
        "missing_measurement",  # a configured measurement is absent (capacity.json)
        "client_lag",  # a comparison the load client's dispatch lag leaves undecidable
        # the time bound stopped a run of a profile the baseline did not finish in time either (or the
        # baseline's own): measuring again gives the same; a longer workloads.<profile>.time_limit_s decides
        "time_bound",
        "not_measured",  # the candidate was stopped during its launch (no run.json) or never reached
        "not_run",  # an enabled gate could not run (its measurement is missing), not by design
    ]
    side: Literal["candidate", "baseline"]
    message: str  # what is missing, with the file and the numbers
    file: str | None = None  # relative to the sweep directory


class GateResult(_Model):
    """One requirement (or the gain) judged for one candidate."""

    gate: str  # registered name
    failure: str = ""  # what failing it means, in words ("concurrency regression"); schema 1: empty
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
    # A ``not_run`` by design, in words: the host has no such figure (no NVML: a CPU host, the simulator)
    # or the configuration asks for none (no capacity search). Empty on a ``not_run``: the gate could not
    # run (its measurement is missing), and the candidate's verdict is ``incomplete``.
    not_applicable: str = ""
    # Evidence the gate itself found missing (labelled items the load client could not send): each is a
    # gap of the candidate's verdict, which is then ``incomplete`` whatever the gate's status.
    gaps: list[Gap] = Field(default_factory=list)


class KeyFigure(_Model):
    """One figure of one candidate against the baseline, as the report shows it.

    Ratio and interval are a gate's own comparison where one judged the figure (``source="gates"``);
    otherwise the figure is computed from the stored results alone and carries no interval.
    """

    metric: str  # serial_e2e_p50, output_tps, prompt_tps, ttft_p50, visible_answers, visible_p50_censored
    profile: str
    label: str
    unit: str  # "s", "tok/s", "answers"
    better: Literal["lower", "higher"]
    value: float | None  # the candidate's value (infinite: right-censored median)
    baseline: float | None
    ratio: float | None = None  # candidate / baseline
    interval: tuple[float, float] | None = None  # confidence interval of the ratio (None: not judged)
    status: GateStatus | None = None  # the gates' status of this comparison; None: shown for context
    method: str = ""
    count: tuple[int, int] | None = None  # visible answers: (visible, asked)
    baseline_count: tuple[int, int] | None = None
    source: Literal["gates", "results"] = "results"  # where the numbers came from


class Ranking(_Model):
    """Measured candidates ordered best first by one figure (point estimates)."""

    metric: str
    profile: str
    label: str
    order: list[str]
    values: list[float | None]


class Reversal(_Model):
    """Serial latency and the loaded figures rank a candidate on opposite sides of the baseline."""

    candidate: str
    direction: Literal["faster", "slower"]  # on the empty road (serial e2e p50), against the baseline
    serial_ratio: float
    loaded_profile: str  # the profile with the strongest opposite effect
    output_ratio: float | None
    ttft_ratio: float | None


class Verdict(_Model):
    """The decision for one candidate, and every gate result behind it."""

    candidate: str
    decision: Decision
    reason: str  # one line with numbers
    failed: list[str] = Field(default_factory=list)  # names of the failed requirement gates
    gains: list[str] = Field(default_factory=list)  # improvements beyond noise, with numbers
    gates: list[GateResult] = Field(default_factory=list)
    more_repeats: int | None = None  # when inconclusive: repeats per side that may settle it (the fewest)
    settle: MoreRepeats | None = None  # when inconclusive: the range behind ``more_repeats``, in its reason
    reversal: str | None = None  # serial and loaded rankings against the baseline disagree
    decision_before_drift: Decision | None = None  # set when baseline drift overrode the decision
    figures: list[KeyFigure] = Field(default_factory=list)  # empty when the candidate did not start
    # Schema 3: an ``incomplete`` verdict's missing evidence, the decision the partial evidence would
    # have given (never acted on), and the command that measures what is missing.
    missing: list[Gap] = Field(default_factory=list)
    decision_on_partial: Decision | None = None
    resume: str | None = None


class DriftResult(_Model):
    """The baseline's opening repeats against the same profiles measured later in the sweep: after
    candidates (interleaved blocks) and at the end (the recovery)."""

    status: GateStatus  # fail = drift beyond noise (every measured verdict becomes inconclusive)
    message: str
    comparisons: list[Comparison] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    # The smallest change (fraction, 0.12 = 12%) the check would call drift: the larger of the tolerance
    # and the interval's half-width, smallest over the comparisons. None: no run-level comparison.
    min_detectable_drift: float | None = None
    # Which baseline it checked: the sweep's own, or ``<baseline>@<node>`` (a node of a parallel sweep).
    baseline: str | None = None
    # What the opening repeats were compared with: interleaved blocks (run.interleave) and the recovery.
    blocks: int = 0
    recovery: bool = False


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
    baseline_figures: list[KeyFigure] = Field(default_factory=list)  # the baseline's own values, no ratio
    rankings: list[Ranking] = Field(default_factory=list)  # serial latency, then each loaded figure
    reversals: list[Reversal] = Field(default_factory=list)
    # Per node of a parallel sweep: the node's baseline, its opening repeats against its later blocks.
    node_drift: list[DriftResult] = Field(default_factory=list)
    # Schema 3: the command that completes an incomplete sweep (None when every verdict is complete).
    resume: str | None = None

    @property
    def incomplete(self) -> list[Verdict]:
        """The verdicts read from partial evidence."""
        return [v for v in self.verdicts if v.decision == "incomplete"]


def write_verdicts(sweep_dir: Path, verdict: SweepVerdict) -> Path:
    """Validate and write ``<sweep>/verdicts.json`` atomically; returns its path."""
    path = SweepPaths(sweep_dir).verdicts
    write_model(path, verdict)
    return path


def read_verdicts(sweep_dir: Path) -> SweepVerdict:
    """Read and validate ``<sweep>/verdicts.json`` (ResultFileError naming it when missing or invalid)."""
    return read_model(SweepPaths(sweep_dir).verdicts, SweepVerdict)
