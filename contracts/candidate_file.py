"""A candidate as a file: the typed candidate a launch measured, read back, and written as a candidate YAML.

Pipeline position: a shared contract between the sweep, which records the typed candidate each launch
measured in its directory (``candidates/<name>/candidate.yaml``), and ``promote``, which reads it back
(checking that it renders the measured spec), and writes the promoted candidate as a file of Hydra's
candidate group (``promotions/<stamp>/conf/candidate/<name>.yaml``) that the next sweep selects as its
baseline. Plain YAML, type-checked with pydantic: no Hydra, no OmegaConf::

    write_candidate_record(LaunchPaths(out).candidate_config, candidate)
    candidate = read_candidate(LaunchPaths(out).candidate_config)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError

from contracts.errors import ResultFileError
from contracts.schema import CandidateConfig

#: The defaults list of a candidate file that inherits nothing: the schema, then the file's own fields.
SCHEMA_DEFAULTS = ["/schema/candidate@_here_", "_self_"]

_ADAPTER: TypeAdapter[CandidateConfig] = TypeAdapter(CandidateConfig)


def candidate_fields(candidate: CandidateConfig) -> dict[str, Any]:
    """Every field of the typed candidate, in the schema's order (pure)."""
    return dataclasses.asdict(candidate)


def write_candidate_record(path: Path, candidate: CandidateConfig) -> Path:
    """Write the typed candidate a launch measured (``candidate.yaml`` in its directory); its path."""
    path.write_text(yaml.safe_dump(candidate_fields(candidate), sort_keys=False))
    return path


def candidate_file_text(candidate: CandidateConfig, header: Sequence[str]) -> str:
    """A file for a config directory's ``candidate/`` group (pure): ``header`` as comment lines, the schema as
    its only parent, then every field, so it composes the same from any search path (it inherits nothing
    from a file that may have changed since)."""
    comments = "".join(f"# {line}\n" for line in header)
    body = yaml.safe_dump({"defaults": SCHEMA_DEFAULTS, **candidate_fields(candidate)}, sort_keys=False)
    return comments + body


def read_candidate(path: Path, *, node: str | None = None) -> CandidateConfig:
    """A typed candidate read back from ``path``: a launch's record, a candidate file (its ``defaults`` list
    is Hydra's, not a field), or the ``node`` of a composed configuration (Hydra's record of a job).
    :class:`ResultFileError` names the file and the field when it is missing or not a candidate."""
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ResultFileError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    except yaml.YAMLError as exc:
        raise ResultFileError(f"{path}: not YAML ({exc})") from exc
    if node is not None:
        raw = raw.get(node) if isinstance(raw, dict) else None
    if not isinstance(raw, dict):
        where = f"{path}: {node}" if node is not None else str(path)
        raise ResultFileError(f"{where}: not a candidate (expected a mapping of its fields)")
    raw = {key: value for key, value in raw.items() if key != "defaults"}
    try:
        return _ADAPTER.validate_python(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])} = {err.get('input')!r}: {err['msg']}"
            for err in exc.errors()[:5]
        )
        raise ResultFileError(
            f"{path}: not a gauntlet candidate ({problems})",
            hint="the file was edited or written by another version",
        ) from exc
