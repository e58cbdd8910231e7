"""What of a search's space cannot start, ruled out before anything starts.

Pipeline position: the search's first step (:class:`orchestrator.search.loop.SearchRun`) and ``plan``
(:mod:`.plan_text`). :func:`prune` removes a layout the host's placement rule refuses and lists each point
whose candidate cannot be encoded (:func:`orchestrator.search.point.encode`), rendered, or whose command
line the installed vLLM (or the simulator) would refuse per doctor's flag table
(:func:`doctor_flag_check`); the search tells such a point as infeasible without launching it. Pure over
its inputs (the flag table is asked once, through injected probes).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from contracts.errors import GauntletError, SpecError
from contracts.pipeline import pipeline_parallel_size
from contracts.placement import placement_problem
from contracts.schema import GauntletConfig
from contracts.search import EXTRA_PREFIX, Space
from contracts.trials import PrunedPoint
from launch.flags import check_args, parse_help, program_part
from launch.preflight import Probes
from launch.spec import LaunchSpec, render_spec
from orchestrator.config.validate import placement_refusal
from orchestrator.search.point import Point, candidate_at, grid

#: Why a rendered command line would be refused (doctor's flag table), or None.
FlagCheck = Callable[[LaunchSpec], str | None]
#: Spaces larger than this are not enumerated to count invalid points (each value is still checked).
ENUMERATE_AT_MOST = 20_000


@dataclass(frozen=True)
class Pruned:
    """A space with what cannot start removed: the layouts kept, the points (or values) ruled out, why."""

    space: Space
    pruned: list[PrunedPoint]
    #: Points of a finite space left to search (None: too large or continuous to list).
    valid: int | None

    def refusal(self, point: Mapping[str, Any]) -> str | None:
        """Why ``point`` was pruned before anything started, or None."""
        for item in self.pruned:
            if all(point.get(k) == v for k, v in item.params.items()):
                return item.why
        return None


def prune(space: Space, cfg: GauntletConfig, flag_check: FlagCheck | None = None) -> Pruned:
    """Rule out what cannot start: a layout the host's placement rule refuses (the value is removed from
    the space), then each point whose candidate cannot be rendered or whose command line ``flag_check``
    refuses (listed; the search tells such a point as infeasible without launching it)."""
    host = cfg.host
    pruned: list[PrunedPoint] = []
    dims = list(space.dimensions)
    for k, dim in enumerate(dims):
        if dim.name != "layout":
            continue
        keep = []
        stages = pipeline_sizes(space, cfg)
        for value in dim.values:
            layout = space.layouts[str(value)]
            tp = int(layout.get("tensor_parallel_size", cfg.baseline.tensor_parallel_size))
            dp = int(layout.get("data_parallel_size", cfg.baseline.data_parallel_size))
            refusals = [
                placement_problem(
                    tp,
                    dp,
                    gpus=host.gpu_count,
                    placement=host.placement,
                    where=host.name,
                    pipeline_parallel_size=pp,
                )
                for pp in stages
            ]  # a layout leaves the space when no pipeline size of it places; a point of it, by its own
            if None in refusals:
                keep.append(value)
            else:
                pruned.append(PrunedPoint(params={"layout": value}, why=f"layout {value}: {refusals[0]}"))
        dims[k] = replace(dim, values=tuple(keep))
    kept = replace(space, dimensions=tuple(dims))
    size = kept.size
    if size is None or size > ENUMERATE_AT_MOST:
        return Pruned(kept, pruned, None)
    valid = 0
    for point in grid(kept):
        why = point_refusal(cfg, kept, point, flag_check)
        if why is None:
            valid += 1
        else:
            pruned.append(PrunedPoint(params=point, why=why))
    return Pruned(kept, pruned, valid)


def pipeline_sizes(space: Space, cfg: GauntletConfig) -> list[int]:
    """The pipeline-parallel sizes a point of ``space`` may run with (:mod:`contracts.pipeline`): the values
    of a field over ``extra_args.pipeline_parallel_size``, else the baseline's own."""
    for dim in space.dimensions:
        flag = dim.name.removeprefix(EXTRA_PREFIX)
        if dim.name.startswith(EXTRA_PREFIX) and pipeline_parallel_size({flag: 2}) == 2:  # vLLM's flag
            if dim.finite:
                return sorted({pipeline_parallel_size({flag: v}) for v in dim.values})
            assert dim.low is not None and dim.high is not None
            return list(range(max(1, int(dim.low)), int(dim.high) + 1))
    return [pipeline_parallel_size(cfg.service.extra_args, cfg.baseline.extra_args)]


def point_refusal(
    cfg: GauntletConfig, space: Space, point: Point, flag_check: FlagCheck | None
) -> str | None:
    """Why one point cannot start (its candidate, its rendering, doctor's flag table), or None."""
    try:
        candidate = candidate_at(cfg.baseline, point, space.layouts, "point")
        spec = render_spec(cfg.service, candidate, cfg.host)
    except (ValueError, SpecError) as exc:
        return str(exc)
    if (placed := placement_refusal(candidate, cfg.host)) is not None:  # TP x PP x DP: a PP flag's GPUs
        return placed
    return flag_check(spec) if flag_check is not None else None


def doctor_flag_check(cfg: GauntletConfig, probes: Probes) -> tuple[FlagCheck | None, str]:
    """doctor's flag table of the host's server program (the simulator's parser, or the installed vLLM's
    ``--help``) as a check of one rendered command line, and a line on what it checks against; no check
    (and why) when the program cannot be asked."""
    host = cfg.host
    program = [w.replace("{model}", cfg.service.model) for w in program_part(host.entrypoint)]
    try:
        if host.kind == "sim":
            text, who = probes.sim_help(), "the simulator's parser"
        else:
            resolved = probes.resolve(program)
            version = probes.version(resolved)
            text, who = probes.help_text(resolved, version), f"vLLM {version or '(version unknown)'}"
    except GauntletError as exc:
        return None, f"flags not checked: {' '.join(program)} could not be asked ({exc.message})"
    table = parse_help(text)
    if not table.flags:
        return None, f"flags not checked: {' '.join(program)} --help lists no flags"

    def check(spec: LaunchSpec) -> str | None:
        problems = check_args(spec.argv[len(program) :], table)
        return f"{problems[0]} ({who}, per doctor's flag table)" if problems else None

    return check, f"flags checked against {who} ({len(table.flags)} option strings)"


def declared_size(pruned: Pruned) -> int | None:
    """Points of the space as declared: those left, and those the removed layouts stood for."""
    size = pruned.space.size
    return None if size is None else size + _layout_pruned(pruned)


def _layout_pruned(pruned: Pruned) -> int:
    """Points the removed layouts stood for (the space as declared counts them)."""
    others = 1
    for dim in pruned.space.dimensions:
        if dim.name != "layout":
            others *= len(dim.values) if dim.finite else 1
    return others * sum(1 for p in pruned.pruned if list(p.params) == ["layout"])
