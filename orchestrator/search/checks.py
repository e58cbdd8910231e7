"""A search's own checks (``search=NAME``, conf/search/): one function for ``plan``, ``doctor`` and the sweep.

Pipeline position: right after composition and validation (:mod:`orchestrator.config.validate`, which stays
free of Hydra; a space's expressions are parsed by Hydra's grammar, :mod:`orchestrator.config.space`). The
sweep's opening (:mod:`orchestrator.app.sweeper`), ``plan search=NAME`` (:mod:`orchestrator.plan`) and
``doctor`` (:mod:`orchestrator.doctor`) all call :func:`search_problems`, so a search the sweep would refuse
is refused by ``plan`` and ``doctor`` first, with the same message. Whether ``search.storage`` can be
reached is the environment's question, not the file's: :mod:`.storage`.
"""

from __future__ import annotations

from contracts.errors import ConfigError, ConfigProblem
from contracts.schema import GauntletConfig
from contracts.search import OBJECTIVES, PRUNERS, SAMPLERS, Space
from orchestrator.config.search_defaults import capacity_profile_problem
from orchestrator.config.space import parse_space
from orchestrator.config.validate import Sources


def search_problems(cfg: GauntletConfig, sources: Sources) -> tuple[Space | None, list[ConfigProblem]]:
    """The search's space (None when it does not parse) and every problem of the search's settings, each
    naming the search's file: the space (:func:`~orchestrator.config.space.parse_space`), the capacity
    profile the screen and the capacity objective measure on, the objective, sampler and pruner, the
    budget and the trials measured at once. No search selected: ``(None, [])``."""
    search = cfg.search
    if search is None:
        return None, []
    where = sources.describe("search")
    problems: list[ConfigProblem] = []
    space: Space | None = None
    try:
        space = parse_space(search, where=where)
    except ConfigError as exc:
        problems.extend(exc.problems)
    if cfg.capacity.profile is None:
        problems.append(capacity_profile_problem(cfg, where))
    if search.objective not in OBJECTIVES:
        problems.append(ConfigProblem(where, "search.objective", search.objective, f"one of {OBJECTIVES}"))
    if search.sampler not in SAMPLERS:
        problems.append(ConfigProblem(where, "search.sampler", search.sampler, f"one of {SAMPLERS}"))
    if search.pruner not in PRUNERS:
        problems.append(ConfigProblem(where, "search.pruner", search.pruner, f"one of {PRUNERS}"))
    if search.max_launches < 1:
        problems.append(ConfigProblem(where, "search.max_launches", search.max_launches, ">= 1"))
    if search.objective == "usd_per_mtok_at_slo" and cfg.host.gpu_hour_price is None:
        problems.append(
            ConfigProblem(
                where, "host.gpu_hour_price", None, "a price ($ per GPU-hour): the objective is $/Mtok"
            )
        )
    if search.confirm_top < 1:
        problems.append(ConfigProblem(where, "search.confirm_top", search.confirm_top, ">= 1"))
    if search.parallel < 1:
        problems.append(ConfigProblem(where, "search.parallel", search.parallel, ">= 1"))
    return space, problems


def checked_space(cfg: GauntletConfig, sources: Sources) -> Space:
    """The search's space once :func:`search_problems` found nothing; else a :class:`ConfigError` listing
    every problem (what the sweep, ``plan`` and ``doctor`` refuse alike)."""
    space, problems = search_problems(cfg, sources)
    if problems:
        raise ConfigError(problems)
    assert space is not None  # a space that does not parse is a problem
    return space
