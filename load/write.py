"""The one place a profile run writes: ``records.jsonl``, ``metrics.json``, ``bench_serve.json``,
``summary.json`` (validated).

Pipeline position: the last step of :func:`load.runner.run_profile`, with what
:func:`load.collect.summarize_run` returned. Each file is validated against its :mod:`contracts.results`
model on write (and again by every reader) and written atomically; ``bench_serve.json`` is the same run in
``vllm bench serve``'s result shape (:mod:`contracts.benchserve`, a pure function of the records and the
summary, so it can be rebuilt from them); the summary goes last, so a directory with a ``summary.json``
is complete.
"""

from __future__ import annotations

import json
from pathlib import Path

from contracts.benchserve import bench_serve_result
from contracts.files import atomic_write_text, write_jsonl, write_model
from contracts.layout import RepeatPaths
from load.collect import RunResult


def write_results(out_dir: Path, result: RunResult) -> None:
    """Write one run's files into ``out_dir`` (which must exist)."""
    run = RepeatPaths(out_dir)
    write_jsonl(run.records, result.records)
    write_model(run.metrics, result.metrics)
    bench = bench_serve_result(result.summary, result.records)
    atomic_write_text(run.bench_serve, json.dumps(bench, indent=2, allow_nan=False) + "\n")
    write_model(run.summary, result.summary)
