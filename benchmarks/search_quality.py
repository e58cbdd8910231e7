"""Search quality (issue 34): how often the search's winner is within 5% of the best capacity, at what cost.

**Brute force, once.** Every point of a search space (``conf/search/<name>.yaml``, composed with the
experiment) is a candidate: the baseline with the point's fields
(:func:`orchestrator.search.point.candidate_at`), rendered to its command line and read back by the
simulator's own parser (:func:`launch.sim.versus.engine_config`). A point the simulator refuses at
startup (:func:`launch.sim.model.check_startup`) or the space's pruning refuses has no capacity. Every
other point gets its exact capacity at the SLO: the capacity profile replayed in virtual time
(:func:`launch.sim.replay.replay_closed_loop`) at whole concurrency levels, doubled from ``min_level``
until the SLO fails and bisected to one request. The table is written to a JSON file keyed by what it
depends on (profile, workload, SLO, capacity settings, space), so every seed and every later run reuses it.

**The search, per seed.** S1's :class:`orchestrator.search.loop.SearchRun` runs as in a sweep (Optuna,
its pruner, its budget and stall rule, its record) with one seam changed: a trial's job is measured
in-process on the same engine model instead of by a launched simulator. A trial starts (or is
infeasible), is screened at the load level (the baseline's capacity, as ``make demo-search`` does), and,
unless the pruner stops it, gets the capacity search of :mod:`orchestrator.measure.capacity_search` with
the experiment's settings; each level's SLO margin is the replay's, times ``exp(N(0, noise))`` (seeded),
because a measured margin is never exact. The winner is judged by its brute-force capacity.

    .venv/bin/python benchmarks/search_quality.py --seeds 10
    .venv/bin/python benchmarks/search_quality.py --truth-only     # the brute force and its best points

Results, command, machine and date: docs/measurements/search-quality.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contracts.layout import DEFAULT_SWEEPS_DIR
from contracts.metrics import percentile
from contracts.schema import GauntletConfig, SloConfig, WorkloadConfig
from contracts.trials import read_search
from launch.sim.model import EngineConfig, StartupError, check_startup
from launch.sim.profile import Profile, load_profile
from launch.sim.replay import ReplayRecord, ReplayRequest, replay_closed_loop
from launch.sim.versus import engine_config
from launch.spec import render_spec
from orchestrator.config.compose import load
from orchestrator.config.space import parse_space
from orchestrator.measure.capacity_search import SearchSettings, search
from orchestrator.measure.trial import SCREEN_STEP, TrialOutcome, screen_estimate
from orchestrator.search.loop import SearchRun
from orchestrator.search.point import candidate_at, grid, point_overrides
from orchestrator.search.prune import Pruned, prune
from orchestrator.search.study import reporter

#: A winner counts as found when its capacity is at least this fraction of the best (issue 34: within 5%).
WITHIN = 0.95
#: The issue's goal: at least this share of seeds within 5%, with at most this share of the space launched.
GOAL_FOUND, GOAL_LAUNCHED = 0.9, 0.25
#: The brute force's tables, beside the sweeps (ignored by git).
DEFAULT_CACHE = Path(DEFAULT_SWEEPS_DIR) / "search-quality"


# ------------------------------------------------------------------------------------------ pure parts


def slo_margin(ttft: Sequence[float], tpot: Sequence[float], e2e: Sequence[float], slo: SloConfig) -> float:
    """The run's SLO margin as the capacity search reads it (docs/capacity.md): the worst
    ``threshold / observed percentile`` over the set thresholds; >= 1 holds; +inf counts as censored.

    >>> slo_margin([0.5, 0.5], [0.02, 0.02], [1.0, 1.0], SloConfig(ttft_s=1.0, tpot_s=0.015))
    0.75
    """
    margins: list[float] = []
    for threshold, values in ((slo.ttft_s, ttft), (slo.tpot_s, tpot), (slo.e2e_s, e2e)):
        if threshold is None:
            continue
        observed = percentile(list(values), slo.percentile)
        if observed is None or math.isinf(observed):
            margins.append(0.0)
        else:
            margins.append(math.inf if observed <= 0 else threshold / observed)
    return min(margins) if margins else math.inf


def exact_capacity(holds: Callable[[int], bool], min_level: int, max_level: int) -> int:
    """The highest whole level at which ``holds`` is true, assuming it holds up to a point and then fails:
    double from ``min_level`` until it fails (or ``max_level``), then bisect to one request. 0 when
    ``min_level`` already fails; ``max_level`` when it holds there.

    >>> exact_capacity(lambda level: level <= 37, 2, 512)
    37
    """
    if not holds(min_level):
        return 0
    low, high = min_level, min(min_level * 2, max_level)
    while holds(high):
        if high >= max_level:
            return max_level
        low, high = high, min(high * 2, max_level)
    while high - low > 1:
        middle = (low + high) // 2
        if holds(middle):
            low = middle
        else:
            high = middle
    return low


def within(value: float | None, best: float, tolerance: float = 1 - WITHIN) -> bool:
    """Whether ``value`` is within ``tolerance`` of ``best`` (a missing value never is).

    >>> within(96, 100), within(94.9, 100), within(None, 100)
    (True, False, False)
    """
    return value is not None and value >= (1 - tolerance) * best


@dataclass(frozen=True)
class SeedRun:
    """One seed's search: its winner (None: nothing measured fully), that point's true capacity, the
    server launches it spent and the distinct configurations it launched."""

    seed: int
    winner: str | None
    winner_point: dict[str, Any] | None
    estimate: float | None
    true_capacity: float | None
    launches: int
    distinct: int
    stopped: str


@dataclass(frozen=True)
class Summary:
    """The runs judged against the brute force."""

    seeds: int
    found: int  # winners within 5% of the best
    best: float
    space_size: int
    mean_launches: float
    max_launches: int
    mean_share: float  # mean launches / space size

    @property
    def goal_met(self) -> bool:
        return self.found >= GOAL_FOUND * self.seeds and self.max_launches <= GOAL_LAUNCHED * self.space_size


def summarize(runs: Sequence[SeedRun], best: float, space_size: int) -> Summary:
    """How many winners are within 5% of ``best``, and the launches spent (mean, most, mean share)."""
    if not runs:
        raise ValueError("no seeds to summarize")
    launches = [r.launches for r in runs]
    mean_launches = sum(launches) / len(runs)
    return Summary(
        seeds=len(runs),
        found=sum(1 for r in runs if within(r.true_capacity, best)),
        best=best,
        space_size=space_size,
        mean_launches=mean_launches,
        max_launches=max(launches),
        mean_share=mean_launches / space_size if space_size else math.nan,
    )


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def render_table(runs: Sequence[SeedRun], summary: Summary) -> str:
    """The runs as a Markdown table, then the summary line against the issue's goal."""
    lines = [
        "| seed | winner | point | search estimate | true capacity | of best | within 5% | launches |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        share = "-" if run.true_capacity is None else f"{run.true_capacity / summary.best:.0%}"
        point = "-" if run.winner_point is None else point_text(run.winner_point)
        mark = "yes" if within(run.true_capacity, summary.best) else "no"
        lines.append(
            f"| {run.seed} | {run.winner or '-'} | {point} | {_num(run.estimate)} | "
            f"{_num(run.true_capacity)} | {share} | {mark} | {run.launches} |"
        )
    goal = "met" if summary.goal_met else "not met"
    lines.append("")
    lines.append(
        f"{summary.found}/{summary.seeds} winners within 5% of the best capacity ({_num(summary.best)}); "
        f"launches: mean {summary.mean_launches:.1f}, most {summary.max_launches} of {summary.space_size} "
        f"configurations ({summary.mean_share:.0%} on average); goal (>= {GOAL_FOUND:.0%} within 5%, "
        f"<= {GOAL_LAUNCHED:.0%} of the space launched): {goal}"
    )
    return "\n".join(lines)


def point_text(point: Mapping[str, Any]) -> str:
    """A point in one short line: its values in the space's order (``tp2_dp4 seqs=128 ...``)."""
    short = {
        "max_num_seqs": "seqs",
        "max_num_batched_tokens": "mbt",
        "gpu_memory_utilization": "gmu",
        "speculative.num_speculative_tokens": "k",
        "speculative.method": "spec",
        "moe_backend": "moe",
    }
    return " ".join(str(v) if k == "layout" else f"{short.get(k, k)}={v}" for k, v in point.items())


def point_key(point: Mapping[str, Any]) -> str:
    return json.dumps(dict(point), sort_keys=True, default=str)


# ------------------------------------------------------------------------ the simulator's true surface


@dataclass(frozen=True)
class Setting:
    """What a point's capacity at the SLO depends on besides the point: the profile, the workload's
    shape, the SLO, the levels' bounds and requests per level (not the capacity search's resolution)."""

    profile: str
    prompt_tokens: int
    output_tokens: int
    ignore_eos: bool
    slo: SloConfig
    min_level: int
    max_level: int
    waves: float
    min_requests: int

    def digest(self) -> str:
        blob = json.dumps(asdict(self), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def setting_of(cfg: GauntletConfig, profile: str) -> Setting:
    """The capacity profile as the replay needs it; fixed lengths only (what the demo's profile is)."""
    cap = cfg.capacity
    if cap.profile is None:
        raise ValueError("the experiment has no capacity.profile: there is no capacity to search")
    wl: WorkloadConfig = cfg.workloads[cap.profile]
    if wl.mode == "open" or wl.prompt_tokens.kind != "fixed" or wl.output_tokens.kind != "fixed":
        raise ValueError(
            f"workload {cap.profile}: the brute force replays a closed loop of fixed lengths; got mode "
            f"{wl.mode}, prompt {wl.prompt_tokens.kind}, output {wl.output_tokens.kind}"
        )
    return Setting(
        profile=profile,
        prompt_tokens=int(wl.prompt_tokens.mean),
        output_tokens=int(wl.output_tokens.mean),
        ignore_eos=bool(wl.ignore_eos),
        slo=cfg.slo,
        min_level=max(1, int(cap.min_level)),
        max_level=int(cap.max_level),
        waves=cap.waves,
        min_requests=cap.min_requests,
    )


def _tpot(record: ReplayRecord) -> float:
    if record.end is None or record.ttft is None:
        return math.inf
    tokens = record.completion_tokens
    return 0.0 if tokens <= 1 else (record.end - record.ttft) / (tokens - 1)


class Surface:
    """The simulator's capacity at the SLO over engine configurations (margins memoised per level)."""

    def __init__(self, setting: Setting, profile: Profile) -> None:
        self.setting, self.profile = setting, profile
        self._margin = lru_cache(maxsize=None)(self._margin_uncached)

    def startup(self, cfg: EngineConfig) -> str | None:
        """Why the simulated engine refuses to start, or None."""
        try:
            check_startup(self.profile, cfg)
        except StartupError as exc:
            return f"{exc.kind}: {exc.log[-1] if exc.log else ''}"[:200]
        return None

    def margin(self, cfg: EngineConfig, level: int) -> float:
        return float(self._margin(cfg, level))

    def _margin_uncached(self, cfg: EngineConfig, level: int) -> float:
        s = self.setting
        n = max(s.min_requests, math.ceil(level * s.waves))
        request = ReplayRequest(
            prompt_tokens=s.prompt_tokens, max_tokens=s.output_tokens, ignore_eos=s.ignore_eos
        )
        result = replay_closed_loop(self.profile, cfg, [request] * n, level)
        records = result.records
        ttft = [r.ttft if r.ttft is not None else math.inf for r in records]
        e2e = [r.end if r.end is not None else math.inf for r in records]
        return slo_margin(ttft, [_tpot(r) for r in records], e2e, s.slo)

    def capacity(self, cfg: EngineConfig) -> int:
        s = self.setting
        return exact_capacity(lambda level: self.margin(cfg, level) >= 1.0, s.min_level, s.max_level)


@dataclass
class Truth:
    """The brute force's table: every point's capacity (None: refused, with why)."""

    setting: str
    space: str
    points: list[dict[str, Any]] = field(default_factory=list)  # {"point", "capacity", "why"}
    seconds: float = 0.0

    def capacity_of(self, point: Mapping[str, Any]) -> float | None:
        key = point_key(point)
        for row in self.points:
            if point_key(row["point"]) == key:
                value = row["capacity"]
                return None if value is None else float(value)
        raise KeyError(f"point {key} is not in the brute force's table")

    @property
    def best(self) -> float:
        values = [float(r["capacity"]) for r in self.points if r["capacity"] is not None]
        if not values:
            raise ValueError("no point of the space starts: there is no best capacity")
        return max(values)


def brute_force(
    points: Iterable[Mapping[str, Any]],
    to_engine: Callable[[Mapping[str, Any]], EngineConfig | str],
    surface: Surface,
    *,
    setting: str,
    space: str,
    say: Callable[[str], None] = lambda _line: None,
) -> Truth:
    """Every point's exact capacity; ``to_engine`` gives its engine settings or why it is refused."""
    truth = Truth(setting=setting, space=space)
    start = time.perf_counter()
    for point in points:
        cfg = to_engine(point)
        why = cfg if isinstance(cfg, str) else surface.startup(cfg)
        capacity = None if why is not None or isinstance(cfg, str) else surface.capacity(cfg)
        truth.points.append({"point": dict(point), "capacity": capacity, "why": why})
        say(f"{point_text(point)}: {capacity if capacity is not None else why}")
    truth.seconds = time.perf_counter() - start
    return truth


def read_truth(path: Path, setting: str, space: str) -> Truth | None:
    """The cached table when it was computed for the same setting and space."""
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    if data.get("setting") != setting or data.get("space") != space:
        return None
    return Truth(**data)


def write_truth(path: Path, truth: Truth) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(truth), indent=1, default=str) + "\n")


def best_points(truth: Truth, tolerance: float = 1 - WITHIN) -> list[dict[str, Any]]:
    """The points within ``tolerance`` of the best, best first."""
    best = truth.best
    rows = [r for r in truth.points if within(r["capacity"], best, tolerance)]
    return sorted(rows, key=lambda r: -float(r["capacity"]))


def best_by_dimension(truth: Truth) -> dict[str, dict[str, float | None]]:
    """For every field and each of its values, the best capacity of any point with that value (None: no
    point with it starts): the surface seen one dimension at a time.

    >>> t = Truth("s", "x", [{"point": {"k": 3}, "capacity": 216, "why": None},
    ...                      {"point": {"k": 7}, "capacity": None, "why": "oom"}])
    >>> best_by_dimension(t)
    {'k': {'3': 216.0, '7': None}}
    """
    out: dict[str, dict[str, float | None]] = {}
    for row in truth.points:
        for name, value in row["point"].items():
            slot = out.setdefault(name, {})
            key = str(value)
            current = slot.get(key)
            capacity = row["capacity"]
            if capacity is not None and (current is None or float(capacity) > current):
                slot[key] = float(capacity)
            else:
                slot.setdefault(key, None)
    return out


# ------------------------------------------------------------------------------------- the experiment


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
    cfg: GauntletConfig, truth: Truth, surface: Surface, *, seed: int, noise: float
) -> Callable[[list[str], Any], Any]:
    """A trial's job measured on the engine model, as ``orchestrator.measure.trial.measure_trial`` measures
    it on a launched simulator: start (or infeasible), one screening run at the ticket's level reported to
    the pruner, then the capacity search with the experiment's settings."""
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

    def job(overrides: list[str], ticket: Any) -> Any:
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
        if reporter(ticket)(SCREEN_STEP, screen):
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
    *,
    seed: int,
    noise: float,
    say: Callable[[str], None],
) -> SeedRun:
    """One search with sampler seed ``seed``, trials measured in-process, the winner judged by the truth."""
    assert cfg.search is not None
    level = baseline_level(cfg, surface, seed=seed, noise=noise)
    seeded = replace(cfg, search=replace(cfg.search, seed=seed, load_level=level))
    assert seeded.search is not None
    with tempfile.TemporaryDirectory(prefix="search-quality-") as tmp:
        sweep = Path(tmp)
        lines: list[str] = []
        run = SearchRun(
            seeded,
            sweep,
            baseline_option="baseline",
            space=parse_space(seeded.search),
            flag_check=None,
            launch_job=in_process_job(seeded, truth, surface, seed=seed, noise=noise),
            say=lines.append,
        )
        run.run()
        record = read_search(sweep)
    assert record is not None
    winner = record.winner
    point = dict(winner.params) if winner is not None else None
    run_ = SeedRun(
        seed=seed,
        winner=winner.name if winner is not None else None,
        winner_point=point,
        estimate=winner.estimate[0] if winner is not None and winner.estimate else None,
        true_capacity=truth.capacity_of(point) if point is not None else None,
        launches=record.launches,
        distinct=record.distinct_launched,
        stopped=record.stopped,
    )
    say(
        f"seed {seed}: level {level:g}, {run_.launches} launches ({record.stopped}); winner "
        f"{point_text(point) if point else '-'}: estimate {_num(run_.estimate)}, "
        f"true {_num(run_.true_capacity)}"
    )
    return run_


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seeds", type=int, default=10, help="search seeds (0..N-1)")
    parser.add_argument("--noise", type=float, default=0.05, help="sd of a measured margin's log noise")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where the brute force is kept")
    parser.add_argument("--truth-only", action="store_true", help="the brute force and its best points only")
    parser.add_argument(
        "overrides", nargs="*", default=["+experiment=demo_search"], help="Hydra overrides (the experiment)"
    )
    args = parser.parse_args(argv)
    cfg = compose(args.overrides)
    if cfg.search is None:
        parser.error("the overrides select no search (add search=NAME)")
    truth, surface = truth_for(cfg, args.cache, say=print)
    started = sum(1 for r in truth.points if r["capacity"] is not None)
    print(f"space: {len(truth.points)} points, {started} start; best capacity {truth.best:g}")
    for row in best_points(truth):
        print(f"  {row['capacity']:>5}  {point_text(row['point'])}")
    for name, values in best_by_dimension(truth).items():
        print(f"  best at each {name}: " + ", ".join(f"{v} -> {_num(c)}" for v, c in values.items()))
    if args.truth_only:
        return 0
    runs = [run_seed(cfg, truth, surface, seed=s, noise=args.noise, say=print) for s in range(args.seeds)]
    summary = summarize(runs, truth.best, len(truth.points))
    print(render_table(runs, summary))
    return 0 if summary.goal_met else 1


if __name__ == "__main__":
    raise SystemExit(main())
