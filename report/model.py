"""The report as data: ``report.json``'s models, built from ``verdicts.json`` and the sweep's files.

Pipeline position: the first step of the report stage. :func:`build_model` takes what the judge decided
(:class:`~contracts.verdicts.SweepVerdict`: decisions, key figures, rankings, reversals) and what the
sweep wrote (run files, summaries, host probe, recovery validation, read by :func:`read_sweep`) and
arranges them into rows and paragraphs. It judges nothing and computes no statistic: every number comes
from ``verdicts.json``; only the words around them are chosen here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from contracts.layout import (
    PLOT_GOODPUT,
    PLOT_PARETO,
    PLOT_RANKING,
    PLOT_SEARCH,
    PLOT_THROUGHPUT,
    PLOT_TTFT,
    candidate_root,
)
from contracts.metrics import by_severity, fmt_bounds, fmt_factor, fmt_ratio, fmt_value, slo_text
from contracts.promotion import PromotionRecord, read_promotions
from contracts.results import HostProbe, RecoveryValidation
from contracts.schema import GauntletConfig
from contracts.sweepdir import Results, load_baseline, read_host_probe, read_recovery_validation
from contracts.verdicts import (
    Comparison,
    Decision,
    DriftResult,
    Gap,
    GateStatus,
    KeyFigure,
    Ranking,
    Reversal,
    SweepVerdict,
    Verdict,
    decision_label,
    spelled_reason,
)
from report.accuracy import AccuracyLine, accuracy_lines
from report.cost import CostRow, cost_rows, headline_profile
from report.lost import led_summary
from report.search import SearchSection, search_model
from report.slo import (
    CapacityLine,
    GoodputRow,
    ServerFigureRow,
    capacity_lines,
    goodput_rows,
    server_figure_rows,
)

REPORT_SCHEMA_VERSION = 1


RowDecision = Decision | Literal["baseline"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="constants")


class StartupInfo(_Model):
    """How the candidate's server start went."""

    ok: bool | None  # None: no run.json
    kind: str | None = None
    matched_line: str | None = None
    time_to_ready_s: float | None = None


class CandidateRow(_Model):
    """One row of the decision table."""

    candidate: str
    decision: RowDecision
    reason: str  # the gates' full reason, with numbers
    summary: str = ""  # the decision table's short cell
    failed: list[str] = Field(default_factory=list)
    failed_messages: list[str] = Field(default_factory=list)  # each failed requirement, with numbers
    gains: list[str] = Field(default_factory=list)
    startup: StartupInfo
    more_repeats: int | None = None
    reversal: str | None = None  # the gates' own reversal note
    figures: list[KeyFigure] = Field(default_factory=list)
    repeats_used: int = 0  # whole repeats (adaptive repeats: where the loop stopped)
    confirmation_runs: int = 0  # runs on top of them (gates/confirm.py: runs that disagreed)
    measurement_s: float = 0.0  # sum of its profiles' durations (host seconds; simulated on the simulator)
    # An incomplete verdict: what is missing, the decision the partial evidence gave (never acted on),
    # and the command that completes it.
    missing: list[Gap] = Field(default_factory=list)
    decision_on_partial: Decision | None = None
    resume: str | None = None


class ReversalParagraph(_Model):
    """A reversal the judge found, with the report's paragraph about it."""

    candidate: str
    serial_ratio: float
    loaded_profile: str
    output_ratio: float | None
    ttft_ratio: float | None
    text: str


class NodeRow(_Model):
    """Where one run of a parallel sweep was measured, and the baseline of that node it is compared with."""

    candidate: str
    node: str
    paired_baseline: str | None


class HostInfo(_Model):
    """The configured host and what its probe said."""

    name: str
    kind: str
    gpu_name: str
    gpu_count: int
    probe: HostProbe | None


class ReportModel(_Model):
    """Everything the Markdown says, as data (``report.json``)."""

    schema_version: int = REPORT_SCHEMA_VERSION
    sweep: str  # the sweep directory's name
    backend: str  # "vllm", "sim", or "vllm+sim" when runs disagree
    simulated: bool
    time_scale: float
    host: HostInfo
    model: str
    baseline: str
    retained: str
    retained_reason: str
    profiles: list[str]
    loaded_profiles: list[str]
    repeats: int
    confidence: float
    rows: list[CandidateRow]
    min_repeats: int | None = None  # adaptive repeats of the candidates (None: fixed run.repeats)
    max_repeats: int | None = None
    confirm_runs: int = 0  # run.confirm_runs: the most runs on top of fixed repeats per profile
    rankings: list[Ranking]
    reversals: list[ReversalParagraph]
    gates_reversal: str | None
    drift: DriftResult
    node_drift: list[DriftResult] = Field(default_factory=list)  # per node of a parallel sweep
    blocks: int = 0  # the baseline's interleaved blocks (run.interleave): launches after candidates
    recovery: RecoveryValidation | None
    plots: list[str]
    nodes: list[NodeRow] = Field(default_factory=list)  # a parallel sweep: who measured what, where
    # Added with the SLO (report.slo): the SLO in words, capacity per candidate, goodput per profile.
    slo_text: str = ""
    capacity: list[CapacityLine] = Field(default_factory=list)
    goodput: list[GoodputRow] = Field(default_factory=list)
    # Speculative decoding and prefix cache, from the server's counters (where it exports them).
    server_figures: list[ServerFigureRow] = Field(default_factory=list)
    resume: str | None = None  # the command that completes an incomplete sweep
    # Energy per token and $ per million output tokens per candidate and loaded profile (report.cost); the
    # profile the decision table quotes. Empty: no launch has an energy reading or a price.
    cost: list[CostRow] = Field(default_factory=list)
    cost_profile: str | None = None
    # Accuracy on the labelled set and its non-inferiority bound, a line per judged candidate.
    accuracy: list[AccuracyLine] = Field(default_factory=list)
    # The sweep's search (report.search): its estimate beside the confirmation's verdict, the trials, the
    # infeasible region, the winner's candidate file. None: the sweep ran no search.
    search: SearchSection | None = None
    # The sweep's promotions (``promotions/<stamp>/``, oldest first): what they left live (report.live).
    promotions: list[PromotionRecord] = Field(default_factory=list)


# ------------------------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class SweepData:
    """What the sweep directory holds besides the verdicts, read and validated."""

    results: dict[str, Results]  # by candidate name, the baseline included
    probe: HostProbe | None
    recovery: RecoveryValidation | None
    promotions: list[PromotionRecord] = field(default_factory=list)


def read_sweep(sweep_dir: Path, names: Sequence[str]) -> SweepData:
    """Run files, summaries and records of ``names``, the host probe, the recovery validation and the
    promotions."""
    return SweepData(
        results={name: load_baseline(sweep_dir, candidate_root(name), name) for name in names},
        probe=read_host_probe(sweep_dir),
        recovery=read_recovery_validation(sweep_dir),
        promotions=read_promotions(sweep_dir),
    )


# ------------------------------------------------------------------------------------------- words


def short_comparison(c: Comparison) -> str:
    """A comparison in a few words for the decision table (the full message goes to the details)."""
    if c.metric == "visible_answers" and c.observed is not None and c.baseline is not None:
        return f"visible answers {c.observed:g}/{c.n_candidate} vs {c.baseline:g}/{c.n_baseline}"
    if c.metric == "answer_accuracy" and c.observed is not None and c.baseline is not None:
        n = c.n_candidate
        return f"accuracy {round(c.observed * n)}/{n} vs {round(c.baseline * n)}/{n} (non-inferiority)"
    if c.metric == "visible_p50_censored":
        return (
            f"censored median to visible answer {fmt_value(c.observed, 's')} vs {fmt_value(c.baseline, 's')}"
        )
    names = {
        "output_tps": "output tok/s",
        "prompt_tps": "prompt tok/s",
        "ttft_p50": "TTFT p50",
        "serial_e2e_p50": "serial latency p50",
        "serial_ttft_p50": "serial TTFT p50",
        "serial_combined_p50": "serial TTFT and latency p50 (one test)",
    }
    if c.metric in names and c.ratio is not None:
        where = "" if c.metric.startswith("serial_") else f"{c.profile} "
        return f"{where}{names[c.metric]} {fmt_ratio(c.ratio)}{fmt_bounds(c.interval)}"
    return c.message


def _few(items: Sequence[str], limit: int = 2) -> str:
    head = ", ".join(items[:limit])
    return head + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def _gates_short(verdict: Verdict, status: GateStatus, *, gain: bool = False) -> str:
    """The requirement gates (or the gain gate) with ``status``, each with its strongest comparisons."""
    parts = []
    for gate in verdict.gates:
        if gate.status != status or (gate.role == "gain") != gain or gate.gate == "compatibility":
            continue
        bad = by_severity([c for c in gate.comparisons if c.status == status])
        bad.sort(key=lambda c: c.metric != "visible_answers")  # the count says more than its median
        detail = _few([short_comparison(c) for c in bad]) if bad else gate.message
        name = (gate.failure or gate.gate) if status == "fail" else gate.gate
        parts.append(f"{name}: {detail}")
    return "; ".join(parts)


def _gains_short(verdict: Verdict) -> str:
    gain = next((g for g in verdict.gates if g.gate == "latency_gain"), None)
    good = by_severity([c for c in (gain.comparisons if gain else []) if c.status == "pass"])
    return _few([short_comparison(c) for c in good]) if good else _few(list(verdict.gains))


def row_summary(verdict: Verdict | None) -> str:
    """The decision table's short cell: the failed requirements, the gain, or what is unsettled."""
    if verdict is None:
        return "the gates returned no verdict for this candidate"
    if verdict.decision_before_drift is not None:
        return f"baseline drift (would have been {decision_label(verdict.decision_before_drift)})"
    if verdict.decision == "reject":
        failed = _gates_short(verdict, "fail")
        no_gain = "" if verdict.gains else "; no clear load advantage"
        return f"{failed}{no_gain}" if failed else verdict.reason
    if verdict.decision == "keep":
        return f"gain: {_gains_short(verdict)}; no requirement failed"
    if verdict.decision == "neutral":
        return "fails no requirement, no clear gain: not worth a production change"
    if verdict.decision == "incomplete" and all(g.kind == "not_measured" for g in verdict.missing):
        return "not measured: resuming the sweep measures it (the command below)"
    if verdict.decision == "incomplete":
        said = verdict.decision_on_partial
        partial = f" (the partial evidence said {decision_label(said)}; not acted on)" if said else ""
        return f"missing: {_few([g.message for g in verdict.missing])}{partial}"
    if verdict.decision == "inconclusive":
        unsure = _gates_short(verdict, "inconclusive") or _gates_short(verdict, "inconclusive", gain=True)
        more = f"; {verdict.settle.words()}" if verdict.settle is not None else ""
        if not more and verdict.more_repeats:  # a file judged before the range: no number is promised
            more = f"; {verdict.more_repeats} or more repeat(s) per side may settle it (an estimate)"
        return f"unsettled: {unsure or verdict.reason}{more}"
    return verdict.reason


def _ci_suffix(fig: KeyFigure) -> str:
    if fig.interval is None:
        return ""
    return f", ratio {fmt_ratio(fig.ratio)} CI {fmt_ratio(fig.interval[0])}-{fmt_ratio(fig.interval[1])}"


def _load_phrase(profile: str, cfg: GauntletConfig, results: Results) -> str:
    workload = cfg.workloads.get(profile)
    if workload is None:
        return profile
    if workload.mode == "open":
        return f"{profile} (open loop, {workload.rate:g} req/s)"
    measured = [rep.summary.num_requests for rep in results.repeats(profile)]
    way = min(workload.concurrency, *measured) if measured else workload.concurrency
    return f"{way}-way {profile}"


def reversal_text(rev: Reversal, verdicts: SweepVerdict, figures: Sequence[KeyFigure], load: str) -> str:
    """The paragraph: how the candidate does on the empty road, and what it does under load."""
    by_key = {(f.metric, f.profile): f for f in figures}
    serial = next(f for f in figures if f.metric == "serial_e2e_p50")
    out, ttft = by_key.get(("output_tps", rev.loaded_profile)), by_key.get(("ttft_p50", rev.loaded_profile))
    head = (
        f"**{rev.candidate}** is {rev.direction} than {verdicts.baseline} on the empty road (serial e2e p50 "
        f"{fmt_value(serial.value, 's')} vs {fmt_value(serial.baseline, 's')}{_ci_suffix(serial)})"
    )
    parts: list[str] = []
    if out is not None and out.ratio and out.value is not None and out.baseline is not None:
        amount = f"{fmt_factor(1 / out.ratio)}x less" if out.ratio < 1 else f"{fmt_factor(out.ratio)}x more"
        parts.append(
            f"serves {amount} output ({fmt_value(out.value, 'tok/s')} vs {fmt_value(out.baseline, 'tok/s')})"
        )
    if ttft is not None and ttft.ratio and ttft.value is not None and ttft.baseline is not None:
        word = "worse" if ttft.ratio > 1 else "better"
        factor = ttft.ratio if ttft.ratio > 1 else 1 / ttft.ratio
        parts.append(
            f"its median TTFT is {fmt_factor(factor)}x {word} "
            f"({fmt_value(ttft.value, 's')} vs {fmt_value(ttft.baseline, 's')})"
        )
    return f"{head}, but under {load} it {' and '.join(parts)}."


# ------------------------------------------------------------------------------------------- building


def _startup(results: Results) -> StartupInfo:
    run = results.run
    if run is None:
        return StartupInfo(ok=None)
    return StartupInfo(
        ok=run.startup.ok,
        kind=run.startup.kind,
        matched_line=run.startup.matched_line,
        time_to_ready_s=run.startup.time_to_ready_s,
    )


def _row(name: str, verdict: Verdict | None, startup: StartupInfo) -> CandidateRow:
    if verdict is None:
        return CandidateRow(
            candidate=name,
            decision="inconclusive",
            reason=row_summary(None),
            summary=row_summary(None),
            startup=startup,
        )
    return CandidateRow(
        candidate=name,
        decision=verdict.decision,
        reason=spelled_reason(verdict.decision, verdict.reason),
        summary=row_summary(verdict),
        failed=verdict.failed,
        failed_messages=[
            f"{g.gate}: {g.message}" for g in verdict.gates if g.role == "requirement" and g.status == "fail"
        ],
        gains=verdict.gains,
        startup=startup,
        more_repeats=verdict.more_repeats,
        reversal=verdict.reversal,
        figures=verdict.figures,
        missing=verdict.missing,
        decision_on_partial=verdict.decision_on_partial,
        resume=verdict.resume,
    )


def _measured(row: CandidateRow, results: Results | None, repeats: int) -> CandidateRow:
    """The row with its repeats used, its confirmation runs and its measurement time (read from its
    summaries). ``repeats``: the most repeats the launch could be measured with (the baseline's
    ``run.repeats``; a candidate's most, ``RunConfig.candidate_repeats``, where an adaptive loop that
    stopped earlier has the most of any profile); runs beyond them are confirmation runs."""
    if results is None:
        return row
    reps = list(results.profiles.values())
    most = max((len(r) for r in reps), default=0)
    whole = min(most, repeats)
    return row.model_copy(
        update={
            # The opening repeats; a baseline's interleaved blocks are counted apart (ReportModel.blocks).
            "repeats_used": whole,
            "confirmation_runs": sum(max(0, len(r) - whole) for r in reps),
            "measurement_s": sum(float(rep.summary.duration_s) for r in reps for rep in r)
            + sum(float(r.summary.duration_s) for p in results.profiles for r in results.block_repeats(p)),
        }
    )


def build_model(
    sweep_dir: Path, cfg: GauntletConfig, verdicts: SweepVerdict, data: SweepData, names: Sequence[str]
) -> ReportModel:
    """The report as data: one row per candidate (baseline first), rankings, reversals, drift, recovery."""
    by_name = {v.candidate: v for v in verdicts.verdicts}
    rows = [
        CandidateRow(
            candidate=name,
            decision="baseline",
            reason=verdicts.retained_reason,
            startup=_startup(data.results[name]),
            figures=verdicts.baseline_figures,
        )
        if name == verdicts.baseline
        else _row(name, by_name.get(name), _startup(data.results[name]))
        for name in names
    ]
    most = cfg.run.candidate_repeats[1]
    rows = [
        _measured(
            row,
            data.results.get(row.candidate),
            most if row.decision != "baseline" else cfg.run.repeats,
        )
        for row in rows
    ]
    rows = [  # a server lost under load leads the cell, naming the node (report.lost)
        r.model_copy(update={"summary": led_summary(r.decision, r.summary, data.results.get(r.candidate))})
        for r in rows
    ]
    reversals = [
        ReversalParagraph(
            **rev.model_dump(exclude={"direction"}),
            text=reversal_text(
                rev,
                verdicts,
                by_name[rev.candidate].figures,
                _load_phrase(rev.loaded_profile, cfg, data.results[rev.candidate]),
            ),
        )
        for rev in verdicts.reversals
        if rev.candidate in by_name and rev.candidate in data.results
    ]
    runs = [r.run for r in data.results.values() if r.run is not None]
    backends = sorted({run.backend for run in runs})
    scales = sorted(
        {
            rep.summary.time_scale
            for r in data.results.values()
            for reps in r.profiles.values()
            for rep in reps
        }
    )
    host = cfg.host
    nodes = [
        NodeRow(candidate=name, node=r.run.node, paired_baseline=r.run.paired_baseline)
        for name, r in sorted(data.results.items())
        if r.run is not None and r.run.node is not None
    ]
    capacity = capacity_lines(verdicts, data.results)
    ordered = {n: data.results[n] for n in names if n in data.results}
    cost = cost_rows(ordered, cfg.gates.loaded_profiles)
    profile = cfg.workloads.get(cfg.capacity.profile) if cfg.capacity.profile is not None else None
    search = search_model(sweep_dir, verdicts, capacity_mode=profile.mode if profile is not None else None)
    return ReportModel(
        search=search,
        cost=cost,
        accuracy=accuracy_lines(verdicts),
        cost_profile=headline_profile(cost, cfg.capacity.profile),
        nodes=nodes,
        sweep=sweep_dir.resolve().name,
        backend="+".join(backends) if backends else ("sim" if host.kind == "sim" else "vllm"),
        simulated="sim" in backends or (not backends and host.kind == "sim"),
        time_scale=scales[-1] if scales else host.time_scale,
        host=HostInfo(
            name=host.name, kind=host.kind, gpu_name=host.gpu_name, gpu_count=host.gpu_count, probe=data.probe
        ),
        model=cfg.service.served_model_name,
        baseline=verdicts.baseline,
        retained=verdicts.retained,
        retained_reason=verdicts.retained_reason,
        profiles=list(cfg.run.profiles),
        loaded_profiles=list(cfg.gates.loaded_profiles),
        repeats=cfg.run.repeats,
        confidence=cfg.gates.confidence,
        rows=rows,
        min_repeats=cfg.run.min_repeats if cfg.run.max_repeats is not None else None,
        max_repeats=cfg.run.max_repeats,
        confirm_runs=cfg.run.confirm_runs,
        rankings=verdicts.rankings,
        reversals=reversals,
        gates_reversal=verdicts.reversal,
        drift=verdicts.drift,
        node_drift=verdicts.node_drift,
        blocks=len(base.blocks) if (base := data.results.get(verdicts.baseline)) is not None else 0,
        recovery=data.recovery,
        promotions=data.promotions,
        plots=[PLOT_TTFT, PLOT_THROUGHPUT, PLOT_RANKING]
        + ([PLOT_PARETO, PLOT_GOODPUT] if capacity else [])
        + ([PLOT_SEARCH] if search is not None else []),
        slo_text=slo_text(cfg.slo),
        capacity=capacity,
        goodput=goodput_rows(data.results, cfg.run.profiles, cfg.gates.confidence),
        server_figures=server_figure_rows(data.results, cfg.run.profiles),
        resume=verdicts.resume,
    )
