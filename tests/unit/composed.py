"""The unit tests' one Hydra composition per input: ``load`` as ``orchestrator.config.compose.load``, composed
once per test process for each distinct input and handed to every caller as its own deep copy.

A composition of the shipped ``conf/`` costs about 0.6 s of CPU, and hundreds of unit tests compose the
same few override lists (the default config, a candidate, a sweep's profiles). The result depends only on
the overrides, the files they name, the working directory and the environment (a secret's ``${oc.env:...}``),
so those are the key: an override naming a file adds the file's size and modification time, so a test that
rewrites its labelled set or TLS file between two loads composes again. Two variables of the environment
change with every test and are read by no composition, so they are left out of it: pytest's
``PYTEST_CURRENT_TEST`` and the private sweep-lock folder tests/unit/conftest.py gives each test. A
composition that raises is not kept (each call composes and raises again), nor is one from another config
directory or ``location``, whose files a test may rewrite. Each caller gets a deep copy, so a test that
changes its config changes nobody else's. ``tests/unit/test_composed.py`` holds the key to these rules.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from pathlib import Path

from contracts.schema import GauntletConfig
from orchestrator.config.compose import CONF_DIR, ConfigLocation
from orchestrator.config.compose import load as compose_load
from orchestrator.config.validate import Sources
from orchestrator.ledger.lock import LOCK_DIR_ENV

Key = tuple[object, ...]

#: Set anew for each test and read by no composition (the lock folder only by the sweep's port lock).
PER_TEST = frozenset({"PYTEST_CURRENT_TEST", LOCK_DIR_ENV})

_KEPT: dict[Key, tuple[GauntletConfig, Sources]] = {}


def _named_file(override: str) -> tuple[str, int, int] | None:
    """The size and modification time of the file an override's value names, if it names one."""
    value = override.partition("=")[2].strip()
    if not value or len(value) > 4096:
        return None
    try:
        stat = Path(value).stat()
    except (OSError, ValueError):
        return None
    return value, stat.st_size, stat.st_mtime_ns


def key(overrides: Sequence[str]) -> Key:
    """What a composition of the shipped ``conf/`` with ``overrides`` depends on."""
    files = tuple(f for f in map(_named_file, overrides) if f is not None)
    environ = frozenset((k, v) for k, v in os.environ.items() if k not in PER_TEST)
    return tuple(overrides), files, os.getcwd(), environ


def load(
    overrides: Sequence[str] = (), *, config_dir: Path = CONF_DIR, location: ConfigLocation | None = None
) -> tuple[GauntletConfig, Sources]:
    """``orchestrator.config.compose.load``, kept per input: see the module's docstring."""
    if config_dir != CONF_DIR or location is not None:
        return compose_load(overrides, config_dir=config_dir, location=location)
    k = key(overrides)
    if k not in _KEPT:
        _KEPT[k] = compose_load(overrides)
    return copy.deepcopy(_KEPT[k])
