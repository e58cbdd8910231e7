"""The verdict rules: gate results -> one decision per candidate, the retained configuration, the reversal.

Pipeline position: the end of ``gates``: :func:`evaluate_sweep` reads a sweep directory (through
:mod:`gates.data`), runs the enabled gates for every candidate against the baseline, checks baseline
drift, and returns a :class:`SweepVerdict`; :func:`write_verdicts` stores it next to the results.

Rules, in order: startup failed -> ``incompatible``; a requirement failed -> ``reject`` (naming every
failed one); a requirement inconclusive -> ``inconclusive``; a latency gain beyond noise -> ``keep``; a
gain within noise -> ``inconclusive``; otherwise ``neutral``. Drift beyond noise turns every measured
decision into ``inconclusive``.

    >>> sweep = Path("sweeps/2025-01-01")
    >>> write_verdicts(sweep, evaluate_sweep(sweep, GatesConfig(), baseline="baseline"))  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from contracts.errors import GateError
from contracts.results import read_model, write_model
from contracts.schema import GatesConfig
from contracts.verdicts import Comparison, Decision, GateResult, SweepVerdict, Verdict
from gates.compare import brief, fmt_ratio
from gates.data import Results, candidate_names, load_results
from gates.drift import evaluate_drift
from gates.registry import REGISTRY, Gate, GateContext, selected_gates

VERDICTS_FILE = "verdicts.json"


def _label(gate: str) -> str:
    cls = REGISTRY.get(gate)
    return (cls.failure or cls.requirement) if cls else gate


def _gate(results: Sequence[GateResult], name: str) -> GateResult | None:
    return next((g for g in results if g.gate == name), None)


def _excludes(c: Comparison, side: str) -> bool:
    if c.interval is None:
        return False
    low, high = c.interval
    return high < 1 if side == "below" else low > 1


def _load_gains(results: Sequence[GateResult], cfg: GatesConfig) -> list[Comparison]:
    """Loaded throughput up by min_gain beyond noise, or loaded median TTFT down beyond noise."""
    out: list[Comparison] = []
    conc = _gate(results, "concurrency")
    for c in conc.comparisons if conc else []:
        if (
            c.unit == "tok/s"
            and c.ratio is not None
            and c.ratio >= 1 + cfg.min_gain
            and _excludes(c, "above")
        ):
            out.append(c)
    gain = _gate(results, "latency_gain")
    for c in gain.comparisons if gain else []:
        if c.metric == "ttft_p50" and c.status == "pass":
            out.append(c)
    return out


def _serial_gains(results: Sequence[GateResult]) -> list[Comparison]:
    gain = _gate(results, "latency_gain")
    return [
        c for c in (gain.comparisons if gain else []) if c.metric.startswith("serial_") and c.status == "pass"
    ]


def _reversal(candidate: str, baseline: str, results: Sequence[GateResult], cfg: GatesConfig) -> str | None:
    """Serial and loaded rankings of candidate vs baseline disagree (each side beyond noise)."""
    gain = _gate(results, "latency_gain")
    conc = _gate(results, "concurrency")
    if gain is None or conc is None:
        return None
    serial = [c for c in gain.comparisons if c.metric.startswith("serial_")]
    serial_better = [c for c in serial if _excludes(c, "below")]
    serial_worse = [c for c in serial if _excludes(c, "above")]
    load_worse = [c for c in conc.comparisons if c.status == "fail"]
    load_better = _load_gains(results, cfg)
    if serial_better and load_worse:
        return (
            f"reversal: serial latency ranks {candidate} ahead of {baseline} "
            f"({brief(serial_better, 'pass', 1)}), but under load it ranks behind "
            f"({brief(load_worse, 'fail')})"
        )
    if serial_worse and load_better:
        return (
            f"reversal: serial latency ranks {candidate} behind {baseline} "
            f"({brief(serial_worse, serial_worse[0].status, 1)}), but under load it ranks ahead "
            f"({brief(load_better, load_better[0].status)})"
        )
    return None


def _brief(gate: GateResult, status: str) -> str:
    """A gate's message, shortened to its most severe comparisons when it has several."""
    if len([c for c in gate.comparisons if c.status == status]) > 2:
        return brief(gate.comparisons, gate.status)
    return gate.message


def _load_summary(results: Sequence[GateResult]) -> str:
    conc = _gate(results, "concurrency")
    parts = [
        f"{c.profile} output {fmt_ratio(c.ratio)}"
        for c in (conc.comparisons if conc else [])
        if c.metric == "output_tps" and c.ratio is not None
    ]
    return ", ".join(parts) if parts else "no loaded comparison"


def decide(candidate: str, baseline: str, results: Sequence[GateResult], cfg: GatesConfig) -> Verdict:
    """Apply the verdict rules to one candidate's gate results."""
    compat = _gate(results, "compatibility")
    requirements = [g for g in results if g.role == "requirement" and g.gate != "compatibility"]
    failed = [g for g in requirements if g.status == "fail"]
    unsure = [g for g in requirements if g.status == "inconclusive"]
    gain = _gate(results, "latency_gain")
    gains = [c.message for c in _serial_gains(results)] + [c.message for c in _load_gains(results, cfg)]
    reversal = _reversal(candidate, baseline, results, cfg)
    decision: Decision
    more: int | None = None
    if compat is not None and compat.status == "fail":
        decision = "incompatible"
        reason = f"incompatible: {compat.message} (a compatibility failure, not a performance result)"
        return Verdict(
            candidate=candidate,
            decision=decision,
            reason=reason,
            failed=["compatibility"],
            gates=list(results),
        )
    if compat is not None and compat.status != "pass":
        return Verdict(
            candidate=candidate,
            decision="inconclusive",
            reason=f"inconclusive: {compat.message}",
            gates=list(results),
        )
    if failed:
        decision = "reject"
        named = "; ".join(f"{_label(g.gate)}: {_brief(g, 'fail')}" for g in failed)
        conc = _gate(results, "concurrency")
        # Passed, or unsettled within run-to-run noise, and no load gain beyond noise: no advantage.
        neutral_load = (
            conc is not None and conc.status in ("pass", "inconclusive") and not _load_gains(results, cfg)
        )
        load = f"; no clear load advantage ({_load_summary(results)})" if neutral_load else ""
        reason = f"reject: {named}{load}"
    elif unsure:
        decision = "inconclusive"
        more = max((g.more_repeats for g in unsure if g.more_repeats), default=None)
        reason = "inconclusive: " + "; ".join(f"{g.gate}: {_brief(g, 'inconclusive')}" for g in unsure)
    elif gain is not None and gain.status == "pass":
        decision = "keep"
        reason = f"keep: latency gain beyond noise ({_brief(gain, 'pass')}); no requirement failed"
    elif gain is not None and gain.status == "inconclusive":
        decision = "inconclusive"
        more = gain.more_repeats
        reason = f"inconclusive: {gain.message}"
    else:
        decision = "neutral"
        why = gain.message if gain is not None else "latency gain not evaluated"
        reason = f"neutral: fails no requirement but no clear gain ({why}); not worth a production change"
    if decision == "inconclusive":
        sources = unsure or ([gain] if gain else [])
        pending = [c for g in sources for c in g.comparisons]
        unmeasured = any(c.status == "inconclusive" and c.ratio is None for c in pending)
        if more:
            reason += f"; about {more} more repeat(s) per side would likely settle it"
        elif unmeasured:
            reason += "; rerun the missing or unreadable measurement"
        else:
            reason += "; the effect is too small for more repeats to settle it"
    return Verdict(
        candidate=candidate,
        decision=decision,
        reason=reason,
        failed=[g.gate for g in failed],
        gains=gains,
        gates=list(results),
        more_repeats=more,
        reversal=reversal,
    )


def _not_run(gate: Gate, why: str) -> GateResult:
    return GateResult(gate=gate.name, role=gate.role, status="not_run", message=why)


def _load_score(verdict: Verdict) -> float:
    """Geometric mean of loaded output tokens/s ratios against the baseline (1.0 when none)."""
    conc = _gate(verdict.gates, "concurrency")
    ratios = [c.ratio for c in (conc.comparisons if conc else []) if c.metric == "output_tps" and c.ratio]
    if not ratios:
        return 1.0
    return math.exp(sum(math.log(max(r, 1e-12)) for r in ratios) / len(ratios))


def _sweep_reversal(baseline: str, verdicts: Sequence[Verdict]) -> str | None:
    reversed_ = [v for v in verdicts if v.reversal]
    if not reversed_:
        return None
    names = ", ".join(v.candidate for v in reversed_)
    return (
        f"The serial ranking and the ranking under load disagree for {names}: a single-request benchmark "
        f"would have preferred {'them' if len(reversed_) > 1 else 'it'} over {baseline}, but shared load "
        f"says otherwise ({'; '.join(f'{v.candidate}: {_load_summary(v.gates)}' for v in reversed_)})."
    )


def _check_baseline(baseline: Results) -> None:
    if baseline.run is None and not baseline.profiles:
        raise GateError(
            f"no results for the baseline under {baseline.root}/",
            hint="pass the baseline's name as configured (baseline.name) or rerun the sweep",
        )
    if baseline.run is not None and not baseline.run.startup.ok:
        startup = baseline.run.startup
        raise GateError(
            f"the baseline {baseline.name!r} failed to start ({startup.kind}): nothing to compare against",
            evidence=[line for line in [startup.matched_line, *startup.evidence[-5:]] if line],
            hint="fix the baseline's launch before judging candidates",
        )
    if not baseline.profiles:
        raise GateError(f"the baseline {baseline.name!r} has no measured profile under {baseline.root}/")


def evaluate_sweep(
    sweep_dir: Path, cfg: GatesConfig, *, baseline: str, candidates: Sequence[str] | None = None
) -> SweepVerdict:
    """Judge every candidate of a stored sweep against its baseline (reads files, writes nothing)."""
    gates = selected_gates(cfg.enabled)
    base = load_results(sweep_dir, f"candidates/{baseline}", baseline)
    _check_baseline(base)
    names = [
        n for n in (candidates if candidates is not None else candidate_names(sweep_dir)) if n != baseline
    ]
    verdicts: list[Verdict] = []
    for name in names:
        results = load_results(sweep_dir, f"candidates/{name}", name)
        ctx = GateContext(cfg=cfg, baseline=base, candidate=results)
        compat = next(g for g in gates if g.name == "compatibility").evaluate(ctx)
        gate_results = [compat]
        for gate in gates:
            if gate.name == "compatibility":
                continue
            if compat.status != "pass":
                gate_results.append(_not_run(gate, "not run: the candidate did not start"))
            else:
                gate_results.append(gate.evaluate(ctx))
        verdicts.append(decide(name, baseline, gate_results, cfg))
    drift = evaluate_drift(sweep_dir, cfg, base)
    if drift.status == "fail":
        verdicts = [_drifted(v, drift.message) for v in verdicts]
    keeps = [v for v in verdicts if v.decision == "keep"]
    if keeps:
        best = max(keeps, key=_load_score)
        retained = best.candidate
        others = (
            f" (best of {len(keeps)} kept candidates by loaded output tokens/s)" if len(keeps) > 1 else ""
        )
        retained_reason = f"{best.candidate} is kept{others}: {best.reason}"
    else:
        retained = baseline
        retained_reason = f"no candidate is keep: {baseline} stays" + (
            " (baseline drift made every measured verdict inconclusive)" if drift.status == "fail" else ""
        )
    return SweepVerdict(
        baseline=baseline,
        retained=retained,
        retained_reason=retained_reason,
        drift=drift,
        verdicts=verdicts,
        reversal=_sweep_reversal(baseline, verdicts),
        gates_evaluated=[g.name for g in gates],
    )


def _drifted(verdict: Verdict, why: str) -> Verdict:
    if verdict.decision in ("incompatible", "inconclusive"):
        return verdict
    return verdict.model_copy(
        update={
            "decision": "inconclusive",
            "decision_before_drift": verdict.decision,
            "reason": f"inconclusive: {why} (without the drift: {verdict.reason})",
        }
    )


def write_verdicts(sweep_dir: Path, verdict: SweepVerdict) -> Path:
    """Validate and write ``<sweep>/verdicts.json`` atomically; returns its path."""
    path = sweep_dir / VERDICTS_FILE
    write_model(path, verdict)
    return path


def read_verdicts(sweep_dir: Path) -> SweepVerdict:
    """Read and validate ``<sweep>/verdicts.json``."""
    return read_model(sweep_dir / VERDICTS_FILE, SweepVerdict)
