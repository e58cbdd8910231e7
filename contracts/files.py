"""Validated files on disk: every result model is written and read through here.

Pipeline position: under every writer and reader of a sweep's files (:mod:`contracts.results`' models,
the search's records, the ledger). A file is validated on write and on read (:func:`write_model`,
:func:`read_model`, :func:`read_jsonl`), written atomically (a temp file beside it, fsync, rename: a
reader sees all of it or none), and created with the umask's mode, so a team's shared sweeps directory
stays readable; a bad or missing file raises :class:`~contracts.errors.ResultFileError` naming it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from contracts.errors import ResultFileError
from contracts.layout import write_probe

M = TypeVar("M", bound=BaseModel)


def write_model(path: Path, model: BaseModel) -> None:
    """Validate and write one JSON file atomically (write to a temp file, fsync, rename)."""
    data = model.model_dump_json(indent=2)
    type(model).model_validate_json(data)
    _atomic_write(path, data + "\n")


def read_model(path: Path, kind: type[M]) -> M:
    """Read and validate one JSON file; a bad file raises ResultFileError naming it."""
    try:
        return kind.model_validate_json(path.read_text())
    except FileNotFoundError as exc:
        raise ResultFileError(f"{path}: missing", hint="rerun the profile or the sweep") from exc
    except ValidationError as exc:
        raise ResultFileError(
            f"{path}: not a valid {kind.__name__}", evidence=str(exc).splitlines()[:8]
        ) from exc


def write_jsonl(path: Path, records: Iterable[BaseModel]) -> int:
    """Validate and write records, one JSON object per line; returns the count."""
    lines = []
    for record in records:
        data = record.model_dump_json()
        type(record).model_validate_json(data)
        lines.append(data)
    _atomic_write(path, "".join(line + "\n" for line in lines))
    return len(lines)


def read_jsonl(path: Path, kind: type[M]) -> list[M]:
    """Read and validate every line; the error names the file and line."""
    return list(iter_jsonl(path, kind))


def iter_jsonl(path: Path, kind: type[M]) -> Iterator[M]:
    try:
        handle = path.open()
    except FileNotFoundError as exc:
        raise ResultFileError(f"{path}: missing") from exc
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield kind.model_validate_json(line)
            except ValidationError as exc:
                raise ResultFileError(
                    f"{path}:{number}: not a valid {kind.__name__}", evidence=str(exc).splitlines()[:8]
                ) from exc


def atomic_write_text(path: Path, text: str) -> None:
    """Write a small text file atomically (temp file, fsync, rename): a reader sees all of it or none."""
    _atomic_write(path, text)


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(path)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def probe_writable(folder: Path) -> None:
    """Make ``folder`` (if needed), then create and remove a folder and a file in it, the way every writer
    of a sweep does (mkdir, a temp file renamed): an OSError here says the sweep could not write its
    evidence, before it has touched any server."""
    folder.mkdir(parents=True, exist_ok=True)
    probe, probe_file = write_probe(folder, os.getpid())
    probe.mkdir(exist_ok=True)
    try:
        atomic_write_text(probe_file, "")
        probe_file.unlink()
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()


def _create_temp(path: Path) -> tuple[int, str]:
    """A new temp file beside ``path``, created with mode 0666 so the umask decides (0644 under 022).

    ``tempfile.mkstemp`` creates 0600 whatever the umask: a team's shared sweeps directory would be
    unreadable to the team. ``O_EXCL`` keeps mkstemp's guarantee that the name is ours alone.
    """
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(path.parent))


def dumps(data: object) -> str:
    """Canonical JSON for small ad-hoc files (journal lines, reports)."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"))
