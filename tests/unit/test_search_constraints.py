"""A search trial's constraints (orchestrator.measure.trial_constraints) and what Optuna is told of them
(orchestrator.search.study): each gated requirement as a violation size from the screen's runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.results import Stats
from contracts.schema import GatesConfig
from contracts.search import SearchConfig
from contracts.trials import TrialRecord
from orchestrator.config.space import parse_space
from orchestrator.measure.trial import TrialOutcome
from orchestrator.measure.trial_constraints import (
    Requirement,
    broken,
    describe,
    requirements,
    ruling,
    screened,
    size_of,
    violations,
)
from orchestrator.search.rules import trial_record
from orchestrator.search.study import SearchStudy
from tests.unit.fakes import summary

pytestmark = pytest.mark.unit

GATES = GatesConfig(
    latency_tolerance=0.05,
    throughput_tolerance=0.05,
    accepted_profiles=["prefill_10k", "decode_heavy"],
    loaded_profiles=["short", "prefill_10k", "decode_heavy"],
    serial_profile="serial",
)


@pytest.mark.parametrize(
    ("figure", "mine", "theirs", "expected"),
    [
        # lower is better: the limit is 1 + latency_tolerance = 1.05 x the baseline's figure
        ("ttft", 1.18, 1.0, 0.1238),  # the demo's k = 3 REJECT: prefill_10k TTFT 1.18x
        ("e2e", 1.05, 1.0, 0.0),  # exactly at the limit: met
        ("e2e", 0.80, 1.0, -0.2381),  # better than the baseline: met with room
        ("ttft", None, 1.0, 1.0),  # nothing completed: as broken as it gets
        ("ttft", 1.0, None, None),  # the baseline has no figure: not ruled on
        # higher is better: at least 1 - throughput_tolerance = 0.95 x the baseline's tokens/s
        ("tps", 900.0, 1000.0, 0.0556),
        ("tps", 960.0, 1000.0, -0.0104),
        ("tps", 0.0, 1000.0, 1.0),
        # every request of an accepted profile must succeed: the share that failed is the size
        ("failed", 0.0, None, 0.0),
        ("failed", 0.25, 0.0, 0.25),
    ],
)
def test_violation_size_noise_free(
    figure: str, mine: float | None, theirs: float | None, expected: float | None
) -> None:
    size = size_of(figure, mine, theirs, GATES)
    assert (round(size, 4) if size is not None else None) == expected


@pytest.mark.parametrize(
    ("profiles", "expected"),
    [
        (["serial"], ["serial TTFT", "serial latency"]),
        (
            ["serial", "prefill_10k"],
            [
                "serial TTFT",
                "serial latency",
                "prefill_10k TTFT",
                "prefill_10k tokens/s",
                "prefill_10k failed requests",
            ],
        ),
        # an accepted profile that is not loaded: only its requests' success is gated
        (["answer_gate"], []),
        (["short"], ["short TTFT", "short tokens/s"]),
    ],
)
def test_requirements_are_the_gates(profiles: list[str], expected: list[str]) -> None:
    assert [r.name for r in requirements(profiles, GATES)] == expected


def _run(profile: str, *, ttft: float = 0.5, e2e: float = 0.5, tps: float = 1000.0, failed: int = 0):  # type: ignore[no-untyped-def]
    s = summary("c", profile, 1, "f", output_tps=tps)
    return s.model_copy(
        update={
            "ttft": Stats(n=4, mean=ttft, p50=ttft, p90=ttft, p99=ttft),
            "e2e": Stats(n=4, mean=e2e, p50=e2e, p90=e2e, p99=e2e),
            "failed": failed,
            "completed": 4 - failed,
        }
    )


@pytest.mark.parametrize(
    ("cand", "expected_broken"),
    [
        # the demo's k = 3: serial latency 1.18x the baseline's median, prefill TTFT 1.18x; the quiet
        # baseline's noise is the 3% floor (MIN_NOISE): sizes at the refusing bound (REFUSE_WIDTHS widths)
        (
            {"serial": [_run("serial", e2e=0.59)], "prefill_10k": [_run("prefill_10k", ttft=0.59)]},
            {"prefill_10k TTFT": 0.051, "serial latency": 0.051},
        ),
        # within every tolerance: nothing broken
        ({"serial": [_run("serial", e2e=0.51)], "prefill_10k": [_run("prefill_10k", ttft=0.505)]}, {}),
        # one request of four failed under prefill_10k
        (
            {"serial": [_run("serial")], "prefill_10k": [_run("prefill_10k", failed=1)]},
            {"prefill_10k failed requests": 0.25},
        ),
        # slower tokens/s under load beyond 5% (the baseline's runs alike: the 3% floor's band)
        (
            {"serial": [_run("serial")], "prefill_10k": [_run("prefill_10k", tps=800.0)]},
            {"prefill_10k tokens/s": 0.1106},
        ),
    ],
)
def test_violations_against_the_baselines_median(cand: dict, expected_broken: dict[str, float]) -> None:  # type: ignore[type-arg]
    # the baseline's three opening runs, alike: 0.5 s and 1000 tokens/s
    base = {"serial": [_run("serial")] * 3, "prefill_10k": [_run("prefill_10k")] * 3}
    sizes = violations(requirements(["serial", "prefill_10k"], GATES), base, cand, GATES)
    assert len(sizes) == 5  # serial TTFT and latency; prefill TTFT, tokens/s, failed requests
    assert broken(sizes) == dict(sorted(expected_broken.items(), key=lambda kv: -kv[1]))
    for name in expected_broken:
        assert name in describe(sizes)


@pytest.mark.parametrize(
    ("runs", "expected"),
    [
        # no spread: 1.18x beyond the 1.05 limit by at least 5.1% (two widths of 3% noise)
        ([0.5, 0.5, 0.5], 0.051),
        # the baseline's runs lie 0.1 s (20%) from their median, typically: 1.18x is within that noise,
        # not shown either way on one run (its estimate, 1.18 / 1.05)
        ([0.4, 0.5, 0.6], 0.1238),
        # typically 4% off (a 6% sd): 1.18x is within two widths of the limit, its estimate too
        ([0.48, 0.5, 0.52], 0.1238),
        ([0.5, 0.5, 0.7], 0.051),  # one slow run does not widen the band
    ],
)
def test_one_run_is_judged_within_the_baselines_own_spread(runs: list[float], expected: float) -> None:
    base = {"serial": [_run("serial", e2e=v) for v in runs]}
    cand = {"serial": [_run("serial", e2e=0.59)]}
    sizes = violations(requirements(["serial"], GATES), base, cand, GATES)
    assert sizes["serial latency"] == expected


def test_a_requirement_of_a_profile_the_baseline_did_not_run_is_not_ruled_on() -> None:
    reqs = [Requirement("mixed TTFT", "mixed", "ttft")]
    assert violations(reqs, {}, {"mixed": [_run("mixed")]}, GATES) == {}


@pytest.mark.parametrize(
    ("outcome", "constraints"),
    [
        (TrialOutcome(state="infeasible", why="did not start (oom)"), {"starts": 1.0}),
        (
            TrialOutcome(
                state="infeasible",
                why="screen breaks",
                constraints={"serial latency": 0.12, "serial TTFT": -0.1},
            ),
            {"starts": 0.0, "serial latency": 0.12, "serial TTFT": -0.1},
        ),
        (
            TrialOutcome(state="complete", values=[150.0], constraints={"serial latency": -0.02}),
            {"starts": 0.0, "serial latency": -0.02},
        ),
    ],
)
def test_optuna_learns_each_constraint(
    tmp_path: Path, outcome: TrialOutcome, constraints: dict[str, float]
) -> None:
    search = SearchConfig(name="c", space={"max_num_seqs": "choice(32,64)"})
    study = SearchStudy(search, parse_space(search), f"sqlite:///{tmp_path / 'study.db'}")
    asked = study.ask()
    study.tell(asked, outcome)
    frozen = study.study.trials[0]
    assert frozen.constraints == constraints


def test_the_record_keeps_each_violation_size_as_its_constraints_and_reads_old_records() -> None:
    outcome = TrialOutcome(state="infeasible", fidelity="screen", constraints={"serial latency": 0.12})
    assert trial_record(3, "s_t003", {}, outcome, 1.0).constraints == {"serial latency": 0.12}
    old = {"number": 1, "name": "s_t001", "params": {}, "state": "complete"}  # trials.json before constraints
    assert TrialRecord.model_validate(old).constraints == {}


def _ruled(figure: str, base: list[float], cand: list[float], time_scale: float) -> tuple[float, bool]:
    """The serial profile's ``figure`` (``e2e`` or ``ttft``) ruled on: its size to 4 places, and settled."""
    name = {"e2e": "serial latency", "ttft": "serial TTFT"}[figure]

    def runs(values: list[float]):  # type: ignore[no-untyped-def]
        made = [_run("serial", e2e=v) if figure == "e2e" else _run("serial", ttft=v) for v in values]
        return [r.model_copy(update={"time_scale": time_scale}) for r in made]

    ruled = ruling(Requirement(name, "serial", figure), runs(base), runs(cand), GATES)
    assert ruled is not None
    return round(ruled.size, 4), ruled.settled


# The demo's serial latency: the baseline's three opening runs at 1.43 s, a simulator 20x faster than real
# time (a run's noise floor is 3%, MIN_NOISE; the client's 0.2 ms resolution is 4 ms of host time).
DEMO_BASE = [1.43, 1.43, 1.43]


@pytest.mark.parametrize(
    ("base", "time_scale", "cand", "expected", "settled"),
    [
        # well inside the limit (0.84x): met on one run, by the upper bound's margin
        (DEMO_BASE, 20.0, [1.20], -0.1731, True),
        # well outside: the demo's k = 3 (1.72 s, 1.2x, +14.4% beyond on the surface): broken on one run,
        # by its lower bound
        (DEMO_BASE, 20.0, [1.72], 0.0713, True),
        # the same point read 4% low, which the old rule (the resolution taken off the figure, the limit
        # widened) let through: still broken beyond the noise
        (DEMO_BASE, 20.0, [1.651], 0.0283, True),
        # with the baseline's runs 3.5% apart (a 5% sd) it is within two widths: a second run
        ([1.38, 1.43, 1.48], 20.0, [1.651], 0.0996, False),
        # read 8% low (1.105x): within two widths of one run's 3% band: a second run
        (DEMO_BASE, 20.0, [1.58], 0.0523, False),
        # within noise of the limit (1.035x, an acceptable k = 5; or 1.063x): a second run ...
        (DEMO_BASE, 20.0, [1.48], -0.0143, False),
        (DEMO_BASE, 20.0, [1.52], 0.0123, False),
        # ... whose mean (1.028x) is within the limit: met
        (DEMO_BASE, 20.0, [1.48, 1.46], -0.021, True),
        # ... or 1.063x: still within the two runs' noise of the limit: at it, met (0). Two runs cannot
        # tell it from a point 1% inside; the confirmation's repeats decide (the gates' own rule, a mean
        # beyond the limit and worse than the baseline's beyond noise, refused it here before)
        (DEMO_BASE, 20.0, [1.48, 1.56], 0.0, True),
        # ... or 1.09x: at it too (two widths of the two runs' band reach 1.105x) ...
        (DEMO_BASE, 20.0, [1.52, 1.60], 0.0, True),
        # ... and 1.15x beyond them: broken, by that lower bound
        (DEMO_BASE, 20.0, [1.58, 1.72], 0.0418, True),
        # on a real host the same: a latency's noise is at least 3% whatever the time scale
        (DEMO_BASE, 1.0, [1.48], -0.0143, False),
        # 0.91x: met on one run against a quiet baseline ...
        (DEMO_BASE, 20.0, [1.30], -0.1042, True),
        # ... but the baseline's own runs spread 9% (their median absolute deviation as a standard
        # deviation, 13.5%): the band is the spread's, wider than the floor's, and crosses the limit
        ([1.30, 1.43, 1.56], 20.0, [1.30], -0.1342, False),
    ],
)
def test_a_point_is_feasible_only_when_the_screens_evidence_says_so(
    base: list[float], time_scale: float, cand: list[float], expected: float, settled: bool
) -> None:
    assert _ruled("e2e", base, cand, time_scale) == (expected, settled)


# The demo's serial median TTFT: 34.4 ms of host time on the simulator's surface, 1.7 ms of wall time at 20x.
DEMO_TTFT = [0.0344, 0.0344, 0.0344]


@pytest.mark.parametrize(
    ("time_scale", "cand", "expected", "settled"),
    [
        # the layout space's TP1 x DP8 points (serial TTFT 1.447x the baseline's on the surface): broken on
        # one run at 20x (the client's resolution, 4 ms of host time, is 12% of the figure). With a 5 ms
        # resolution (0.1 s of host time, 2.9x the figure) the band was 3.7x wide either way and every
        # such point passed its screen, to be refused by the gates
        (20.0, [0.0498], 0.0869, True),
        (1.0, [0.0498], 0.2894, True),  # on a real host, by more (the 3% floor)
        # 1.10x: within noise of the limit on one run, at 20x and on a real host: a second run
        (20.0, [0.038], 0.052, False),
        (1.0, [0.038], 0.052, False),
        # 1.09x on two runs: at the limit (0) either way ...
        (20.0, [0.038, 0.037], 0.0, True),
        (1.0, [0.038, 0.037], 0.0, True),
        # ... 1.16x: still within the resolution's noise at 20x, beyond it on a real host: refused
        (20.0, [0.040, 0.040], 0.0, True),
        (1.0, [0.040, 0.040], 0.0499, True),
    ],
)
def test_a_serial_ttft_of_tens_of_milliseconds_is_ruled_on_at_the_demos_time_scale(
    time_scale: float, cand: list[float], expected: float, settled: bool
) -> None:
    assert _ruled("ttft", DEMO_TTFT, cand, time_scale) == (expected, settled)


def _timed(profile: str, e2e: float = 1.43, tps: float = 1000.0):  # type: ignore[no-untyped-def]
    return _run(profile, e2e=e2e, ttft=e2e, tps=tps).model_copy(update={"time_scale": 20.0})


@pytest.mark.parametrize(
    ("first", "second", "expected_runs", "expected_broken"),
    [
        # clearly feasible: one run of each profile
        ({"serial": 1.20, "prefill_10k": 1.20}, {}, {"serial": 1, "prefill_10k": 1}, []),
        # clearly broken: one run, refused
        (
            {"serial": 1.72, "prefill_10k": 1.20},
            {},
            {"serial": 1, "prefill_10k": 1},
            ["serial TTFT", "serial latency"],
        ),
        # serial within noise: serial again, prefill_10k not; the second run settles it as met
        (
            {"serial": 1.48, "prefill_10k": 1.20},
            {"serial": 1.46},
            {"serial": 2, "prefill_10k": 1},
            [],
        ),
        # ... or refuses it (1.15x on the two runs)
        (
            {"serial": 1.48, "prefill_10k": 1.20},
            {"serial": 1.80},
            {"serial": 2, "prefill_10k": 1},
            ["serial TTFT", "serial latency"],
        ),
        # serial within noise but prefill_10k clearly broken: refused, no second run (serial's sizes
        # stay its one run's estimates, within the limit)
        ({"serial": 1.48, "prefill_10k": 1.80}, {}, {"serial": 1, "prefill_10k": 1}, ["prefill_10k TTFT"]),
    ],
)
def test_the_screen_runs_a_profile_again_only_within_noise(
    first: dict[str, float],
    second: dict[str, float],
    expected_runs: dict[str, int],
    expected_broken: list[str],
) -> None:
    taken: dict[str, int] = {}

    def run(profile: str, repeat: int):  # type: ignore[no-untyped-def]
        taken[profile] = repeat
        return _timed(profile, e2e=(first if repeat == 1 else second)[profile])

    profiles = ["serial", "prefill_10k"]
    base = {p: [_timed(p)] * 3 for p in profiles}
    sizes = screened(requirements(profiles, GATES), base, profiles, run, GATES)
    assert sizes is not None
    assert taken == expected_runs
    assert sorted(broken(sizes)) == sorted(expected_broken)


def test_a_screen_run_that_did_not_complete_rules_on_nothing() -> None:
    base = {"serial": [_timed("serial")] * 3}
    assert screened(requirements(["serial"], GATES), base, ["serial"], lambda _p, _r: None, GATES) is None
