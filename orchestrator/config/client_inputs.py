"""The load client's own inputs, checked when the configuration is composed: its TLS files and its API key.

Pipeline position: called by :func:`orchestrator.config.validate.validate` (the sweep, ``plan`` and
``doctor`` alike), before anything is stopped or started. A TLS file the client cannot use, or an API key
with a line break, would otherwise surface under load, where a failed request reads as the server's fault;
here it is a ConfigProblem naming the field, the file or the variable (never the key's value). At run time
the same faults are the harness's (:func:`load.tls.tls_context`, :meth:`launch.spec.LaunchSpec.api_key`:
a HarnessError, the verdict INCOMPLETE).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from contracts.errors import ConfigProblem
from contracts.schema import LoadConfig, ServiceConfig
from launch.spec import API_KEY_HINT, api_key_problem
from load.tls import tls_fault


def tls_problems(load: LoadConfig, where: Callable[[str], str]) -> list[ConfigProblem]:
    """The first TLS file of ``load`` the client could not use (missing, unreadable, not PEM, a key that is
    not its certificate's or asks for a passphrase), named with its field and where it was set."""
    fault = tls_fault(load)
    if fault is None:
        return []
    field, path, why = fault
    return [ConfigProblem(where(field), field, path, f"a readable PEM file, or null ({why})")]


def api_key_problems(
    service: ServiceConfig, where: str, environ: Mapping[str, str] = os.environ
) -> list[ConfigProblem]:
    """The API key's variable (``service.api_key_env``) holds a value with a line break: no request header
    could carry it, and the server would get it as its key. An unset variable is refused at launch."""
    name = service.api_key_env
    problem = api_key_problem(name, environ.get(name, "")) if name else None
    if name is None or problem is None:
        return []
    return [ConfigProblem(where, "service.api_key_env", name, f"{problem}; {API_KEY_HINT.format(name=name)}")]
