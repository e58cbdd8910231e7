"""A study several sweeps share (``search.storage``) without corrupting each other: what may share it.

Pipeline position: the sweep's opening (:mod:`orchestrator.app.sweeper`: before the live service is
stopped), ``plan`` (:mod:`orchestrator.plan`) and the Optuna adapter (:mod:`.study`, which stores and
compares what is decided here). A study's trials are comparable only when they measured the same thing:
:func:`study_fingerprint` says what that is (the model, the installed vLLM, the host, the SLO, the
workload the screen and the capacity measure on, the objective, the space and the baseline the points
are encoded over), stored with the study when it is made; a sweep whose fingerprint differs is refused
field by field (:func:`fingerprint_problems`) with the way on, a new study name. Each trial is tagged with
its sweep's id (:data:`SWEEP_ATTR`, ``SearchRecord.sweep_id``), so a resumed sweep fails only the trials
*it* left running, never a colleague's live ones. SQLite over a shared file system corrupts: a parallel
search whose trials report from other nodes needs a database server (:func:`sqlite_parallel_problem`).
Pure, apart from the probes :func:`server_version` is given.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict
from typing import Any

from contracts.errors import ConfigError, ConfigProblem, GauntletError
from contracts.schema import GauntletConfig
from contracts.search import SearchConfig
from launch.flags import program_part
from launch.preflight import Probes

#: The study's user attribute holding its fingerprint, and a trial's holding its sweep's id.
FINGERPRINT_ATTR = "gauntlet.fingerprint"
SWEEP_ATTR = "gauntlet.sweep"
#: How a study holds its points (:class:`orchestrator.search.study.Encoding`), part of the fingerprint's
#: ``space``: a study that held them otherwise is refused (Optuna cannot mix two distributions of a field).
ENCODING = "numeric choices as ordered indices"

#: A fingerprint's fields, in the order a mismatch names them.
FINGERPRINT_FIELDS = ("model", "vllm", "host", "slo", "workload", "objective", "space", "baseline")
#: Launchers whose trial jobs run on other machines (their workers report to the study's storage).
REMOTE_LAUNCHERS = ("gauntlet_slurm", "submitit_slurm", "ray")


def new_sweep_id() -> str:
    """An id for one sweep's trials in a study (kept in ``search/trials.json``, so a resume keeps it)."""
    return uuid.uuid4().hex[:12]


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def study_fingerprint(cfg: GauntletConfig, server: str) -> dict[str, str]:
    """What a study's trials measured, field by field (:data:`FINGERPRINT_FIELDS`); ``server`` is the
    installed server's version (:func:`server_version`). The candidates' names and descriptions are not
    settings, and neither is the sweep's own budget (``max_launches``, ``seed``, ``parallel``)."""
    search = cfg.search
    assert search is not None
    service, host = cfg.service, cfg.host
    profile = cfg.capacity.profile
    workload = cfg.workloads.get(profile) if profile is not None else None
    measured = (
        {k: v for k, v in asdict(workload).items() if k not in ("name", "description")} if workload else {}
    )
    baseline = {k: v for k, v in asdict(cfg.baseline).items() if k not in ("name", "description")}
    return {
        "model": f"{service.model} (revision {service.revision or 'default'}, max_model_len "
        f"{service.max_model_len}, kv_cache_dtype {service.kv_cache_dtype})",
        "vllm": server,
        "host": f"{host.name}: {host.gpu_count} x {host.gpu_name or host.kind} on {host.nodes} node(s)",
        "slo": _text({k: v for k, v in asdict(cfg.slo).items() if k != "name"}),
        "workload": f"{profile}: {_text(measured)}",
        "objective": f"{search.objective} (load_level {search.load_level}, pareto {search.pareto})",
        "space": _text({"space": search.space, "layouts": search.layouts, "encoding": ENCODING}),
        "baseline": _text(baseline),
    }


def server_version(cfg: GauntletConfig, probes: Probes) -> str:
    """The host's server program as a fingerprint names it: vLLM's version (as doctor reads it), or the
    simulator; "unknown" when it cannot be told (two sweeps that cannot tell it do not differ on it)."""
    if cfg.host.kind == "sim":
        return f"simulator ({cfg.host.sim_args.get('sim-profile', 'default profile')})"
    program = [w.replace("{model}", cfg.service.model) for w in program_part(cfg.host.entrypoint)]
    try:
        version = probes.version(probes.resolve(program))
    except GauntletError:
        return "unknown"
    return f"vLLM {version}" if version else "unknown"


def _short(text: str, at_most: int = 160) -> str:
    return text if len(text) <= at_most else f"{text[: at_most - 3]}..."


def fingerprint_problems(
    stored: dict[str, str], ours: dict[str, str], *, study: str, where: str
) -> list[ConfigProblem]:
    """Each field of ``ours`` that differs from the study's ``stored`` fingerprint (a field one of them
    lacks is not compared: a study made before the field was fingerprinted)."""
    return [
        ConfigProblem(
            f"study {study!r} at {where}",
            field,
            _short(ours[field]),
            f"the study's own, which its trials measured: {_short(stored[field])}",
        )
        for field in FINGERPRINT_FIELDS
        if field in stored and field in ours and stored[field] != ours[field]
    ]


def mismatch_error(problems: list[ConfigProblem], study: str) -> ConfigError:
    """The refusal of a study made by another configuration: what differs, and the way on."""
    return ConfigError(
        problems,
        hint=(
            f"a study's trials must measure the same thing, or its best point means nothing: give this "
            f"search a study of its own (search.name={study}_2, or another name), or run it with the "
            f"study's configuration; nothing was started or stopped"
        ),
    )


def sqlite_parallel_problem(search: SearchConfig, *, remote: bool, where: str) -> ConfigProblem | None:
    """SQLite (``search.storage`` null: search/study.db, or a sqlite:// URL) with trials measured at once
    on other machines (``remote``: their jobs report to the study over the shared file system, where
    SQLite's locks do not hold and the file corrupts): a database server is needed."""
    url = search.storage or ""
    if search.parallel <= 1 or not remote or (url and not url.startswith("sqlite")):
        return None
    return ConfigProblem(
        where,
        "search.storage",
        search.storage,
        f"a database server (postgresql+psycopg://user@host/db) with search.parallel {search.parallel} on "
        "a launcher that runs trials on other nodes: they would write one SQLite file over a shared file "
        "system, whose locks do not hold there and which corrupts; or search.parallel: 1",
    )


def remote_launcher(overrides: list[str]) -> bool:
    """Whether the command line's ``hydra/launcher=...`` runs jobs on other machines (``plan``'s view:
    the sweep's opening asks the launcher itself)."""
    for override in overrides:
        key, eq, value = override.partition("=")
        if eq and key.lstrip("+~") == "hydra/launcher" and value.strip("'\" ") in REMOTE_LAUNCHERS:
            return True
    return False


def remote_target(target: str) -> bool:
    """Whether a launcher (its ``_target_`` class path) runs trial jobs on other machines: SLURM's or
    Ray's; ``submitit_local`` runs them here (simulated nodes), the basic launcher in the sweep itself."""
    name = target.lower()
    return ("submitit" in name and "local" not in name) or "ray" in name
