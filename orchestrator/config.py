"""Compose and type the configuration with Hydra (the boundary where omegaconf stops).

Pipeline position: ``conf/*.yaml`` --compose (Hydra)--> DictConfig --:func:`to_typed`--> GauntletConfig
--:func:`orchestrator.validate.validate`--> ready to render launch specs. With :mod:`orchestrator.hydra_app`
the only module that imports Hydra or OmegaConf; validation itself lives in :mod:`orchestrator.validate`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from contracts.errors import ConfigError, ConfigProblem
from contracts.paths import CONF_DIR
from contracts.schema import (
    CandidateConfig,
    GauntletConfig,
    HostConfig,
    LengthConfig,
    WorkloadConfig,
)
from orchestrator.config_guard import check_yaml_files, config_roots
from orchestrator.validate import Sources, display_path, read_yaml, validate


def register_configs() -> None:
    """Register the typed schemas in Hydra's ConfigStore (idempotent)."""
    cs = ConfigStore.instance()
    cs.store(name="gauntlet_schema", node=GauntletConfig)
    cs.store(group="schema", name="candidate", node=CandidateConfig)
    cs.store(group="schema", name="workload", node=WorkloadConfig)


def register() -> None:
    register_configs()


def compose_config(
    overrides: Sequence[str] = (), *, config_dir: Path = CONF_DIR, config_name: str = "config"
) -> tuple[DictConfig, Sources]:
    """Compose the configuration with Hydra's compose API (plan, tests, rollback)."""
    register()
    check_yaml_files(config_roots(overrides, config_dir))
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
            cfg = compose(config_name=config_name, overrides=list(overrides), return_hydra_config=True)
    except (HydraException, OmegaConfBaseException) as exc:
        raise translate_compose_error(exc, Sources(search_path=[config_dir])) from exc
    finally:
        GlobalHydra.instance().clear()
    sources = sources_from_hydra(cfg.hydra, primary=Path(config_dir))
    sources.overrides = list(overrides)
    with _open(cfg):
        del cfg["hydra"]
    return cfg, sources


def sources_from_hydra(hydra_node: Any, *, primary: Path = CONF_DIR) -> Sources:
    """Sources of a composed config from its ``hydra`` node: group choices, search path, overrides."""
    choices = {str(k): str(v) for k, v in hydra_node.runtime.choices.items() if v is not None}
    extra = [Path(str(p)[len("file://") :]) for p in hydra_node.searchpath if str(p).startswith("file://")]
    overrides: list[str] = [str(o) for o in hydra_node.overrides.task]
    return Sources(choices=choices, search_path=[primary, *extra], overrides=overrides)


class _open:
    """Context manager that lifts struct mode on a DictConfig."""

    def __init__(self, cfg: DictConfig) -> None:
        self.cfg = cfg

    def __enter__(self) -> None:
        OmegaConf.set_struct(self.cfg, False)

    def __exit__(self, *exc: object) -> None:
        OmegaConf.set_struct(self.cfg, True)


_KEY_ERROR = re.compile(r"In '(?P<file>[^']+)'.*?Key '(?P<key>[^']+)' not in '(?P<type>[^']+)'", re.S)
_FULL_KEY = re.compile(r"full_key: (?P<full>\S+)")
_VALUE_ERROR = re.compile(
    r"Value '(?P<value>[^']*)' (?:of type '[^']+' )?could not be converted to (?P<type>\w+)"
)
_SCHEMAS: dict[str, type[Any]] = {
    "CandidateConfig": CandidateConfig,
    "WorkloadConfig": WorkloadConfig,
    "HostConfig": HostConfig,
    "LengthConfig": LengthConfig,
    "GauntletConfig": GauntletConfig,
}


def translate_compose_error(exc: Exception, sources: Sources) -> ConfigError:
    """Turn Hydra's composition error into a ConfigError that names file, field, value and allowed keys."""
    text = str(exc)
    match = _KEY_ERROR.search(text)
    full = _FULL_KEY.search(text)
    if match:
        file_ref = match.group("file")
        group, _, choice = file_ref.rpartition("/")
        path = sources.group_file(group, choice) if group else None
        schema = _SCHEMAS.get(match.group("type"))
        allowed_keys = [f.name for f in fields(schema)] if schema else []
        key = match.group("key")
        near = difflib.get_close_matches(key, allowed_keys, n=1)
        allowed = f"unknown key; allowed keys: {', '.join(allowed_keys)}"
        if near:
            allowed = f"unknown key (did you mean {near[0]!r}?); allowed keys: {', '.join(allowed_keys)}"
        value: object = "<set>"
        if path is not None:
            raw = read_yaml(path)
            value = raw.get(key, "<set>")
        where = display_path(path) if path else f"conf/{file_ref}.yaml"
        return ConfigError([ConfigProblem(where, full.group("full") if full else key, value, allowed)])
    vmatch = _VALUE_ERROR.search(text)
    if vmatch:
        file_ref = re.search(r"In '(?P<file>[^']+)'", text)
        where = f"conf/{file_ref.group('file')}.yaml" if file_ref else "<override>"
        return ConfigError(
            [
                ConfigProblem(
                    where,
                    full.group("full") if full else "?",
                    vmatch.group("value"),
                    f"must be of type {vmatch.group('type')}",
                )
            ]
        )
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return ConfigError(
        [ConfigProblem("<composition>", "-", first, "a valid group choice or override (see `--help`)")],
        hint=text if len(text) < 2000 else None,
    )


def to_typed(cfg: DictConfig) -> GauntletConfig:
    """Convert the composed DictConfig into plain dataclasses, once, at the entry point."""
    obj = OmegaConf.to_object(cfg)
    if not isinstance(obj, GauntletConfig):
        raise TypeError(f"composed config is {type(obj).__name__}, expected GauntletConfig")
    return obj


def load(overrides: Sequence[str] = (), *, config_dir: Path = CONF_DIR) -> tuple[GauntletConfig, Sources]:
    """Compose, type and validate: the one call an entry point needs."""
    cfg, sources = compose_config(overrides, config_dir=config_dir)
    typed = to_typed(cfg)
    validate(typed, sources)
    return typed, sources


# --------------------------------------------------------------------------- validation (pure)
