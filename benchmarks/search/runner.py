"""The search-quality benchmark's experiment: the space composed, a trial's job measured in-process on the
simulator's surface, one seed's search run by the product's own loop and judged by the brute force.

Pipeline position: above :mod:`benchmarks.search.surface`; the driver ``benchmarks/search_quality.py``
calls :func:`truth_for` and :func:`run_seed`. S1's :class:`orchestrator.search.loop.SearchRun` runs as in a
sweep (Optuna, its pruner, its budget and stall rule, its record) with one seam changed: a trial's job is
measured in-process on the same engine model instead of by a launched simulator.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from benchmarks.search.constrained import Constrained, baseline_runs, noisy, screen_sizes
from benchmarks.search.goals import Answer, charged, recommended
from benchmarks.search.ladder import prefix
from benchmarks.search.methods import METHODS, GridRun, grid_design
from benchmarks.search.scoring import num, point_key, point_text
from benchmarks.search.surface import Surface, Truth, brute_force, read_truth, setting_of, write_truth
from contracts.schema import GauntletConfig
from contracts.search import Space
from contracts.trials import SearchRecord, read_search
from launch.sim.model import EngineConfig
from launch.sim.profile import load_profile
from launch.sim.versus import engine_config
from launch.spec import render_spec
from orchestrator.config.compose import load
from orchestrator.config.space import parse_space
from orchestrator.measure.capacity_search import SearchSettings, search
from orchestrator.measure.trial import SCREEN_STEP, TrialOutcome, screen_estimate
from orchestrator.measure.trial_constraints import broken, describe
from orchestrator.search.budget import confirmation_launches, kept_launches
from orchestrator.search.loop import SearchRun
from orchestrator.search.point import baseline_point, candidate_at, grid, point_overrides
from orchestrator.search.prune import Pruned, prune
from orchestrator.search.rules import best_trial, is_baseline
from orchestrator.search.study import reporter

#: Where each seed's sweep directory (its record and Optuna's SQLite study) lives: memory when there is a
#: tmpfs (the study's writes are most of a seed's time on a disk), else the system's temporary folder.
SCRATCH = "/dev/shm" if Path("/dev/shm").is_dir() else None


def compose(overrides: Sequence[str]) -> GauntletConfig:
    cfg, _sources = load(list(overrides))
    return cfg


def space_of(cfg: GauntletConfig) -> tuple[list[dict[str, Any]], Pruned]:
    """Every point of the search's space, in declaration order, and the pruning (layouts, flags)."""
    assert cfg.search is not None
    space = parse_space(cfg.search)
    return [dict(p) for p in grid(space)], prune(space, cfg, None)


def engine_of(cfg: GauntletConfig, pruned: Pruned) -> Callable[[Mapping[str, Any]], EngineConfig | str]:
    """A point's engine settings through the product's own path (candidate, launch spec, simulator argv)."""
    assert cfg.search is not None
    layouts = cfg.search.layouts

    def to_engine(point: Mapping[str, Any]) -> EngineConfig | str:
        refused = pruned.refusal(dict(point))
        if refused is not None:
            return f"pruned: {refused}"
        candidate = candidate_at(cfg.candidate, point, layouts, name="point")
        return engine_config(render_spec(cfg.service, candidate, cfg.host))

    return to_engine


def truth_for(cfg: GauntletConfig, cache: Path, *, say: Callable[[str], None]) -> tuple[Truth, Surface]:
    profile_name = str(cfg.host.sim_args.get("sim-profile", "h100x8_deepseek_v4_flash"))
    setting = setting_of(cfg, profile_name)
    points, pruned = space_of(cfg)
    assert cfg.search is not None
    space_id = hashlib.sha256(
        json.dumps(
            [cfg.search.space, cfg.search.layouts, asdict(cfg.candidate)], sort_keys=True, default=str
        ).encode()
    ).hexdigest()[:16]
    surface = Surface(setting, load_profile(profile_name))
    path = cache / f"truth-{cfg.search.name}-{space_id}.json"
    truth = read_truth(path, setting.digest(), space_id)
    if truth is None:
        say(f"brute force: {len(points)} points of search={cfg.search.name} (cached in {path})")
        truth = brute_force(points, engine_of(cfg, pruned), surface, setting=setting.digest(), space=space_id)
        write_truth(path, truth)
        say(f"brute force: {truth.seconds:.0f} s")
    return truth, surface


def in_process_job(
    cfg: GauntletConfig,
    truth: Truth,
    surface: Surface,
    constrained: Constrained,
    *,
    seed: int,
    noise: float,
    ask_pruner: bool = True,
) -> Callable[[list[str], Any], Any]:
    """A trial's job measured on the engine model, as ``orchestrator.measure.trial.measure_trial`` measures
    it on a launched simulator: start (or infeasible), one screening run at the ticket's level, one run of
    each constraint profile (a second where a ruling was within noise) ruled on by the product's rule
    against the baseline's opening runs (a requirement not shown met: infeasible at the screen), the
    pruner asked, then the capacity search with the experiment's settings. Every run's figures are the
    replay's times ``exp(N(0, noise))``, seeded per seed, point, profile and attempt. The accuracy probe
    is not modelled: the simulator's answers do not depend on the speculative settings these spaces vary
    (the demo's launched runs: none broken). ``ask_pruner`` False: every point that meets its constraints
    is measured fully (``benchmarks/search_exhaustive.py``; the ticket then needs only its ``level``)."""
    assert cfg.search is not None
    layouts = cfg.search.layouts
    by_overrides: dict[tuple[str, ...], dict[str, Any]] = {}
    for row in truth.points:
        overrides = point_overrides(
            row["point"], layouts, cfg.candidate, baseline_option="baseline", name="point"
        )
        by_overrides[_job_key(overrides)] = row["point"]
    to_engine = engine_of(cfg, space_of(cfg)[1])
    settings = SearchSettings.from_config(cfg.capacity, integer=True)
    repeats = max(1, cfg.run.repeats)
    base_runs = baseline_runs(constrained, seed=seed, noise=noise, repeats=repeats)  # once per seed

    def job(overrides: list[str], ticket: Any) -> Any:
        if ticket is None:  # a confirmation: not measured here (the answer is judged by the truth)
            return None
        point = by_overrides[_job_key(overrides)]
        engine = to_engine(point)
        assert not isinstance(engine, str), engine  # the search prunes these before launching
        gpus = engine.tensor_parallel_size * engine.data_parallel_size
        why = surface.startup(engine)
        if why is not None:
            startup = why.split(":", 1)[0]  # the startup class, as a launched trial records it
            return TrialOutcome(
                state="infeasible", fidelity="start", why=why, launches=1, gpus=gpus, startup=startup
            )

        def measured(level: float, attempt: int) -> float:
            rng = random.Random(f"{seed}:{point_key(point)}:{level}:{attempt}")
            return surface.margin(engine, int(level)) * math.exp(rng.gauss(0.0, noise))

        level = float(int(ticket.level))
        screen = screen_estimate(level, measured(level, 0))
        outcome = TrialOutcome(state="running", fidelity="screen", screen=screen, launches=1, gpus=gpus)
        row = constrained.row_of(point)
        assert row is not None, point  # it started: the table has its figures

        def mine(profile: str, attempt: int) -> dict[str, float | None]:
            tag = f"{seed}:{point_key(point)}:{profile}" + (f":{attempt}" if attempt else "")
            return noisy(row["figures"][profile], random.Random(tag), noise)

        outcome.constraints = screen_sizes(cfg, mine, base_runs)
        if broken(outcome.constraints):
            outcome.state, outcome.why = (
                "infeasible",
                f"screen breaks a constraint: {describe(outcome.constraints)}",
            )
            return outcome
        if ask_pruner and reporter(ticket)(SCREEN_STEP, screen):
            outcome.state, outcome.values = "pruned", [screen]
            return outcome
        found = search(measured, settings)
        outcome.state, outcome.fidelity, outcome.values = "complete", "full", [found.low or 0.0]
        return outcome

    return job


def _job_key(overrides: Sequence[str]) -> tuple[str, ...]:
    """A job's overrides less the candidate's file and name: the point's fields as the search wrote them."""
    return tuple(o for o in overrides if not o.startswith(("candidate=", "candidate.name=")))


def baseline_level(cfg: GauntletConfig, surface: Surface, *, seed: int, noise: float) -> float:
    """The baseline's capacity as the sweep measures it before the search (the screen's load level)."""
    engine = engine_config(render_spec(cfg.service, cfg.candidate, cfg.host))

    def measured(level: float, attempt: int) -> float:
        rng = random.Random(f"{seed}:baseline:{level}:{attempt}")
        return surface.margin(engine, int(level)) * math.exp(rng.gauss(0.0, noise))

    found = search(measured, SearchSettings.from_config(cfg.capacity, integer=True))
    return float(found.low or cfg.capacity.start)


def run_seed(
    cfg: GauntletConfig,
    truth: Truth,
    surface: Surface,
    constrained: Constrained,
    *,
    seed: int,
    noise: float,
    method: str = "tpe",
    budgets: Sequence[int] = (),
    say: Callable[[str], None] = lambda _line: None,
) -> dict[int, Answer]:
    """One search with seed ``seed`` choosing points by ``method`` (:data:`~benchmarks.search.methods
    .METHODS`) at ``cfg``'s budget, trials measured in-process; its answer at that budget and at each of
    ``budgets`` under it (:func:`benchmarks.search.ladder.prefix`: the same run cut where that budget
    stops it), judged by the constrained truth. A grid's design depends on its budget: it is judged at
    its own only."""
    assert cfg.search is not None
    level = baseline_level(cfg, surface, seed=seed, noise=noise)
    sampler = METHODS[method]
    seeded = replace(cfg, search=replace(cfg.search, seed=seed, load_level=level, sampler=sampler))
    assert seeded.search is not None
    search = seeded.search
    space = parse_space(search)
    each = confirmation_launches(interleave=seeded.run.interleave)
    with tempfile.TemporaryDirectory(prefix="search-quality-", dir=SCRATCH) as tmp:
        sweep = Path(tmp)
        lines: list[str] = []
        common: dict[str, Any] = {
            "baseline_option": "baseline",
            "space": space,
            "flag_check": None,
            "launch_job": in_process_job(seeded, truth, surface, constrained, seed=seed, noise=noise),
            "say": lines.append,
        }
        if method == "grid":
            trials = search.max_launches - kept_launches(search, each)
            run: SearchRun = GridRun(seeded, sweep, design=grid_design(space, trials), **common)
        else:
            run = SearchRun(seeded, sweep, **common)
        run.run()
        record = read_search(sweep)
    assert record is not None
    judged = [search.max_launches] if method == "grid" else sorted({*budgets, search.max_launches})
    out: dict[int, Answer] = {}
    for budget in (b for b in judged if b <= search.max_launches):
        at = replace(search, max_launches=budget)
        cut = prefix(record.trials, budget - kept_launches(at, each))
        short = record.model_copy(
            update={"trials": cut, "launches": sum(t.launches for t in cut), "best_is_baseline": False}
        )
        stopped = record.stopped if len(cut) == len(record.trials) else f"budget spent: {budget}"
        out[budget] = judge(short, run, constrained, space, seeded, seed=seed, each=each, stopped=stopped)
        answer = out[budget]
        say(
            f"{search.name} {method} {budget} seed {seed}: level {level:g}, {answer.launches} launches "
            f"({stopped}); answer {answer.point}: accepted capacity {num(answer.accepted)}; first "
            f"finalist {'refused' if answer.refused else 'accepted'}"
        )
    return out


def judge(
    record: SearchRecord,
    run: SearchRun,
    constrained: Constrained,
    space: Space,
    cfg: GauntletConfig,
    *,
    seed: int,
    each: int,
    stopped: str,
) -> Answer:
    """A search's answer from its trials (``record``), as the run loop's end would give it
    (:meth:`~orchestrator.search.loop.SearchRun._finish`): its finalists, the first round confirmed (the
    best the gates accept recommended), else the baseline's own configuration when the best feasible
    trial is it; charged its trials' launches and that round's."""
    assert cfg.search is not None
    queue = run.ranked(record)
    round_ = [dict(t.params) for t in queue[: max(1, cfg.search.confirm_top)]]
    accepted_each = [constrained.accepted_capacity(p) for p in round_]
    chosen = recommended(accepted_each)
    point: dict[str, Any] | None = None
    if chosen is not None:
        point = round_[chosen]
    elif not queue:
        feasible = record.model_copy(update={"trials": [t for t in record.trials if not t.broken]})
        best = best_trial(feasible, run._changes)
        if best is not None and is_baseline(best, run._changes):
            point = baseline_point(space, cfg.baseline)
    accepted = constrained.accepted_capacity(point) if point is not None else None
    trial_launches, confirms = charged(record.launches, len(queue), cfg.search.confirm_top, each)
    return Answer(
        seed=seed,
        point=point_text(point) if point is not None else "-",
        accepted=accepted,
        refused=bool(accepted_each) and accepted_each[0] is None,
        trial_launches=trial_launches,
        confirm_launches=confirms,
        stopped=stopped,
    )
