"""``python -m orchestrator list [GROUP]``: what can be chosen, per config group, and where each file is.

Pipeline position: beside ``plan``, before anything runs. Hydra lists each group's options over the whole
search path (the project's ``conf/``, ``--config-dir``, ``hydra.searchpath``, packages), exactly the
options a ``group=option`` override or ``candidate=glob(*)`` can pick; this module adds each file's
description (its ``description:`` field, else its first comment line) and its path; ``list gates`` also
names the registered gates ``gates.enabled`` selects from. Hydra's flags work as on ``plan``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from contracts.errors import GauntletError
from orchestrator.config.compose import ConfigLocation, group_options, parse_hydra_args, show, wants_show
from orchestrator.config.validate import display_path, read_yaml

#: The groups a user chooses from, in the order ``list`` prints them, and how an option is chosen.
HOW = {
    "candidate": "candidate=OPTION (the sweep: -m 'candidate=glob(*)')",
    "host": "host=OPTION",
    "service": "service=OPTION",
    "workload": "workload@workloads.PROFILE=OPTION (run.profiles says which profiles run)",
    "experiment": "+experiment=OPTION",
    "gates": "gates=OPTION",
    "slo": "slo=OPTION",
    "search": "search=OPTION (find the best configuration instead of listing candidates: docs/search.md)",
    "hydra/launcher": "hydra/launcher=OPTION (parallel jobs: docs/scale-out.md)",
}
GROUPS = tuple(HOW)


@dataclass(frozen=True)
class Choice:
    """One option of a group: ``group=option`` on the command line."""

    group: str
    option: str
    description: str
    path: Path | None  # None: a structured config registered in code


def describe(path: Path | None) -> str:
    """A config file's one-line description: its ``description`` (or ``name``) field, else its first
    comment line, else empty."""
    if path is None:
        return "(registered in code)"
    raw = read_yaml(path)
    if isinstance(raw.get("description"), str):
        return " ".join(str(raw["description"]).split())
    for line in path.read_text(errors="replace").splitlines():
        text = line.strip()
        if text.startswith("#") and not text.startswith("# @package"):
            return text.lstrip("#").strip()
        if text and not text.startswith("#"):
            break
    return ""


def choices(groups: Sequence[str], location: ConfigLocation, overrides: Sequence[str]) -> list[Choice]:
    """Every option of ``groups`` on the search path the flags and overrides name."""
    out: list[Choice] = []
    for group in groups:
        for option, path in group_options(location, overrides, group):
            out.append(Choice(group, option, describe(path), path))
    return out


def format_choices(found: Sequence[Choice], groups: Sequence[str]) -> str:
    lines: list[str] = []
    for group in groups:
        mine = [c for c in found if c.group == group]
        lines.append(f"{group} ({len(mine)}): choose with {HOW.get(group, group + '=OPTION')}")
        if not mine:
            lines.append("  (none)")
        width = max((len(c.option) for c in mine), default=0)
        for c in mine:
            where = display_path(c.path) if c.path is not None else "-"
            lines.append(f"  {c.option:<{width}}  {c.description}".rstrip())
            lines.append(f"  {'':<{width}}  {where}")
        lines.append("")
    return "\n".join(lines)


def registered_gates() -> str:
    """The gates the judge can run (every registered one, in evaluation order), what each protects, and
    how to choose them: ``gates.enabled``."""
    from gates import REGISTRY  # noqa: PLC0415  (loads and registers the gates only for this listing)

    found = sorted(REGISTRY.values(), key=lambda g: g.order)  # stable: equal order keeps registration order
    width = max(len(g.name) for g in found)
    lines = [f"registered gates ({len(found)}): choose with gates.enabled=[NAME,...] (empty: every one)"]
    lines += [f"  {g.name:<{width}}  {g.requirement}" for g in found]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str], out: TextIO | None = None) -> int:
    """``list [GROUP ...] [hydra flags] [overrides]``."""
    out = out or sys.stdout
    args = parse_hydra_args(argv)
    groups = [o for o in args.overrides if "=" not in o]
    args.overrides = [o for o in args.overrides if "=" in o]
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        print(
            f"gauntlet list: unknown group {', '.join(unknown)}; groups: {', '.join(GROUPS)}", file=sys.stderr
        )
        return 2
    try:
        if wants_show(args):
            return show(args, command="list")
        shown = groups or list(GROUPS)
        found = choices(shown, ConfigLocation.from_args(args), args.overrides)
    except GauntletError as exc:
        print(f"gauntlet list: {exc}", file=sys.stderr)
        return exc.exit_code
    out.write(format_choices(found, shown))
    if "gates" in shown:
        out.write(registered_gates())
    return 0
