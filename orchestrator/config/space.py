"""A search's space (conf/search/): Hydra's sweep syntax parsed, its points as candidates, the invalid pruned.

Pipeline position: beside the composer, below the sweep. ``search.space`` holds expressions in the syntax
Hydra users know from its sweepers, ``choice(a,b)``, ``range(start,stop,step)``, ``interval(low,high)``,
``tag(log,interval(low,high))``, parsed by Hydra's own override grammar (:func:`parse_space`; the only
Hydra import here). A point is a candidate: the baseline with the point's fields (:func:`candidate_at`),
and, for the launcher, the same as Hydra overrides (:func:`point_overrides`). :func:`prune` rules out,
before anything starts, a layout the host's placement rule refuses and a point whose command line the
installed vLLM (or the simulator) would refuse, per doctor's flag table. Pure over its inputs.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep
from hydra.errors import HydraException

from contracts.errors import ConfigError, ConfigProblem, GauntletError, SpecError
from contracts.layout import SweepPaths, previous_latest
from contracts.results import CandidateRun, read_model
from contracts.schema import CandidateConfig, GauntletConfig, SpeculativeConfig, placement_problem
from contracts.search import (
    LAYOUT_FIELDS,
    SEARCH_FIELDS,
    SPECULATIVE_OFF,
    Dimension,
    SearchConfig,
    Space,
)
from contracts.trials import PrunedPoint
from launch.flags import check_args, parse_help, program_part
from launch.preflight import Probes
from launch.spec import LaunchSpec, render_spec

#: A point of the space: field (dotted for nested ones) -> value.
Point = dict[str, Any]
#: Why a rendered command line would be refused (doctor's flag table), or None.
FlagCheck = Callable[[LaunchSpec], str | None]
#: Spaces larger than this are not enumerated to count invalid points (each value is still checked).
ENUMERATE_AT_MOST = 20_000


def _flatten(space: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in space.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _flatten(value, f"{name}.")
        else:
            yield name, value


def _expression(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_space(search: SearchConfig, *, where: str = "<search>") -> Space:
    """``search.space`` as a :class:`Space`; every problem (unknown field, bad expression, unknown layout,
    empty space) in one :class:`ConfigError` naming the file, the field, the value and what is allowed."""
    parser = OverridesParser.create()
    problems: list[ConfigProblem] = []
    dims: list[Dimension] = []
    fixed: dict[str, Any] = {}
    allowed = f"one of {', '.join(SEARCH_FIELDS)}"
    for name, raw in _flatten(search.space):
        field = f"search.space.{name}"
        if name not in SEARCH_FIELDS:
            problems.append(ConfigProblem(where, field, raw, f"a candidate field a search varies: {allowed}"))
            continue
        try:
            value = parser.parse_override(f"{name}={_expression(raw)}").value()
        except HydraException as exc:
            why = str(exc).splitlines()[0]
            problems.append(
                ConfigProblem(
                    where,
                    field,
                    raw,
                    f"Hydra's sweep syntax: choice(a,b,...), range(start,stop,step), interval(low,high), "
                    f"tag(log,interval(low,high)), or a value ({why})",
                )
            )
            continue
        if isinstance(value, ChoiceSweep):
            values = tuple(value.list)
        elif isinstance(value, RangeSweep):
            if value.start is None or value.stop is None:
                problems.append(ConfigProblem(where, field, raw, "range(start,stop[,step]) with both ends"))
                continue
            step = value.step if value.step is not None else 1
            values = tuple(_range(value.start, value.stop, step))
        elif isinstance(value, IntervalSweep):
            if value.start is None or value.end is None:
                problems.append(ConfigProblem(where, field, raw, "interval(low,high) with both ends"))
                continue
            low, high = float(value.start), float(value.end)
            log = "log" in value.tags
            if not low < high or (log and low <= 0):
                problems.append(
                    ConfigProblem(where, field, raw, "interval(low,high), low < high (low > 0 with log)")
                )
                continue
            dims.append(Dimension(name, low=low, high=high, log=log))
            continue
        else:
            fixed[name] = value
            continue
        if not values:
            problems.append(ConfigProblem(where, field, raw, "at least one value"))
            continue
        dims.append(Dimension(name, values=values))
    for dim in dims:
        if dim.name == "layout":
            for value in dim.values:
                if str(value) not in search.layouts:
                    known = ", ".join(sorted(search.layouts)) or "none defined"
                    problems.append(
                        ConfigProblem(
                            where, "search.space.layout", value, f"a layout of search.layouts: {known}"
                        )
                    )
    for name, layout in search.layouts.items():
        for key in layout:
            if key not in LAYOUT_FIELDS:
                problems.append(
                    ConfigProblem(where, f"search.layouts.{name}.{key}", layout[key], f"{LAYOUT_FIELDS}")
                )
    if not dims and not problems:
        problems.append(
            ConfigProblem(where, "search.space", dict(search.space), "at least one choice, range or interval")
        )
    if problems:
        raise ConfigError(problems)
    return Space(dimensions=tuple(dims), layouts=dict(search.layouts), fixed=fixed)


def _range(start: float, stop: float, step: float) -> Iterator[float | int]:
    """Hydra's range: Python's for integers (stop excluded), the same rule for floats."""
    if all(isinstance(v, int) for v in (start, stop, step)):
        yield from range(int(start), int(stop), int(step))
        return
    count = max(0, math.ceil((stop - start) / step - 1e-9))  # 0.3 / 0.1 is 3.0000000000000004
    for k in range(count):
        yield round(start + k * step, 12)


def grid(space: Space) -> Iterator[Point]:
    """Every point of a finite space, in declaration order (the fixed fields in each)."""
    names = [d.name for d in space.dimensions]
    for values in itertools.product(*(d.values for d in space.dimensions)):
        yield {**space.fixed, **dict(zip(names, values, strict=True))}


def candidate_at(
    baseline: CandidateConfig, point: Mapping[str, Any], layouts: Mapping[str, Mapping[str, Any]], name: str
) -> CandidateConfig:
    """The candidate a point stands for: ``baseline`` with the point's fields, named ``name``.

    Raises ValueError when the point cannot be a candidate (speculative tokens without a method)."""
    changes: dict[str, Any] = {"name": name, "description": _describe(point)}
    spec = baseline.speculative
    for field, value in point.items():
        if field == "layout":
            changes.update(layouts[str(value)])
        elif field == "speculative.method":
            if value == SPECULATIVE_OFF:
                spec = None
            elif spec is None:
                tokens = point.get("speculative.num_speculative_tokens")
                if tokens is None:
                    raise ValueError(f"speculative.method {value} needs speculative.num_speculative_tokens")
                spec = SpeculativeConfig(method=str(value), num_speculative_tokens=int(tokens))
            else:
                spec = replace(spec, method=str(value))
        elif field == "speculative.num_speculative_tokens":
            continue  # applied below, once the method is known
        else:
            changes[field] = value
    tokens = point.get("speculative.num_speculative_tokens")
    if tokens is not None and point.get("speculative.method") != SPECULATIVE_OFF:
        if spec is None:
            raise ValueError("speculative.num_speculative_tokens without a method (the baseline has none)")
        spec = replace(spec, num_speculative_tokens=int(tokens))
    changes["speculative"] = spec
    return replace(baseline, **changes)


def changed_fields(baseline: CandidateConfig, candidate: CandidateConfig) -> list[str]:
    """The candidate fields a point changes from the baseline (``speculative.*`` one by one; name and
    description are not settings). A field the baseline leaves unset and the point sets counts as changed.

    >>> base = CandidateConfig(name="b", max_num_batched_tokens=16384)
    >>> changed_fields(base, replace(base, name="c", max_num_seqs=64, max_num_batched_tokens=16384))
    ['max_num_seqs']
    """

    def flat(c: CandidateConfig) -> dict[str, Any]:
        out = {k: v for k, v in asdict(c).items() if k not in ("name", "description", "speculative")}
        spec = asdict(c.speculative) if c.speculative is not None else {}
        out.update({f"speculative.{k}": v for k, v in spec.items()})
        return out

    before, after = flat(baseline), flat(candidate)
    return [k for k in sorted(before.keys() | after.keys()) if before.get(k) != after.get(k)]


def _spec_off(point: Mapping[str, Any]) -> bool:
    return point.get("speculative.method") == SPECULATIVE_OFF


def _describe(point: Mapping[str, Any]) -> str:
    return "search point: " + ", ".join(f"{k}={v}" for k, v in point.items())


def point_overrides(
    point: Mapping[str, Any], layouts: Mapping[str, Mapping[str, Any]], *, baseline_option: str, name: str
) -> list[str]:
    """The point as Hydra overrides of one job: the baseline's candidate file, renamed, with the point's
    fields (what :func:`candidate_at` builds, composed by Hydra for the launcher)."""
    out = [f"candidate={baseline_option}", f"candidate.name={name}"]
    for field, value in point.items():
        if field == "layout":
            out.extend(f"candidate.{k}={_expression(v)}" for k, v in layouts[str(value)].items())
        elif field == "speculative.method" and value == SPECULATIVE_OFF:
            out.append("candidate.speculative=null")
        elif (
            field == "speculative.num_speculative_tokens"
            and point.get("speculative.method") == SPECULATIVE_OFF
        ):
            continue
        else:
            out.append(f"candidate.{field}={_expression(value)}")
    return out


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
        for value in dim.values:
            layout = space.layouts[str(value)]
            tp = int(layout.get("tensor_parallel_size", cfg.baseline.tensor_parallel_size))
            dp = int(layout.get("data_parallel_size", cfg.baseline.data_parallel_size))
            why = placement_problem(tp, dp, gpus=host.gpu_count, placement=host.placement, where=host.name)
            if why is None:
                keep.append(value)
            else:
                pruned.append(PrunedPoint(params={"layout": value}, why=f"layout {value}: {why}"))
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


def point_refusal(
    cfg: GauntletConfig, space: Space, point: Point, flag_check: FlagCheck | None
) -> str | None:
    """Why one point cannot start (its candidate, its rendering, doctor's flag table), or None."""
    try:
        candidate = candidate_at(cfg.baseline, point, space.layouts, "point")
        spec = render_spec(cfg.service, candidate, cfg.host)
    except (ValueError, SpecError) as exc:
        return str(exc)
    return flag_check(spec) if flag_check is not None else None


def estimated_wall_s(search: SearchConfig, startup_s: float, *, confirm_launches: int = 2) -> float:
    """Server starts the search may cost, in seconds: each launch of the budget and the confirmation's
    (the winner and the baseline's block after it) at ``startup_s``; the load runs come on top."""
    return (search.max_launches + confirm_launches) * startup_s


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


def format_search_plan(
    cfg: GauntletConfig, space: Space, pruned: Pruned, *, flags: str, startup: tuple[float, str]
) -> str:
    """``plan`` with a search selected: the space's size, what was pruned and why, the budget, the
    estimated wall time of its server starts."""
    search = cfg.search
    assert search is not None
    size = space.size
    dims = " x ".join(
        f"{d.name} ({len(d.values)})" if d.finite else f"{d.name} (interval)" for d in space.dimensions
    )
    lines = [
        f"search {search.name}: {size if size is not None else 'a continuous'} point(s): {dims}",
        f"  objective: {search.objective}{' vs serial latency (Pareto front)' if search.pareto else ''}; "
        f"sampler {search.sampler} (seed {search.seed}), pruner {search.pruner}",
    ]
    if pruned.pruned:
        lines.append(f"  pruned before anything starts: {len(pruned.pruned)}")
        for item in pruned.pruned[:12]:
            point = ", ".join(f"{k}={v}" for k, v in item.params.items())
            lines.append(f"    {point}: {item.why}")
        if len(pruned.pruned) > 12:
            lines.append(f"    ... and {len(pruned.pruned) - 12} more (listed in search/trials.json)")
    else:
        lines.append("  pruned before anything starts: none")
    if pruned.valid is not None:
        lines.append(f"  left to search: {pruned.valid} point(s)")
    lines.append(f"  {flags}")
    hours = f", {search.max_gpu_hours:g} GPU-hours" if search.max_gpu_hours is not None else ""
    lines.append(
        f"  budget: {search.max_launches} launches{hours}; stops after {search.stall_trials} trials "
        f"measured fully without a {search.min_improvement:.0%} better estimate"
    )
    startup_s, source = startup
    wall = estimated_wall_s(search, startup_s)
    lines.append(
        f"  estimated wall time of its server starts: {_duration(wall)} ({search.max_launches} + 2 "
        f"confirmation launches at {startup_s:g} s each, from {source}; the load runs come on top)"
    )
    return "\n".join(lines) + "\n"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def startup_estimate(cfg: GauntletConfig, measured: float | None = None) -> tuple[float, str]:
    """Seconds one server start takes on the host, and where the figure comes from: ``measured`` (the
    baseline's last start on this host, from the latest sweep), else the simulator's configured startup,
    else the host's startup bound (``host.startup_timeout_s``: an upper bound)."""
    if measured is not None:
        return measured, "the baseline's start in the latest sweep"
    if cfg.host.kind == "sim":
        args = cfg.host.sim_args
        seconds = float(args.get("sim-startup-s", 1.0)) + float(args.get("sim-slow-start-s", 0.0))
        return seconds, "the simulator's sim-startup-s"
    return cfg.host.startup_timeout_s, "host.startup_timeout_s, an upper bound"


def recorded_startup(cfg: GauntletConfig) -> float | None:
    """The baseline's time to ready in the latest sweep of ``run.sweeps_dir`` on the same host, or None."""
    previous = previous_latest(Path(cfg.run.sweeps_dir))
    if previous is None:
        return None
    path = SweepPaths(previous).candidate(cfg.baseline.name).run_file
    try:
        run = read_model(path, CandidateRun)
    except (GauntletError, OSError):
        return None
    same_host = run.host == cfg.host.name
    return run.startup.time_to_ready_s if same_host and run.startup.ok else None
