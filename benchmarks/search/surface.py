"""The simulator's true surface for the search-quality benchmark: every point's exact capacity at the SLO.

Pipeline position: above :mod:`benchmarks.search.scoring`, under :mod:`benchmarks.search.runner`. A point's
capacity is the capacity profile replayed in virtual time (:func:`launch.sim.replay.replay_closed_loop`) at
whole concurrency levels, doubled from ``min_level`` until the SLO fails and bisected to one request; the
table (:class:`Truth`) is written to a JSON file keyed by what it depends on, so every seed and every later
run reuses it.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from benchmarks.search.scoring import WITHIN, exact_capacity, point_key, point_text, slo_margin, within
from contracts.layout import DEFAULT_SWEEPS_DIR
from contracts.schema import GauntletConfig, SloConfig, WorkloadConfig
from launch.sim.model import EngineConfig, StartupError, check_startup
from launch.sim.profile import Profile
from launch.sim.replay import ReplayRecord, ReplayRequest, replay_closed_loop

#: The brute force's tables, beside the sweeps (ignored by git).
DEFAULT_CACHE = Path(DEFAULT_SWEEPS_DIR) / "search-quality"


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
