"""The verdict rules: gate results -> one decision per candidate, the retained configuration, the reversal.

Pipeline position: the end of ``gates``: :func:`evaluate_sweep` reads a sweep directory (through
:mod:`contracts.sweepdir`), runs the enabled gates for every candidate against the baseline, checks
baseline drift, adds the key figures, rankings and reversals the report shows (:mod:`gates.figures`),
and returns a :class:`SweepVerdict`; :mod:`gates.judge` writes it as ``verdicts.json``.

Rules, in order: startup failed -> ``incompatible``; partial evidence (:mod:`gates.evidence`: an
interrupted run, missing repeats, a baseline lost under load, a harness fault, a candidate not measured)
-> ``incomplete``; a requirement failed -> ``reject`` (naming every failed one); a comparison the load
client's lag leaves undecidable, or an enabled gate that could not run (``not_run`` not by design:
:func:`not_run_gaps`) -> ``incomplete``; a requirement inconclusive -> ``inconclusive``; a latency gain
beyond noise, or capacity at the SLO up beyond noise with no latency worse -> ``keep``; a gain within noise
-> ``inconclusive``; otherwise (a capacity gain bought with a latency loss included) ``neutral``; a keep or a
neutral with a quiet signal (:mod:`gates.quiet`: a flagged comparison, slow runs back in the confirmation
runs) -> ``inconclusive``, and a keep names the runs it set aside. Drift beyond noise turns every measured
decision (not an incomplete one) into ``inconclusive``.

    >>> evaluate_sweep(Path("sweeps/2025-01-01"), GatesConfig(), baseline="baseline")  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from contracts.errors import GateError
from contracts.layout import LaunchPaths, candidate_dir, candidate_root
from contracts.metrics import excludes_one, fmt_ratio, geometric_mean
from contracts.schema import GatesConfig
from contracts.sweepdir import (
    NODE_SEPARATOR,
    Results,
    candidate_names,
    load_baseline,
    load_results,
    node_baseline_names,
    planned_names,
    read_host_probe,
    resume_command,
)
from contracts.verdicts import (
    Comparison,
    Decision,
    DriftResult,
    Gap,
    GateResult,
    MoreRepeats,
    Reversal,
    SweepVerdict,
    Verdict,
    decision_label,
    spelled_reason,
)
from gates.agreement import read_claim, read_unpromised
from gates.compare import brief
from gates.drift import evaluate_drift, evaluate_node_drift
from gates.evidence import Expected, evidence_gaps, not_measured
from gates.figures import (
    FigureSpec,
    baseline_figures,
    figure_specs,
    key_figures,
    rankings,
    reversal,
    reversal_note,
)
from gates.quiet import Confirmations, confirmation_runs, heard
from gates.registry import REGISTRY, Gate, GateContext, selected_gates
from gates.sequential import SequentialPlan
from gates.settle import combined, settle_words


def _label(gate: str) -> str:
    cls = REGISTRY.get(gate)
    return (cls.failure or cls.requirement) if cls else gate


def _gate(results: Sequence[GateResult], name: str) -> GateResult | None:
    return next((g for g in results if g.gate == name), None)


def _load_gains(results: Sequence[GateResult], cfg: GatesConfig) -> list[Comparison]:
    """Loaded throughput up by min_gain beyond noise, or loaded median TTFT down beyond noise."""
    out: list[Comparison] = []
    conc = _gate(results, "concurrency")
    for c in conc.comparisons if conc else []:
        if (
            c.unit == "tok/s"
            and c.ratio is not None
            and c.ratio >= 1 + cfg.min_gain
            and excludes_one(c.interval, "above")
        ):
            out.append(c)
    gain = _gate(results, "latency_gain")
    for c in gain.comparisons if gain else []:
        if c.metric == "ttft_p50" and c.status == "pass":
            out.append(c)
    return out


def _capacity_gains(results: Sequence[GateResult], cfg: GatesConfig) -> list[Comparison]:
    """Capacity at the SLO up by min_gain with its whole interval at the capacity's share of the gain
    family above 1 (``gain_interval``: gates.gain_family): more users served within the SLO is a gain in
    its own right (what a search for capacity is after), not only "not worse"; never one the client's lag
    leaves undecidable."""
    cap = _gate(results, "capacity")
    return [
        c
        for c in (cap.comparisons if cap else [])
        if c.ratio is not None
        and c.undecidable is None
        and c.ratio >= 1 + cfg.min_gain
        and excludes_one(c.gain_interval or c.interval, "above")
    ]


def _latency_worse(results: Sequence[GateResult], cfg: GatesConfig) -> list[Comparison]:
    """The latency gain gate's comparisons that got worse beyond ``latency_tolerance`` and noise (the rule
    of every requirement, as the gate itself reads "worse")."""
    gain = _gate(results, "latency_gain")
    return [
        c
        for c in (gain.comparisons if gain else [])
        if c.undecidable is None
        and c.ratio is not None
        and c.ratio > 1 + cfg.latency_tolerance
        and excludes_one(c.interval, "above")
    ]


def _serial_gains(results: Sequence[GateResult]) -> list[Comparison]:
    gain = _gate(results, "latency_gain")
    return [
        c for c in (gain.comparisons if gain else []) if c.metric.startswith("serial_") and c.status == "pass"
    ]


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


def lag_gaps(results: Sequence[GateResult]) -> list[Gap]:
    """Every comparison the load client's dispatch lag leaves undecidable, as a gap (one per comparison)."""
    out: list[Gap] = []
    for gate in results:
        for c in gate.comparisons:
            if c.undecidable == "client_lag" and not any(g.file == f"{c.profile}/{c.metric}" for g in out):
                late = f"{(c.client_lag_s or 0.0) * 1000:.0f} ms"
                out.append(
                    Gap(
                        kind="client_lag",
                        side="candidate",
                        message=f"{c.profile} {c.metric}: the load client was {late} late at p99; re-run "
                        f"with fewer streams per client ({c.message})",
                        file=f"{c.profile}/{c.metric}",
                    )
                )
    return out


def not_run_gaps(results: Sequence[GateResult]) -> list[Gap]:
    """Every enabled gate that could not run on a started candidate, as a gap: a ``not_run`` that is not by
    design (``GateResult.not_applicable``: the host has no such figure, no search was configured). None
    for a candidate that did not start: no gate runs on it, and the verdict says why."""
    compat = _gate(results, "compatibility")
    if compat is not None and compat.status != "pass":
        return []
    return [
        Gap(
            kind="not_run",
            side="candidate",
            message=f"{g.gate}: could not run ({g.message}); measure what it needs, or leave it out of "
            "gates.enabled",
            file=g.evidence[0].file if g.evidence else None,
        )
        for g in results
        if g.status == "not_run" and not g.not_applicable
    ]


def _incomplete(verdict: Verdict, gaps: Sequence[Gap], resume: str | None) -> Verdict:
    """``verdict`` read from partial evidence: incomplete, saying what is missing and how to complete it."""
    data = [g for g in gaps if g.kind not in ("client_lag", "time_bound", "not_run")]  # resuming fills none
    command = resume if data else None
    missing = "; ".join(g.message for g in gaps)
    then = f"; to complete it: {command}" if command else ""
    # Without any evidence (not measured) there is nothing a decision was read from.
    partial = None if all(g.kind == "not_measured" for g in gaps) else verdict
    so_far = f" (on the evidence so far, never acted on: {partial.reason})" if partial else ""
    return verdict.model_copy(
        update={
            "decision": "incomplete",
            "decision_on_partial": partial.decision if partial else None,
            "reason": f"{decision_label('incomplete')}: {missing}{then}{so_far}",
            "missing": list(gaps),
            "resume": command,
            "more_repeats": None,
            "settle": None,
        }
    )


def decide(
    candidate: str,
    baseline: str,
    results: Sequence[GateResult],
    cfg: GatesConfig,
    *,
    gaps: Sequence[Gap] = (),
    resume: str | None = None,
    confirmations: Confirmations | None = None,
) -> Verdict:
    """Apply the verdict rules to one candidate's gate results (``gaps``: its evidence's, from
    :func:`gates.evidence.evidence_gaps`; ``resume``: the command that measures what is missing;
    ``confirmations``: its confirmation runs, :func:`gates.quiet.confirmation_runs`)."""
    verdict = _decide(candidate, results, cfg)
    if verdict.decision == "incompatible":
        return verdict
    verdict = heard(verdict, results, confirmations)  # a flag, slow runs that recur, runs set aside
    gaps = [*gaps, *(gap for g in results for gap in g.gaps)]  # a gate's own: labelled items unsent
    # What resuming cannot fill: comparisons within the client's lag, gates that could not run.
    unsettled = [*lag_gaps(results), *not_run_gaps(results)]
    if gaps:  # never keep or reject on partial evidence
        return _incomplete(verdict, [*gaps, *unsettled], resume)
    # A failed requirement decides (what is unsettled could only add a failure); an undecidable
    # comparison or a gate that never ran never counts towards a keep, a neutral or an inconclusive
    # verdict (more repeats will not settle it).
    if unsettled and verdict.decision != "reject":
        return _incomplete(verdict, unsettled, None)
    return verdict


def _decide(candidate: str, results: Sequence[GateResult], cfg: GatesConfig) -> Verdict:
    """The rules on the gates' results alone (complete evidence assumed)."""
    compat = _gate(results, "compatibility")
    requirements = [g for g in results if g.role == "requirement" and g.gate != "compatibility"]
    failed = [g for g in requirements if g.status == "fail"]
    unsure = [g for g in requirements if g.status == "inconclusive"]
    gain = _gate(results, "latency_gain")
    capacity = _capacity_gains(results, cfg)
    gains = [c.message for c in _serial_gains(results)] + [c.message for c in _load_gains(results, cfg)]
    gains += [c.message for c in capacity]
    decision: Decision
    more: int | None = None
    settle: MoreRepeats | None = None
    if compat is not None and compat.status == "fail":
        decision = "incompatible"
        reason = f"incompatible: {compat.message} (a compatibility failure, not a performance result)"
        return Verdict(
            candidate=candidate,
            decision=decision,
            reason=spelled_reason(decision, reason),
            failed=["compatibility"],
            gates=list(results),
        )
    if compat is not None and compat.status != "pass":
        return Verdict(
            candidate=candidate,
            decision="inconclusive",
            reason=f"{decision_label('inconclusive')}: {compat.message}",
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
    elif capacity and not (worse := _latency_worse(results, cfg)):
        decision = "keep"
        reason = f"keep: capacity at the SLO up beyond noise ({capacity[0].message}); no requirement failed"
    elif capacity:
        decision = "neutral"
        reason = (
            f"neutral: capacity at the SLO up beyond noise ({capacity[0].message}) but worse: "
            f"{'; '.join(c.message for c in worse)}: a trade-off, not a change the gates make for you "
            "(keep it by hand if your traffic wants the capacity)"
        )
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
            settle = combined(pending)
            reason += f"; {settle_words(pending, more)}"
        elif unmeasured:
            reason += "; rerun the missing or unreadable measurement"
        else:
            reason += "; the effect is too small for more repeats to settle it"
    return Verdict(
        candidate=candidate,
        decision=decision,
        reason=spelled_reason(decision, reason),
        failed=[g.gate for g in failed],
        gains=gains,
        gates=list(results),
        more_repeats=more,
        settle=settle,
    )


def _evaluated(gate: Gate, ctx: GateContext, compat: GateResult | None) -> GateResult:
    """The gate's result on the candidate, labelled with what failing it means."""
    if compat is not None and compat.status != "pass":
        result = GateResult(
            gate=gate.name, role=gate.role, status="not_run", message="not run: the candidate did not start"
        )
    else:
        result = gate.evaluate(ctx)
    return result.model_copy(update={"failure": _label(gate.name)})


def _load_score(verdict: Verdict) -> float:
    """Geometric mean of loaded output tokens/s ratios against the baseline (1.0 when none)."""
    conc = _gate(verdict.gates, "concurrency")
    ratios = [c.ratio for c in (conc.comparisons if conc else []) if c.metric == "output_tps" and c.ratio]
    score = geometric_mean(ratios)
    return 1.0 if score is None else score


def _sweep_reversal(baseline: str, verdicts: Sequence[Verdict], reversals: Sequence[Reversal]) -> str | None:
    if not reversals:
        return None
    by_name = {v.candidate: v for v in verdicts}
    names = ", ".join(r.candidate for r in reversals)
    them = "them" if len(reversals) > 1 else "it"
    serial = (
        f"would have preferred {them} over {baseline}"
        if all(r.direction == "faster" for r in reversals)
        else f"ranks {them} the other way round against {baseline}"
    )
    loads = "; ".join(f"{r.candidate}: {_load_summary(by_name[r.candidate].gates)}" for r in reversals)
    return (
        f"The serial ranking and the ranking under load disagree for {names}: a single-request benchmark "
        f"{serial}, but shared load says otherwise ({loads})."
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
    # Started but nothing measured (it died, or Ctrl-C came first): every candidate's evidence is partial,
    # which gates.evidence says per candidate (incomplete), rather than refusing to judge.


def _judge_candidate(
    ctx: GateContext,
    gates: Sequence[Gate],
    specs: Sequence[FigureSpec],
    expected: Expected | None,
    resume: str,
    *,
    begun: bool = True,
    confirmed: Confirmations | None = None,
) -> tuple[Verdict, Reversal | None]:
    """Every gate on one candidate, the decision, its key figures and its reversal (if any). ``begun``:
    its directory exists (without it, and without ``run.json``, the sweep never reached it); ``confirmed``:
    its confirmation runs (:func:`gates.quiet.confirmation_runs`)."""
    cfg, baseline, candidate, name = ctx.cfg, ctx.baseline, ctx.candidate, ctx.candidate.name
    compat = _evaluated(next(g for g in gates if g.name == "compatibility"), ctx, None)
    results = [compat] + [_evaluated(g, ctx, compat) for g in gates if g.name != "compatibility"]
    gaps = evidence_gaps(candidate, baseline, expected) if candidate.started else []
    if candidate.run is None:  # stopped during its launch, or never reached: measuring it completes it
        gaps = [not_measured(candidate, begun=begun)]
    verdict = decide(name, baseline.name, results, cfg, gaps=gaps, resume=resume, confirmations=confirmed)
    if not candidate.started:
        return verdict, None
    figures = key_figures(specs, candidate, baseline, results)
    found = reversal(name, figures, cfg)
    note = reversal_note(found, baseline.name, figures, cfg) if found else None
    return verdict.model_copy(update={"figures": figures, "reversal": note}), found


def evaluate_sweep(
    sweep_dir: Path,
    cfg: GatesConfig,
    *,
    baseline: str,
    candidates: Sequence[str] | None = None,
    plan: SequentialPlan | None = None,
    expected: Expected | None = None,
) -> SweepVerdict:
    """Judge every candidate of a stored sweep against its baseline (reads files, writes nothing).

    ``plan``: the candidates' adaptive repeats (:mod:`gates.sequential`); each candidate's gates use the
    confidence of the look it stopped at (its number of repeats), so the family-wise error over the
    looks stays at ``1 - cfg.confidence``. The drift check keeps ``cfg``. ``expected``: what a complete
    measurement holds (:class:`gates.evidence.Expected`, from the sweep's config); without it only what
    the files say (interrupted runs, a lost baseline, harness faults) can make a verdict incomplete.
    """
    gates = selected_gates(cfg.enabled)
    specs = figure_specs(cfg)
    found = candidate_names(sweep_dir)
    # The candidates measured or begun, then those the sweep was asked for and never reached.
    every = (
        candidates
        if candidates is not None
        else [*found, *(n for n in planned_names(sweep_dir) if n not in found)]
    )
    node_baselines = [n for n in node_baseline_names(sweep_dir) if is_node_baseline(n, baseline)]
    # The sweep's own baseline, or (every candidate measured on other nodes) the first node's.
    reference = baseline if candidate_dir(sweep_dir, baseline).is_dir() or not node_baselines else None
    base_name = reference or node_baselines[0]
    base = load_baseline(sweep_dir, candidate_root(base_name), base_name)
    _check_baseline(base)
    names = [n for n in every if n != baseline]
    host = read_host_probe(sweep_dir)
    # Keyed by the baseline's configured name even when measured on a node (the report's rows are).
    results = {baseline: base} | {n: load_results(sweep_dir, candidate_root(n), n) for n in names}
    paired = _paired_baselines(sweep_dir, results, names)
    verdicts: list[Verdict] = []
    reversals: list[Reversal] = []
    for name in names:
        spec_file = LaunchPaths(candidate_dir(sweep_dir, name)).spec
        base_spec = LaunchPaths(sweep_dir / paired.get(name, base).root).spec
        ctx = GateContext(
            cfg=_at_look(cfg, plan, results[name]),
            baseline=paired.get(name, base),
            candidate=results[name],
            host=host,
            host_kind=expected.host_kind if expected is not None else None,
            candidate_claim=read_claim(spec_file),
            agreement_unpromised=read_unpromised(spec_file, base_spec),
            sweep_confidence=cfg.confidence,
        )
        begun = candidate_dir(sweep_dir, name).is_dir()
        confirmed = confirmation_runs(results[name], plan, expected)
        verdict, rev = _judge_candidate(
            ctx, gates, specs, expected, resume_command(sweep_dir), begun=begun, confirmed=confirmed
        )
        verdicts.append(verdict)
        reversals += [rev] if rev else []
    if reference is None:  # the serving host measured no baseline: comparing it would mix two nodes
        drift = DriftResult(
            status="not_run",
            message="candidates and their baselines were measured on other nodes than the serving host: "
            "drift across the sweep is not compared here (each node's baseline is checked against its own "
            "interleaved blocks: see the drift per node)",
        )
    else:
        drift = evaluate_drift(sweep_dir, cfg, base)
    node_drift = _node_drift(cfg, paired)
    if drift.status == "fail":
        verdicts = [_drifted(v, drift.message) for v in verdicts]
    drifted_nodes = {d.baseline: d for d in node_drift if d.status == "fail"}
    verdicts = [
        _drifted(v, drifted_nodes[pair.name].message)
        if (pair := paired.get(v.candidate)) is not None and pair.name in drifted_nodes
        else v
        for v in verdicts
    ]
    retained, retained_reason = _retained(
        baseline, verdicts, drifted=drift.status == "fail" or bool(drifted_nodes)
    )
    measured = [n for n in [baseline, *names] if results[n].started and results[n].profiles]
    return SweepVerdict(
        baseline=baseline,
        retained=retained,
        retained_reason=retained_reason,
        drift=drift,
        verdicts=verdicts,
        reversal=_sweep_reversal(baseline, verdicts, reversals),
        gates_evaluated=[g.name for g in gates],
        baseline_figures=baseline_figures(specs, base),
        rankings=rankings(specs, measured, results),
        reversals=reversals,
        node_drift=node_drift,
        resume=next((v.resume for v in verdicts if v.resume), None),
    )


def _node_drift(cfg: GatesConfig, paired: dict[str, Results]) -> list[DriftResult]:
    """Each node baseline that has interleaved blocks, against its own opening repeats."""
    nodes = {pair.name: pair for pair in paired.values()}
    return [evaluate_node_drift(cfg, nodes[name]) for name in sorted(nodes) if nodes[name].blocks]


def is_node_baseline(name: str, baseline: str) -> bool:
    """``baseline@<node>``: the retained configuration measured on one node of a parallel sweep."""
    return name.startswith(f"{baseline}{NODE_SEPARATOR}")


def _paired_baselines(
    sweep_dir: Path, results: dict[str, Results], names: Sequence[str]
) -> dict[str, Results]:
    """Each candidate measured on a node of a parallel sweep, with the baseline measured on that node."""
    out: dict[str, Results] = {}
    for name in names:
        run = results[name].run
        if run is not None and run.paired_baseline:
            ref = run.paired_baseline
            # A node's baseline that did not start or died early is a gap of its candidates' evidence
            # (gates.evidence), not a reason to judge nothing.
            out[name] = load_baseline(sweep_dir, candidate_root(ref), ref)
    return out


def _at_look(cfg: GatesConfig, plan: SequentialPlan | None, candidate: Results) -> GatesConfig:
    """The gates' config at the confidence of the candidate's last look (unchanged for fixed repeats)."""
    if plan is None or not plan.adaptive:
        return cfg
    repeats = max((len(reps) for reps in candidate.profiles.values()), default=plan.min_repeats)
    return replace(cfg, confidence=plan.look_confidence(cfg.confidence, repeats))


def _retained(baseline: str, verdicts: Sequence[Verdict], *, drifted: bool) -> tuple[str, str]:
    """The configuration to keep running, and why: the best keep under load, or the baseline."""
    keeps = [v for v in verdicts if v.decision == "keep"]
    if not keeps:
        why = " (baseline drift made every measured verdict inconclusive)" if drifted else ""
        return baseline, f"no candidate is {decision_label('keep')}: {baseline} stays{why}"
    best = max(keeps, key=_load_score)
    others = f" (best of {len(keeps)} kept candidates by loaded output tokens/s)" if len(keeps) > 1 else ""
    return best.candidate, f"{best.candidate} is kept{others}: {best.reason}"


def _drifted(verdict: Verdict, why: str) -> Verdict:
    if verdict.decision in ("incompatible", "inconclusive", "incomplete"):
        return verdict
    return verdict.model_copy(
        update={
            "decision": "inconclusive",
            "decision_before_drift": verdict.decision,
            "reason": f"{decision_label('inconclusive')}: {why} (without the drift: {verdict.reason})",
        }
    )
