"""lm-eval-harness as a workload: the per-document scores one run left, read from lm-eval's own files.

Pipeline position: the load stage runs lm-eval against a launched server (:mod:`load.lm_eval`) with
``--log_samples``; lm-eval writes one ``samples_<task>_<date>.jsonl`` per task, one JSON object per
document and filter::

    {"doc_id": 0, "doc": {...}, "target": "42", "resps": [["..."]], "filtered_resps": ["42"],
     "filter": "strict-match", "metrics": ["exact_match"], "doc_hash": "...", "exact_match": 1.0, ...}

:func:`parse_samples` turns that text into :class:`LmEvalDoc` records (pure; a bad line is a
:class:`~contracts.errors.HarnessError` naming ``file:line``), :func:`task_of` reads the task from the
file's name, and :class:`LmEvalRun` is what the run writes beside them (its record:
:class:`contracts.layout_lmeval.LmEvalPaths`), validated on write and read. The accuracy gate pairs two
runs' documents by task and ``doc_id`` (:mod:`gates.lm_eval_accuracy`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from contracts.errors import HarnessError, ResultFileError
from contracts.jsonl import json_lines

#: ``samples_<task>_<date id>.jsonl`` as lm-eval 0.4.x names it (``date id``: 2026-12-06T16-21-07.123456).
_SAMPLES_NAME = re.compile(r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[0-9.\-]+)\.jsonl$")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LmEvalDoc(_Model):
    """One document's score on one side: task, document, the filter and metric read, right or wrong."""

    task: str
    doc_id: int
    doc_hash: str | None  # lm-eval's hash of the document: two runs pair only on the same document
    filter: str  # lm-eval's filter whose answer was scored (strict-match, flexible-extract, none, ...)
    metric: str  # the metric read (exact_match, acc, ...)
    score: float  # the metric's value for this document: 1.0 right, 0.0 wrong
    target: str  # the reference, as lm-eval wrote it
    response: str  # the filtered answer lm-eval scored (its first filtered response)

    @property
    def right(self) -> bool:
        return self.score >= 1.0


class LmEvalRun(_Model):
    """One lm-eval run against one server: what was run and every document's score (its record)."""

    profile: str  # the lm_eval profile's name
    candidate: str
    base_url: str
    model: str  # the served model name
    argv: list[str]  # lm-eval's command line, as run
    tasks: list[str]  # the task names lm-eval ran, in the profile's order
    docs: list[LmEvalDoc]
    wall_s: float  # how long lm-eval ran, in seconds

    def write(self, path: Path) -> None:
        path.write_text(self.model_dump_json(indent=2) + "\n")

    @classmethod
    def read(cls, path: Path) -> LmEvalRun:
        try:
            return cls.model_validate_json(path.read_text())
        except (OSError, ValidationError) as exc:
            raise ResultFileError(f"{path}: not a readable lm-eval run record: {exc}") from exc


def task_of(name: str) -> str | None:
    """The task of a samples file's name, as lm-eval 0.4.x names it (None: not a samples file).

    >>> task_of("samples_gsm8k_2026-12-06T16-21-07.123456.jsonl")
    'gsm8k'
    >>> task_of("results_2026-12-06T16-21-07.123456.json") is None
    True
    """
    found = _SAMPLES_NAME.match(name)
    return found.group("task") if found else None


def _score(raw: dict[str, object], metric: str, where: str) -> float:
    value = raw.get(metric)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise HarnessError(
            f"{where}: metric {metric!r} is {value!r}: the accuracy gate needs a number per document "
            f"(the line's metrics: {raw.get('metrics')!r})"
        )
    if value not in (0, 1):
        raise HarnessError(
            f"{where}: metric {metric!r} is {value!r}: the accuracy gate pairs right (1) and wrong (0) "
            "documents; choose a 0/1 metric of the task (exact_match, acc)"
        )
    return float(value)


def _first_text(value: object) -> str:
    """lm-eval's first filtered response (a string, or nested lists of them)."""
    while isinstance(value, list) and value:
        value = value[0]
    return value if isinstance(value, str) else json.dumps(value)


def parse_samples(
    text: str, where: str, *, task: str, metric: str, filter_name: str | None
) -> list[LmEvalDoc]:
    """One samples file's documents: each ``doc_id``'s ``metric`` under ``filter_name`` (None: the first
    filter the file lists, in lm-eval's order). Blank lines are skipped; a line that is not such an object,
    a metric the file does not carry or a filter it does not have is a :class:`HarnessError` naming it."""
    rows: list[tuple[str, dict[str, object]]] = []
    allowed = "lm-eval's samples are one object a line"
    for here, raw in json_lines(text, where, error=HarnessError, allowed=allowed):
        if not isinstance(raw, dict) or not isinstance(raw.get("doc_id"), int):
            raise HarnessError(f"{here}: not an lm-eval sample (an object with an integer doc_id)")
        rows.append((here, raw))
    filters = list(dict.fromkeys(str(raw.get("filter", "none")) for _, raw in rows))
    chosen = filter_name if filter_name is not None else (filters[0] if filters else None)
    if rows and chosen not in filters:
        raise HarnessError(
            f"{where}: task {task!r} has no filter {chosen!r}; its filters: {', '.join(filters)}"
        )
    docs: list[LmEvalDoc] = []
    seen: set[int] = set()
    for here, raw in rows:
        if str(raw.get("filter", "none")) != chosen:
            continue
        doc_id = int(str(raw["doc_id"]))
        if doc_id in seen:
            raise HarnessError(f"{here}: doc_id {doc_id} appears twice under filter {chosen!r}")
        seen.add(doc_id)
        if metric not in raw:
            raise HarnessError(
                f"{here}: task {task!r} has no metric {metric!r} per document; its metrics: "
                f"{raw.get('metrics')!r}"
            )
        doc_hash = raw.get("doc_hash")
        docs.append(
            LmEvalDoc(
                task=task,
                doc_id=doc_id,
                doc_hash=doc_hash if isinstance(doc_hash, str) else None,
                filter=str(chosen),
                metric=metric,
                score=_score(raw, metric, here),
                target=str(raw.get("target", "")),
                response=_first_text(raw.get("filtered_resps")),
            )
        )
    return sorted(docs, key=lambda d: d.doc_id)


def samples_files(output_dir: Path) -> dict[str, Path]:
    """Task -> its samples file below lm-eval's ``--output_path`` (the newest when a task has several)."""
    found: dict[str, Path] = {}
    for path in sorted(output_dir.rglob("samples_*.jsonl")):
        task = task_of(path.name)
        if task is not None and (task not in found or path.name > found[task].name):
            found[task] = path
    return found


def read_docs(
    output_dir: Path, tasks: Sequence[str], *, metric: str, filter_name: str | None
) -> list[LmEvalDoc]:
    """Every task's documents from lm-eval's output folder; a task with no samples file is a
    :class:`HarnessError` naming it and the files that were there."""
    files = samples_files(output_dir)
    docs: list[LmEvalDoc] = []
    for task in tasks:
        if task not in files:
            there = ", ".join(sorted(p.name for p in files.values())) or "none"
            raise HarnessError(
                f"{output_dir}: lm-eval wrote no samples for task {task!r} (samples files there: {there})"
            )
        path = files[task]
        docs.extend(
            parse_samples(path.read_text(), str(path), task=task, metric=metric, filter_name=filter_name)
        )
    return docs
