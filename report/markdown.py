"""The report in Markdown: the decision table and everything around it, from the report model.

Pipeline position: renders a :class:`~report.model.ReportModel` (already built from ``verdicts.json``
and the sweep's files) as ``report.md``, which the sweep also prints. Pure: text in, text out; it reads
nothing and computes no figure, it only chooses how each one is shown (:mod:`contracts.metrics`).
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Sequence

from contracts.layout import (
    PLOT_GOODPUT,
    PLOT_PARETO,
    PLOT_RANKING,
    PLOT_THROUGHPUT,
    PLOT_TTFT,
    SUMMARIES_CSV,
)
from contracts.metrics import fmt_bounds, fmt_ratio, fmt_value
from contracts.results import HostProbe
from contracts.verdicts import DriftResult, KeyFigure, decision_label
from report.accuracy import SECTION_NOTE, accuracy_table, terminal_accuracy
from report.cost import COST_HEADER, cost_cell, cost_label, cost_title
from report.live import baseline_cell, live_lines, promotion_details, retained_line
from report.model import CandidateRow, ReportModel
from report.slo import capacity_short, capacity_text, fmt_interval, server_figure_cell


def figure_value(fig: KeyFigure, *, baseline: bool = False) -> str:
    if fig.metric == "visible_answers":
        count = fig.baseline_count if baseline else fig.count
        return "n/a" if count is None else f"{count[0]}/{count[1]}"
    return fmt_value(fig.baseline if baseline else fig.value, fig.unit)


def figure_cell(fig: KeyFigure) -> str:
    """``value  ratio [low-high]`` for a candidate's figure against the baseline."""
    value = figure_value(fig)
    if fig.value is None:
        return "not measured"
    if fig.ratio is None or math.isinf(fig.ratio):
        return value
    return f"{value}  {fmt_ratio(fig.ratio)}{fmt_bounds(fig.interval)}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table with padded columns, so that it also reads in a terminal."""
    clean = [[cell.replace("|", "\\|").replace("\n", " ") for cell in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in clean)) if clean else len(h) for i, h in enumerate(header)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |"]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    lines.extend("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in clean)
    return lines


def why(row: CandidateRow, baseline: str) -> str:
    """The decision table's short cell: the failed requirement, the gain, or the startup failure;
    ``baseline``: the baseline's own cell (:func:`report.live.baseline_cell`)."""
    if row.decision == "baseline":
        return baseline
    if row.decision == "incompatible":
        kind = row.startup.kind or "did not start"
        line = (row.startup.matched_line or "").strip()
        return f"startup failed ({kind}): {line}" if line else f"startup failed ({kind})"
    return row.summary or row.reason


def render_markdown(report: ReportModel) -> str:
    """The decision table and everything around it, readable as Markdown and in a terminal."""
    out: list[str] = [f"# gauntlet sweep report: {report.sweep}", ""]
    out += _header(report)
    out += ["", "## Decision", ""]
    out += _decision_table(report)
    out += _incomplete_section(report)
    details = [r for r in report.rows if r.decision != "baseline"]
    if details:
        out += ["", "Details (the gates' reasons, with numbers):", ""]
        out += [f"- **{r.candidate}** ({decision_label(r.decision)}): {r.reason}" for r in details]
    out += _figures_section(report)
    out += _nodes_section(report)
    out += _slo_section(report)
    out += _server_figures_section(report)
    out += _cost_section(report)
    if report.accuracy:
        header, rows = accuracy_table(report.accuracy, report.baseline, report.confidence)
        out += ["", "## Accuracy on the labelled set", "", *table(header, rows), "", SECTION_NOTE]
    out += ["", "## Serial versus loaded ranking", ""]
    out += _reversal_section(report)
    out += ["", "## Repeats and measurement time", ""]
    out += _repeats_section(report)
    out += ["", "## Baseline drift", ""]
    out += _drift_section(report.drift)
    for node in report.node_drift:
        out += ["", f"On {node.baseline} ({node.blocks} block(s) after its candidates):", ""]
        out += _drift_section(node)
    out += ["", "## Retained configuration and recovery", ""]
    out += _recovery_section(report)
    out += ["", "## Plots", ""]
    out += [
        f"- `{PLOT_TTFT}`: TTFT distribution per candidate and profile (log scale)",
        f"- `{PLOT_THROUGHPUT}`: aggregate output and prompt tokens/s per candidate and profile "
        "(with the repeats' spread)",
        f"- `{PLOT_RANKING}`: rank by serial latency against rank under load",
    ]
    if report.capacity:
        out += [
            f"- `{PLOT_PARETO}`: output tok/s per GPU against tok/s per user, per load level of the capacity "
            "search (star: capacity)",
            f"- `{PLOT_GOODPUT}`: goodput and SLO attainment against load, with the SLO target",
        ]
    out.append(
        f"- `{SUMMARIES_CSV}`: every summary, one row per candidate x profile x repeat, block, capacity run "
        "and recovery run"
    )
    return "\n".join(out) + "\n"


#: The terminal summary's width: a decision-table cell is cut to fit it (report.md has the whole cell).
TERMINAL_WIDTH = 120


_ERROR = re.compile(r"\b[\w.]*(?:Error|Exception)\b:?.*")


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3].rstrip() + "..."


def _terminal_why(row: CandidateRow, baseline: str, width: int) -> str:
    """The decision table's cell cut to ``width``; a startup failure keeps its error, not the log prefix."""
    if row.decision == "incompatible" and (found := _ERROR.search(row.startup.matched_line or "")):
        return _clip(f"{row.startup.kind or 'did not start'}: {found.group(0)}", width)
    return _clip(why(row, baseline), width)


def render_terminal(report: ReportModel) -> str:
    """What the sweep prints at its end: the decision table (cells cut to the terminal's width) and a
    short summary (retained configuration, recovery, drift, capacity, goodput, reversals); report.md and
    report.html have the rest."""
    sim = f" (SIMULATED, time scale {report.time_scale:g}x)" if report.simulated else " (real vLLM)"
    out = [f"gauntlet sweep {report.sweep}{sim}: baseline {report.baseline}, model {report.model}", ""]
    names = max((len(r.candidate) for r in report.rows), default=9)
    room = max(30, TERMINAL_WIDTH - max(names, 9) - len("INCONCLUSIVE") - 12)
    out += table(
        ["candidate", "verdict", "failed requirement / gain / reason"],
        [
            [r.candidate, decision_label(r.decision), _terminal_why(r, baseline_cell(report), room)]
            for r in report.rows
        ],
    )
    out.append("")
    out += textwrap.wrap(retained_line(report), TERMINAL_WIDTH)
    drift = {
        "pass": "none beyond noise",
        "fail": "DRIFT beyond noise: every measured verdict is inconclusive",
        "inconclusive": "INCONCLUSIVE",
        "not_run": "not checked",
    }
    out.append(f"baseline drift: {drift[report.drift.status]}")
    if report.capacity:
        first = report.capacity[0]
        parts = [
            f"{line.candidate} {capacity_short(line)}"
            + (
                f" ({line.bound + ' ' if line.bound else ''}{fmt_ratio(line.ratio)})"
                if line.ratio is not None
                else ""
            )
            for line in report.capacity
        ]
        out += textwrap.wrap(
            f"capacity at the SLO ({first.profile}, {first.unit}): {', '.join(parts)}", TERMINAL_WIDTH
        )
    out += _terminal_goodput(report)
    out += _terminal_cost(report)
    out += terminal_accuracy(report.accuracy, report.baseline, TERMINAL_WIDTH)
    for rev in report.reversals:
        out += textwrap.wrap("reversal: " + rev.text.replace("**", ""), TERMINAL_WIDTH)
    return "\n".join(out) + "\n"


def _terminal_goodput(report: ReportModel) -> list[str]:
    """Goodput at the SLO, a line per profile measured with it: each candidate's mean [interval] over
    repeats and how many repeats held the SLO (the report's table, a line per row)."""
    if not report.goodput:
        return []
    interval = f"mean [{report.confidence:.0%} interval] over repeats"
    out = [f"goodput at the SLO (output tok/s, {interval}; repeats held):"]
    for profile in dict.fromkeys(r.profile for r in report.goodput):
        parts = [
            f"{r.candidate} {fmt_interval(r.goodput_tps)} ({r.held}/{r.repeats})"
            for r in report.goodput
            if r.profile == profile
        ]
        out += textwrap.wrap(
            f"{profile}: {', '.join(parts)}",
            TERMINAL_WIDTH,
            initial_indent="  ",
            subsequent_indent="    ",
            break_on_hyphens=False,
        )
    return out


def _decision_table(report: ReportModel) -> list[str]:
    """The decision table; with energy or cost figures, a column of them on the headline profile."""
    header = ["candidate", "verdict", "failed requirement / gain / reason"]
    rows = [[r.candidate, decision_label(r.decision), why(r, baseline_cell(report))] for r in report.rows]
    profile = report.cost_profile
    if not report.cost or profile is None:
        return table(header, rows)
    cells = {c.candidate: c for c in report.cost if c.profile == profile}
    header.append(f"energy, cost ({cost_label(report.cost, profile)})")
    return table(header, [[*row, cost_cell(cells.get(row[0]))] for row in rows])


def _cost_section(report: ReportModel) -> list[str]:
    """Energy per token and $ per million output tokens, a row per candidate and loaded profile."""
    if not report.cost:
        return []
    out = ["", f"## {cost_title(report.cost)}", ""]

    def num(value: float | None, fmt: str) -> str:
        return "not measured" if value is None else format(value, fmt)

    out += table(
        list(COST_HEADER),
        [
            [
                c.candidate,
                c.profile,
                f"{c.method or 'not measured'} ({c.metered}/{c.runs} runs)",
                num(c.tokens_per_joule, ".3g"),
                num(c.watts_per_gpu, ".0f"),
                num(c.usd_per_mtok, ".3g"),
                num(c.usd_per_mtok_at_slo, ".3g") if c.usd_per_mtok_at_slo is not None else "-",
                c.note or "-",
            ]
            for c in report.cost
        ],
    )
    out += [
        "",
        "Medians over each profile's runs. Energy is read over each run's measured window (NVML's energy "
        "counter, or its power readings integrated; the simulator: its stated power model); tok/J is the "
        "window's output tok/s over its average power. $/Mtok prices the host's "
        "GPU-hours (host.gpu_hour_price) and, when host.power_price_kwh is set, the energy; at the SLO it "
        "uses the capacity search's output tok/s at the capacity (docs/accuracy-and-cost.md).",
    ]
    return out


def _terminal_cost(report: ReportModel) -> list[str]:
    """Energy and cost on the headline profile, one line for every candidate."""
    profile = report.cost_profile
    if not report.cost or profile is None:
        return []
    parts = [f"{c.candidate} {cost_cell(c)}" for c in report.cost if c.profile == profile]
    return textwrap.wrap(
        f"energy and cost ({cost_label(report.cost, profile)}): {'; '.join(parts)}",
        TERMINAL_WIDTH,
        break_on_hyphens=False,
    )


def _incomplete_section(report: ReportModel) -> list[str]:
    """What an incomplete sweep lacks, gap by gap, and the command that completes it."""
    rows = [r for r in report.rows if r.decision == "incomplete"]
    if not rows:
        return []
    out = [
        "",
        f"**The sweep is incomplete**: {len(rows)} verdict(s) rest on partial evidence and decide nothing "
        "(the retained configuration stays). Missing:",
        "",
    ]
    out += [f"- {r.candidate}: {g.message}" for r in rows for g in r.missing]
    if report.resume:
        out += ["", "To complete it (complete results are kept, partial ones measured again):", ""]
        out += ["```", report.resume, "```"]
    return out


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
        lines.append([base_fig.label, figure_value(base_fig), *(figure_cell(f) for f in figs)])
    out += table(["figure", base_label, *(r.candidate for r in measured)], lines)
    out += [
        "",
        "Ratios are candidate / baseline; an interval that excludes 1.000x is beyond noise. Intervals are "
        "the gates' own (serial latency: widened for the several latencies the gain gate tests).",
    ]
    if unmeasured:
        out.append(f"Not measured in this sweep: {', '.join(unmeasured)}.")
    return out


def _nodes_section(report: ReportModel) -> list[str]:
    """A parallel sweep: which node measured what; each candidate is compared with its node's baseline."""
    if not report.nodes:
        return []
    out = ["", "## Where each ran (candidates are compared with the baseline measured on their node)", ""]
    out += table(
        ["measured", "node", "compared with"],
        [[n.candidate, n.node, n.paired_baseline or "-"] for n in report.nodes],
    )
    return out


def _slo_section(report: ReportModel) -> list[str]:
    """The SLO, a capacity line per candidate, and goodput per profile (mean [interval] over repeats)."""
    if not report.capacity and not report.goodput:
        return []
    out = ["", "## Capacity and goodput at the SLO", "", f"SLO: {report.slo_text}.", ""]
    if report.capacity:
        first = report.capacity[0]
        out += [f"Capacity: the highest {first.unit} load of `{first.profile}` at which the SLO holds.", ""]
        out += [f"- {capacity_text(line, report.baseline)}" for line in report.capacity]
        out += [f"- note: {line.candidate}: {note}" for line in report.capacity for note in line.notes]
    if report.goodput:
        names = list(dict.fromkeys(r.candidate for r in report.goodput))
        profiles = list(dict.fromkeys(r.profile for r in report.goodput))
        cells = {(r.candidate, r.profile): r for r in report.goodput}

        def cell(name: str, profile: str) -> str:
            row = cells.get((name, profile))
            if row is None:
                return "-"
            return f"{fmt_interval(row.goodput_tps)} ({row.attainment.mean:.0%}, {row.held}/{row.repeats})"

        out += [
            "",
            f"Goodput, output tok/s of the requests that met the SLO: mean [{report.confidence:.0%} interval "
            "over repeats] (attainment, repeats that held the SLO):",
            "",
        ]
        out += table(["profile", *names], [[p, *(cell(n, p) for n in names)] for p in profiles])
    return out


def _server_figures_section(report: ReportModel) -> list[str]:
    """Speculative decoding (acceptance, mean accepted length) and prefix-cache hit rate, per candidate
    and loaded profile (every profile in report.json)."""
    shown = set(report.loaded_profiles) or {r.profile for r in report.server_figures}
    rows = [r for r in report.server_figures if r.profile in shown]
    if not rows:
        return []
    names = list(dict.fromkeys(r.candidate for r in rows))
    profiles = list(dict.fromkeys(r.profile for r in rows))
    cells = {(r.candidate, r.profile): r for r in rows}

    def cell(name: str, profile: str) -> str:
        r = cells.get((name, profile))
        if r is None:
            return "-"
        return server_figure_cell(r)

    out = [
        "",
        "## Server counters: speculative decoding and prefix cache",
        "",
        "From /metrics (vllm:spec_decode_*: draft acceptance, by draft position where exported, and "
        "tokens per target step; vllm:prefix_cache_*: hit rate), mean over repeats; '-' = not exported.",
        "",
    ]
    out += table(["candidate", *profiles], [[n, *(cell(n, p) for p in profiles)] for n in names])
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


def _repeats_section(report: ReportModel) -> list[str]:
    """Repeats each candidate used and the measurement time it cost (adaptive repeats save it)."""
    unit = "simulated s" if report.simulated else "s"
    if report.max_repeats is not None:
        plan = (
            f"Candidates: adaptive repeats, {report.min_repeats or report.repeats} to {report.max_repeats}; "
            "another repeat only while the verdict is inconclusive (docs/gates.md, Adaptive repeats). "
        )
    else:
        plan = f"Candidates: fixed {report.repeats} repeat(s). "
    if report.confirm_runs:
        plan += (
            f"Fixed repeats get up to {report.confirm_runs} confirmation run(s) of a profile whose runs "
            "disagree beyond 2x or lost a slow run set aside (docs/gates.md, Confirmation runs). "
        )
    confirmed = any(r.confirmation_runs for r in report.rows)
    rows = [
        [r.candidate, str(r.repeats_used)]
        + ([str(r.confirmation_runs)] if confirmed else [])
        + [f"{r.measurement_s:,.1f}"]
        for r in report.rows
        if r.decision != "incompatible"
    ]
    total = sum(r.measurement_s for r in report.rows)
    blocks = (
        f", then {report.blocks} interleaved block(s) of the recovery profiles, one after each measured "
        "candidate (the drift check's later runs; its measurement time includes them)"
        if report.blocks
        else ""
    )
    base = next((r for r in report.rows if r.decision == "baseline"), None)
    ran = base.repeats_used if base is not None else report.repeats
    measured = f"{report.repeats}" if ran >= report.repeats else f"{ran} of the configured {report.repeats}"
    out = [f"{plan}The baseline: {measured} repeat(s){blocks}.", ""]
    head = [
        "candidate",
        "repeats used",
        *(["confirmation runs"] if confirmed else []),
        f"measurement time ({unit})",
    ]
    out += table(head, rows)
    out += ["", f"Measurement time of the sweep (every profile of every launch): {total:,.1f} {unit}."]
    return out


def _drift_section(drift: DriftResult) -> list[str]:
    detectable = (
        [f"Minimum detectable drift: {drift.min_detectable_drift:.1%} (a smaller change is within noise)."]
        if drift.min_detectable_drift is not None
        else []
    )
    if drift.status == "fail":
        return [
            f"**DRIFT: the baseline moved beyond noise during the sweep: every measured verdict is "
            f"inconclusive.** {drift.message}",
            *detectable,
        ]
    label = {"pass": "pass", "inconclusive": "INCONCLUSIVE", "not_run": "not run"}
    return [
        f"drift check: **{label[drift.status]}**. {drift.message}",
        *(["", *detectable] if detectable else []),
    ]


def _recovery_section(report: ReportModel) -> list[str]:
    rec = report.recovery
    after = live_lines(report, lambda name: f"**{name}**")
    if after is not None:  # promoted since: what is live now first, then the sweep's own restore
        lines = [*(f"- {line}" for line in after), "", *promotion_details(report), ""]
    elif report.retained == report.baseline or (rec is not None and rec.candidate == report.retained):
        lines = [f"retained: **{report.retained}** ({report.retained_reason})", ""]
    else:
        restored = report.baseline if rec is None else rec.candidate
        lines = [
            f"recommended: **{report.retained}** ({report.retained_reason}); not live: the sweep restored "
            f"**{restored}** (below), and `python -m orchestrator promote SWEEP {report.retained}` adopts "
            "the recommendation",
            "",
        ]
    if rec is None:
        return [*lines, "recovery validation: **NOT RUN** (no recovery/validation.json)"]
    same = rec.fingerprint == rec.recorded_fingerprint
    state = "PASSED" if rec.ok else "FAILED"
    lines += [
        f"recovery validation{' of the sweep' if after else ''}: **{state}**: {rec.reason}",
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
