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
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

from contracts import schema
from contracts.errors import ConfigError, ConfigProblem
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
#: Every config group's schema by its class name (Hydra's "Key 'x' not in 'RunConfig'"): each dataclass
#: of contracts.schema, so a new group gets its allowed keys and its did-you-mean without a change here.
_SCHEMAS: dict[str, type[Any]] = {
    name: value
    for name, value in vars(schema).items()
    if isinstance(value, type) and is_dataclass(value) and value.__module__ == schema.__name__
}


_LOAD_ERROR = re.compile(r"In '(?P<file>[^']+)': Could not load '(?P<ref>[^']+)'")


def unknown_keys(data: Any, sources: Sources) -> list[ConfigProblem]:
    """Keys of the composed config (a plain container) that no schema field names: ``+service.api_key=..``
    opens a structured node and would be dropped in silence. Each names its override (or ``<composition>``),
    the allowed keys and a did-you-mean; free-form mappings (``extra_args``, ``env``) are not walked."""
    out: list[ConfigProblem] = []

    def walk(node: Any, kind: type[Any], path: list[str]) -> None:
        if not isinstance(node, dict):
            return
        hints = get_type_hints(kind)
        allowed = [f.name for f in fields(kind)]
        for key, value in node.items():
            if key not in hints:
                full = ".".join([*path, str(key)])
                override = next(
                    (o for o in sources.overrides if o.split("=", 1)[0].lstrip("+~") == full), None
                )
                where = f"command-line override {override!r}" if override else "<composition>"
                shown = override.split("=", 1)[1] if override and "=" in override else "<set>"
                out.append(ConfigProblem(where, full, shown, _allowed_keys(str(key), allowed)))
                continue
            hint = hints[key]
            if isinstance(hint, type) and is_dataclass(hint):
                walk(value, hint, [*path, str(key)])
            elif get_origin(hint) is dict and isinstance(value, dict):
                item_kind = get_args(hint)[1]
                if isinstance(item_kind, type) and is_dataclass(item_kind):
                    for name, item in value.items():
                        walk(item, item_kind, [*path, str(key), str(name)])

    walk(data, schema.GauntletConfig, [])
    return out


def _allowed_keys(key: str, allowed: Sequence[str]) -> str:
    near = difflib.get_close_matches(key, allowed, n=1)
    guess = f" (did you mean {near[0]!r}?)" if near else ""
    return f"unknown key{guess}; allowed keys: {', '.join(allowed)}"


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
        kind = _SCHEMAS.get(match.group("type"))
        allowed = _allowed_keys(key, [f.name for f in fields(kind)] if kind else [])
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
    parent = _LOAD_ERROR.search(text)
    if parent:  # a defaults list names a file that is not there: blame the file whose list it is
        return ConfigError([_missing_parent(parent.group("file"), parent.group("ref"), sources)])
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


def _missing_parent(asking: str, ref: str, sources: Sources) -> ConfigProblem:
    """``defaults: [nosuch]`` in ``candidate/x.yaml``: that file, its defaults entry, what exists there."""
    where = _file_of(asking, sources)[0]
    group, _, option = ref.rpartition("/")
    searched = ", ".join(display_path(d) for d in sources.search_path) or "the search path"
    names = sorted(
        {p.stem for d in sources.search_path if (d / group).is_dir() for p in (d / group).glob("*.yaml")}
    )
    allowed = f"one of {', '.join(names)}" if names else f"a file {ref}.yaml"
    return ConfigProblem(where, "defaults", option, f"{allowed} (no {ref}.yaml in {searched})")


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
