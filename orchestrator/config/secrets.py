"""Secrets in the composed configuration: where a secret may stand, and a URL's password kept out of files.

Pipeline position: inside composition (:mod:`orchestrator.config.compose` asks :func:`secret_value` how to
resolve ``${oc.env:...}`` and :func:`value_problems` where a secret may stand), before Hydra reads the
command line (:func:`password_problems`, from :mod:`orchestrator.config.overrides`), and in the sweep
(:mod:`orchestrator.app.sweeper` moves a URL's password out of every composition with
:func:`conceal_field`; :mod:`orchestrator.app.search` opens the storage with :func:`revealed`). Free of
Hydra and OmegaConf: a resolver's nodes are read through their ``_key()`` only.

A secret is written as a reference to the environment variable that holds it (``<from $HF_TOKEN>``), in
every file (config.yaml, Hydra's records, the pickled jobs of a launcher, the journal) and message; the
value is read back only where it is used: the server's environment at launch (``env`` values:
launch.command.child_env) and the connection to the search's storage (``search.storage``)::

    search.storage: postgresql+psycopg://team:pw@db/g            # in the user's file
    search.storage: postgresql+psycopg://team:<from $GAUNTLET_SECRET_SEARCH_STORAGE>@db/g   # everywhere else
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contracts.errors import COMMAND_LINE, ConfigError, ConfigProblem
from contracts.secrets import (
    ENV_REFERENCE,
    conceal_url,
    only_password_references,
    password_variable,
    redacted,
    referenced,
    url_password,
)
from launch.spec import SECRET_NAME

#: Fields whose value is read back from the environment where it is used (a URL's password included).
REVEALED_FIELDS = ("search.storage",)
#: The sections whose ``env`` mapping is the server's environment (a secret's value reaches it at launch).
ENV_SECTIONS = ("host", "service", "candidate", "baseline")

#: How to give a database its password without writing it anywhere gauntlet copies or shows.
PASSWORD_ADVICE = (
    "give the password through libpq's PGPASSWORD or ~/.pgpass (psycopg reads both; the URL then has "
    "none), or the whole URL through an environment variable: search.storage='${oc.env:MY_STORAGE_URL}'"
)


def _key(node: Any) -> str:
    """The key of an OmegaConf node as its parent holds it ('' for the root)."""
    key = node._key() if node is not None else None  # OmegaConf's resolver nodes
    return "" if key is None else str(key)


def secret_value(value: object, node: Any, parent: Any) -> bool:
    """Whether a value read from the environment (``${oc.env:VAR}``) is a secret by what it holds or where
    it goes, whatever the variable's name: a URL with a password, or the value of an ``env`` key that looks
    secret (``HF_TOKEN: ${oc.env:HFTOK}``). ``node`` and ``parent`` are the resolver's ``_node_`` and
    ``_parent_``."""
    if isinstance(value, str) and url_password(value) is not None:
        return True
    return _key(parent) == "env" and SECRET_NAME.search(_key(node)) is not None


def _env_value(path: Sequence[str]) -> bool:
    return len(path) == 3 and path[0] in ENV_SECTIONS and path[1] == "env"


def value_problems(path: Sequence[str], value: str) -> list[str]:
    """What is wrong with a secret in the composed ``value`` at ``path`` (the allowed part of each problem):
    a secret from the environment (``<from $VAR>``) stands only in an ``env`` value (the server's
    environment) or a field read back where it is used (:data:`REVEALED_FIELDS`); a URL's password written
    in a file stands only in such a field (the sweep moves it to the environment)."""
    field = ".".join(path)
    if _env_value(path):
        if url_password(value) is None:
            return []
        return [
            f"no password in a URL: the launch spec and config.yaml would carry it; take the value from the "
            f"environment ({path[-1]}: ${{oc.env:VAR}}, written <from $VAR>)"
        ]
    if field in REVEALED_FIELDS:
        if not referenced(value) or ENV_REFERENCE.fullmatch(value) or only_password_references(value):
            return []
        return [f"a URL, its password or the whole of it from the environment; {PASSWORD_ADVICE}"]
    out = [
        f"no value of ${variable}, a secret (names and command-line flags are written and shown "
        f"everywhere); pass it through the server's environment (service.pass_env / "
        f"env: {{NAME: ${{oc.env:{variable}}}}})"
        for variable in referenced(value)
    ]
    if url_password(value) is not None:
        out.append(
            "no password in a URL: only search.storage and the server's env values can hold a secret, "
            "read from the environment where they are used"
        )
    return out


def password_problems(overrides: Sequence[str]) -> list[ConfigProblem]:
    """Command-line overrides that carry a URL's password: a command line is shown to every user of the
    host (ps) for the whole sweep and kept in the shell's history, so masking what gauntlet writes
    could not make it secret. Refused before Hydra records anything."""
    out: list[ConfigProblem] = []
    for override in overrides:
        if url_password(override) is None:
            continue
        key, _, value = override.partition("=")
        shown = redacted(override)
        allowed = (
            f"a URL without its password on the command line (every user of the host can read a command "
            f"line, and the shell keeps it); {PASSWORD_ADVICE}"
        )
        out.append(ConfigProblem(f"{COMMAND_LINE} {shown!r}", key.lstrip("+~"), redacted(value), allowed))
    return out


@dataclass(frozen=True)
class Concealed:
    """A field whose URL password moves to the environment: the value written, the variable, the password."""

    field: str
    value: str
    variable: str
    password: str


def conceal_field(field: str, value: object) -> Concealed | None:
    """``value`` of ``field`` with its URL's password replaced by a reference to the variable it moves to
    (``GAUNTLET_SECRET_SEARCH_STORAGE``); None when it has none. The caller sets the variable in the
    environment the sweep and its jobs run in, and writes the concealed value into the composition."""
    if not isinstance(value, str):
        return None
    variable = password_variable(field)
    done = conceal_url(value, variable)
    return Concealed(field, done[0], variable, done[1]) if done is not None else None


def revealed(value: str, field: str = "search.storage", environ: Mapping[str, str] = os.environ) -> str:
    """``value`` with each ``<from $VAR>`` replaced by ``environ[VAR]``: the URL a connection is opened
    with, held in memory only. A variable that is not set is a ConfigError naming it and the field."""

    def value_of(match: Any) -> str:
        variable = str(match.group(1))
        if variable not in environ:
            allowed = (
                f"${variable} set in gauntlet's environment (the sweep sets it from the password of "
                f"{field}; a job on another node inherits it, as sbatch's default --export=ALL does); or "
                f"no password in the URL and PGPASSWORD or ~/.pgpass on every node"
            )
            raise ConfigError([ConfigProblem("gauntlet's environment", field, value, allowed)])
        return environ[variable]

    return ENV_REFERENCE.sub(value_of, value)
