"""The report as one self-contained HTML page: ``report.html``, readable at a glance, offline.

Pipeline position: beside :mod:`report.markdown`, rendering the same :class:`~report.model.ReportModel`
(plus each candidate's capacity search and the PNGs :mod:`report.plots` drew). Pure: model and image bytes
in, text out. Nothing is fetched when the page opens: the CSS is inline and every plot is a PNG data URI,
so the file can be mailed, attached to a ticket or opened from a disk with no network. Every cell's words
and numbers are those of ``report.md`` (the same helpers choose them); only the layout differs.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from html import escape

from contracts.layout import (
    PLOT_GOODPUT,
    PLOT_PARETO,
    PLOT_RANKING,
    PLOT_SEARCH,
    PLOT_THROUGHPUT,
    PLOT_TTFT,
    REPORT_HTML,
)
from contracts.metrics import fmt_bounds, fmt_ratio
from contracts.results import CapacityResult
from contracts.verdicts import KeyFigure, decision_label
from report.accuracy import SECTION_NOTE, accuracy_table
from report.cost import COST_HEADER, cost_cell, cost_label, cost_title
from report.live import baseline_cell, live_card, live_lines
from report.markdown import figure_cell, figure_value, why
from report.model import CandidateRow, ReportModel
from report.search import ALL_STARTED, trials_table, winner_header, winner_rows
from report.search_table import TrialRow
from report.slo import capacity_value, launches_text

HTML_FILE = REPORT_HTML

#: What each plot shows, in the order the page shows them.
PLOT_CAPTIONS: dict[str, str] = {
    PLOT_THROUGHPUT: "Aggregate output and prompt tokens/s per candidate and profile (bars: mean of the "
    "repeats, whiskers: min-max, dots: each repeat)",
    PLOT_TTFT: "TTFT per candidate and profile, pooled requests of every repeat (log scale)",
    PLOT_RANKING: "Rank by serial latency against rank under load (red: a reversal)",
    PLOT_PARETO: "Output tok/s per GPU against tok/s per user along each capacity search (star: capacity)",
    PLOT_GOODPUT: "Goodput and SLO attainment against load, with the SLO's target",
    PLOT_SEARCH: "The search. Left, top: the objective measured in full against the launches spent (crosses: "
    "did not start, broke a requirement or failed), the best so far as a line, the winner starred, the "
    "baseline dashed, the confirmation's capacity as a diamond. Left, below, on an axis of its own: each "
    "trial's screen, a rough estimate (hollow: stopped there, never measured in full). Right: the feasible "
    "region over the two fields tried most (shade: best value measured in full; hatched red: infeasible)",
}

_CSS = """
:root { --ink:#1d2430; --muted:#5b6575; --line:#d8dde6; --bg:#f6f7f9; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       color: var(--ink); background: var(--bg); margin: 0; padding: 24px 32px; }
main { max-width: 1280px; margin: 0 auto; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
.meta { color: var(--muted); margin: 0 0 12px; }
.banner { padding: 8px 12px; border-radius: 6px; margin: 8px 0 14px; font-weight: 600; }
.banner.sim { background: #fff4d6; border: 1px solid #f0c64a; }
.banner.real { background: #e3f4e8; border: 1px solid #7cc493; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 12px 0; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px;
        min-width: 180px; }
.card .k { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card .v { font-size: 18px; font-weight: 650; }
table { border-collapse: collapse; background: #fff; width: 100%; margin: 6px 0 10px; }
th, td { border: 1px solid var(--line); padding: 5px 8px; text-align: left; vertical-align: top; }
th { background: #eef1f5; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-weight: 700; font-size: 12px;
         white-space: nowrap; }
.d-keep { background: #1f9d55; color: #fff; }
.d-reject { background: #d64545; color: #fff; }
.d-incompatible { background: #6b7280; color: #fff; }
.d-inconclusive { background: #f0b429; color: #1d2430; }
.d-incomplete { background: #8a94a6; color: #ffffff; }
.d-neutral { background: #cbd2dc; color: #1d2430; }
.d-baseline { background: #2f6fdb; color: #fff; }
.s-fail { background: #fde8e8; }
.s-pass { background: #e6f6ec; }
.s-inconclusive { background: #fff6da; }
.note { color: var(--muted); font-size: 13px; }
figure { background: #fff; border: 1px solid var(--line); border-radius: 8px; margin: 10px 0;
         padding: 8px; }
figure img { max-width: 100%; height: auto; display: block; margin: 0 auto; }
figcaption { color: var(--muted); font-size: 13px; margin-top: 4px; }
details { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 6px 10px;
          margin: 4px 0; }
summary { cursor: pointer; font-weight: 600; }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12.5px; }
.steps { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12.5px; }
.held { color: #1f7a45; } .failed { color: #b42318; }
pre { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px;
      overflow-x: auto; }
"""


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _badge(decision: str) -> str:
    return f'<span class="badge d-{_e(decision)}">{_e(decision_label(decision))}</span>'


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], *, table_id: str = "") -> list[str]:
    """A table whose cells are already HTML (escape before)."""
    ident = f' id="{table_id}"' if table_id else ""
    out = [f"<table{ident}>", "<thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr></thead>"]
    out.append("<tbody>")
    out += ["<tr>" + "".join(row) + "</tr>" for row in rows]
    out.append("</tbody></table>")
    return out


def png_data_uri(data: bytes) -> str:
    """A PNG as a ``data:`` URI (the page then needs no file beside it)."""
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def render_html(
    report: ReportModel,
    images: Mapping[str, bytes],
    capacity: Mapping[str, CapacityResult] | None = None,
) -> str:
    """The whole page. ``images``: plot file name -> PNG bytes (missing plots are left out);
    ``capacity``: each candidate's capacity search, for its steps."""
    title = f"gauntlet sweep report: {report.sweep}"
    body: list[str] = [f"<h1>{_e(title)}</h1>"]
    body += _header(report)
    body += _cards(report)
    body += ['<h2 id="decision-heading">Decision</h2>']
    body += _decision_table(report)
    body += _figures(report)
    body += _capacity(report, capacity or {})
    body += _search(report)
    body += _cost(report)
    body += _accuracy(report)
    body += _state(report)
    body += _plots(images)
    body += _details(report)
    body += [
        '<p class="note">Beside this file: <code>report.md</code> (the same report as text), '
        "<code>report.json</code> (as data), <code>verdicts.json</code> (the gates' evidence), "
        "<code>summaries.csv</code> (every run), and each run's <code>summary.json</code> and "
        "<code>bench_serve.json</code>.</p>"
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n<main>\n"
        + "\n".join(body)
        + "\n</main>\n</body>\n</html>\n"
    )


def _header(report: ReportModel) -> list[str]:
    if report.simulated:
        scale = (
            "real time"
            if report.time_scale == 1
            else f"time scale {report.time_scale:g}x; every duration is in simulated seconds"
        )
        banner = (
            '<div class="banner sim">SIMULATED: these numbers come from gauntlet\'s simulated vLLM host '
            f"({_e(scale)}). They show how the sweep decides; they say nothing about real hardware.</div>"
        )
    else:
        banner = '<div class="banner real">Measured on real vLLM (backend <code>vllm</code>).</div>'
    host = report.host
    meta = (
        f"host <code>{_e(host.name)}</code> ({_e(host.kind)}; {host.gpu_count} x "
        f"{_e(host.gpu_name or 'unnamed accelerator')}) · model <code>{_e(report.model)}</code> · "
        f"baseline <code>{_e(report.baseline)}</code> · {report.repeats} repeat(s) of "
        f"{_e(', '.join(report.profiles) or 'no profile')}"
    )
    return [banner, f'<p class="meta">{meta}</p>']


def _cards(report: ReportModel) -> list[str]:
    """The answer first: what is retained, how many of each verdict, drift and recovery."""
    counts: dict[str, int] = {}
    for row in report.rows:
        if row.decision != "baseline":
            counts[row.decision] = counts.get(row.decision, 0) + 1
    verdicts = ", ".join(f"{n} {decision_label(d)}" for d, n in sorted(counts.items())) or "none"
    recovery = "not run" if report.recovery is None else ("passed" if report.recovery.ok else "FAILED")
    drift = {"pass": "none", "fail": "DRIFT", "inconclusive": "inconclusive", "not_run": "not checked"}
    cards = [
        live_card(report),
        ("candidates", verdicts),
        ("baseline drift", drift[report.drift.status]),
        ("recovery validation", recovery),
    ]
    out = ['<div class="cards">']
    out += [
        f'<div class="card" data-card="{_e(k)}"><div class="k">{_e(k)}</div>'
        f'<div class="v">{_e(v)}</div></div>'
        for k, v in cards
    ]
    out.append("</div>")
    return out


def _decision_row(row: CandidateRow, baseline: str) -> list[str]:
    return [
        f'<td data-candidate="{_e(row.candidate)}"><code>{_e(row.candidate)}</code></td>',
        f'<td data-decision="{_e(row.decision)}">{_badge(row.decision)}</td>',
        f"<td>{_e(why(row, baseline))}</td>",
    ]


def _decision_table(report: ReportModel) -> list[str]:
    rows = [_decision_row(r, baseline_cell(report)) for r in report.rows]
    header = ["candidate", "verdict", "failed requirement / gain / reason"]
    profile = report.cost_profile
    if report.cost and profile is not None:  # energy and cost on the headline profile (report.cost)
        cells = {c.candidate: c for c in report.cost if c.profile == profile}
        header.append(f"energy, cost ({cost_label(report.cost, profile)})")
        rows = [
            [*row, f'<td data-cost="{_e(r.candidate)}">{_e(cost_cell(cells.get(r.candidate)))}</td>']
            for row, r in zip(rows, report.rows, strict=True)
        ]
    return _table(header, rows, table_id="decision")


def _figures(report: ReportModel) -> list[str]:
    measured = [r for r in report.rows if r.figures and r.decision != "baseline"]
    base_row = next((r for r in report.rows if r.decision == "baseline"), None)
    if not measured or base_row is None:
        return []
    lines: list[list[str]] = []
    for i, base_fig in enumerate(base_row.figures):
        figs = [r.figures[i] for r in measured]
        if base_fig.value is None and all(f.value is None for f in figs):
            continue
        cells = [f"<td>{_e(base_fig.label)}</td>", f'<td class="num">{_e(figure_value(base_fig))}</td>']
        for fig in figs:
            shade = _shade(fig)
            cells.append(f'<td class="num{" s-" + shade if shade else ""}">{_e(figure_cell(fig))}</td>')
        lines.append(cells)
    conf = f"{report.confidence:.0%}"
    return [
        f"<h2>Key figures (value, ratio to {_e(report.baseline)} [{conf} CI])</h2>",
        *_table(["figure", f"{report.baseline} (baseline)", *(r.candidate for r in measured)], lines),
        '<p class="note">Ratios are candidate / baseline; an interval that excludes 1.000x is beyond noise. '
        "Shaded: beyond noise, red worse and green better than the baseline; amber: a comparison the gates "
        "could not settle; a failed count without an interval (visible answers) is red.</p>",
    ]


def _shade(fig: KeyFigure) -> str:
    """``fail`` (worse beyond noise), ``pass`` (better beyond noise), ``inconclusive`` or nothing."""
    if fig.ratio is None or fig.value is None:
        return ""
    worse = fig.ratio > 1 if fig.better == "lower" else fig.ratio < 1
    if fig.interval is not None and (fig.interval[0] > 1 or fig.interval[1] < 1):
        return "fail" if worse else "pass"
    if fig.interval is None and fig.status == "fail" and worse:
        return "fail"
    return "inconclusive" if fig.status == "inconclusive" else ""


def _steps(result: CapacityResult) -> str:
    """The search's levels in measuring order: ``32 held → 64 held → 128 failed ...``."""
    seen: dict[float, bool] = {}
    for point in result.points:
        seen.setdefault(point.level, result.decided.get(f"{point.level:g}", point.met))
    parts = [
        f'<span class="{"held" if held else "failed"}">{level:g} {"held" if held else "failed"}</span>'
        for level, held in seen.items()
    ]
    return " → ".join(parts)


def _capacity(report: ReportModel, capacity: Mapping[str, CapacityResult]) -> list[str]:
    if not report.capacity:
        return []
    first = report.capacity[0]
    out = [
        "<h2>Capacity at the SLO</h2>",
        f'<p class="note">SLO: {_e(report.slo_text)}. Capacity: the highest {_e(first.unit)} load of '
        f"<code>{_e(first.profile)}</code> at which the SLO holds; the bracket is [held, first failed).</p>",
    ]
    rows: list[list[str]] = []
    for line in report.capacity:
        cap = capacity_value(line).replace(f" {line.unit}", "")  # the column's header has the unit
        cap += f"; {launches_text(line)}" if launches_text(line) else ""
        shown = (f"{line.bound} " if line.bound else "") + fmt_ratio(line.ratio)
        ratio = (
            "" if line.ratio is None else f"{shown}{fmt_bounds(line.interval)} (capacity gate: {line.status})"
        )
        status = f" s-{line.status}" if line.status in ("fail", "inconclusive") else ""
        search = capacity.get(line.candidate)
        rows.append(
            [
                f"<td><code>{_e(line.candidate)}</code></td>",
                f'<td class="num">{_e(cap)}</td>',
                f'<td class="{status.strip()}">{_e(ratio) or "-"}</td>',
                f'<td class="num">{_e(_num(line.goodput_tps))}</td>',
                f'<td class="num">{_e(_num(line.tps_per_gpu))}</td>',
                f'<td class="num">{_e(_num(line.tps_per_user))}</td>',
                f'<td class="steps">{_steps(search) if search else "-"}</td>',
            ]
        )
    out += _table(
        [
            "candidate",
            f"capacity ({first.unit})",
            f"against {report.baseline}",
            "goodput tok/s",
            "tok/s per GPU",
            "tok/s per user",
            "search (in measuring order)",
        ],
        rows,
        table_id="capacity",
    )
    out += [
        f'<p class="note">{_e(line.candidate)}: {_e(n)}</p>' for line in report.capacity for n in line.notes
    ]
    return out


def _inline(text: str) -> str:
    """A sentence of the report's Markdown: escaped, its ``**strong**`` and `` `code` `` as HTML."""
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", _e(text))
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", out)


def _search(report: ReportModel) -> list[str]:
    """The search (report.search): its estimate beside the confirmation's verdict, the trials, the
    infeasible region and the winner's candidate file; the words are report.search's."""
    section = report.search
    if section is None:
        return []
    out = ['<h2 id="search">Search</h2>', f"<p>{_inline(section.summary)}</p>"]
    rows = [
        [
            f"<td>{_e(row.what)}</td>",
            f'<td class="num">{_e(row.figure)}</td>',
            f"<td>{_badge(row.decision) if row.decision is not None else _e(row.verdict)}</td>",
        ]
        for row in winner_rows(section)
    ]
    if rows:
        out += _table(winner_header(section), rows, table_id="search-winner")
    out.append(f"<p>{_inline(section.advice)}</p>")
    header, table = trials_table(section)
    trials = [_trial_row(row, cells) for row, cells in table]
    out += ["<h3>Trials</h3>", *_table(header, trials, table_id="search-trials")]
    out.append("<h3>Infeasible region</h3>")
    if section.infeasible:
        items = [f"<li>{_e(line)}</li>" for line in section.infeasible]
        out += ['<ul id="search-infeasible">', *items, "</ul>"]
    else:
        out.append(f"<p>{_e(ALL_STARTED)}</p>")
    winner = section.winner
    if winner is not None and winner.yaml is not None:
        out += [
            f"<h3>The winner as a candidate file (<code>{_e(winner.yaml_file)}</code>)</h3>",
            f'<pre id="search-winner-yaml"><code>{_e(winner.yaml.rstrip())}</code></pre>',
        ]
    return out


def _trial_row(row: TrialRow, cells: list[str]) -> list[str]:
    """A point's row: its trial number carries its state and the trials folded into it (data-*)."""
    number, *rest = cells
    folded = " ".join(str(n) for n in row.repeats)
    first = f'<td data-trial="{_e(number)}" data-state="{_e(row.state)}" data-asked="{row.asked}"'
    first += f' data-repeats="{_e(folded)}">{_e(number)}</td>' if folded else f">{_e(number)}</td>"
    return [first, *(f"<td>{_e(cell)}</td>" for cell in rest)]


def _cost(report: ReportModel) -> list[str]:
    """Energy and cost per candidate and loaded profile (report.cost), labelled when simulated."""
    if not report.cost:
        return []
    out = [f"<h2>{_e(cost_title(report.cost))}</h2>"]
    rows = [
        [
            f"<td><code>{_e(c.candidate)}</code></td>",
            f"<td>{_e(c.profile)}</td>",
            f"<td>{_e(c.method or 'not measured')} ({c.metered}/{c.runs} runs)</td>",
            *(
                f"<td>{'not measured' if v is None else _num(v)}</td>"
                for v in (c.tokens_per_joule, c.watts_per_gpu, c.usd_per_mtok)
            ),
            f"<td>{_num(c.usd_per_mtok_at_slo)}</td>",
            f"<td>{_e(c.note or '-')}</td>",
        ]
        for c in report.cost
    ]
    return out + _table(list(COST_HEADER), rows, table_id="cost")


def _accuracy(report: ReportModel) -> list[str]:
    """Accuracy on the labelled set and its non-inferiority bound (report.accuracy)."""
    if not report.accuracy:
        return []
    header, rows = accuracy_table(report.accuracy, report.baseline, report.confidence)
    cells = [[f"<td>{_e(cell)}</td>" for cell in row] for row in rows]
    return [
        "<h2>Accuracy on the labelled set</h2>",
        *_table(header, cells, table_id="accuracy"),
        f'<p class="note">{_e(SECTION_NOTE)}</p>',
    ]


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _state(report: ReportModel) -> list[str]:
    """Reversal, drift and recovery in a sentence each."""
    out = ["<h2>Serial versus loaded, drift, recovery</h2>"]
    if report.reversals:
        out += [f"<p>{_e(rev.text.replace('**', ''))}</p>" for rev in report.reversals]
    elif report.gates_reversal:
        out.append(f"<p>{_e(report.gates_reversal)}</p>")
    else:
        out.append(
            "<p>No reversal: where measured, serial and loaded rankings agree against the baseline.</p>"
        )
    out.append(
        f"<p><strong>Baseline drift: {_e(report.drift.status)}.</strong> {_e(report.drift.message)}</p>"
    )
    rec = report.recovery
    after = live_lines(report)
    if after is not None:  # promoted since: what is live now, in the report's words (report.live)
        out += [f"<p><strong>{_e(line)}</strong></p>" for line in after]
    elif rec is None:
        out.append("<p><strong>Recovery validation: NOT RUN</strong> (no recovery/validation.json).</p>")
    else:
        state = "PASSED" if rec.ok else "FAILED"
        what = (
            f"Retained: <code>{_e(report.retained)}</code>"
            if rec.candidate == report.retained
            else f"Recommended: <code>{_e(report.retained)}</code>, not live; restored after the sweep: "
            f"<code>{_e(rec.candidate)}</code>"
        )
        out.append(f"<p><strong>{what}; recovery validation {state}</strong>: {_e(rec.reason)}</p>")
    return out


def _plots(images: Mapping[str, bytes]) -> list[str]:
    shown = [name for name in PLOT_CAPTIONS if name in images]
    if not shown:
        return []
    out = ["<h2>Plots</h2>"]
    for name in shown:
        out += [
            f'<figure data-plot="{_e(name)}"><img alt="{_e(name)}" src="{png_data_uri(images[name])}">',
            f"<figcaption><code>{_e(name)}</code>: {_e(PLOT_CAPTIONS[name])}</figcaption></figure>",
        ]
    return out


def _details(report: ReportModel) -> list[str]:
    rows = [r for r in report.rows if r.decision != "baseline"]
    if not rows:
        return []
    out = ["<h2>The gates' reasons, with numbers</h2>"]
    for r in rows:
        out.append(
            f"<details><summary><code>{_e(r.candidate)}</code> {_badge(r.decision)}</summary>"
            f"<p>{_e(r.reason)}</p></details>"
        )
    return out
