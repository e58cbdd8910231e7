"""Command-line overrides Hydra refuses with a bare Python error, refused first with a ConfigProblem.

Pipeline position: beside :mod:`orchestrator.config.guard` and :mod:`orchestrator.config.extras`, before
Hydra composes anything (the sweep's entry and :func:`orchestrator.config.compose.load`). ``search=null``
reads naturally (``conf/config.yaml`` says of the search group "null = none"), but Hydra cannot set a
config group to null on the command line and raises ``ValueError: Config group override must be a string
or a list. Got NoneType`` with a traceback; the problem here names the override, the group's configs and
Hydra's way to drop a group, ``~search``. A URL's password on the command line is refused here too
(:func:`orchestrator.config.secrets.password_problems`), before Hydra records it. Free of Hydra; pure apart
from listing the groups' directories.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from contracts.errors import COMMAND_LINE, ConfigError, ConfigProblem
from orchestrator.config.secrets import password_problems


def null_group_problems(overrides: Sequence[str], roots: Sequence[Path]) -> list[ConfigProblem]:
    """Overrides that set a config group of ``roots`` (a directory of configs) to null."""
    out: list[ConfigProblem] = []
    for override in overrides:
        key, eq, value = override.partition("=")
        group = key.lstrip("+").split("@", 1)[0]
        if not eq or value.strip() != "null" or not group or group.startswith(("~", "-", "hydra")):
            continue
        dirs = [root / group for root in roots if (root / group).is_dir()]
        if not dirs:  # a field (slo.tpot_s=null) or no group at all: Hydra's to judge
            continue
        names = sorted({p.stem for d in dirs for p in d.glob("*.yaml")})
        allowed = (
            f"a config of {group}/ ({', '.join(names) or 'none yet'}); to run without the {group} a config "
            f"selects, write ~{group} (Hydra cannot set a config group to null on the command line)"
        )
        out.append(ConfigProblem(f"{COMMAND_LINE} {override!r}", group, "null", allowed))
    return out


def check_overrides(overrides: Sequence[str], roots: Sequence[Path]) -> None:
    """Raise ConfigError before composition for an override Hydra would refuse with a traceback."""
    problems = [*null_group_problems(overrides, roots), *password_problems(overrides)]
    if problems:
        raise ConfigError(problems, hint="change the override named above; nothing was started")
