"""What the sweep's opening asks of a search before the live service is stopped, beyond its file's checks.

Pipeline position: :mod:`orchestrator.app.sweeper`'s opening, after
:func:`orchestrator.search.checks.checked_space` and before anything is started or stopped: the space's
vLLM flags against the installed vLLM (:mod:`.flags`), SQLite with trials reporting from other machines
(:func:`.shared.sqlite_parallel_problem`), and a shared study (``search.storage``) made by another
configuration (:func:`.shared.fingerprint_problems`). Returns the sweep's study fingerprint, which the
run loop stores with (or compares against) its study.
"""

from __future__ import annotations

from contracts.errors import ConfigError
from contracts.schema import GauntletConfig
from contracts.search import Space
from launch.preflight import Probes
from orchestrator.search.flags import refuse_flags
from orchestrator.search.shared import (
    fingerprint_problems,
    mismatch_error,
    remote_target,
    server_version,
    sqlite_parallel_problem,
    study_fingerprint,
)
from orchestrator.search.storage import masked_url
from orchestrator.search.study import stored_fingerprint


def admit_search(
    cfg: GauntletConfig, space: Space, probes: Probes, *, where: str, launcher: str
) -> dict[str, str]:
    """Refuse (ConfigError) what would fail or corrupt once the search runs; the sweep's fingerprint."""
    search = cfg.search
    assert search is not None
    refuse_flags(cfg, space, probes, where=where)
    if (problem := sqlite_parallel_problem(search, remote=remote_target(launcher), where=where)) is not None:
        raise ConfigError([problem], hint="nothing was started or stopped")
    fingerprint = study_fingerprint(cfg, server_version(cfg, probes))
    if search.storage:  # a shared study: compared now, before the live service is stopped
        stored = stored_fingerprint(search, search.storage)
        shown = masked_url(search.storage)
        if stored and (problems := fingerprint_problems(stored, fingerprint, study=search.name, where=shown)):
            raise mismatch_error(problems, search.name)
    return fingerprint
