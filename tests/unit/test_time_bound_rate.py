"""The time bound decides on rate (issue 42, item 6): a candidate's runs its profile's time bound stopped,
where the baseline finished every run in time, are judged by their requests completed per second against
the baseline's, with the throughput tolerance and the throughput comparison's guards (gates/time_bound.py).
A bound hit in a minority of runs is not alone a REJECT; a majority at a rate beyond the tolerance, or a
rate beyond the tolerance and noise, is.

The runs are built in memory: 64 requests a run, the baseline's three runs in about 10 s (6.4 requests/s);
a run the bound stopped completed ``done`` requests within ``limit_s``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from contracts.results import CandidateRun, LoadSettings, StartupRecord
from contracts.schema import GatesConfig, WorkloadConfig
from contracts.sweepdir import Repeat, Results
from gates.concurrency import Concurrency
from gates.registry import GateContext
from gates.time_bound import run_rate
from tests.unit.fakes import summary

N = 64
PROFILE = "decode_heavy"
BASE = (10.0, 10.05, 9.95)  # the baseline's run durations (s): 6.4 requests/s, 0.5% apart


def _run(name: str, repeat: int, *, done: int, duration: float, limit_s: float, stopped: bool) -> Repeat:
    s = summary(name, PROFILE, repeat, "f", n=N)
    settings = LoadSettings(
        base_url="http://127.0.0.1:8000",
        served_model="m",
        salt="s",
        scale=1.0,
        time_scale=1.0,
        prompts_dir=".",
        workload=WorkloadConfig(name=PROFILE, time_limit_s=limit_s, num_requests=N),
    )
    update = {
        "duration_s": duration,
        "completed": done,
        "failed": N - done,
        "errors": {"timeout": N - done} if N - done else {},
        "interrupted": stopped,
        "time_bound": stopped,
        "settings": settings,
    }
    return Repeat(
        summary=s.model_copy(update=update),
        records=[],
        summary_file=f"candidates/{name}/{PROFILE}/r{repeat}/summary.json",
        records_file="",
    )


def _side(name: str, runs: Sequence[float | int], limit_s: float) -> Results:
    """``runs``: a float is a run that finished in that many seconds; an int is a run the bound stopped
    with that many requests completed (its last completion at ``limit_s`` - 1 s)."""
    reps = [
        _run(name, k, done=r, duration=limit_s - 1.0, limit_s=limit_s, stopped=True)
        if isinstance(r, int)
        else _run(name, k, done=N, duration=r, limit_s=limit_s, stopped=False)
        for k, r in enumerate(runs)
    ]
    run = CandidateRun(
        candidate=name,
        fingerprint="f",
        backend="sim",
        host="sim",
        is_baseline=False,
        startup=StartupRecord(ok=True),
    )
    return Results(name, f"candidates/{name}", run, {PROFILE: reps})


# (id, candidate's runs, baseline's runs, limit_s, gate status, words in the message)
CASES = [
    ("one run each, stopped at 0.52x: within 4x", [40], [10.0], 12.0, "inconclusive", "beyond 4x"),
    ("one run each, stopped at 0.1x", [8], [10.0], 12.0, "fail", "r0 did not finish 56 of 64"),
    ("one stopped run against three, 0.52x", [40], list(BASE), 12.0, "inconclusive", "beyond 4x"),
    (
        "a minority stopped at 0.52x, the rest as fast",
        [10.0, 40, 10.02],
        list(BASE),
        12.0,
        "inconclusive",
        "",
    ),
    (
        "a minority stopped at 0.1x is set aside",
        [10.0, 8, 10.02],
        list(BASE),
        12.0,
        "pass",
        "candidate run r1 (0.667 req/s, 0.104x the others' median) set aside as one outlier run",
    ),
    (
        "a majority stopped at 0.52x",
        [40, 40, 10.0],
        list(BASE),
        12.0,
        "fail",
        "the time bound stopped 2 of 3 runs, a majority, at a rate below 0.950x",
    ),
    ("every run stopped at 0.52x", [40, 40, 40], list(BASE), 12.0, "fail", "a majority"),
    (
        "a majority stopped just over the bound, rate within tolerance",
        [63, 63, 10.0],
        list(BASE),
        10.3,
        "pass",
        "",
    ),
    (
        "a minority stopped, the other runs at half the rate: beyond tolerance and noise",
        [20.0, 8, 20.1],
        list(BASE),
        30.0,
        "fail",
        "Holm step",
    ),
]


@pytest.mark.parametrize(
    ("cand", "base", "limit_s", "status", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_the_time_bound_decides_on_rate_and_a_minority_is_not_alone_a_reject(
    cand: list[float | int], base: list[float], limit_s: float, status: str, words: str
) -> None:
    ctx = GateContext(
        GatesConfig(loaded_profiles=[], accepted_profiles=[], throughput_tolerance=0.05),
        _side("baseline", base, limit_s),
        _side("cand", cand, limit_s),
    )
    result = Concurrency().evaluate(ctx)
    (rate,) = [c for c in result.comparisons if c.profile == PROFILE]
    assert (result.status, rate.status) == (status, status), rate.message
    assert rate.metric == "request_rate" and rate.unit == "req/s"
    assert words in rate.message
    assert "the baseline finished each of its" in rate.message


@pytest.mark.parametrize(
    ("done", "duration", "limit_s", "stopped", "rate"),
    [
        pytest.param(64, 10.0, 600.0, False, 6.4, id="ran to its end: completed over its window"),
        pytest.param(44, 50.0, 600.0, True, 44 / 600, id="stopped: completed within the bound"),
        pytest.param(44, 50.0, 20.0, True, 44 / 50, id="never less than its own window"),
    ],
)
def test_a_runs_rate(done: int, duration: float, limit_s: float, stopped: bool, rate: float) -> None:
    rep = _run("c", 0, done=done, duration=duration, limit_s=limit_s, stopped=stopped)
    assert run_rate(rep) == pytest.approx(rate)
