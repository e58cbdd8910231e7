"""The one place a profile run writes: ``records.jsonl``, ``metrics.json``, ``summary.json`` (validated).

Pipeline position: the last step of :func:`load.runner.run_profile`, with what
:func:`load.collect.summarize_run` returned. Each file is validated against its :mod:`contracts.results`
model on write (and again by every reader) and written atomically; the summary goes last, so a directory
with a ``summary.json`` is complete.
"""

from __future__ import annotations

from pathlib import Path

from contracts.layout import METRICS_FILE, RECORDS_FILE, SUMMARY_FILE
from contracts.results import write_jsonl, write_model
from load.collect import RunResult


def write_results(out_dir: Path, result: RunResult) -> None:
    """Write one run's files into ``out_dir`` (which must exist)."""
    write_jsonl(out_dir / RECORDS_FILE, result.records)
    write_model(out_dir / METRICS_FILE, result.metrics)
    write_model(out_dir / SUMMARY_FILE, result.summary)
