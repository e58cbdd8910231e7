"""Key figures, rankings and reversals: what the report shows, computed once, by the judge.

Pipeline position: after the gate rules, inside :func:`gates.verdict.evaluate_sweep`: each candidate's
figures against the baseline go into its :class:`~contracts.verdicts.Verdict`, the baseline's own values,
the rankings and the reversals into the :class:`~contracts.verdicts.SweepVerdict`, so the report renders
``verdicts.json`` with no statistics of its own. A figure a gate compared takes that comparison's value,
ratio and interval; any other is computed from the stored results with :mod:`contracts.metrics` and
carries no interval. A reversal is :func:`contracts.metrics.find_reversal`, the only definition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from contracts.metrics import (
    Better,
    e2e_value,
    find_reversal,
    fmt_bounds,
    fmt_ratio,
    fmt_value,
    mean,
    median,
    ratio,
    ttft_value,
    visible_value,
)
from contracts.schema import GatesConfig
from contracts.sweepdir import Results
from contracts.verdicts import Comparison, GateResult, KeyFigure, Ranking, Reversal

#: The figures a ranking orders candidates by: serial latency, then each loaded profile's.
RANKED = ("serial_e2e_p50", "output_tps", "ttft_p50")


@dataclass(frozen=True)
class FigureSpec:
    """A key figure: which comparison of the gates it is, and how to compute it without one."""

    metric: str
    profile: str
    label: str
    unit: str
    better: Better


def figure_specs(cfg: GatesConfig) -> list[FigureSpec]:
    """Serial e2e p50; output, prompt tokens/s and TTFT p50 per loaded profile; the visible answers."""
    specs = [FigureSpec("serial_e2e_p50", cfg.serial_profile, "serial e2e p50", "s", "lower")]
    loaded = cfg.loaded_profiles
    specs += [FigureSpec("output_tps", p, f"{p} output tok/s", "tok/s", "higher") for p in loaded]
    specs += [FigureSpec("prompt_tps", p, f"{p} prompt tok/s", "tok/s", "higher") for p in loaded]
    specs += [FigureSpec("ttft_p50", p, f"{p} TTFT p50", "s", "lower") for p in loaded]
    specs += [
        FigureSpec("visible_answers", cfg.answer_profile, "visible answers", "answers", "higher"),
        FigureSpec(
            "visible_p50_censored", cfg.answer_profile, "visible-answer censored median", "s", "lower"
        ),
    ]
    return specs


def raw_value(spec: FigureSpec, results: Results) -> tuple[float | None, tuple[int, int] | None]:
    """The figure from the stored results alone, pooled over the runs that ran to their end (a run cut
    short is no sample) (and the count of answers)."""
    repeats = results.samples(spec.profile)
    if not repeats:
        return None, None
    records = [r for rep in repeats for r in rep.records]
    if spec.metric in ("output_tps", "prompt_tps"):
        return mean([float(getattr(rep.summary, spec.metric)) for rep in repeats]), None
    if spec.metric == "serial_e2e_p50":
        return median([e2e_value(r) for r in records]), None
    if spec.metric == "ttft_p50":
        return median([ttft_value(r) for r in records]), None
    visible = sum(r.first_visible_s is not None for r in records)
    if spec.metric == "visible_answers":
        return float(visible), (visible, len(records))
    return median([visible_value(r) for r in records]), None


def _judged(results: Sequence[GateResult]) -> dict[tuple[str, str], Comparison]:
    """The first comparison with numbers of each (metric, profile), in the gates' evaluation order."""
    found: dict[tuple[str, str], Comparison] = {}
    for gate in results:
        for comparison in gate.comparisons:
            if comparison.observed is None and comparison.ratio is None:
                continue
            found.setdefault((comparison.metric, comparison.profile), comparison)
    return found


def key_figures(
    specs: Sequence[FigureSpec], cand: Results, base: Results, gate_results: Sequence[GateResult]
) -> list[KeyFigure]:
    """Each figure of ``cand`` against ``base``; value, ratio and interval from the gates where they judged
    it (a count of visible answers always comes from the records: the gate compares rates)."""
    judged = _judged(gate_results)
    figures: list[KeyFigure] = []
    for spec in specs:
        comparison = judged.get((spec.metric, spec.profile))
        count = base_count = None
        if comparison is not None and spec.metric != "visible_answers":
            value, base_value, rate = comparison.observed, comparison.baseline, comparison.ratio
        else:
            value, count = raw_value(spec, cand)
            base_value, base_count = raw_value(spec, base)
            rate = comparison.ratio if comparison is not None else ratio(value, base_value)
        figures.append(
            KeyFigure(
                metric=spec.metric,
                profile=spec.profile,
                label=spec.label,
                unit=spec.unit,
                better=spec.better,
                value=value,
                baseline=base_value,
                ratio=rate,
                interval=comparison.interval if comparison is not None else None,
                status=comparison.status if comparison is not None else None,
                method=comparison.method if comparison is not None else "",
                count=count,
                baseline_count=base_count,
                source="gates" if comparison is not None else "results",
            )
        )
    return figures


def baseline_figures(specs: Sequence[FigureSpec], base: Results) -> list[KeyFigure]:
    """The baseline's own values of every figure (no ratio: it is what the others are divided by)."""
    return [f.model_copy(update={"ratio": None}) for f in key_figures(specs, base, base, ())]


def rankings(
    specs: Sequence[FigureSpec], names: Sequence[str], results: Mapping[str, Results]
) -> list[Ranking]:
    """Measured candidates ordered best first by serial latency, then by each loaded figure."""
    out: list[Ranking] = []
    for spec in specs:
        if spec.metric not in RANKED:
            continue
        values = {n: raw_value(spec, results[n])[0] for n in names}
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


def reversal(candidate: str, figures: Sequence[KeyFigure], cfg: GatesConfig) -> Reversal | None:
    """The candidate's reversal against the baseline, if any (:func:`contracts.metrics.find_reversal`)."""
    return find_reversal(
        candidate,
        figures,
        serial_profile=cfg.serial_profile,
        loaded_profiles=cfg.loaded_profiles,
        min_gain=cfg.min_gain,
        tolerance=cfg.throughput_tolerance,
    )


def _figure_text(fig: KeyFigure) -> str:
    return (
        f"{fig.label} {fmt_value(fig.value, fig.unit)} vs {fmt_value(fig.baseline, fig.unit)}, "
        f"{fmt_ratio(fig.ratio)}{fmt_bounds(fig.interval)}"
    )


def reversal_note(rev: Reversal, baseline: str, figures: Sequence[KeyFigure], cfg: GatesConfig) -> str:
    """The verdict's one line: which way serial latency ranks the candidate, and the loaded figures."""
    by_key = {(f.metric, f.profile): f for f in figures}
    serial = by_key[("serial_e2e_p50", cfg.serial_profile)]
    loaded = [
        f
        for key in (("output_tps", rev.loaded_profile), ("ttft_p50", rev.loaded_profile))
        if (f := by_key.get(key)) is not None and f.ratio is not None
    ]
    ahead, behind = ("ahead of", "behind") if rev.direction == "faster" else ("behind", "ahead")
    return (
        f"reversal: serial latency ranks {rev.candidate} {ahead} {baseline} ({_figure_text(serial)}), "
        f"but under load it ranks {behind} ({'; '.join(_figure_text(f) for f in loaded)})"
    )
