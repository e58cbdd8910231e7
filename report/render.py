"""The report: the decision table, the reversal, drift and the recovery result, rebuilt from disk.

Pipeline position: the last box. :func:`build_report` re-judges the stored results of a sweep directory
(``gates.evaluate_sweep``, then ``verdicts.json``), reads the rest of what the sweep wrote (host probe,
run files, summaries, records, recovery validation) and writes ``report.md``, ``report.json`` and three
PNG plots. Nothing here measures anything: a report can be rebuilt at any time with
``python -m orchestrator report DIR``::

    text = build_report(Path("sweeps/20261202-101500"))   # the Markdown decision table
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from contracts.errors import GauntletError, ResultFileError
from contracts.results import HostProbe, RecoveryValidation, RequestRecord, read_model, write_model
from contracts.schema import GauntletConfig, read_sweep_config
from contracts.verdicts import Comparison, Decision, DriftResult, GateStatus, SweepVerdict, Verdict
from gates.data import Repeat, Results, candidate_names, load_results

if TYPE_CHECKING:
    from matplotlib.axes import Axes

REPORT_SCHEMA_VERSION = 1

PLOT_TTFT = "ttft.png"
PLOT_THROUGHPUT = "throughput.png"
PLOT_RANKING = "ranking.png"

Better = Literal["lower", "higher"]
RowDecision = Decision | Literal["baseline"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="constants")


class KeyFigure(_Model):
    """One figure of one candidate against the baseline (ratio and interval from the gates when judged)."""

    metric: str  # serial_e2e_p50, output_tps, prompt_tps, ttft_p50, visible_answers, visible_p50_censored
    profile: str
    label: str
    unit: str  # "s", "tok/s", "answers"
    better: Better
    value: float | None  # the candidate's value (infinite: right-censored median)
    baseline: float | None
    ratio: float | None = None  # candidate / baseline
    interval: tuple[float, float] | None = None  # confidence interval of the ratio (None: not judged)
    status: GateStatus | None = None  # the gates' status of this comparison; None: shown for context
    method: str = ""
    count: tuple[int, int] | None = None  # visible answers: (visible, asked)
    baseline_count: tuple[int, int] | None = None
    source: Literal["gates", "results"] = "results"  # where the numbers came from


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


class Ranking(_Model):
    """Measured candidates ordered best first by one figure."""

    metric: str
    profile: str
    label: str
    order: list[str]
    values: list[float | None]


class Reversal(_Model):
    """Serial and loaded rankings disagree for one candidate against the baseline."""

    candidate: str
    serial_ratio: float
    loaded_profile: str
    output_ratio: float | None
    ttft_ratio: float | None
    text: str


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
    rankings: list[Ranking]
    reversals: list[Reversal]
    gates_reversal: str | None
    drift: DriftResult
    recovery: RecoveryValidation | None
    plots: list[str]


# ------------------------------------------------------------------------------------------- judging

Judge = Callable[[Path, GauntletConfig], SweepVerdict]


def rejudge(sweep_dir: Path, cfg: GauntletConfig) -> SweepVerdict:
    """Evaluate the gates over the stored results and write ``verdicts.json`` (the real default)."""
    import gates  # noqa: PLC0415  (the gates package pulls in scipy; only a report needs it)

    verdicts: SweepVerdict = gates.evaluate_sweep(sweep_dir, cfg.gates, baseline=cfg.baseline.name)
    gates.write_verdicts(sweep_dir, verdicts)
    return verdicts


# ------------------------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class SweepData:
    """What the sweep directory holds, read and validated."""

    results: dict[str, Results]  # by candidate name, the baseline included
    probe: HostProbe | None
    recovery: RecoveryValidation | None


def read_sweep(sweep_dir: Path, names: Iterable[str]) -> SweepData:
    results = {name: load_results(sweep_dir, f"candidates/{name}", name) for name in names}
    probe_path = sweep_dir / "host.json"
    probe = read_model(probe_path, HostProbe) if probe_path.exists() else None
    validation = sweep_dir / "recovery" / "validation.json"
    recovery = read_model(validation, RecoveryValidation) if validation.exists() else None
    return SweepData(results=results, probe=probe, recovery=recovery)


# ------------------------------------------------------------------------------------------- figures


@dataclass(frozen=True)
class FigureSpec:
    """A key figure: which comparison of the gates it is, and how to compute it without one."""

    metric: str
    profile: str
    label: str
    unit: str
    better: Better


def figure_specs(cfg: GauntletConfig) -> list[FigureSpec]:
    g = cfg.gates
    specs = [FigureSpec("serial_e2e_p50", g.serial_profile, "serial e2e p50", "s", "lower")]
    specs += [FigureSpec("output_tps", p, f"{p} output tok/s", "tok/s", "higher") for p in g.loaded_profiles]
    specs += [FigureSpec("prompt_tps", p, f"{p} prompt tok/s", "tok/s", "higher") for p in g.loaded_profiles]
    specs += [FigureSpec("ttft_p50", p, f"{p} TTFT p50", "s", "lower") for p in g.loaded_profiles]
    specs += [
        FigureSpec("visible_answers", g.answer_profile, "visible answers", "answers", "higher"),
        FigureSpec("visible_p50_censored", g.answer_profile, "visible-answer censored median", "s", "lower"),
    ]
    return specs


def _median(values: Sequence[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    n = len(ordered)
    if n % 2:
        return ordered[n // 2]
    high = ordered[n // 2]
    return math.inf if math.isinf(high) else (ordered[n // 2 - 1] + high) / 2


def _records(repeats: Sequence[Repeat]) -> list[RequestRecord]:
    return [r for rep in repeats for r in rep.records]


def _e2e(r: RequestRecord) -> float:
    return r.end_s if r.ok and r.end_s is not None else math.inf


def _ttft(r: RequestRecord) -> float:
    return math.inf if r.ttft_s is None else r.ttft_s


def _visible(r: RequestRecord) -> float:
    return math.inf if r.first_visible_s is None else r.first_visible_s


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def raw_value(spec: FigureSpec, results: Results) -> tuple[float | None, tuple[int, int] | None]:
    """The figure computed from the stored results alone (used when no comparison of the gates has it)."""
    repeats = results.repeats(spec.profile)
    if not repeats:
        return None, None
    records = _records(repeats)
    if spec.metric in ("output_tps", "prompt_tps"):
        return _mean([float(getattr(rep.summary, spec.metric)) for rep in repeats]), None
    if spec.metric == "serial_e2e_p50":
        return _median([_e2e(r) for r in records]), None
    if spec.metric == "ttft_p50":
        return _median([_ttft(r) for r in records]), None
    visible = sum(r.first_visible_s is not None for r in records)
    if spec.metric == "visible_answers":
        return float(visible), (visible, len(records))
    return _median([_visible(r) for r in records]), None


def _comparisons(verdict: Verdict | None) -> dict[tuple[str, str], Comparison]:
    found: dict[tuple[str, str], Comparison] = {}
    for gate in verdict.gates if verdict else []:
        for comparison in gate.comparisons:
            if comparison.observed is None and comparison.ratio is None:
                continue
            found.setdefault((comparison.metric, comparison.profile), comparison)
    return found


def key_figures(
    specs: Sequence[FigureSpec], cand: Results, base: Results, verdict: Verdict | None
) -> list[KeyFigure]:
    """Each figure of ``cand`` against ``base``; ratio and interval from the gates where they judged it."""
    judged = _comparisons(verdict)
    figures: list[KeyFigure] = []
    for spec in specs:
        value, count = raw_value(spec, cand)
        base_value, base_count = raw_value(spec, base)
        comparison = judged.get((spec.metric, spec.profile))
        if comparison is not None and spec.metric != "visible_answers":
            figures.append(
                KeyFigure(
                    metric=spec.metric,
                    profile=spec.profile,
                    label=spec.label,
                    unit=spec.unit,
                    better=spec.better,
                    value=comparison.observed,
                    baseline=comparison.baseline,
                    ratio=comparison.ratio,
                    interval=comparison.interval,
                    status=comparison.status,
                    method=comparison.method,
                    source="gates",
                )
            )
            continue
        ratio = comparison.ratio if comparison is not None else _ratio(value, base_value)
        figures.append(
            KeyFigure(
                metric=spec.metric,
                profile=spec.profile,
                label=spec.label,
                unit=spec.unit,
                better=spec.better,
                value=value,
                baseline=base_value,
                ratio=ratio,
                interval=comparison.interval if comparison is not None else None,
                status=comparison.status if comparison is not None else None,
                method=comparison.method if comparison is not None else "",
                count=count,
                baseline_count=base_count,
                source="gates" if comparison is not None else "results",
            )
        )
    return figures


def _ratio(value: float | None, base: float | None) -> float | None:
    if value is None or base is None or base == 0 or math.isinf(base):
        return None
    return value / base


# ------------------------------------------------------------------------------------------- rankings


def rankings(specs: Sequence[FigureSpec], names: Sequence[str], data: SweepData) -> list[Ranking]:
    """Measured candidates ordered best first by serial latency, then by each loaded figure."""
    out: list[Ranking] = []
    for spec in specs:
        if spec.metric not in ("serial_e2e_p50", "output_tps", "ttft_p50"):
            continue
        values = {n: raw_value(spec, data.results[n])[0] for n in names}
        measured = [n for n in names if values[n] is not None]
        if len(measured) < 2:
            continue
        sign = 1.0 if spec.better == "lower" else -1.0
        order = sorted(measured, key=lambda n: (sign * (values[n] or 0.0), names.index(n)))
        out.append(
            Ranking(
                metric=spec.metric,
                profile=spec.profile,
                label=spec.label,
                order=order,
                values=[values[n] for n in order],
            )
        )
    return out


def _beyond_noise(fig: KeyFigure, worse: bool, tolerance: float) -> bool:
    """The figure is worse (or better) than the baseline, and its interval excludes "no change"."""
    if fig.ratio is None:
        return False
    up = (fig.better == "lower") == worse  # the direction of the ratio that means worse/better
    if fig.interval is not None:
        low, high = fig.interval
        return low > 1 if up else high < 1
    return fig.ratio > 1 + tolerance if up else fig.ratio < 1 - tolerance


def find_reversals(
    rows: Sequence[CandidateRow], cfg: GauntletConfig, data: SweepData, baseline: str
) -> list[Reversal]:
    """Candidates whose serial latency and loaded figures point opposite ways against the baseline."""
    tol = cfg.gates.throughput_tolerance
    found: list[Reversal] = []
    for row in rows:
        figs = {(f.metric, f.profile): f for f in row.figures}
        serial = figs.get(("serial_e2e_p50", cfg.gates.serial_profile))
        if serial is None or serial.ratio is None or serial.value is None or serial.baseline is None:
            continue
        faster = _beyond_noise(serial, worse=False, tolerance=cfg.gates.min_gain)
        slower = _beyond_noise(serial, worse=True, tolerance=tol)
        if not (faster or slower):
            continue
        best: tuple[float, str, KeyFigure | None, KeyFigure | None] | None = None
        for profile in cfg.gates.loaded_profiles:
            out = figs.get(("output_tps", profile))
            ttft = figs.get(("ttft_p50", profile))
            opposite = [
                f for f in (out, ttft) if f is not None and _beyond_noise(f, worse=faster, tolerance=tol)
            ]
            if not opposite:
                continue
            # Strength of the opposite effect, in log-ratio units oriented so that larger = stronger.
            strength = max(abs(math.log(f.ratio)) for f in opposite if f.ratio and not math.isinf(f.ratio))
            if best is None or strength > best[0]:
                best = (strength, profile, out, ttft)
        if best is None:
            continue
        _, profile, out, ttft = best
        found.append(
            Reversal(
                candidate=row.candidate,
                serial_ratio=serial.ratio,
                loaded_profile=profile,
                output_ratio=out.ratio if out else None,
                ttft_ratio=ttft.ratio if ttft else None,
                text=_reversal_text(
                    name=row.candidate,
                    baseline=baseline,
                    serial=serial,
                    profile=profile,
                    out=out,
                    ttft=ttft,
                    faster=faster,
                    cfg=cfg,
                    data=data,
                ),
            )
        )
    return found


def _load_phrase(profile: str, cfg: GauntletConfig, data: SweepData, name: str) -> str:
    workload = cfg.workloads.get(profile)
    if workload is None:
        return profile
    if workload.mode == "open":
        return f"{profile} (open loop, {workload.rate:g} req/s)"
    measured = [rep.summary.num_requests for rep in data.results[name].repeats(profile)]
    way = min(workload.concurrency, *measured) if measured else workload.concurrency
    return f"{way}-way {profile}"


def _times(ratio: float) -> str:
    return "inf" if math.isinf(ratio) else (f"{ratio:.1f}" if ratio >= 1.95 else f"{ratio:.2f}")


def _reversal_text(
    *,
    name: str,
    baseline: str,
    serial: KeyFigure,
    profile: str,
    out: KeyFigure | None,
    ttft: KeyFigure | None,
    faster: bool,
    cfg: GauntletConfig,
    data: SweepData,
) -> str:
    road = "faster" if faster else "slower"
    head = (
        f"**{name}** is {road} than {baseline} on the empty road (serial e2e p50 "
        f"{fmt_value(serial.value, 's')} vs {fmt_value(serial.baseline, 's')}{_ci_suffix(serial)})"
    )
    parts: list[str] = []
    if out is not None and out.ratio and out.value is not None and out.baseline is not None:
        if out.ratio < 1:
            amount = f"{_times(1 / out.ratio)}x less output"
        else:
            amount = f"{_times(out.ratio)}x more output"
        parts.append(
            f"serves {amount} ({fmt_value(out.value, 'tok/s')} vs {fmt_value(out.baseline, 'tok/s')})"
        )
    if ttft is not None and ttft.ratio and ttft.value is not None and ttft.baseline is not None:
        word = "worse" if ttft.ratio > 1 else "better"
        factor = ttft.ratio if ttft.ratio > 1 else 1 / ttft.ratio
        parts.append(
            f"its median TTFT is {_times(factor)}x {word} "
            f"({fmt_value(ttft.value, 's')} vs {fmt_value(ttft.baseline, 's')})"
        )
    load = _load_phrase(profile, cfg, data, name)
    return f"{head}, but under {load} it {' and '.join(parts)}."


# ------------------------------------------------------------------------------------------- formatting


def fmt_value(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if math.isinf(value):
        return "inf (censored)" if unit == "s" else "inf"
    if unit == "tok/s":
        return f"{value:,.0f} tok/s" if value >= 100 else f"{value:,.1f} tok/s"
    if unit == "s":
        if value < 1:
            return f"{value:.3f} s"
        return f"{value:.2f} s" if value < 100 else f"{value:,.0f} s"
    return f"{value:g}"


def fmt_ratio(value: float | None) -> str:
    if value is None:
        return "n/a"
    if math.isinf(value):
        return "inf"
    if value >= 10:
        return f"{value:.1f}x"
    return f"{value:.3f}x" if value < 1.2 else f"{value:.2f}x"


def _ci_suffix(fig: KeyFigure) -> str:
    if fig.interval is None:
        return ""
    return f", ratio {fmt_ratio(fig.ratio)} CI {fmt_ratio(fig.interval[0])}-{fmt_ratio(fig.interval[1])}"


def _figure_value(fig: KeyFigure, *, baseline: bool = False) -> str:
    if fig.metric == "visible_answers":
        count = fig.baseline_count if baseline else fig.count
        return "n/a" if count is None else f"{count[0]}/{count[1]}"
    return fmt_value(fig.baseline if baseline else fig.value, fig.unit)


def figure_cell(fig: KeyFigure) -> str:
    """``value  ratio [low-high]`` for a candidate's figure against the baseline."""
    value = _figure_value(fig)
    if fig.value is None:
        return "not measured"
    if fig.ratio is None or math.isinf(fig.ratio):
        return value
    return f"{value}  {fmt_ratio(fig.ratio)}{_bounds(fig.interval)}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table with padded columns, so that it also reads in a terminal."""
    clean = [[cell.replace("|", "\\|").replace("\n", " ") for cell in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in clean)) if clean else len(h) for i, h in enumerate(header)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |"]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    lines.extend("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in clean)
    return lines


_LABELS: dict[str, str] = {
    "baseline": "baseline",
    "keep": "KEEP",
    "reject": "REJECT",
    "neutral": "neutral",
    "incompatible": "INCOMPATIBLE",
    "inconclusive": "INCONCLUSIVE",
}


def _bounds(interval: tuple[float, float] | None) -> str:
    if interval is None:
        return ""
    low, high = interval
    if low <= 0 or math.isinf(high):
        return " [unbounded]"
    return f" [{fmt_ratio(low)}-{fmt_ratio(high)}]"


def short_comparison(c: Comparison) -> str:
    """A comparison in a few words for the decision table (the full message goes to the details)."""
    if c.metric == "visible_answers" and c.observed is not None and c.baseline is not None:
        return f"visible answers {c.observed:g}/{c.n_candidate} vs {c.baseline:g}/{c.n_baseline}"
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
    }
    if c.metric in names and c.ratio is not None:
        where = "" if c.metric.startswith("serial_") else f"{c.profile} "
        return f"{where}{names[c.metric]} {fmt_ratio(c.ratio)}{_bounds(c.interval)}"
    return c.message


_METRIC_ORDER = {"output_tps": 0, "ttft_p50": 1, "prompt_tps": 2}


def _strength(c: Comparison) -> tuple[float, int]:
    """Sort key: the largest effect first; on a tie, output before TTFT before prompt tokens/s."""
    order = _METRIC_ORDER.get(c.metric, 3)
    if c.ratio is None or c.ratio <= 0:
        return (0.0, -order)
    size = math.inf if math.isinf(c.ratio) else round(abs(math.log(c.ratio)), 2)
    return (size, -order)


def requirement_label(gate: str) -> str:
    """What failing a gate means, in words ("concurrency regression"), from the gate registry."""
    from gates.registry import REGISTRY  # noqa: PLC0415

    cls = REGISTRY.get(gate)
    return str(getattr(cls, "failure", "") or gate) if cls is not None else gate


def _few(items: Sequence[str], limit: int = 2) -> str:
    head = ", ".join(items[:limit])
    return head + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def _gates_short(verdict: Verdict, status: GateStatus, *, gain: bool = False) -> str:
    """The requirement gates (or the gain gate) with ``status``, each with its strongest comparisons."""
    parts = []
    for gate in verdict.gates:
        if gate.status != status or (gate.role == "gain") != gain or gate.gate == "compatibility":
            continue
        bad = sorted((c for c in gate.comparisons if c.status == status), key=_strength, reverse=True)
        bad.sort(key=lambda c: c.metric != "visible_answers")  # the count says more than its median
        detail = _few([short_comparison(c) for c in bad]) if bad else gate.message
        parts.append(f"{requirement_label(gate.gate) if status == 'fail' else gate.gate}: {detail}")
    return "; ".join(parts)


def _gains_short(verdict: Verdict) -> str:
    gain = next((g for g in verdict.gates if g.gate == "latency_gain"), None)
    good = sorted(
        (c for c in (gain.comparisons if gain else []) if c.status == "pass"), key=_strength, reverse=True
    )
    return _few([short_comparison(c) for c in good]) if good else _few(list(verdict.gains))


def _why(row: CandidateRow, retained: str) -> str:
    """The decision table's short cell: the failed requirement, the gain, or the startup failure."""
    if row.decision == "baseline":
        return "retained configuration" if row.candidate == retained else f"replaced by {retained}"
    if row.decision == "incompatible":
        kind = row.startup.kind or "did not start"
        line = (row.startup.matched_line or "").strip()
        return f"startup failed ({kind}): {line}" if line else f"startup failed ({kind})"
    return row.summary or row.reason


# ------------------------------------------------------------------------------------------- building


def _summary(verdict: Verdict | None) -> str:
    if verdict is None:
        return "the gates returned no verdict for this candidate"
    if verdict.decision_before_drift is not None:
        return f"baseline drift (would have been {verdict.decision_before_drift})"
    if verdict.decision == "reject":
        failed = _gates_short(verdict, "fail")
        no_gain = "" if verdict.gains else "; no clear load advantage"
        return f"{failed}{no_gain}" if failed else verdict.reason
    if verdict.decision == "keep":
        return f"gain: {_gains_short(verdict)}; no requirement failed"
    if verdict.decision == "neutral":
        return "fails no requirement, no clear gain: not worth a production change"
    if verdict.decision == "inconclusive":
        unsure = _gates_short(verdict, "inconclusive") or _gates_short(verdict, "inconclusive", gain=True)
        more = (
            f"; about {verdict.more_repeats} more repeat(s) per side would settle it"
            if verdict.more_repeats
            else ""
        )
        return f"unsettled: {unsure or verdict.reason}{more}"
    return verdict.reason


# ------------------------------------------------------------------------------------------- building


def build_model(
    sweep_dir: Path, cfg: GauntletConfig, verdicts: SweepVerdict, data: SweepData, names: Sequence[str]
) -> ReportModel:
    """The report as data: one row per candidate (baseline first), rankings, reversals, drift, recovery."""
    baseline = verdicts.baseline
    specs = figure_specs(cfg)
    by_name = {v.candidate: v for v in verdicts.verdicts}
    base_results = data.results[baseline]
    rows: list[CandidateRow] = []
    for name in names:
        res = data.results[name]
        run = res.run
        startup = StartupInfo(
            ok=run.startup.ok if run else None,
            kind=run.startup.kind if run else None,
            matched_line=run.startup.matched_line if run else None,
            time_to_ready_s=run.startup.time_to_ready_s if run else None,
        )
        if name == baseline:
            rows.append(
                CandidateRow(
                    candidate=name,
                    decision="baseline",
                    reason=verdicts.retained_reason,
                    startup=startup,
                    figures=[
                        f.model_copy(update={"ratio": None}) for f in key_figures(specs, res, res, None)
                    ],
                )
            )
            continue
        verdict = by_name.get(name)
        failed_messages = [
            f"{g.gate}: {g.message}"
            for g in (verdict.gates if verdict else [])
            if g.role == "requirement" and g.status == "fail"
        ]
        rows.append(
            CandidateRow(
                candidate=name,
                decision=verdict.decision if verdict else "inconclusive",
                reason=verdict.reason if verdict else "the gates returned no verdict for this candidate",
                summary=_summary(verdict),
                failed=verdict.failed if verdict else [],
                failed_messages=failed_messages,
                gains=verdict.gains if verdict else [],
                startup=startup,
                more_repeats=verdict.more_repeats if verdict else None,
                reversal=verdict.reversal if verdict else None,
                figures=key_figures(specs, res, base_results, verdict) if res.started else [],
            )
        )
    measured = [n for n in names if data.results[n].started and data.results[n].profiles]
    backends = sorted({r.run.backend for r in data.results.values() if r.run is not None})
    scales = sorted(
        {
            rep.summary.time_scale
            for r in data.results.values()
            for reps in r.profiles.values()
            for rep in reps
        }
    )
    host = cfg.host
    return ReportModel(
        sweep=sweep_dir.resolve().name,
        backend="+".join(backends) if backends else ("sim" if host.kind == "sim" else "vllm"),
        simulated="sim" in backends or (not backends and host.kind == "sim"),
        time_scale=scales[-1] if scales else host.time_scale,
        host=HostInfo(
            name=host.name, kind=host.kind, gpu_name=host.gpu_name, gpu_count=host.gpu_count, probe=data.probe
        ),
        model=cfg.service.served_model_name,
        baseline=baseline,
        retained=verdicts.retained,
        retained_reason=verdicts.retained_reason,
        profiles=list(cfg.run.profiles),
        loaded_profiles=list(cfg.gates.loaded_profiles),
        repeats=cfg.run.repeats,
        confidence=cfg.gates.confidence,
        rows=rows,
        rankings=rankings(specs, measured, data),
        reversals=find_reversals([r for r in rows if r.decision != "baseline"], cfg, data, baseline),
        gates_reversal=verdicts.reversal,
        drift=verdicts.drift,
        recovery=data.recovery,
        plots=[PLOT_TTFT, PLOT_THROUGHPUT, PLOT_RANKING],
    )


def render_markdown(report: ReportModel) -> str:
    """The decision table and everything around it, readable as Markdown and in a terminal."""
    out: list[str] = [f"# gauntlet sweep report: {report.sweep}", ""]
    out += _header(report)
    out += ["", "## Decision", ""]
    out += table(
        ["candidate", "verdict", "failed requirement / gain / reason"],
        [[r.candidate, _LABELS[r.decision], _why(r, report.retained)] for r in report.rows],
    )
    details = [r for r in report.rows if r.decision != "baseline"]
    if details:
        out += ["", "Details (the gates' reasons, with numbers):", ""]
        out += [f"- **{r.candidate}** ({_LABELS[r.decision]}): {r.reason}" for r in details]
    out += _figures_section(report)
    out += ["", "## Serial versus loaded ranking", ""]
    out += _reversal_section(report)
    out += ["", "## Baseline drift", ""]
    out += _drift_section(report.drift)
    out += ["", "## Retained configuration and recovery", ""]
    out += _recovery_section(report)
    out += ["", "## Plots", ""]
    out += [
        f"- `{PLOT_TTFT}`: TTFT distribution per candidate and profile (log scale)",
        f"- `{PLOT_THROUGHPUT}`: aggregate output and prompt tokens/s per candidate and profile "
        "(with the repeats' spread)",
        f"- `{PLOT_RANKING}`: rank by serial latency against rank under load",
    ]
    return "\n".join(out) + "\n"


def _figures_section(report: ReportModel) -> list[str]:
    measured = [r for r in report.rows if r.figures and r.decision != "baseline"]
    base_row = next((r for r in report.rows if r.decision == "baseline"), None)
    if not measured or base_row is None:
        return []
    conf = f"{report.confidence:.0%}"
    out = ["", f"## Key figures against the baseline (value, ratio to {report.baseline} [{conf} CI])", ""]
    base_label = "baseline" if report.baseline == "baseline" else f"{report.baseline} (baseline)"
    lines: list[list[str]] = []
    unmeasured: list[str] = []
    for i, base_fig in enumerate(base_row.figures):
        if base_fig.metric == "prompt_tps":
            continue  # in report.json and the throughput plot; the table stays terminal-wide
        figs = [r.figures[i] for r in measured]
        if base_fig.value is None and all(f.value is None for f in figs):
            unmeasured.append(base_fig.label)
            continue
        lines.append([base_fig.label, _figure_value(base_fig), *(figure_cell(f) for f in figs)])
    out += table(["figure", base_label, *(r.candidate for r in measured)], lines)
    out += [
        "",
        "Ratios are candidate / baseline; an interval that excludes 1.000x is beyond noise. Intervals are "
        "the gates' own (serial latency: widened for the several latencies the gain gate tests).",
    ]
    if unmeasured:
        out.append(f"Not measured in this sweep: {', '.join(unmeasured)}.")
    return out


def _header(report: ReportModel) -> list[str]:
    if report.simulated:
        scale = (
            "running in real time"
            if report.time_scale == 1
            else f"time scale {report.time_scale:g}x: each wall-clock second stands for "
            f"{report.time_scale:g} simulated seconds; every duration here is in simulated seconds"
        )
        lines = [
            "> **SIMULATED**: these numbers come from gauntlet's simulated vLLM host (launch.sim), "
            f"not from a real GPU ({scale}).",
            "> They show how the sweep decides; they say nothing about real hardware.",
        ]
    else:
        lines = ["> Numbers measured on **real vLLM** (backend `vllm`)."]
    host = report.host
    lines += [
        "",
        f"- host: `{host.name}` ({host.kind}; {host.gpu_count} x {host.gpu_name or 'unnamed accelerator'})",
        f"- host probe: {_probe_text(host.probe)}",
        f"- model: `{report.model}`; baseline: `{report.baseline}`; "
        f"{report.repeats} repeat(s) of {', '.join(report.profiles) or 'no profile'}",
    ]
    return lines


def _probe_text(probe: HostProbe | None) -> str:
    if probe is None:
        return "not recorded (no host.json)"
    if not probe.driver:
        return probe.reason or "no NVIDIA driver"
    names = sorted({g.name for g in probe.gpus})
    free = [g.free_gib for g in probe.gpus]
    free_text = f", free {min(free):.1f}-{max(free):.1f} GiB" if free else ""
    cc = (
        f", compute capability {', '.join(sorted(set(probe.compute_capability)))}"
        if probe.compute_capability
        else ""
    )
    return (
        f"NVIDIA driver {probe.driver_version or '?'}, {len(probe.gpus)} GPU(s) "
        f"({', '.join(names) or 'unnamed'}){cc}{free_text}"
    )


def _reversal_section(report: ReportModel) -> list[str]:
    lines: list[str] = []
    if report.reversals:
        for rev in report.reversals:
            lines += [rev.text, ""]
        lines.append(
            "Serial latency alone would have picked the wrong configuration: the load profiles are what "
            "the service actually serves."
        )
    elif report.gates_reversal:
        lines.append(report.gates_reversal)
    else:
        lines.append("No reversal: where measured, serial and loaded rankings agree against the baseline.")
    serial = next((r for r in report.rankings if r.metric == "serial_e2e_p50"), None)
    if serial is not None:
        lines += ["", "Rank (best first, point estimates):", ""]
        for ranking in report.rankings:
            lines.append(f"- {ranking.label}: {' > '.join(ranking.order)}")
    return lines


def _drift_section(drift: DriftResult) -> list[str]:
    if drift.status == "fail":
        return [
            f"**DRIFT: the baseline moved beyond noise during the sweep: every measured verdict is "
            f"inconclusive.** {drift.message}"
        ]
    label = {"pass": "pass", "inconclusive": "INCONCLUSIVE", "not_run": "not run"}
    return [f"drift check: **{label[drift.status]}**. {drift.message}"]


def _recovery_section(report: ReportModel) -> list[str]:
    lines = [f"retained: **{report.retained}** ({report.retained_reason})", ""]
    rec = report.recovery
    if rec is None:
        return [*lines, "recovery validation: **NOT RUN** (no recovery/validation.json)"]
    same = rec.fingerprint == rec.recorded_fingerprint
    state = "PASSED" if rec.ok else "FAILED"
    lines += [
        f"recovery validation: **{state}**: {rec.reason}",
        f"- fingerprint {'matches' if same else 'DIFFERS from'} the one recorded at the start: "
        f"`{rec.fingerprint}`" + ("" if same else f" (recorded `{rec.recorded_fingerprint}`)"),
        f"- server pid: {rec.pid if rec.pid is not None else 'none'}",
        "",
    ]
    lines += table(
        ["check", "expected", "observed", "ok"],
        [[c.name, c.expected, c.observed, "yes" if c.ok else "NO"] for c in rec.checks],
    )
    return lines


def build_report(sweep_dir: Path, cfg: GauntletConfig | None = None, *, judge: Judge = rejudge) -> str:
    """Re-judge, write report.md, report.json and the PNG plots into ``sweep_dir``; return the Markdown."""
    if not sweep_dir.is_dir():
        raise ResultFileError(f"{sweep_dir}: no such sweep directory", hint="pass a directory a sweep wrote")
    if cfg is None:
        cfg = read_sweep_config(sweep_dir)
    verdicts = judge(sweep_dir, cfg)
    others = [n for n in candidate_names(sweep_dir) if n != verdicts.baseline]
    names = [verdicts.baseline, *others]
    data = read_sweep(sweep_dir, names)
    report = build_model(sweep_dir, cfg, verdicts, data, names)
    text = render_markdown(report)
    write_plots(sweep_dir, cfg, report, data)
    write_model(sweep_dir / "report.json", report)
    (sweep_dir / "report.md").write_text(text)
    return text


# ------------------------------------------------------------------------------------------- plots


def _pyplot() -> Any:
    import matplotlib  # noqa: PLC0415  (plots are the only user; set the backend before pyplot loads)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


_BASELINE_COLOR = "#222222"
_REVERSAL_COLORS = ["#d62728", "#ff7f0e", "#e377c2"]
_OTHER_COLORS = ["#1f77b4", "#2ca02c", "#9467bd", "#17becf", "#8c564b", "#bcbd22", "#7f7f7f"]


def plot_colors(report: ReportModel) -> dict[str, str]:
    """Baseline black, candidates with a reversal in warm colours, the rest in cool ones (stable order)."""
    reversed_names = {r.candidate for r in report.reversals}
    colors = {report.baseline: _BASELINE_COLOR}
    warm = [r.candidate for r in report.rows if r.candidate in reversed_names]
    cool = [
        r.candidate for r in report.rows if r.candidate not in reversed_names and r.candidate not in colors
    ]
    colors.update({n: _REVERSAL_COLORS[i % len(_REVERSAL_COLORS)] for i, n in enumerate(warm)})
    colors.update({n: _OTHER_COLORS[i % len(_OTHER_COLORS)] for i, n in enumerate(cool)})
    return colors


def _measured_profiles(profiles: Sequence[str], data: SweepData) -> tuple[list[str], list[str]]:
    """The profiles somebody measured, and the ones nobody did."""
    seen = [p for p in profiles if any(r.repeats(p) for r in data.results.values())]
    return seen, [p for p in profiles if p not in seen]


def _log_axis(ax: Axes) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: PLC0415

    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _save(fig: Any, path: Path) -> None:
    fig.savefig(path, dpi=110, metadata={"Software": None})


def write_plots(sweep_dir: Path, cfg: GauntletConfig, report: ReportModel, data: SweepData) -> None:
    """The three PNGs; a candidate without measurements or a missing profile leaves a labelled gap."""
    plt = _pyplot()
    names = [r.candidate for r in report.rows]
    colors = plot_colors(report)
    title = f"{report.sweep}" + (" (SIMULATED)" if report.simulated else "")
    with plt.rc_context({"font.size": 9, "axes.titlesize": 10}):
        for fig in (
            _plot_ttft(plt=plt, cfg=cfg, names=names, colors=colors, data=data, title=title),
            _plot_throughput(plt=plt, cfg=cfg, names=names, colors=colors, data=data, title=title),
            _plot_ranking(plt, report, colors, title),
        ):
            _save(fig[0], sweep_dir / fig[1])
            plt.close(fig[0])


def _grid(plt: Any, panels: int, *, cols: int, width: float, height: float) -> tuple[Any, list[Axes]]:
    rows = max(1, math.ceil(panels / cols))
    cols = max(1, min(cols, panels))
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[panels:]:
        ax.set_visible(False)
    return fig, flat


def _gap(ax: Axes, x: float, text: str) -> None:
    ax.annotate(
        text,
        (x, 0.5),
        xycoords=("data", "axes fraction"),
        ha="center",
        va="center",
        rotation=90,
        fontsize=8,
        color="#888888",
    )


def _plot_ttft(
    *,
    plt: Any,
    cfg: GauntletConfig,
    names: Sequence[str],
    colors: dict[str, str],
    data: SweepData,
    title: str,
) -> tuple[Any, str]:
    configured = list(cfg.run.profiles) or sorted({p for r in data.results.values() for p in r.profiles})
    profiles, unmeasured = _measured_profiles(configured, data)
    fig, axes = _grid(plt, len(profiles) or 1, cols=3, width=4.2, height=3.4)
    if not profiles:
        axes[0].text(
            0.5, 0.5, "no profile was measured", ha="center", va="center", transform=axes[0].transAxes
        )
        axes[0].set_axis_off()
    for ax, profile in zip(axes, profiles, strict=False):
        positions = list(range(1, len(names) + 1))
        series: list[list[float]] = []
        for pos, name in zip(positions, names, strict=True):
            res = data.results[name]
            values = [
                r.ttft_s for r in _records(res.repeats(profile)) if r.ttft_s is not None and r.ttft_s > 0
            ]
            series.append(values)
            if not values:
                _gap(ax, pos, "did not start" if not res.started else "not measured")
        drawn = [(p, v, n) for p, v, n in zip(positions, series, names, strict=True) if v]
        if drawn:
            parts = ax.boxplot(
                [v for _, v, _ in drawn],
                positions=[p for p, _, _ in drawn],
                widths=0.6,
                patch_artist=True,
                flierprops={"markersize": 2, "alpha": 0.5},
                medianprops={"color": "black"},
            )
            for patch, (_, _, name) in zip(parts["boxes"], drawn, strict=True):
                patch.set_facecolor(colors[name])
                patch.set_alpha(0.55)
            _log_axis(ax)
        ax.set_xlim(0.4, len(names) + 0.6)
        ax.set_xticks(positions, names, rotation=30, ha="right")
        ax.set_title(profile)
        ax.set_ylabel("TTFT (host s, log)")
        ax.grid(axis="y", which="both", alpha=0.25)
    missing = f"\nnot measured by anyone: {', '.join(unmeasured)}" if unmeasured else ""
    fig.suptitle(f"TTFT per candidate and profile: {title}{missing}")
    fig.tight_layout()
    return fig, PLOT_TTFT


def _plot_throughput(
    *,
    plt: Any,
    cfg: GauntletConfig,
    names: Sequence[str],
    colors: dict[str, str],
    data: SweepData,
    title: str,
) -> tuple[Any, str]:
    configured = [p for p in cfg.run.profiles if p != cfg.gates.answer_profile]
    profiles, unmeasured = _measured_profiles(configured, data)
    metrics = [("output_tps", "output tok/s"), ("prompt_tps", "prompt tok/s")]
    if not profiles:
        fig, ax = plt.subplots(figsize=(6.0, 3.0))
        ax.text(0.5, 0.5, "no profile was measured", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        fig.suptitle(f"Aggregate tokens/s: {title}")
        return fig, PLOT_THROUGHPUT
    fig, axes = _grid(plt, len(profiles) * 2, cols=len(profiles), width=2.9, height=3.0)
    for row, (metric, label) in enumerate(metrics):
        for col, profile in enumerate(profiles):
            ax = axes[row * len(profiles) + col]
            for x, name in enumerate(names):
                res = data.results[name]
                values = [float(getattr(rep.summary, metric)) for rep in res.repeats(profile)]
                if not values:
                    _gap(ax, x, "did not start" if not res.started else "not measured")
                    continue
                mean = sum(values) / len(values)
                err = [[max(0.0, mean - min(values))], [max(0.0, max(values) - mean)]]
                ax.bar(
                    x,
                    mean,
                    width=0.7,
                    color=colors[name],
                    alpha=0.7,
                    yerr=err,
                    capsize=3,
                    error_kw={"elinewidth": 1},
                )
                ax.scatter([x] * len(values), values, s=8, color="black", zorder=3)
            ax.set_xlim(-0.6, len(names) - 0.4)
            ax.set_xticks(range(len(names)), names, rotation=35, ha="right")
            ax.set_title(f"{profile}: {label}")
            ax.set_ylim(bottom=0)
            ax.grid(axis="y", alpha=0.25)
    missing = f"\nnot measured by anyone: {', '.join(unmeasured)}" if unmeasured else ""
    fig.suptitle(f"Aggregate tokens/s (mean of repeats, bars: min-max, dots: repeats): {title}{missing}")
    fig.tight_layout()
    return fig, PLOT_THROUGHPUT


def _plot_ranking(plt: Any, report: ReportModel, colors: dict[str, str], title: str) -> tuple[Any, str]:
    ranked = report.rankings
    fig, ax = plt.subplots(figsize=(max(6.0, 1.5 * len(ranked) + 3), 4.2))
    if not ranked:
        ax.text(
            0.5,
            0.5,
            "fewer than two candidates were measured: no ranking",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
        ax.set_axis_off()
        fig.suptitle(f"Serial versus loaded ranking: {title}")
        return fig, PLOT_RANKING
    names = sorted({n for r in ranked for n in r.order}, key=[row.candidate for row in report.rows].index)
    reversed_names = {rev.candidate for rev in report.reversals}
    for name in names:
        xs = [i for i, r in enumerate(ranked) if name in r.order]
        ys = [ranked[i].order.index(name) + 1 for i in xs]
        emphasis = name == report.baseline or name in reversed_names
        ax.plot(
            xs,
            ys,
            marker="o",
            color=colors[name],
            linewidth=2.6 if emphasis else 1.2,
            alpha=1.0 if emphasis else 0.6,
            label=name,
        )
        ax.annotate(
            name,
            (xs[0], ys[0]),
            xytext=(-8, 0),
            textcoords="offset points",
            ha="right",
            va="center",
            color=colors[name],
            fontsize=8,
        )
        ax.annotate(
            name,
            (xs[-1], ys[-1]),
            xytext=(8, 0),
            textcoords="offset points",
            ha="left",
            va="center",
            color=colors[name],
            fontsize=8,
        )
    if len(ranked) > 1:
        ax.axvspan(0.5, len(ranked) - 0.5, color="#f2f2f2", zorder=0)
        ax.text(
            len(ranked) / 2,
            len(names) + 0.45,
            "under load",
            ha="center",
            va="center",
            fontsize=8,
            color="#666666",
        )
    ax.set_xticks(range(len(ranked)), [r.label.replace(" ", "\n", 1) for r in ranked], fontsize=8)
    ax.set_yticks(range(1, len(names) + 1))
    ax.set_ylim(len(names) + 0.7, 0.5)
    ax.set_xlim(-1.2, len(ranked) - 1 + 1.2)
    ax.set_ylabel("rank (1 = best)")
    note = f"reversal: {', '.join(sorted(reversed_names))}" if reversed_names else "no reversal"
    ax.set_title(f"Rank by serial latency (left) and under load ({note})")
    fig.suptitle(f"Serial versus loaded ranking: {title}")
    fig.tight_layout()
    return fig, PLOT_RANKING


# ------------------------------------------------------------------------------------------- command line


def main(args: list[str]) -> int:
    """``python -m orchestrator report DIR``: rebuild the report from disk and print the decision table."""
    parser = argparse.ArgumentParser(
        prog="python -m orchestrator report",
        description="Rebuild the decision table, report.json and the plots of a sweep from its files.",
    )
    parser.add_argument("sweep_dir", type=Path, help="the sweep directory (e.g. sweeps/latest)")
    try:
        opts = parser.parse_args(args)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    try:
        text = build_report(opts.sweep_dir)
    except GauntletError as exc:
        print(f"gauntlet: report: {exc}", file=sys.stderr)
        return exc.exit_code
    print(text, end="", flush=True)
    print(f"gauntlet: report written to {opts.sweep_dir}/report.md, report.json and *.png", file=sys.stderr)
    return 0
