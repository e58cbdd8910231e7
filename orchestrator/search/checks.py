"""A search's own checks (``search=NAME``, conf/search/): one function for ``plan``, ``doctor`` and the sweep.

Pipeline position: right after composition and validation (:mod:`orchestrator.config.validate`, which stays
free of Hydra; a space's expressions are parsed by Hydra's grammar, :mod:`orchestrator.config.space`). The
sweep's opening (:mod:`orchestrator.app.sweeper`), ``plan search=NAME`` (:mod:`orchestrator.plan`) and
``doctor`` (:mod:`orchestrator.doctor`) all call :func:`search_problems`, so a search the sweep would refuse
is refused by ``plan`` and ``doctor`` first, with the same message. Whether ``search.storage`` can be
reached is the environment's question, not the file's: :mod:`.storage`.
"""

from __future__ import annotations

from contracts.errors import COMMAND_LINE, ConfigError, ConfigProblem
from contracts.schema import GauntletConfig
from contracts.search import OBJECTIVES, PRUNERS, SAMPLERS, Space
from orchestrator.config.search_defaults import capacity_profile_problem
from orchestrator.config.space import parse_space
from orchestrator.config.validate import Sources
from orchestrator.search.budget import (
    confirmation_words,
    each_confirmation,
    first_trial_launches,
    smallest_budget,
)
from orchestrator.search.nodes import planned_nodes


def search_problems(
    cfg: GauntletConfig, sources: Sources, *, elsewhere: bool
) -> tuple[Space | None, list[ConfigProblem]]:
    """The search's space (None when it does not parse) and every problem of the search's settings, each
    naming the search's file: the space (:func:`~orchestrator.config.space.parse_space`), the capacity
    profile the screen and the capacity objective measure on, the objective, sampler and pruner, the
    budget (one that starts no trial: :func:`budget_problem`; ``elsewhere``: the launcher runs each trial
    on a node of its own, ``orchestrator.app.controller.jobs_run_elsewhere`` of ``sources.launcher``) and
    the trials measured at once. No search selected: ``(None, [])``."""
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
    if (budget := budget_problem(cfg, sources, elsewhere=elsewhere)) is not None:
        problems.append(budget)
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


def budget_problem(cfg: GauntletConfig, sources: Sources, *, elsewhere: bool) -> ConfigProblem | None:
    """``search.max_launches`` below the smallest budget whose first trial can start beside the launches
    kept for the confirmations (:func:`~orchestrator.search.budget.smallest_budget`, as a new sweep opens:
    no node holds a recent baseline, :func:`~orchestrator.search.nodes.planned_nodes`), or None. Such a
    search would launch nothing and end without a verdict; it is refused before anything starts, naming
    how the smallest is counted."""
    search = cfg.search
    assert search is not None
    nodes = planned_nodes(cfg, elsewhere=elsewhere)
    interleave = cfg.run.interleave
    smallest = smallest_budget(search, interleave=interleave, nodes=nodes)
    if search.max_launches >= smallest:
        return None
    need, each, top = first_trial_launches(nodes), each_confirmation(interleave, nodes), search.confirm_top
    if need > 1:
        why = (
            f"the smallest budget that fits one trial and the confirmations: the trial's launch and its "
            f"node's baseline ({need}; each trial runs on a node of its own, and none holds a recent "
            f"baseline when the sweep opens), and search.confirm_top = {top} confirmation(s) at {each} "
            "launches each "
            f"({confirmation_words(interleave, each)}), kept before the trials: {need} + {top} x {each}"
        )
    else:
        why = (
            f"one trial's launch (the confirmations, search.confirm_top = {top} at {each} launch(es) each: "
            f"{confirmation_words(interleave, each)}, are kept from what the budget holds beyond it; "
            f"{1 + max(0, top) * each} holds one trial and every confirmation)"
        )
    where = sources.describe("search")
    set_by = sources.override_of("search.max_launches")
    origin = f"{COMMAND_LINE} {set_by!r} (the search: {where})" if set_by is not None else where
    return ConfigProblem(origin, "search.max_launches", search.max_launches, f">= {smallest}: {why}")


def checked_space(cfg: GauntletConfig, sources: Sources, *, elsewhere: bool) -> Space:
    """The search's space once :func:`search_problems` found nothing; else a :class:`ConfigError` listing
    every problem (what the sweep, ``plan`` and ``doctor`` refuse alike)."""
    space, problems = search_problems(cfg, sources, elsewhere=elsewhere)
    if problems:
        raise ConfigError(problems)
    assert space is not None  # a space that does not parse is a problem
    return space
