"""Compose and type the configuration with Hydra (the boundary where omegaconf stops).

Pipeline position: ``conf/*.yaml`` --compose (Hydra)--> DictConfig --:func:`to_typed`--> GauntletConfig
--:func:`orchestrator.config.validate.validate`--> ready to render launch specs. With
:mod:`orchestrator.app.sweeper`
the only module that imports Hydra or OmegaConf; validation itself lives in
:mod:`orchestrator.config.validate`,
Hydra's errors read as ConfigErrors in :mod:`orchestrator.config.compose_errors`.
"""

from __future__ import annotations

import argparse
import importlib.resources
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra._internal.hydra import Hydra
from hydra._internal.utils import create_automatic_config_search_path, get_args_parser
from hydra.core.config_search_path import SearchPathQuery
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.core.object_type import ObjectType
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Glob
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from omegaconf.resolvers import oc

from contracts.errors import COMMAND_LINE, ConfigError, ConfigProblem
from contracts.layout import CONFIG_FILE, OVERRIDES_FILE, RECORDED_HYDRA
from contracts.paths import CONF_DIR
from contracts.schema import (
    CandidateConfig,
    GauntletConfig,
    WorkloadConfig,
)
from contracts.search import SearchConfig
from contracts.secrets import env_reference
from launch.spec import SECRET_NAME
from orchestrator.config.compose_errors import translate_compose_error, unknown_keys
from orchestrator.config.extras import check_extras
from orchestrator.config.guard import YamlReads, check_yaml_files, config_roots
from orchestrator.config.overrides import check_overrides
from orchestrator.config.resolvers import gpus_per_node, job_minutes
from orchestrator.config.search_defaults import apply_search_defaults
from orchestrator.config.secrets import secret_value, value_problems
from orchestrator.config.validate import Sources, validate

#: The module whose ``@hydra.main`` runs the sweep: a relative ``--config-path`` resolves against its
#: package, and its task name names Hydra's job, exactly as for the sweep (see :func:`create_hydra`).
APP_MODULE = "orchestrator.app.entry"
CONFIG_NAME = "config"


def register_configs() -> None:
    """Register the typed schemas in Hydra's ConfigStore (idempotent)."""
    cs = ConfigStore.instance()
    cs.store(name="gauntlet_schema", node=GauntletConfig)
    cs.store(group="schema", name="candidate", node=CandidateConfig)
    cs.store(group="schema", name="workload", node=WorkloadConfig)
    cs.store(group="schema", name="search", node=SearchConfig)
    # ${gauntlet.job_minutes:} in conf/hydra/launcher/*: a job's time limit from the host and profiles.
    OmegaConf.register_new_resolver("gauntlet.job_minutes", _job_minutes, replace=True)
    # ${gauntlet.gpus_per_node:} there: a node's GPUs (host.gpus_per_node on a multi-node host).
    OmegaConf.register_new_resolver("gauntlet.gpus_per_node", gpus_per_node, replace=True)
    # ${oc.env:HF_TOKEN}: a secret's value never enters the composed config (see secret_env).
    OmegaConf.register_new_resolver("oc.env", secret_env, replace=True)


def secret_variables(root: Any) -> set[str]:
    """The variables of a composed config whose values are secrets beyond their names' look
    (:data:`launch.spec.SECRET_NAME`): every ``service.pass_env`` name and ``service.api_key_env``, as
    written (read unresolved: a resolver must not resolve the node it may be resolving)."""
    service = OmegaConf.select(root, "service", default=None, throw_on_resolution_failure=False)
    if not isinstance(service, DictConfig):
        return set()
    raw = OmegaConf.to_container(service, resolve=False)
    assert isinstance(raw, dict)
    named = [*(raw.get("pass_env") or []), raw.get("api_key_env")]
    return {str(name) for name in named if isinstance(name, str) and "${" not in name}


def secret_env(key: str, *default: Any, _root_: Any, _node_: Any, _parent_: Any) -> str | None:
    """``${oc.env:KEY[,default]}`` as gauntlet resolves it: OmegaConf's own, except that a set variable
    whose value is a secret (its name has TOKEN, KEY, SECRET, PASSWORD ...; a pass_env or api_key_env
    name; a URL with a password, or the value of a secret-looking env key: secrets.secret_value)
    resolves to ``<from $KEY>``. The value itself reaches only the server's environment, at launch
    (:func:`launch.command.child_env`), or the search's storage; every file, message and fingerprint
    has the name."""
    value: str | None = oc.env(key, *default)
    secret = (
        SECRET_NAME.search(key) or key in secret_variables(_root_) or secret_value(value, _node_, _parent_)
    )
    return env_reference(key) if key in os.environ and secret else value


def secret_problems(cfg: DictConfig, sources: Sources | None = None) -> list[ConfigProblem]:
    """Every value of ``cfg`` where a secret may not stand (orchestrator.config.secrets.value_problems): a
    variable's value (``<from $HF_TOKEN>``) outside an ``env`` mapping becomes directory names and
    reports, a flag the server's command line, which every user of the host can read (ps)."""
    try:
        container = OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException:
        return []  # typing the config reports the interpolation that does not resolve
    return [
        ConfigProblem(_field_origin(sources or Sources(), path), ".".join(path), value, allowed)
        for path, value in _strings(container, ())
        for allowed in value_problems(path, value)
    ]


def _strings(node: Any, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], str]]:
    if isinstance(node, dict):
        items = [(k, v) for k, v in node.items() if path or k != "hydra"]  # Hydra's node: not the job's
        return [s for k, v in items for s in _strings(v, (*path, str(k)))]
    if isinstance(node, list):
        return [s for i, v in enumerate(node) for s in _strings(v, (*path, str(i)))]
    return [(path, node)] if isinstance(node, str) else []


def _field_origin(sources: Sources, path: Sequence[str]) -> str:
    """The file (or command-line override) that set the field at ``path``, as far as sources tell."""
    for end in range(len(path), 1, -1):  # an override of a mapping or list sets the values inside it
        item = sources.override_of(".".join(path[:end]))
        if item is not None:
            return f"{COMMAND_LINE} {item!r}"
    head, rest = path[0], list(path[1:])
    if head == "baseline":
        package, group = "candidate@baseline", "candidate"
    elif head == "workloads" and rest:
        package, group, rest = f"workload@workloads.{rest[0]}", "workload", rest[1:]
    else:
        package = group = head
    choice = sources.choices.get(package)
    if choice is None:
        return sources.top_origin(".".join(path))
    return sources.origin(group, choice, rest, package.rpartition("@")[2])


def _job_minutes(*, _root_: DictConfig) -> int:

    run, workloads = _root_.run, _root_.workloads
    profiles = [
        (
            int(workloads[name].repeats if workloads[name].repeats is not None else run.repeats),
            float(workloads[name].time_limit_s),
        )
        for name in run.profiles
    ]
    return job_minutes(float(_root_.host.startup_timeout_s), profiles)


def register() -> None:
    register_configs()


@dataclass(frozen=True)
class ConfigLocation:
    """Where composition starts: Hydra's ``--config-path``, ``--config-name`` and ``--config-dir``.

    ``config_path`` None is the project's ``conf/`` (what the sweep's ``@hydra.main`` names); a relative
    one resolves against the :data:`APP_MODULE` package as Hydra resolves it for the sweep.
    """

    config_path: str | None = None
    config_name: str | None = None
    config_dir: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ConfigLocation:
        """The location named by flags parsed with :func:`parse_hydra_args`."""
        return cls(args.config_path, args.config_name, args.config_dir)

    @property
    def name(self) -> str:
        return self.config_name or CONFIG_NAME


def hydra_args_parser() -> argparse.ArgumentParser:
    """Hydra's own command-line parser (the one ``@hydra.main`` uses): every flag, the same meaning."""
    return get_args_parser()


def parse_hydra_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse ``argv`` with Hydra's parser; positional arguments land in ``overrides`` (a usage error
    raises SystemExit, as for any Hydra app)."""
    return hydra_args_parser().parse_args(list(argv))


def create_hydra(location: ConfigLocation = ConfigLocation()) -> Hydra:
    """Hydra's main object with the search path ``@hydra.main`` builds for the sweep (``-cp``, ``-cd``).

    Mirrors ``hydra._internal.utils._run_hydra``: the primary config path, then a ``--config-dir``
    prepended before the structured-config source. The caller clears ``GlobalHydra`` afterwards.
    """
    register()
    GlobalHydra.instance().clear()
    config_path = location.config_path or str(CONF_DIR)
    search_path = create_automatic_config_search_path(None, APP_MODULE, config_path)
    if location.config_dir is not None:
        config_dir = Path(location.config_dir).absolute()
        if not config_dir.is_dir():
            raise ConfigError(
                [ConfigProblem("--config-dir", "config_dir", str(config_dir), "an existing directory")],
                hint="pass the directory that holds your candidate/, host/, service/ ... groups",
            )
        search_path.prepend(
            provider="command-line", path=f"file://{config_dir}", anchor=SearchPathQuery(provider="schema")
        )
    return Hydra.create_main_hydra2(task_name=APP_MODULE.rpartition(".")[2], config_search_path=search_path)


def source_dirs(sources: Sequence[Any]) -> list[Path]:
    """The directories of Hydra config sources (``file://`` and ``pkg://``), in search order.

    Takes Hydra's ConfigSource objects or the ``hydra.runtime.config_sources`` records; Hydra's own
    ``pkg://hydra.conf`` and structured configs hold no file of the user's and are left out.
    """
    out: list[Path] = []
    for source in sources:
        scheme = source.scheme() if callable(getattr(source, "scheme", None)) else str(source.schema)
        if str(source.provider) in ("hydra", "schema"):
            continue
        path = _source_dir(scheme, str(source.path))
        if path is not None and path not in out:
            out.append(path)
    return out


def _source_dir(scheme: str, path: str) -> Path | None:
    if scheme == "file":
        return Path(path).absolute()
    if scheme != "pkg":
        return None
    module, _, sub = path.partition("/")
    try:
        root = importlib.resources.files(module)
    except (ModuleNotFoundError, TypeError, ValueError):
        return None
    target = root.joinpath(*sub.split("/")) if sub else root
    return Path(str(target)) if isinstance(target, Path) and target.is_dir() else None


def search_dirs(hydra: Hydra, location: ConfigLocation, overrides: Sequence[str]) -> list[Path]:
    """The config directories Hydra will search for ``overrides`` (``hydra.searchpath`` included), in order.

    Computed before composing, so an error that stops composition can still name the real file.
    """
    loader = hydra.config_loader
    try:
        _, repo = loader._parse_overrides_and_create_caching_repo(  # type: ignore[attr-defined]
            location.name, list(overrides)
        )
        return source_dirs(repo.get_sources())
    except (HydraException, OmegaConfBaseException, AttributeError):
        return source_dirs(loader.get_sources())


def compose_config(
    overrides: Sequence[str] = (),
    *,
    config_dir: Path = CONF_DIR,
    config_name: str = CONFIG_NAME,
    location: ConfigLocation | None = None,
) -> tuple[DictConfig, Sources]:
    """Compose the configuration as the sweep's ``@hydra.main`` would (plan, list, tests).

    ``location`` carries ``--config-path/--config-name/--config-dir``; without it ``config_dir`` is the
    primary config directory (a test's copy of ``conf/``).
    """
    loc = location or ConfigLocation(config_path=str(config_dir), config_name=config_name)
    check_before_composing(loc, overrides)
    try:
        hydra = create_hydra(loc)
        return compose_with(hydra, loc, overrides, search_dirs(hydra, loc, overrides))
    except (HydraException, OmegaConfBaseException) as exc:  # the search path itself (a bad -cp)
        raise translate_compose_error(exc, Sources(search_path=[], overrides=list(overrides))) from exc
    finally:
        GlobalHydra.instance().clear()


def check_before_composing(
    location: ConfigLocation, overrides: Sequence[str], reads: YamlReads | None = None
) -> None:
    """The guards before Hydra reads anything: hostile YAML among the files a composition of
    ``overrides`` may read (one bad candidate blocks its own), a launcher whose extra is missing."""
    extra = ["--config-dir", location.config_dir] if location.config_dir is not None else []
    argv = [*overrides, *extra]
    roots = config_roots(argv, Path(location.config_path or CONF_DIR))
    check_yaml_files(roots, argv, config_name=location.name, reads=reads)
    check_overrides(overrides, roots)
    check_extras(overrides)


def compose_with(
    hydra: Hydra, location: ConfigLocation, overrides: Sequence[str], search_path: list[Path]
) -> tuple[DictConfig, Sources]:
    """One composition by a Hydra made with :func:`create_hydra` (the caller clears ``GlobalHydra``):
    the config without its ``hydra`` node, and its sources; ``search_path`` names files in errors."""
    sources = Sources(search_path=search_path, overrides=list(overrides), config_name=location.name)
    try:
        cfg = hydra.compose_config(
            location.name, list(overrides), run_mode=RunMode.RUN, with_log_configuration=False
        )
    except (HydraException, OmegaConfBaseException) as exc:
        raise translate_compose_error(exc, sources) from exc
    sources = sources_from_hydra(cfg.hydra)
    sources.overrides = list(overrides)
    with _open(cfg):
        del cfg["hydra"]
    return cfg, sources


def sources_from_hydra(hydra_node: Any, *, primary: Path = CONF_DIR) -> Sources:
    """Sources of a composed config from its ``hydra`` node: group choices, search path, overrides.

    The search path is Hydra's own record of where it looked (``hydra.runtime.config_sources``: the
    primary config path, ``--config-dir``, ``hydra.searchpath`` entries, ``pkg://`` packages).
    """
    choices = {str(k): str(v) for k, v in hydra_node.runtime.choices.items() if v is not None}
    recorded = OmegaConf.select(hydra_node, "runtime.config_sources")
    if recorded:
        search_path = source_dirs(list(recorded))
    else:
        extra = [
            Path(str(p)[len("file://") :]) for p in hydra_node.searchpath if str(p).startswith("file://")
        ]
        search_path = [primary, *extra]
    overrides: list[str] = [str(o) for o in hydra_node.overrides.task]
    name = OmegaConf.select(hydra_node, "job.config_name") or CONFIG_NAME
    launcher = str(OmegaConf.select(hydra_node, "launcher._target_", default="") or "")
    return Sources(choices, search_path, overrides, str(name), launcher=launcher)


@dataclass(frozen=True)
class Selection:
    """What a composing command's overrides select: the search path and the candidate options."""

    search_path: list[Path]
    #: Candidate options chosen (``candidate=a,b``, ``candidate=glob(tp*)``); every one when none is named.
    candidates: list[str]
    #: The overrides other than ``candidate=...``.
    rest: list[str]


def select(location: ConfigLocation, overrides: Sequence[str]) -> Selection:
    """The candidates ``overrides`` select, found on the search path Hydra uses (``-cd``, searchpath)."""
    try:
        hydra = create_hydra(location)
        dirs = search_dirs(hydra, location, overrides)
        every = hydra.config_loader.get_group_options(
            "candidate",
            results_filter=ObjectType.CONFIG,
            config_name=location.name,
            overrides=list(overrides),
        )
        parsed = OverridesParser.create().parse_overrides([o for o in overrides if _key(o) == "candidate"])
    except (HydraException, OmegaConfBaseException) as exc:
        raise translate_compose_error(exc, Sources(overrides=list(overrides))) from exc
    finally:
        GlobalHydra.instance().clear()
    chosen = every
    for override in parsed:
        value = override.value()
        if isinstance(value, Glob):
            chosen = value.filter(every)
        elif override.is_sweep_override():
            chosen = list(override.sweep_string_iterator())
        else:
            chosen = [str(value)]
    rest = [o for o in overrides if _key(o) != "candidate"]
    return Selection(search_path=dirs, candidates=chosen, rest=rest)


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~") if "=" in override else ""


def group_options(
    location: ConfigLocation, overrides: Sequence[str], group: str
) -> list[tuple[str, Path | None]]:
    """Every option of a config group as Hydra lists it (all sources), with the file that holds it."""
    try:
        hydra = create_hydra(location)
        dirs = search_dirs(hydra, location, overrides)
        names = hydra.config_loader.get_group_options(
            group, results_filter=ObjectType.CONFIG, config_name=location.name, overrides=list(overrides)
        )
    except (HydraException, OmegaConfBaseException) as exc:
        raise translate_compose_error(exc, Sources(overrides=list(overrides))) from exc
    finally:
        GlobalHydra.instance().clear()
    sources = Sources(search_path=dirs)
    return [(name, sources.group_file(group, name)) for name in names]


def show(args: argparse.Namespace, *, command: str) -> int:
    """Hydra's informational flags for a composing command (plan, list): the output ``@hydra.main`` gives.

    ``--cfg job|hydra|all`` (with ``--resolve``, ``--package``), ``--info [what]``, ``--help``,
    ``--hydra-help`` and ``--shell-completion``, on the search path the flags name. Mirrors the branches
    of ``hydra._internal.utils._run_hydra``. Returns the exit code.
    """
    location = ConfigLocation.from_args(args)
    overrides = list(args.overrides)
    hydra = create_hydra(location)
    try:
        if args.help:
            hydra.app_help(config_name=location.name, args_parser=hydra_args_parser(), args=args)
        elif args.hydra_help:
            hydra.hydra_help(config_name=location.name, args_parser=hydra_args_parser(), args=args)
        elif args.cfg is not None:
            hydra.show_cfg(
                config_name=location.name,
                overrides=overrides,
                cfg_type=args.cfg,
                package=args.package,
                resolve=args.resolve,
            )
        elif args.shell_completion:
            hydra.shell_completion(config_name=location.name, overrides=overrides)
        elif args.info is not None:
            hydra.show_info(args.info, config_name=location.name, overrides=overrides)
        else:
            raise ValueError(f"{command}: no informational flag given")
    except (HydraException, OmegaConfBaseException) as exc:
        sources = Sources(search_path=search_dirs(hydra, location, overrides), overrides=overrides)
        raise translate_compose_error(exc, sources) from exc
    finally:
        GlobalHydra.instance().clear()
    return 0


def wants_show(args: argparse.Namespace) -> bool:
    """Whether Hydra's flags ask for information instead of running the command (after checking them
    as ``@hydra.main`` does: ``--resolve`` only with ``--cfg`` or ``--help``; one of ``--cfg``, ``--info``,
    ``--shell-completion`` at most)."""
    if args.resolve and args.cfg is None and not args.help:
        raise ConfigError(
            [ConfigProblem("--resolve", "resolve", True, "only together with --cfg or --help (as in Hydra)")]
        )
    shows = (args.cfg is not None) + bool(args.shell_completion) + (args.info is not None)
    if shows > 1:
        raise ConfigError(
            [
                ConfigProblem(
                    "--cfg/--info/--shell-completion", "-", shows, "one of them at most (as in Hydra)"
                )
            ]
        )
    return bool(args.help or args.hydra_help or args.cfg is not None or args.shell_completion) or (
        args.info is not None
    )


def composed_sweeps_dir(location: ConfigLocation, overrides: Sequence[str]) -> Path:
    """``run.sweeps_dir`` of the configuration the flags and overrides compose (where ``latest`` is)."""
    cfg, _ = compose_config(overrides, location=location)
    return Path(str(cfg.run.sweeps_dir))


def recorded_hydra(sweep_dir: Path) -> DictConfig | None:
    """The ``hydra`` node a sweep recorded, or None when the sweep has none (written by an older tool)."""
    for pattern in RECORDED_HYDRA:
        for path in sorted(sweep_dir.glob(pattern)):
            node = OmegaConf.load(path)
            if isinstance(node, DictConfig) and "hydra" in node:
                hydra_node = node.hydra
                assert isinstance(hydra_node, DictConfig)
                return hydra_node
    return None


def recorded_cfg(sweep_dir: Path, cfg_type: str, *, package: str | None = None, resolve: bool = False) -> str:
    """``--cfg job|hydra|all`` of a command that reads a sweep: the configuration the sweep recorded.

    ``job`` is ``config.yaml`` (resolved when it was written), ``hydra`` the recorded ``hydra`` node
    (``multirun.yaml``), ``all`` both; ``--package`` selects a node, ``--resolve`` resolves what still
    resolves (``${now:...}`` of the sweep's start does not, and stays as written).
    """
    job = OmegaConf.load(sweep_dir / CONFIG_FILE)
    full: Any = OmegaConf.create(OmegaConf.to_container(job))
    if cfg_type in ("hydra", "all"):
        hydra_node = recorded_hydra(sweep_dir)
        if hydra_node is None:
            where = str(sweep_dir)
            raise ConfigError(
                [ConfigProblem(where, "hydra", None, f"a recorded {' or '.join(RECORDED_HYDRA)}")]
            )
        full = OmegaConf.merge(full, {"hydra": hydra_node})
    shown: Any = full
    if cfg_type == "job":
        shown = job
    elif cfg_type == "hydra":
        shown = full.hydra
    if package:
        shown = OmegaConf.select(shown, package)
        if shown is None:
            raise ConfigError([ConfigProblem(str(sweep_dir / CONFIG_FILE), package, None, "a recorded node")])
    if not isinstance(shown, DictConfig):
        return f"{shown}\n"
    try:
        body = OmegaConf.to_container(shown, resolve=resolve)
    except OmegaConfBaseException:
        body = OmegaConf.to_container(shown, resolve=False)
    if cfg_type == "hydra" and not package:
        body = {"hydra": body}
    text = OmegaConf.to_yaml(OmegaConf.create(body))
    return f"# @package {package}\n{text}" if package else text


def recorded_info(sweep_dir: Path, what: str) -> str:
    """``--info`` of a command that reads a sweep: where its configuration came from, as recorded."""
    hydra_node = recorded_hydra(sweep_dir)
    lines = [f"sweep: {sweep_dir}", f"recorded configuration: {sweep_dir / CONFIG_FILE}"]
    overrides = sweep_dir / OVERRIDES_FILE
    if overrides.exists():
        lines.append(f"overrides: {' '.join(overrides.read_text().split()) or '(none)'}")
    if hydra_node is None:
        lines.append("no recorded Hydra configuration (multirun.yaml) in this sweep")
        return "\n".join(lines) + "\n"
    runtime = hydra_node.get("runtime", {})
    if what in ("all", "searchpath"):
        lines.append("config search path (as composed):")
        lines.extend(f"  {s.provider:<34} {s.schema}://{s.path}" for s in runtime.get("config_sources", []))
    if what in ("all", "defaults", "defaults-tree"):
        lines.append("group choices:")
        lines.extend(
            f"  {k:<34} {v}" for k, v in runtime.get("choices", {}).items() if not str(k).startswith("hydra/")
        )
    if what in ("all", "plugins"):
        for kind in ("launcher", "sweeper"):
            target = OmegaConf.select(hydra_node, f"{kind}._target_")
            lines.append(f"{kind}: {target}")
    if what in ("all", "config"):
        lines.append("config:")
        lines.append(OmegaConf.to_yaml(OmegaConf.load(sweep_dir / CONFIG_FILE)).rstrip())
    return "\n".join(lines) + "\n"


class _open:
    """Context manager that lifts struct mode on a DictConfig."""

    def __init__(self, cfg: DictConfig) -> None:
        self.cfg = cfg

    def __enter__(self) -> None:
        OmegaConf.set_struct(self.cfg, False)

    def __exit__(self, *exc: object) -> None:
        OmegaConf.set_struct(self.cfg, True)


def to_typed(cfg: DictConfig, sources: Sources | None = None) -> GauntletConfig:
    """Convert the composed DictConfig into plain dataclasses, once, at the entry point; with ``sources``,
    first refuse keys no schema field names (``+service.api_key=...`` would be dropped in silence). A
    secret read through ``${oc.env:...}`` is refused anywhere but in an ``env`` value (:func:`secret_env`)."""
    if sources is not None:
        container = OmegaConf.to_container(cfg, resolve=False)
        problems = unknown_keys(container, sources)
        if problems:
            raise ConfigError(problems)
    problems = secret_problems(cfg, sources)
    if problems:
        raise ConfigError(problems)
    obj = OmegaConf.to_object(cfg)
    if not isinstance(obj, GauntletConfig):
        raise TypeError(f"composed config is {type(obj).__name__}, expected GauntletConfig")
    return obj


def load(
    overrides: Sequence[str] = (), *, config_dir: Path = CONF_DIR, location: ConfigLocation | None = None
) -> tuple[GauntletConfig, Sources]:
    """Compose, type and validate: the one call an entry point needs."""
    cfg, sources = compose_config(overrides, config_dir=config_dir, location=location)
    typed = to_typed(cfg, sources)
    apply_search_defaults(typed, sources)
    validate(typed, sources)
    return typed, sources
