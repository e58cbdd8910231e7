"""Hydra's composition errors as ConfigErrors: the file, the field, the value and what is allowed.

Pipeline position: between config composition (:mod:`orchestrator.config.compose`,
:mod:`orchestrator.app.sweeper`,
which catch Hydra's and OmegaConf's exceptions) and the user. Reads only the exception's text and the
:class:`orchestrator.config.validate.Sources` of the composition (search path, overrides), so it imports no
Hydra::

    except (HydraException, OmegaConfBaseException) as exc:
        raise translate_compose_error(exc, sources) from exc
    # candidate.max_num_seqs=many: "command-line override 'candidate.max_num_seqs=many':
    #     candidate.max_num_seqs = 'many': must be of type Integer"
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from contracts.errors import ConfigError, ConfigProblem
from contracts.schema import CandidateConfig, GauntletConfig, HostConfig, LengthConfig, WorkloadConfig
from orchestrator.config.validate import Sources, display_path, read_yaml

_KEY_ERROR = re.compile(r"Key '(?P<key>[^']+)' not in '(?P<type>[^']+)'")
_IN_FILE = re.compile(r"In '(?P<file>[^']+)'")
_FULL_KEY = re.compile(r"full_key: (?P<full>\S+)")
_VALUE_ERROR = re.compile(
    r"Value '(?P<value>[^']*)' (?:of type '[^']+' )?could not be converted to (?P<type>\w+)"
)
_MISSING = re.compile(r"Could not find '(?P<ref>[^']+)'")
_OPTIONS = re.compile(r"Available options in '[^']+':\n(?P<options>(?:\t[^\n]+\n?)+)")
_OVERRIDE_ERROR = re.compile(
    r"(?:Could not override|Could not append to config\. An item is already at) '(?P<key>[^']+)'"
)
_MERGE_ERROR = re.compile(r"Error merging override (?P<line>\S+)")
_SCHEMAS: dict[str, type[Any]] = {
    "CandidateConfig": CandidateConfig,
    "WorkloadConfig": WorkloadConfig,
    "HostConfig": HostConfig,
    "LengthConfig": LengthConfig,
    "GauntletConfig": GauntletConfig,
}


def _chain_text(exc: BaseException) -> str:
    """The messages of an exception and of its causes (Hydra wraps OmegaConf's, which has the detail)."""
    parts: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(parts) < 5:
        parts.append(str(current))
        current = current.__cause__
    return "\n".join(parts)


def translate_compose_error(exc: Exception, sources: Sources) -> ConfigError:
    """Turn Hydra's composition error into a ConfigError that names file, field, value and what is allowed.

    The file is the one Hydra actually read (first match on ``sources.search_path``: the primary config
    path, ``--config-dir``, ``hydra.searchpath``, a ``pkg://`` package), or the command-line override
    that set the key or chose the option.
    """
    text = _chain_text(exc)
    full = _FULL_KEY.search(text)
    override = _failed_override(text, sources.overrides, full.group("full") if full else None)
    in_file = _IN_FILE.search(text)
    match = _KEY_ERROR.search(text)
    if match:
        key = match.group("key")
        schema = _SCHEMAS.get(match.group("type"))
        allowed_keys = [f.name for f in fields(schema)] if schema else []
        near = difflib.get_close_matches(key, allowed_keys, n=1)
        allowed = f"unknown key; allowed keys: {', '.join(allowed_keys)}"
        if near:
            allowed = f"unknown key (did you mean {near[0]!r}?); allowed keys: {', '.join(allowed_keys)}"
        value: object = "<set>"
        if override is not None:
            where, value = f"command-line override {override!r}", override.split("=", 1)[1]
        elif in_file:
            where, path = _file_of(in_file.group("file"), sources)
            value = read_yaml(path).get(key, "<set>") if path is not None else "<set>"
        else:
            where = "<composition>"
        return ConfigError([ConfigProblem(where, full.group("full") if full else key, value, allowed)])
    vmatch = _VALUE_ERROR.search(text)
    if vmatch:
        if override is not None:
            where = f"command-line override {override!r}"
        elif in_file:
            where = _file_of(in_file.group("file"), sources)[0]
        else:
            where = "<override>"
        field_name = full.group("full") if full else "?"
        allowed = f"must be of type {vmatch.group('type')}"
        return ConfigError([ConfigProblem(where, field_name, vmatch.group("value"), allowed)])
    missing = _MISSING.search(text)
    if missing:
        return ConfigError([_missing_option(missing.group("ref"), text, sources)])
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    where = f"command-line override {override!r}" if override is not None else "<composition>"
    return ConfigError(
        [ConfigProblem(where, "-", first, "a valid group choice or override (see `--help`)")],
        hint=text if len(text) < 2000 else None,
    )


def _missing_option(ref: str, text: str, sources: Sources) -> ConfigProblem:
    """``candidate=nosuch``: the override (or config file) that chose it, and the options there are."""
    group, _, option = ref.rpartition("/")
    chooser = next(
        (o for o in sources.overrides if "=" in o and o.split("=", 1)[0].lstrip("+~").split("@")[0] == group),
        None,
    )
    if chooser is not None:
        where = f"command-line override {chooser!r}"
    else:
        in_file = _IN_FILE.search(text)
        where = _file_of(in_file.group("file"), sources)[0] if in_file else "<composition>"
    options = _OPTIONS.search(text)
    names = [n.strip() for n in options.group("options").splitlines() if n.strip()] if options else []
    searched = ", ".join(display_path(d) for d in sources.search_path) or "the search path"
    allowed = f"one of {', '.join(names)}" if names else f"a file {ref}.yaml in {searched}"
    return ConfigProblem(where, group or "config", option, f"{allowed} (searched {searched})")


def _file_of(file_ref: str, sources: Sources) -> tuple[str, Path | None]:
    """Hydra's ``group/choice`` reference as the file it read, searched as Hydra searches."""
    group, _, choice = file_ref.rpartition("/")
    path = sources.group_file(group, choice)
    if path is not None:
        return display_path(path), path
    where = ", ".join(display_path(d) for d in sources.search_path) or "the search path"
    return f"{file_ref}.yaml (in {where})", None


def _failed_override(text: str, overrides: Sequence[str], full_key: str | None) -> str | None:
    """The command-line override Hydra's error is about (``Could not override 'a.b'``, ``Error merging
    override a.b=x``), if any."""
    merge = _MERGE_ERROR.search(text)
    if merge is not None and merge.group("line") in overrides:
        return merge.group("line")
    match = _OVERRIDE_ERROR.search(text)
    key = match.group("key") if match else None
    if key is None:
        return None
    for item in overrides:
        if item.split("=", 1)[0].lstrip("+~") in (key, full_key):
            return item
    return None
