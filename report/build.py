"""Building the report from disk: ``verdicts.json`` + the sweep's files -> report.md, report.json, PNGs.

Pipeline position: the last box, after the judge. :func:`build_report` reads what the judge wrote
(``verdicts.json``, :func:`contracts.verdicts.read_verdicts`) and what the sweep wrote (config, host
probe, run files, summaries, records, recovery validation), and writes ``report.md``, ``report.json``,
three PNG plots, ``summaries.csv`` (every summary, :mod:`report.export`), after a capacity search
``pareto.png`` and ``goodput.png`` (:mod:`report.slo_plots`), and ``report.html`` (all of it on one
self-contained page, :mod:`report.html`). It judges nothing: without ``verdicts.json`` it says to run the
judge first. What a terminal gets is :attr:`Built.terminal` (the decision table and a short summary).
The same files always give the same report::

    python -m orchestrator judge sweeps/20261202-101500     # verdicts.json
    python -m orchestrator report sweeps/20261202-101500    # report.md, report.json, *.png
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from contracts.errors import GauntletError, ResultFileError
from contracts.files import write_model
from contracts.layout import RECOVERY_ROOT, REPORT_JSON, REPORT_MD, VERDICTS_FILE, SweepPaths
from contracts.schema import GauntletConfig
from contracts.sweepdir import (
    candidate_names,
    load_results,
    node_baseline_names,
    read_sweep_config,
    sweep_dir_argument,
)
from contracts.trials import read_search
from contracts.verdicts import VERDICTS_SCHEMA_VERSION, SweepVerdict, read_verdicts
from report.export import write_summaries_csv
from report.html import HTML_FILE, PLOT_CAPTIONS, render_html
from report.markdown import render_markdown, render_terminal
from report.model import build_model, read_sweep
from report.plots import write_plots
from report.rerun import rerun_section
from report.search import search_section
from report.search_tradeoff import tradeoff_section


def read_judgement(sweep_dir: Path) -> SweepVerdict:
    """``<sweep>/verdicts.json``; a missing one is a ResultFileError that says to run the judge."""
    if not SweepPaths(sweep_dir).verdicts.exists():
        raise ResultFileError(
            f"{sweep_dir}: no {VERDICTS_FILE}: the sweep was not judged",
            hint=f"run `python -m orchestrator judge {sweep_dir}` first, then the report",
        )
    return read_verdicts(sweep_dir)


def stale_note(verdicts: SweepVerdict, sweep_dir: Path) -> str | None:
    """What an older ``verdicts.json`` lacks, and how to bring it up to date (None when it is current)."""
    if verdicts.schema_version >= VERDICTS_SCHEMA_VERSION:
        return None
    lacks = (
        "no key figures, rankings or reversals"
        if verdicts.schema_version < 2
        else "no check of its evidence's completeness (incomplete verdicts)"
    )
    path = SweepPaths(sweep_dir).verdicts
    return (
        f"{path} has schema {verdicts.schema_version} (an older gauntlet): it holds "
        f"{lacks}; run `python -m orchestrator judge {sweep_dir}` to rewrite it"
    )


@dataclass(frozen=True)
class Built:
    """What :func:`write_report` wrote, as text: the whole Markdown, and what a terminal shows."""

    markdown: str
    terminal: str
    #: The PNG plots were drawn (``run.plots``).
    plots: bool = True


def build_report(sweep_dir: Path, cfg: GauntletConfig | None = None) -> str:
    """Write the report's files into ``sweep_dir`` from its files; return report.md's text."""
    return write_report(sweep_dir, cfg).markdown


def write_report(sweep_dir: Path, cfg: GauntletConfig | None = None) -> Built:
    """Write report.md, report.html, report.json, summaries.csv and the PNG plots into ``sweep_dir``
    from its files; return the Markdown and the terminal summary."""
    if not sweep_dir.is_dir():
        raise ResultFileError(f"{sweep_dir}: no such sweep directory", hint="pass a directory a sweep wrote")
    if cfg is None:
        cfg = read_sweep_config(sweep_dir)
    verdicts = read_judgement(sweep_dir)
    names = [verdicts.baseline, *(n for n in candidate_names(sweep_dir) if n != verdicts.baseline)]
    names += [v.candidate for v in verdicts.verdicts if v.candidate not in names]  # never reached
    data = read_sweep(sweep_dir, [*names, *node_baseline_names(sweep_dir)])
    report = build_model(sweep_dir, cfg, verdicts, data, names)
    text = render_markdown(report) + search_section(report.search)
    text += tradeoff_section(read_search(sweep_dir), verdicts)
    text += rerun_section(sweep_dir, cfg, verdicts.baseline)
    if cfg.run.plots:
        write_plots(sweep_dir, cfg, report, data)
    recovery = (
        load_results(sweep_dir, RECOVERY_ROOT, verdicts.baseline)
        if SweepPaths(sweep_dir).recovery.root.is_dir()
        else None
    )
    write_summaries_csv(sweep_dir, data.results, recovery, verdicts)
    paths = SweepPaths(sweep_dir)
    write_model(paths.report_json, report)
    paths.report_md.write_text(text)
    drawn = PLOT_CAPTIONS if cfg.run.plots else {}  # never an earlier report's plots beside today's tables
    images = {name: (sweep_dir / name).read_bytes() for name in drawn if (sweep_dir / name).exists()}
    capacity = {name: res.capacity for name, res in data.results.items() if res.capacity is not None}
    paths.report_html.write_text(render_html(report, images, capacity), encoding="utf-8")
    terminal = render_terminal(report) + (
        f"full report: {paths.report_html} (one page, offline) and {paths.report_md}\n"
    )
    return Built(markdown=text, terminal=terminal, plots=cfg.run.plots)


def main(args: list[str]) -> int:
    """``python -m orchestrator report DIR``: rebuild the report from disk and print the decision table
    and the short summary."""
    sweep_dir = sweep_dir_argument(
        args,
        prog="python -m orchestrator report",
        description="Render the decision table, report.json and the plots of a judged sweep from its files.",
    )
    if isinstance(sweep_dir, int):
        return sweep_dir
    try:
        built = write_report(sweep_dir)
        note = stale_note(read_verdicts(sweep_dir), sweep_dir)
    except GauntletError as exc:
        print(f"gauntlet: report: {exc}", file=sys.stderr)
        return exc.exit_code
    print(built.terminal, end="", flush=True)
    if note:
        print(f"gauntlet: report: {note}", file=sys.stderr)
    print(
        f"gauntlet: report written to {sweep_dir}/{REPORT_MD}, {HTML_FILE}, {REPORT_JSON}"
        + (" and *.png" if built.plots else " (run.plots: false, no plots)"),
        file=sys.stderr,
    )
    return 0
