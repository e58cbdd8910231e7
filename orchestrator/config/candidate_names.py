"""The candidate group's names: every candidate file resolves to a name no other candidate has.

Pipeline position: a check of the config directories before composition (``plan``, ``doctor``, the
sweep's opening), beside :mod:`orchestrator.config.validate`; names key the result directories. Pure
apart from reading the group's YAML files.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from contracts.errors import ConfigError, ConfigProblem
from contracts.paths import CONF_DIR
from orchestrator.config.guard import yaml_file_problems
from orchestrator.config.validate import display_path, parent_in_group, read_yaml


@dataclass(frozen=True)
class CandidateFile:
    """A candidate YAML file and the name it resolves to (own or inherited)."""

    option: str
    path: Path
    name: str | None


def candidate_files(
    search_path: Iterable[Path] = (CONF_DIR,), *, unread: Collection[Path] = ()
) -> list[CandidateFile]:
    """Every candidate file of the group with the ``name`` it resolves to through its defaults chain;
    the files in ``unread`` (too large, an alias bomb) are left out, never read."""
    files: dict[str, Path] = {}
    for root in search_path:
        for path in sorted((root / "candidate").glob("*.yaml")):
            files.setdefault(path.stem, path)
    files = {option: path for option, path in files.items() if path not in unread}
    out: list[CandidateFile] = []
    for option, path in sorted(files.items()):
        name: str | None = None
        current: str | None = option
        seen: set[str] = set()
        while current is not None and current not in seen and current in files:
            seen.add(current)
            raw = read_yaml(files[current])
            if "name" in raw:
                name = str(raw["name"])
                break
            current = parent_in_group(raw)
        out.append(CandidateFile(option, path, name))
    return out


def check_candidate_names(search_path: Iterable[Path] = (CONF_DIR,)) -> None:
    """Every candidate must resolve to a name no other candidate has (names key result directories).

    A file the YAML parser refuses is reported as the parser says (file:line:column), not as a
    candidate without a name: nothing of it could be read. A file too large or an alias bomb is left out
    here: the composition of a command that selects it refuses it (:func:`guard.check_yaml_files`), and
    one that does not select it is not blocked by it."""
    roots = list(search_path)
    unreadable = yaml_file_problems(roots)
    syntax = [problem for problem in unreadable if problem.field == "<syntax>"]
    if syntax:
        raise ConfigError(syntax)
    files = candidate_files(roots, unread={Path(problem.file) for problem in unreadable})
    by_name: dict[str | None, list[CandidateFile]] = {}
    for f in files:
        by_name.setdefault(f.name, []).append(f)
    problems: list[ConfigProblem] = []
    for name, group in sorted(by_name.items(), key=lambda kv: str(kv[0])):
        if name is None:
            problems.extend(
                ConfigProblem(display_path(f.path), "name", None, "every candidate needs a name")
                for f in group
            )
        elif len(group) > 1:
            others = ", ".join(display_path(f.path) for f in group)
            for f in group:
                if f.option != name:
                    problems.append(
                        ConfigProblem(
                            display_path(f.path),
                            "name",
                            name,
                            f"a name no other candidate has; {name!r} is used by {others} "
                            f"(set `name: {f.option}` in this file)",
                        )
                    )
            if all(f.option != name for f in group):
                problems.append(
                    ConfigProblem(display_path(group[0].path), "name", name, f"unique; also used by {others}")
                )
    if problems:
        raise ConfigError(problems)
