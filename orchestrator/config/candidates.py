"""Compose the same command line with each of many candidates, the part they share composed once.

Pipeline position: beside :mod:`orchestrator.config.compose`, for ``plan`` (and a search, which composes
thousands). Hydra composes a whole configuration for every candidate: it reads and merges every file of
the tree again (``gauntlet_schema``, the service, the host, the baseline, six workloads, gates, the SLO,
Hydra's own nodes), about 0.2 s of CPU each, while only the ``candidate`` node differs between them.

:class:`CandidateComposer` composes the first candidate with Hydra in full, then each further one whose
candidate files are *plain* (every file of its chain in ``candidate/``: no ``# @package`` header, a
``defaults`` list of ``_self_``, ``/schema/candidate@_here_`` and other options of the group) by merging
only what reaches the ``candidate`` node, in Hydra's order and with Hydra's own merge
(``gauntlet_schema``, the chain's files), and puts that node into the first composition in place of its
own. The rest of the composition cannot differ: the defaults list outside the candidate's chain is the
same for every plain chain, and no file outside it sets ``candidate``. The first candidate is composed
both ways and compared (the whole YAML, the node's type, the typed config, the sources); where the two
differ, or a command-line override sets a ``candidate.*`` value, or a chain is not plain, or the quick
merge raises, the candidate is composed by Hydra in full, so an error reads exactly as Hydra's.
"""

from __future__ import annotations

import re
import types
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.config_repository import CachingConfigRepository, IConfigRepository
from hydra._internal.defaults_list import create_defaults_list
from hydra._internal.hydra import Hydra
from hydra.core.default_element import ResultDefault
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from hydra.plugins.config_source import ConfigResult
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from contracts.errors import ConfigError
from contracts.schema import GauntletConfig
from orchestrator.config.compose import (
    ConfigLocation,
    check_before_composing,
    compose_with,
    create_hydra,
    search_dirs,
    to_typed,
)
from orchestrator.config.compose_errors import translate_compose_error
from orchestrator.config.guard import YamlReads
from orchestrator.config.search_defaults import apply_search_defaults
from orchestrator.config.validate import Sources, placement_refusal, validate

GROUP = "candidate"
#: A ``defaults`` entry of a plain candidate file that names another option of the group.
_OPTION = re.compile(r"^\w[\w-]*$")
_SCHEMA = "/schema/candidate@_here_"
_SCHEMA_PATH = "schema/candidate"
#: A Hydra header line (``# @package ...``): it may move a file's package; such a chain is not plain.
_HEADER = re.compile(r"^\s*#\s*@", re.MULTILINE)


class CandidateComposer:
    """Compose, type and validate ``rest`` with each ``candidate=<option>`` in turn.

    Use as a context manager (it holds one Hydra for all candidates)::

        with CandidateComposer(location, ["host=cpu"]) as composer:
            cfg, sources = composer.load("tp4_dp2")
    """

    def __init__(self, location: ConfigLocation, rest: Sequence[str] = ()) -> None:
        self.location = location
        self.rest = list(rest)
        self.reads = YamlReads()
        self._hydra: Hydra | None = None
        self._search_path: list[Path] = []
        self._shared: _Shared | None = None
        self._tried = False
        #: How many candidates Hydra composed in full, and how many through the shared composition.
        self.full = 0
        self.quick = 0

    def __enter__(self) -> CandidateComposer:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._hydra is not None:
            GlobalHydra.instance().clear()
            self._hydra = None

    def _started(self) -> Hydra:
        if self._hydra is None:
            loc = self.location
            try:
                self._hydra = create_hydra(loc)
                self._search_path = search_dirs(self._hydra, loc, self.rest)
            except (HydraException, OmegaConfBaseException) as exc:  # the search path itself (a bad -cp)
                GlobalHydra.instance().clear()
                self._hydra = None
                raise translate_compose_error(exc, Sources(search_path=[], overrides=self.rest)) from exc
        return self._hydra

    def load(self, option: str) -> tuple[GauntletConfig, Sources]:
        """What :func:`orchestrator.config.compose.load` returns for ``[*rest, "candidate=<option>"]``."""
        typed, sources = self.typed(option)
        apply_search_defaults(typed, sources)
        validate(typed, sources)
        return typed, sources

    def load_fitting(self, option: str) -> tuple[GauntletConfig, Sources] | str:
        """:meth:`load`, or why the host cannot place this candidate (its TP x DP: the placement rule
        validation applies) when it is not the baseline: what ``plan`` and ``doctor`` leave out, saying
        so, when no candidate was named. Any other problem, and the baseline's, is raised as by ``load``."""
        typed, sources = self.typed(option)
        if typed.candidate.name != typed.baseline.name:
            why = placement_refusal(typed.candidate, typed.host)
            if why is not None:
                return why
        apply_search_defaults(typed, sources)
        validate(typed, sources)
        return typed, sources

    def typed(self, option: str) -> tuple[GauntletConfig, Sources]:
        """``[*rest, "candidate=<option>"]`` composed and typed, not yet validated."""
        overrides = [*self.rest, f"{GROUP}={option}"]
        check_before_composing(self.location, overrides, self.reads)
        hydra = self._started()
        if self._shared is not None:
            quick = self._shared.compose(option, overrides)
            if quick is not None:
                self.quick += 1
                return _typed(*quick)
        try:
            cfg, sources = compose_with(hydra, self.location, overrides, self._search_path)
        except (HydraException, OmegaConfBaseException) as exc:
            raise translate_compose_error(exc, Sources(search_path=[], overrides=overrides)) from exc
        self.full += 1
        if self._tried:
            return _typed(cfg, sources)
        self._tried = True
        pristine = OmegaConf.to_yaml(cfg)
        failed: ConfigError | None = None
        try:
            typed, sources = _typed(cfg, sources)
        except ConfigError as exc:
            failed = exc
        self._shared = _Shared.build(
            hydra,
            self,
            option=option,
            overrides=overrides,
            cfg=cfg,
            sources=sources,
            typed=str(failed) if failed is not None else typed,
            pristine=pristine,
        )
        if failed is not None:
            raise failed
        return typed, sources


@dataclass(frozen=True)
class LeftOut:
    """A candidate of the group the host cannot place, left out of an unnamed selection (``plan`` and
    ``doctor`` without ``candidate=``): the option and why (the placement rule's words)."""

    option: str
    why: str


def named_candidates(overrides: Sequence[str]) -> bool:
    """Whether the command line names its candidates (``candidate=a,b``, ``candidate=glob(my_*)``)."""
    return any(o.split("=", 1)[0].lstrip("+~") == "candidate" for o in overrides if "=" in o)


def format_left_out(left_out: Sequence[LeftOut], host: str) -> str:
    """The candidates an unnamed selection left out, one line each (why), and how to check one anyway."""
    if not left_out:
        return ""
    lines = [
        f"not planned: {len(left_out)} candidate(s) of the group that host '{host}' cannot place (no "
        "candidate=... was named; `candidate=NAME` checks one as a sweep would, and refuses it):"
    ]
    lines += [f"  {item.option}: {item.why}" for item in left_out]
    return "\n".join(lines) + "\n"


def _typed(cfg: DictConfig, sources: Sources) -> tuple[GauntletConfig, Sources]:
    """The composition typed (a ``ConfigError`` for a key no schema field names); validated by the caller."""
    return to_typed(cfg, sources), sources


def _is_candidate(package: str | None) -> bool:
    return package == GROUP or (package or "").startswith(f"{GROUP}.")


def _sets_candidate(override: str) -> bool:
    key = override.split("=", 1)[0].lstrip("+~") if "=" in override else override.lstrip("~")
    return _is_candidate(key) or key.startswith(f"{GROUP}@")


@dataclass
class _Shared:
    """The first candidate's composition, whose ``candidate`` node each plain candidate replaces."""

    loader: ConfigLoaderImpl
    #: Hydra's repository of config sources (``hydra.searchpath`` applied), copied fresh per candidate.
    repository: IConfigRepository
    #: The defaults outside the candidate's chain that set ``candidate`` (``gauntlet_schema``), in order.
    before: list[ResultDefault]
    after: list[ResultDefault]
    #: The first composition (without ``hydra``); its ``candidate`` node is replaced in turn.
    template: DictConfig
    sources: Sources
    reads: YamlReads

    @classmethod
    def build(
        cls,
        hydra: Hydra,
        composer: CandidateComposer,
        *,
        option: str,
        overrides: list[str],
        cfg: DictConfig,
        sources: Sources,
        typed: GauntletConfig | str,
        pristine: str,
    ) -> _Shared | None:
        """The shared composition, once its merge of ``option`` proved to give Hydra's ``cfg`` (``pristine``
        as YAML), ``sources`` and ``typed`` (or the error typing it gave); else None."""
        loader = hydra.config_loader
        if any(_sets_candidate(o) for o in composer.rest) or not isinstance(loader, ConfigLoaderImpl):
            return None
        name = composer.location.name
        try:
            parsed, repo = loader._parse_overrides_and_create_caching_repo(name, overrides)
            defaults = create_defaults_list(
                repo=repo, config_name=name, overrides_list=parsed, prepend_hydra=True, skip_missing=False
            ).defaults
            chain = [i for i, d in enumerate(defaults) if _is_candidate(d.package)]
            if not chain or chain != list(range(chain[0], chain[-1] + 1)):
                return None
            if any(defaults[i].package != GROUP for i in chain):
                return None

            def sets_candidate(d: ResultDefault) -> bool:
                if d.package:
                    return False
                loaded = repo.load_config(config_path=str(d.config_path))
                return loaded is not None and isinstance(loaded.config, DictConfig) and GROUP in loaded.config

            shared = cls(
                loader=loader,
                repository=repo.delegate,
                before=[d for d in defaults[: chain[0]] if sets_candidate(d)],
                after=[d for d in defaults[chain[-1] + 1 :] if sets_candidate(d)],
                template=cfg,
                sources=sources,
                reads=composer.reads,
            )
            ours = shared.chain(option)
            if ours is None or _paths(ours) != _paths([defaults[i] for i in chain]):
                return None
            node = cfg[GROUP]
            facts = _facts(node)
            quick = shared.compose(option, overrides)
        except (HydraException, OmegaConfBaseException, ConfigError, ValueError, KeyError):
            return None
        if quick is None:
            return None
        try:
            again: GauntletConfig | str = _typed(*quick)[0]
        except ConfigError as exc:
            again = str(exc)
        same = (
            OmegaConf.to_yaml(quick[0]) == pristine
            and _facts(quick[0][GROUP]) == facts
            and quick[1] == sources
            and again == typed
        )
        return shared if same else None

    def chain(self, option: str) -> list[ResultDefault] | None:
        """The defaults list of ``candidate=<option>``'s chain as Hydra makes it, where the chain is plain."""
        return self._expand(option, parent="config", seen=frozenset())

    def _expand(self, option: str, parent: str, seen: frozenset[str]) -> list[ResultDefault] | None:
        path = self.sources.group_file(GROUP, option)
        if option in seen or path is None or self.reads.problem(path) is not None:
            return None
        if _HEADER.search(self.reads.text(path)):
            return None
        raw = self.reads.raw(path)
        if not isinstance(raw, dict):
            return None
        config_path = f"{GROUP}/{option}"
        entries = raw.get("defaults")
        if "defaults" not in raw or entries == []:
            return [ResultDefault(config_path=config_path, package=GROUP, parent=parent)]
        if not isinstance(entries, list) or entries.count("_self_") != 1:
            return None
        out: list[ResultDefault] = []
        for entry in entries:
            if entry == "_self_":
                out.append(ResultDefault(config_path=config_path, package=GROUP, parent=parent, is_self=True))
            elif entry == _SCHEMA:
                out.append(ResultDefault(config_path=_SCHEMA_PATH, package=GROUP, parent=config_path))
            elif isinstance(entry, str) and _OPTION.match(entry):
                inner = self._expand(entry, config_path, seen | {option})
                if inner is None:
                    return None
                out.extend(inner)
            else:
                return None
        return out

    def compose(self, option: str, overrides: list[str]) -> tuple[DictConfig, Sources] | None:
        """The first composition with ``candidate=<option>``'s node, and its sources; None where the
        chain is not plain or merging it raised (Hydra in full then says why)."""
        chain = self.chain(option)
        if chain is None:
            return None
        repo = _FreshRepository(self.repository)
        try:  # a fresh cache: Hydra's merge takes the loaded nodes themselves into the composition
            part = self.loader._compose_config_from_defaults_list(
                defaults=[*self.before, *chain, *self.after], repo=repo
            )
            self.template[GROUP] = part[GROUP]
        except (HydraException, OmegaConfBaseException, ValueError):
            return None
        choices = dict(self.sources.choices)
        choices[GROUP] = option
        sources = Sources(
            choices=choices,
            search_path=list(self.sources.search_path),
            overrides=list(overrides),
            config_name=self.sources.config_name,
            launcher=self.sources.launcher,
        )
        return self.template, sources


class _FreshRepository(CachingConfigRepository):
    """Hydra's caching repository over sources already set up, with an empty cache: Hydra's own copies
    the whole repository first (12 ms), to shield it from ``initialize_sources``, which is not called."""

    def __init__(self, delegate: IConfigRepository) -> None:
        self.delegate = delegate
        self.cache: dict[str, ConfigResult | None] = {}


def _paths(defaults: Sequence[ResultDefault]) -> list[tuple[str | None, str | None]]:
    return [(d.config_path, d.package) for d in defaults]


def _facts(node: object) -> object:
    """What YAML does not show of a node: its type, its annotation, its flags."""
    meta = getattr(node, "_metadata", types.SimpleNamespace())
    return (
        OmegaConf.get_type(node) if isinstance(node, DictConfig) else type(node),
        getattr(meta, "ref_type", None),
        getattr(meta, "optional", None),
        getattr(meta, "object_type", None),
        dict(getattr(meta, "flags", None) or {}),
    )
