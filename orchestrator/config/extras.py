"""Launchers that come with an optional extra of gauntlet, and the one error when it is not installed.

Pipeline position: beside :mod:`orchestrator.config.guard`, before Hydra composes anything. A launcher
chosen on the command line (``hydra/launcher=gauntlet_slurm``) whose extra is missing is refused with the
``pip install`` that provides it, instead of Hydra's "Could not load 'hydra/launcher/submitit_slurm'".
Free of Hydra; pure apart from asking the import system whether a module can be found.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from contracts.errors import COMMAND_LINE, ConfigError, ConfigProblem


@dataclass(frozen=True)
class Extra:
    """An optional extra of ``pyproject.toml`` and a module it installs (present when it is installed)."""

    name: str
    module: str


SLURM = Extra("slurm", "hydra_plugins.hydra_submitit_launcher")
RAY = Extra("ray", "hydra_plugins.hydra_ray_launcher")

#: ``hydra/launcher`` options and the extra that provides them (the plugin's config and launcher class;
#: gauntlet's presets extend the plugin's).
LAUNCHER_EXTRAS: dict[str, Extra] = {
    "gauntlet_slurm": SLURM,
    "gauntlet_local": SLURM,
    "submitit_slurm": SLURM,
    "submitit_local": SLURM,
    "ray": RAY,
}

LAUNCHER_GROUP = "hydra/launcher"


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (found on the path; it is not imported)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that is missing or broken
        return False


def missing_extra(extra: Extra, launcher: str, where: str) -> ConfigProblem:
    """The problem of a launcher whose extra is not installed: what to install."""
    return ConfigProblem(
        where,
        LAUNCHER_GROUP,
        launcher,
        f"a launcher that is installed: {launcher} comes with the `{extra.name}` extra, "
        f"pip install 'gauntlet[{extra.name}]' ({extra.module} cannot be imported)",
    )


def extra_problems(
    overrides: Sequence[str], is_installed: Callable[[str], bool] = installed
) -> list[ConfigProblem]:
    """Launchers chosen in ``overrides`` whose extra is not installed."""
    out: list[ConfigProblem] = []
    for override in overrides:
        key, eq, value = override.partition("=")
        if not eq or key.lstrip("+~") != LAUNCHER_GROUP:
            continue
        launcher = value.strip().strip("'\"")
        extra = LAUNCHER_EXTRAS.get(launcher)
        if extra is not None and not is_installed(extra.module):
            out.append(missing_extra(extra, launcher, f"{COMMAND_LINE} {override!r}"))
    return out


def check_extras(overrides: Sequence[str], is_installed: Callable[[str], bool] = installed) -> None:
    """Raise ConfigError before composition when a chosen launcher's extra is not installed."""
    problems = extra_problems(overrides, is_installed)
    if problems:
        raise ConfigError(
            problems, hint="install the extra named above, or choose another launcher; nothing was started"
        )
