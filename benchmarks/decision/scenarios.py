"""What the decision-quality benchmark measures: the candidates (scenarios) and the verdict each deserves,
the profiles and the demo mix, and the bars a verdict rate is judged against (on its Wilson interval,
:func:`benchmarks.noise_models.judge_rate`). Pure data and rules: no replay, no file.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from benchmarks.noise_models import RateBar, judge_rate, seeds_to_decide

#: Closed-loop profiles of the case study the in-process replay can drive (mixed is open-loop; the answer
#: gate's reasoning lengths are redrawn with every seed, see docs/gates.md).
PROFILES = ("serial", "short", "prefill_10k", "decode_heavy")
#: The demo mix also runs the answer gate (one repeat per side, as the demo: its prompts are deterministic).
ANSWER_PROFILE = "answer_gate"
SIM_PROFILE = "h100x8_deepseek_v4_flash"


@dataclass(frozen=True)
class CapacityPlan:
    """A scenario's capacity searches (:mod:`benchmarks.decision.capacity_runs`): the candidate's true
    capacity against the baseline's, and the launch-to-launch spread of every launch's capacity."""

    factor: float = 1.0  # candidate capacity / baseline capacity (1.15: a true 15% gain)
    launch_sd: float = 0.03  # sd of the log capacity from launch to launch (issue 42's 3%)


@dataclass(frozen=True)
class Scenario:
    """A candidate and the verdict it deserves; ``required`` = least (or most) count per 20 sweeps."""

    name: str
    speed: float  # --sim-speed of the candidate (the baseline's engine otherwise)
    expected: str  # the verdict it deserves
    #: noise model ("*" = every) -> the least share of sweeps with the expected verdict
    required: dict[str, float] = field(default_factory=dict)
    #: decision -> noise model -> the largest share of sweeps with that verdict
    at_most: dict[str, dict[str, float]] = field(default_factory=dict)
    #: profile -> (clock factor, TTFT-only factor) on the candidate's runs: effects that do not move
    #: every profile together
    effects: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: a capacity search on every launch (baseline, candidate, the baseline's block), None: none
    capacity: CapacityPlan | None = None


ALL = "*"
LOADED_TTFT_30 = {p: (1.0, 1.3) for p in ("short", "prefill_10k", "decode_heavy")}
#: Issue 21's acceptance as shares of the sweeps: identical rejected <= 5% (2/40) and kept <= 2.5%
#: (1/40), 20% regression rejected >= 90% (36/40), 15% gain kept >= 85% (34/40); a serial gain with a
#: loaded loss never kept, judged as kept <= 2.5% (no number of seeds shows "never"). The non-uniform
#: regressions (30% loaded TTFT, 20% at the highest concurrency: several times the 5% tolerances) are held
#: to the uniform 20% regression's bar, and kept no more often than the identical candidate.
NEVER_KEPT = {"keep": {ALL: 0.025}}
SCENARIOS = (
    Scenario("identical", 1.0, "neutral", at_most={"keep": {ALL: 0.025}, "reject": {ALL: 0.05}}),
    Scenario("regression_10", 0.9, "reject", required={"lognormal": 0.85, "student_t": 0.85}),
    Scenario("regression_20", 0.8, "reject", required={ALL: 0.9}),
    Scenario("gain_10", 1 / 0.9, "keep"),
    Scenario("gain_15", 1 / 0.85, "keep", required={ALL: 0.85}),
    Scenario(
        "loaded_ttft_30", 1.0, "reject", required={ALL: 0.9}, at_most=NEVER_KEPT, effects=LOADED_TTFT_30
    ),
    Scenario(
        "high_concurrency_20",
        1.0,
        "reject",
        required={ALL: 0.9},
        at_most=NEVER_KEPT,
        effects={"decode_heavy": (1.25, 1.0)},
    ),
    Scenario(
        "serial_gain_loaded_loss",
        1.0,
        "reject",
        at_most=NEVER_KEPT,
        effects={"serial": (0.85, 1.0), **LOADED_TTFT_30},
    ),
    # Issue 42, item 3: capacity searches with a launch effect (3% from launch to launch, 5% run-to-run
    # margin noise), the latency profiles identical. The identical configuration kept at most 5%, a true
    # 15% capacity gain kept at least 80%; with 5% from launch to launch (the prior assumes 3%) reported.
    Scenario(
        "capacity_identical",
        1.0,
        "neutral",
        at_most={"keep": {ALL: 0.05}, "reject": {ALL: 0.05}},
        capacity=CapacityPlan(1.0),
    ),
    Scenario("capacity_gain_15", 1.0, "keep", required={ALL: 0.8}, capacity=CapacityPlan(1.15)),
    Scenario("capacity_identical_launch_5", 1.0, "neutral", capacity=CapacityPlan(1.0, launch_sd=0.05)),
)
#: The demo's measured candidates (eplb and mega_moe fail to start: no measurement in either mode).
DEMO_MIX = ("spec_probabilistic", "tp4_dp2", "eplb", "mega_moe")


def bars(scenario: Scenario, model: str) -> list[RateBar]:
    """The bars the issue sets this scenario under this noise model (none: its rates are reported)."""
    out: list[RateBar] = []
    need = scenario.required.get(model, scenario.required.get(ALL))
    if need is not None:
        out.append(RateBar(scenario.expected, need, at_least=True))
    for decision, limits in scenario.at_most.items():
        most = limits.get(model, limits.get(ALL))
        if most is not None:
            out.append(RateBar(decision, most, at_least=False))
    return out


def judge_row(row_bars: Sequence[RateBar], decisions: Counter[str], n: int) -> tuple[str, list[str]]:
    """A row's result over its bars (FAIL over UNDECIDED over PASS; ``-`` without a bar) and, per bar, what
    it asks with its result (and, undecided, how many seeds would decide it at the observed rate)."""
    checks: list[str] = []
    results: list[str] = []
    for bar in row_bars:
        result = judge_rate(bar, decisions[bar.decision], n)
        results.append(result)
        more = seeds_to_decide(bar, decisions[bar.decision], n) if result == "UNDECIDED" else None
        checks.append(f"{bar}: {result}" + (f" (~{more} seeds would decide)" if more else ""))
    if not results:
        return "-", ["(reported)"]
    overall = "FAIL" if "FAIL" in results else "UNDECIDED" if "UNDECIDED" in results else "PASS"
    return overall, checks
