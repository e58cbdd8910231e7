"""A space's vLLM flags checked against the installed vLLM before anything starts: refused at plan.

Pipeline position: ``plan search=NAME`` (:mod:`orchestrator.plan`) and the sweep's opening
(:mod:`orchestrator.app.sweeper`), after the space parsed (:mod:`orchestrator.config.space`) and doctor's
flag table was read (:func:`orchestrator.search.prune.doctor_flag_check`). A space may vary any vLLM flag
as ``extra_args.<flag>`` (and the typed ``kv_cache_dtype``); a flag the installed vLLM does not know, or a
value outside the flag's choices, is not a point to prune one by one but a mistake in the search's file:
:func:`flag_problems` names the field, the value and why (the flag, and what the program says of it), so
the sweep is refused before the live service is stopped. Pure over its inputs (the flag table arrives as
a check of one rendered command line).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from contracts.errors import ConfigError, ConfigProblem, SpecError
from contracts.schema import GauntletConfig
from contracts.search import EXTRA_PREFIX, SEARCH_FIELDS, Dimension, Space
from launch.preflight import Probes
from launch.spec import render_spec
from orchestrator.search.point import candidate_at
from orchestrator.search.prune import FlagCheck, doctor_flag_check

#: Typed fields of the space that are one vLLM flag each, checked as the extra flags are.
FLAG_FIELDS = ("kv_cache_dtype",)


def flag_dimension(dim: Dimension) -> bool:
    """Whether ``dim`` varies one vLLM flag whose name or values the installed vLLM may refuse."""
    return dim.name.startswith(EXTRA_PREFIX) or dim.name in FLAG_FIELDS


def _values(dim: Dimension) -> Iterator[Any]:
    """The values that stand for a dimension: a choice's every value, an interval's two bounds."""
    if dim.finite:
        yield from dim.values
        return
    assert dim.low is not None and dim.high is not None
    for bound in (dim.low, dim.high):
        yield int(bound) if dim.integer else bound


def flag_problems(
    cfg: GauntletConfig, space: Space, check: FlagCheck | None, *, where: str
) -> list[ConfigProblem]:
    """Each value of the space's flag fields that cannot start: a flag gauntlet renders from a typed field
    (rendering refuses it), or one the installed program refuses (``check``: doctor's flag table; None:
    the program could not be asked, and only the rendering is checked). One problem per value, naming
    ``search.space.<field>``, the value and what was refused."""
    problems: list[ConfigProblem] = []
    for dim in space.dimensions:
        if not flag_dimension(dim):
            continue
        field = f"search.space.{dim.name}"
        said: set[str] = set()  # an unknown flag is one problem, not one per value
        for value in _values(dim):
            candidate = candidate_at(cfg.baseline, {dim.name: value}, space.layouts, "flag-check")
            try:
                spec = render_spec(cfg.service, candidate, cfg.host)
            except SpecError as exc:
                typed = f"a search varies a typed field by its own name ({', '.join(SEARCH_FIELDS)})"
                problems.append(
                    ConfigProblem(where, field, value, f"a flag gauntlet may pass: {exc.message}; {typed}")
                )
                break  # the flag itself is refused: once, not per value
            why = check(spec) if check is not None else None
            if why is not None and why not in said:
                said.add(why)
                problems.append(ConfigProblem(where, field, value, f"a flag and value it accepts: {why}"))
    return problems


#: What to do about :func:`flag_problems`' problems.
FLAG_HINT = (
    "drop or correct the flag in the search's space (`vllm serve --help` lists the installed vLLM's flags "
    "and their choices); nothing was started or stopped"
)


def refuse_flags(cfg: GauntletConfig, space: Space, probes: Probes, *, where: str) -> None:
    """The sweep's opening: raise ConfigError on :func:`flag_problems` (doctor's flag table is asked only
    when the space varies a flag)."""
    if not any(flag_dimension(d) for d in space.dimensions):
        return
    check, _ = doctor_flag_check(cfg, probes)
    if refused := flag_problems(cfg, space, check, where=where):
        raise ConfigError(refused, hint=FLAG_HINT)
