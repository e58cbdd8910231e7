"""The decision-quality benchmark's tables: per scenario, noise model and mode the verdict rates with their
Wilson intervals and each bar's result; the measurement time fixed against adaptive; the demo mix.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.decision.scenarios import DEMO_MIX, SCENARIOS, bars, judge_row
from benchmarks.decision.synthetic_sweep import Outcome
from benchmarks.noise_models import wilson_interval


@dataclass(frozen=True)
class Row:
    group: str
    candidate: str
    mode: str
    model: str
    outcome: Outcome


def _rate(count: int, n: int) -> str:
    low, high = wilson_interval(count, n)
    return f"{count}/{n} [{low:.0%}, {high:.0%}]"


def scenario_table(results: Sequence[Row], models: Sequence[str]) -> tuple[list[str], Counter[str]]:
    """Markdown rows: per scenario, model and mode, the rates with Wilson intervals, each bar's result and
    the row's; with the count of rows per result."""
    lines = [
        "| scenario | noise | mode | seeds | kept | rejected | other | mostly-slow runs (cand/later/base) "
        "| repeats (mean) | required [95% Wilson] | result |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    tally: Counter[str] = Counter()
    for scenario, model, mode in (
        (s, m, d) for s in SCENARIOS for m in models for d in ("fixed", "adaptive")
    ):
        got = [
            r
            for r in results
            if r.group == "scenario" and r.candidate == scenario.name and r.model == model and r.mode == mode
        ]
        if not got:
            continue
        n = len(got)
        decisions = Counter(o.outcome.decision for o in got)
        result, checks = judge_row(bars(scenario, model), decisions, n)
        tally[result] += 1
        other = ", ".join(f"{d} {c}" for d, c in decisions.most_common() if d not in ("keep", "reject"))
        mean_repeats = sum(o.outcome.repeats for o in got) / n
        masked = "/".join(
            str(sum(any(m.startswith(f"{g} ") for m in o.outcome.masked) for o in got))
            for g in ("candidate", "later", "baseline")
        )
        lines.append(
            f"| {scenario.name} | {model} | {mode} | {n} | {_rate(decisions['keep'], n)} | "
            f"{_rate(decisions['reject'], n)} | {other or '-'} | {masked} | {mean_repeats:.2f} | "
            f"{'; '.join(checks)} | {result} |"
        )
    return lines, tally


def scenario_time(results: Sequence[Row]) -> str:
    """Measurement time of the scenarios' candidates, fixed against adaptive on the same draws (both
    modes judged): the saving on a mix that includes the 10% effects, not only the demo's candidates."""
    rows = [r for r in results if r.group == "scenario"]
    totals = {m: sum(r.outcome.time_s for r in rows if r.mode == m) for m in ("fixed", "adaptive")}
    if not totals["fixed"] or not totals["adaptive"]:
        return ""
    names = ", ".join(dict.fromkeys(r.candidate for r in rows))
    models = ", ".join(dict.fromkeys(r.model for r in rows))
    saving = 1 - totals["adaptive"] / totals["fixed"]
    return (
        f"measurement time over the scenarios ({names}; {models}): fixed {totals['fixed']:,.0f} s, "
        f"adaptive {totals['adaptive']:,.0f} s: {abs(saving):.0%} {'less' if saving >= 0 else 'more'} "
        "(required: >= 30% less)"
    )


def mix_table(results: Sequence[Row]) -> tuple[list[str], bool]:
    """The demo mix: measurement time and verdicts, fixed against adaptive, on the same draws."""
    lines = [
        "| candidate | mode | sweeps | verdicts | repeats (mean) | measurement time (mean, sim s) |",
        "|---|---|---|---|---|---|",
    ]
    totals: dict[str, float] = {"fixed": 0.0, "adaptive": 0.0}
    same = True
    verdicts: dict[str, Counter[str]] = {}
    for name in DEMO_MIX:
        for mode in ("fixed", "adaptive"):
            got = [o.outcome for o in results if o.group == "mix" and o.candidate == name and o.mode == mode]
            if not got:
                continue
            decisions = Counter(o.decision for o in got)
            verdicts[f"{name}:{mode}"] = decisions
            spent = sum(o.time_s for o in got)
            totals[mode] += spent
            lines.append(
                f"| {name} | {mode} | {len(got)} | "
                f"{', '.join(f'{d} {c}' for d, c in decisions.most_common())} | "
                f"{sum(o.repeats for o in got) / len(got):.2f} | {spent / len(got):,.1f} |"
            )
        fixed, adaptive = verdicts.get(f"{name}:fixed"), verdicts.get(f"{name}:adaptive")
        if fixed and adaptive:
            same &= fixed.most_common(1)[0][0] == adaptive.most_common(1)[0][0]
    saving = 1 - totals["adaptive"] / totals["fixed"] if totals["fixed"] else 0.0
    lines.append(
        f"\nmeasurement time, whole mix: fixed {totals['fixed']:,.0f} s, "
        f"adaptive {totals['adaptive']:,.0f} s: "
        f"{saving:.0%} less (required >= 30%, same majority verdicts: {'yes' if same else 'NO'})"
    )
    return lines, saving >= 0.30 and same


def capacity_table(results: Sequence[Row], models: Sequence[str]) -> list[str]:
    """The capacity scenarios' capacity rule alone: how often the capacity gate claimed "capacity up beyond
    noise" (whatever the other gates made of the verdict), beside the verdict's keeps."""
    lines = [
        "| scenario | noise | mode | seeds | capacity up beyond noise [95% Wilson] | kept [95% Wilson] |",
        "|---|---|---|---|---|---|",
    ]
    for scenario, model, mode in (
        (s, m, d) for s in SCENARIOS if s.capacity is not None for m in models for d in ("fixed", "adaptive")
    ):
        got = [
            r.outcome
            for r in results
            if r.group == "scenario" and r.candidate == scenario.name and r.model == model and r.mode == mode
        ]
        if not got:
            continue
        claimed = sum(bool(o.capacity_gain) for o in got)
        kept = sum(o.decision == "keep" for o in got)
        lines.append(
            f"| {scenario.name} | {model} | {mode} | {len(got)} | {_rate(claimed, len(got))} | "
            f"{_rate(kept, len(got))} |"
        )
    return lines if len(lines) > 2 else []
