"""The capacity search in a sweep (fake seams), the capacity gate, summaries.csv and the report's lines."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

import pytest

from contracts.errors import HarnessError
from contracts.files import read_model, write_model
from contracts.layout import CAPACITY_FILE
from contracts.results import (
    CapacityPoint,
    CapacityResult,
    ProfileSummary,
    SloSummary,
    SpecDecodeMetrics,
    Stats,
)
from contracts.schema import GatesConfig, WorkloadConfig
from contracts.sweepdir import Repeat, Results, load_results
from gates.capacity import Capacity, capacity_ratio, judge_capacity
from gates.evidence import Expected, evidence_gaps
from gates.registry import GateContext
from orchestrator.measure.candidate import is_complete, run_candidate
from orchestrator.measure.capacity import level_workload
from orchestrator.servers.context import SweepContext
from report.export import COLUMNS, render_csv, summary_rows
from report.slo import CapacityLine, capacity_text, mean_interval, server_figure_rows
from tests.unit.composed import load
from tests.unit.fakes import FakeLoad, FakeSupervisor, fake_seams, summary

CAPACITY = 37  # the fake server's true capacity (concurrency)
OVERRIDES = [
    "run.repeats=1",
    "run.profiles=[serial]",
    "run.recovery_profiles=[decode_heavy]",
    "capacity.profile=decode_heavy",
    "capacity.start=8",
    "capacity.resolution=0.1",
    "capacity.noise=0",
]


class CapacityLoad(FakeLoad):
    """A fake server whose SLO holds up to CAPACITY requests in flight (margin CAPACITY / concurrency)."""

    def __call__(
        self, base_url: str, served_model: str, workload: WorkloadConfig, **kw: Any
    ) -> ProfileSummary:
        result = super().__call__(base_url, served_model, workload, **kw)
        level = kw.get("load_level")
        load = workload.rate if workload.mode == "open" and workload.rate else workload.concurrency
        margin = CAPACITY / load
        slo = SloSummary(
            name="default",
            percentile=99,
            thresholds={"ttft": 2.0},
            observed={"ttft": 2.0 / margin},
            met=margin >= 1,
            margin=margin,
            good_requests=result.num_requests if margin >= 1 else 0,
            attainment=1.0 if margin >= 1 else 0.0,
            goodput_rps=4.0 if margin >= 1 else 0.0,
            goodput_tps=100.0 * min(workload.concurrency, CAPACITY) if margin >= 1 else 0.0,
        )
        tpot = Stats(n=4, mean=0.01, p50=0.01 * workload.concurrency / 8, p90=None, p99=None)
        result = result.model_copy(update={"slo": slo, "load_level": level, "tpot": tpot})
        write_model(kw["out_dir"] / "summary.json", result)
        return result


def make(tmp_path: Path, *extra: str) -> tuple[SweepContext, CapacityLoad]:
    cfg, _ = load([*OVERRIDES, *extra])
    fake = CapacityLoad()
    return SweepContext.open(cfg, tmp_path / "sweep", fake_seams(FakeSupervisor(), fake, [])), fake


def test_the_sweep_searches_each_candidates_capacity_and_a_lost_result_is_measured_again(
    tmp_path: Path,
) -> None:
    ctx, fake = make(tmp_path)
    run_candidate(ctx, ctx.cfg.baseline, role="baseline")
    result = read_model(ctx.candidate_dir("baseline") / CAPACITY_FILE, CapacityResult)
    assert result.low is not None and result.high is not None
    assert result.low <= CAPACITY < result.high and result.high <= max(result.low + 1, result.low * 1.1)
    assert (result.mode, result.unit, result.gpus) == ("concurrency", "concurrent", 8)
    levels = [c for c in fake.calls if c[1] == "decode_heavy"]
    assert len(levels) == len(result.points) >= 5
    assert is_complete(ctx, "baseline")
    # capacity.json lost: the candidate is incomplete and measured again, search included
    (ctx.candidate_dir("baseline") / CAPACITY_FILE).unlink()
    assert not is_complete(ctx, "baseline")
    again, fake2 = make(tmp_path)
    run_candidate(again, again.cfg.baseline, role="baseline")
    assert read_model(again.candidate_dir("baseline") / CAPACITY_FILE, CapacityResult).low == result.low
    assert [c for c in fake2.calls if c[1] == "decode_heavy"] == levels


def test_the_profiles_own_level_reuses_the_sweeps_repeats(tmp_path: Path) -> None:
    # decode_heavy is configured at 128 in flight with 128 measured requests: one wave of level 128.
    ctx, fake = make(tmp_path, "run.profiles=[decode_heavy]", "capacity.start=128", "capacity.waves=1")
    run_candidate(ctx, ctx.cfg.baseline, role="baseline")
    result = read_model(ctx.candidate_dir("baseline") / CAPACITY_FILE, CapacityResult)
    first = result.points[0]
    assert (first.level, first.summary_file, first.met) == (128, "decode_heavy/r1/summary.json", False)
    assert len([c for c in fake.calls if c[1] == "decode_heavy"]) == len(
        result.points
    )  # 1 profile run + the rest
    assert result.low is not None and result.low <= CAPACITY < (result.high or 0)
    res = load_results(ctx.dir, "candidates/baseline", "baseline")
    rows = [r for r in summary_rows(ctx.dir, {"baseline": res}) if r["source"] == "capacity"]
    assert (
        rows[0]["load_level"] == 128
        and rows[0]["summary_file"] == "candidates/baseline/decode_heavy/r1/summary.json"
    )


def test_an_open_loop_profile_searches_the_request_rate(tmp_path: Path) -> None:
    ctx, _ = make(tmp_path, "capacity.profile=mixed", "capacity.start=1", "capacity.duration_s=2")
    run_candidate(ctx, ctx.cfg.baseline, role="baseline")
    result = read_model(ctx.candidate_dir("baseline") / CAPACITY_FILE, CapacityResult)
    assert (result.mode, result.unit) == ("rate", "req/s")
    assert result.low is not None and result.high is not None
    assert result.low <= CAPACITY < result.high <= result.low * 1.1
    assert all(p.summary_file.startswith("capacity/r") for p in result.points)


def test_no_capacity_search_unless_a_profile_is_named(tmp_path: Path) -> None:
    ctx, fake = make(tmp_path, "capacity.profile=null")
    run_candidate(ctx, ctx.cfg.baseline, role="baseline")
    assert not (ctx.candidate_dir("baseline") / CAPACITY_FILE).exists()
    assert [c[1] for c in fake.calls] == ["serial"]


@pytest.mark.parametrize(
    ("mode", "level", "expected"),
    [("closed", 16, (16, 32, None)), ("closed", 4, (4, 16, None)), ("open", 2.5, (256, 75, 2.5))],
)
def test_level_workloads(mode: str, level: float, expected: tuple[int, int, float | None]) -> None:
    cfg, _ = load(["capacity.waves=2", "capacity.min_requests=16", "capacity.duration_s=30"])
    wl = cfg.workloads["decode_heavy" if mode == "closed" else "mixed"]
    out = level_workload(wl, cfg.capacity, level)
    concurrency, n, rate = expected
    assert (out.concurrency, out.num_requests, out.rate) == (
        concurrency if mode == "closed" else wl.concurrency,
        n,
        rate,
    )
    assert out.warmup_requests == 0 and out.name == wl.name


# --------------------------------------------------------------------------------------------- the gate


def cap(name: str, low: float | None, high: float | None, points: tuple[float, ...] = ()) -> CapacityResult:
    return CapacityResult(
        candidate=name,
        profile="decode_heavy",
        mode="concurrency",
        unit="concurrent",
        slo="default",
        slo_text="TTFT p99 <= 2 s",
        capacity=low,
        low=low,
        high=high,
        resolution=0.1,
        gpus=8,
        points=[
            CapacityPoint(
                level=lv,
                attempt=1,
                summary_file="x",
                met=False,
                margin=0.5,
                attainment=0,
                goodput_rps=0,
                goodput_tps=0,
                output_tps=0,
                tps_per_user=None,
            )
            for lv in points
        ],
    )


@pytest.mark.parametrize(
    ("cand", "base", "ratio", "interval", "status"),
    [
        (cap("c", 16, 19), cap("b", 128, 152), 0.125, (16 / 152, 19 / 128), "fail"),
        (cap("c", 128, 152), cap("b", 128, 152), 1.0, (128 / 152, 152 / 128), "pass"),
        (cap("c", 108, 128), cap("b", 128, 152), 108 / 128, (108 / 152, 1.0), "inconclusive"),
        (cap("c", 64, None), cap("b", 32, 40), 2.0, (64 / 40, math.inf), "pass"),
        (cap("c", None, 2, (2,)), cap("b", 32, 40), 0.0, (0.0, 2 / 32), "fail"),
    ],
)
def test_capacity_ratio_interval_and_rule(
    cand: CapacityResult, base: CapacityResult, ratio: float, interval: tuple[float, float], status: str
) -> None:
    estimate = capacity_ratio(cand, base)
    assert estimate is not None
    assert estimate[0] == pytest.approx(ratio)
    assert estimate[1] == pytest.approx(interval)
    assert judge_capacity(estimate[0], estimate[1], 0.1) == status


def results(name: str, capacity: CapacityResult | None) -> Results:
    return Results(name=name, root=f"candidates/{name}", run=None, capacity=capacity)


def test_the_gate_fails_a_far_lower_capacity_and_is_not_run_without_searches() -> None:
    gate = Capacity()
    ctx = GateContext(
        GatesConfig(), results("baseline", cap("baseline", 128, 152)), results("tp4", cap("tp4", 16, 19))
    )
    out = gate.evaluate(ctx)
    assert out.status == "fail" and out.observed == pytest.approx(0.125)
    assert "16 concurrent vs 128 concurrent, 0.125x" in out.message
    assert [e.file for e in out.evidence] == [
        "candidates/tp4/capacity.json",
        "candidates/baseline/capacity.json",
    ]
    none = gate.evaluate(GateContext(GatesConfig(), results("baseline", None), results("tp4", None)))
    assert none.status == "not_run"
    lost = GateContext(
        GatesConfig(), results("baseline", cap("baseline", None, 2, (2,))), results("t", cap("t", 4, 8))
    )
    # The baseline held the SLO at no level tried: the candidate's 4 is a gain with a one-sided interval.
    one_sided = gate.evaluate(lost)
    assert one_sided.status == "pass" and "the baseline held the SLO at no level tried" in one_sided.message


# --------------------------------------------------------------------------------- csv and report lines


def test_summaries_csv_has_one_row_per_repeat_and_capacity_run_and_numbers_parse(tmp_path: Path) -> None:
    ctx, _ = make(tmp_path)
    run_candidate(ctx, ctx.cfg.baseline, role="baseline")
    res = load_results(ctx.dir, "candidates/baseline", "baseline")
    text = render_csv(summary_rows(ctx.dir, {"baseline": res}))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == list(COLUMNS)
    assert [r["source"] for r in rows].count("profile") == 1
    assert res.capacity is not None and [r["source"] for r in rows].count("capacity") == len(
        res.capacity.points
    )
    numeric = [
        c for c in COLUMNS if c.endswith(("_s", "_tps", "_rps", "tokens")) or c in ("repeat", "duration_s")
    ]
    for row in rows:
        for column in numeric:
            if row[column] != "":
                float(row[column])  # a plain decimal, never "None" or a unit
        assert row["slo_met"] in ("True", "False")
    assert {float(r["load_level"]) for r in rows if r["source"] == "capacity"} == {
        p.level for p in res.capacity.points
    }


def test_mean_interval_is_clipped_to_what_the_quantity_can_be() -> None:
    wide = mean_interval([0.0, 100.0], 0.95)
    assert wide.low == 0.0 and wide.high is not None and wide.high > 100
    assert mean_interval([0.99, 1.0, 1.0], 0.95, ceiling=1.0).high == 1.0
    assert mean_interval([5.0], 0.95).low is None


def test_capacity_text() -> None:
    line = CapacityLine(
        candidate="tp4_dp2",
        profile="decode_heavy",
        unit="concurrent",
        slo="interactive",
        slo_text="",
        capacity=16,
        high=19,
        runs=5,
        goodput_tps=1076,
        tps_per_gpu=134.5,
        tps_per_user=73.6,
        ratio=0.125,
        interval=(0.105, 0.148),
        status="fail",
    )
    assert capacity_text(line, "baseline") == (
        "tp4_dp2: capacity 16 concurrent [16, 19), 0.125x [0.105x-0.148x] of baseline (capacity gate: fail); "
        "at capacity: goodput 1,076 tok/s, 134 tok/s per GPU, 73.6 tok/s per user (5 runs)"
    )


def test_server_figures_average_spec_decode_and_prefix_cache_over_repeats() -> None:
    from contracts.sweepdir import Repeat

    def rep(rate: float, hits: float | None) -> Repeat:
        base = summary("spec", "decode_heavy", 1, "f")
        assert base.server is not None
        spec = SpecDecodeMetrics(
            drafts=10,
            draft_tokens=70,
            accepted_tokens=70 * rate,
            acceptance_rate=rate,
            mean_accepted_length=1 + 7 * rate,
        )
        server = base.server.model_copy(update={"speculative": spec, "prefix_cache_hit_rate": hits})
        return Repeat(base.model_copy(update={"server": server}), [], "s", "r")

    res = Results(
        name="spec",
        root="candidates/spec",
        run=None,
        profiles={"decode_heavy": [rep(0.5, None), rep(0.7, None)]},
    )
    (row,) = server_figure_rows({"spec": res}, ["decode_heavy", "serial"])
    assert row.acceptance_rate == pytest.approx(0.6) and row.mean_accepted_length == pytest.approx(5.2)
    assert row.prefix_cache_hit_rate is None and row.repeats == 2


def test_a_harness_fault_inside_the_search_makes_the_candidate_incomplete_not_the_sweep_end(
    tmp_path: Path,
) -> None:
    # The third capacity level's run fails in the load harness (bad data, a runner bug) before it writes a
    # summary: the search stops there, the launch records the harness fault, and nothing is raised.
    ctx, fake = make(tmp_path)
    levels: list[int] = []

    def broken_third_level(candidate: str, profile: str, repeat: int) -> None:
        if profile == "decode_heavy":  # run.profiles=[serial]: every decode_heavy run is a level
            levels.append(repeat)
            if len(levels) == 3:
                raise HarnessError("load harness fault at the third level")

    fake.before = broken_third_level
    run = run_candidate(ctx, ctx.cfg.baseline, role="baseline")
    assert len(levels) == 3  # the search stopped at the fault
    harness = [e for e in run.watch if e.kind == "harness"]
    assert len(harness) == 1 and "third level" in harness[0].detail
    assert not (ctx.candidate_dir("baseline") / CAPACITY_FILE).exists()  # the search did not finish
    assert not is_complete(ctx, "baseline")  # measured again on resume
    res = load_results(ctx.dir, "candidates/baseline", "baseline")
    gaps = evidence_gaps(res, res, Expected.from_config(ctx.cfg))
    assert {g.kind for g in gaps} >= {"harness", "missing_measurement"}
