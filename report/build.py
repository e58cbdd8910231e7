"""Building the report from disk: ``verdicts.json`` + the sweep's files -> report.md, report.json, PNGs.

Pipeline position: the last box, after the judge. :func:`build_report` reads what the judge wrote
(``verdicts.json``, :func:`contracts.verdicts.read_verdicts`) and what the sweep wrote (config, host
probe, run files, summaries, records, recovery validation), and writes ``report.md``, ``report.json``,
three PNG plots, ``summaries.csv`` (every summary, :mod:`report.export`) and, after a capacity search,
``pareto.png`` and ``goodput.png`` (:mod:`report.slo_plots`). It judges nothing: without
``verdicts.json`` it says to run the judge first. The same files always give the same report::

    python -m orchestrator judge sweeps/20261202-101500     # verdicts.json
    python -m orchestrator report sweeps/20261202-101500    # report.md, report.json, *.png
"""

from __future__ import annotations

import sys
from pathlib import Path

from contracts.errors import GauntletError, ResultFileError
from contracts.results import write_model
from contracts.schema import GauntletConfig, read_sweep_config
from contracts.sweepdir import (
    RECOVERY_ROOT,
    candidate_names,
    load_results,
    node_baseline_names,
    sweep_dir_argument,
)
from contracts.verdicts import VERDICTS_FILE, VERDICTS_SCHEMA_VERSION, SweepVerdict, read_verdicts
from report.export import write_summaries_csv
from report.markdown import render_markdown
from report.model import build_model, read_sweep
from report.plots import write_plots
from report.rerun import rerun_section


def read_judgement(sweep_dir: Path) -> SweepVerdict:
    """``<sweep>/verdicts.json``; a missing one is a ResultFileError that says to run the judge."""
    if not (sweep_dir / VERDICTS_FILE).exists():
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
    return (
        f"{sweep_dir / VERDICTS_FILE} has schema {verdicts.schema_version} (an older gauntlet): it holds "
        f"{lacks}; run `python -m orchestrator judge {sweep_dir}` to rewrite it"
    )


def build_report(sweep_dir: Path, cfg: GauntletConfig | None = None) -> str:
    """Write report.md, report.json and the PNG plots into ``sweep_dir`` from its files; return the text."""
    if not sweep_dir.is_dir():
        raise ResultFileError(f"{sweep_dir}: no such sweep directory", hint="pass a directory a sweep wrote")
    if cfg is None:
        cfg = read_sweep_config(sweep_dir)
    verdicts = read_judgement(sweep_dir)
    names = [verdicts.baseline, *(n for n in candidate_names(sweep_dir) if n != verdicts.baseline)]
    data = read_sweep(sweep_dir, [*names, *node_baseline_names(sweep_dir)])
    report = build_model(sweep_dir, cfg, verdicts, data, names)
    text = render_markdown(report) + rerun_section(sweep_dir, cfg, verdicts.baseline)
    write_plots(sweep_dir, cfg, report, data)
    recovery = (
        load_results(sweep_dir, RECOVERY_ROOT, verdicts.baseline)
        if (sweep_dir / RECOVERY_ROOT).is_dir()
        else None
    )
    write_summaries_csv(sweep_dir, data.results, recovery)
    write_model(sweep_dir / "report.json", report)
    (sweep_dir / "report.md").write_text(text)
    return text


def main(args: list[str]) -> int:
    """``python -m orchestrator report DIR``: rebuild the report from disk and print the decision table."""
    sweep_dir = sweep_dir_argument(
        args,
        prog="python -m orchestrator report",
        description="Render the decision table, report.json and the plots of a judged sweep from its files.",
    )
    if isinstance(sweep_dir, int):
        return sweep_dir
    try:
        text = build_report(sweep_dir)
        note = stale_note(read_verdicts(sweep_dir), sweep_dir)
    except GauntletError as exc:
        print(f"gauntlet: report: {exc}", file=sys.stderr)
        return exc.exit_code
    print(text, end="", flush=True)
    if note:
        print(f"gauntlet: report: {note}", file=sys.stderr)
    print(f"gauntlet: report written to {sweep_dir}/report.md, report.json and *.png", file=sys.stderr)
    return 0
