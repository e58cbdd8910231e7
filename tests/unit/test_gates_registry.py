"""The gate registry: adding a gate is one class and a decorator; gates.enabled selects."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts.errors import GateError
from contracts.schema import GatesConfig
from gates import REGISTRY, Gate, GateContext, GateResult, evaluate_sweep, register
from tests.unit.gates_fixtures import SweepBuilder, baseline_like

LOADED = ["prefill_10k", "decode_heavy"]


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True)
    baseline_like(b, "baseline")
    b.run("cand")
    baseline_like(b, "cand", ttft_factor=0.85)
    return tmp_path


@pytest.fixture
def kv_gate() -> Iterator[type[Gate]]:
    @register
    class PeakKvCache(Gate):
        """Peak KV cache usage under load stays below 95%."""

        name = "peak_kv_cache"
        requirement = "KV cache headroom"

        def evaluate(self, ctx: GateContext) -> GateResult:
            peaks = [
                rep.summary.server.peak_kv_cache_usage
                for rep in ctx.candidate.repeats("decode_heavy")
                if rep.summary.server is not None
            ]
            worst = max(peaks)
            return GateResult(
                gate=self.name,
                role=self.role,
                status="fail" if worst > 0.4 else "pass",
                observed=worst,
                threshold=0.4,
                message=f"peak KV cache usage {worst:.0%}",
            )

    yield PeakKvCache
    del REGISTRY["peak_kv_cache"]


def test_every_requirement_of_the_issue_is_registered() -> None:
    assert set(REGISTRY) >= {
        "compatibility",
        "latency_gain",
        "concurrency",
        "answer_reliability",
        "answer_accuracy",
        "memory_headroom",
        "stability",
        "cost",
        "spec_acceptance",
    }


def test_a_registered_gate_is_evaluated_and_can_reject(sweep: Path, kv_gate: type[Gate]) -> None:
    verdict = evaluate_sweep(sweep, GatesConfig(loaded_profiles=LOADED), baseline="baseline").verdicts[0]
    assert verdict.decision == "reject"
    assert verdict.failed == ["peak_kv_cache"]
    assert "KV cache headroom: peak KV cache usage 50%" in verdict.reason


@pytest.mark.parametrize(
    ("enabled", "evaluated", "decision"),
    [
        (
            [],
            [
                "compatibility",
                "concurrency",
                "capacity",
                "stability",
                "answer_reliability",
                "answer_accuracy",
                "lm_eval_accuracy",
                "memory_headroom",
                "cost",
                "spec_acceptance",
                "latency_gain",
            ],
            "keep",
        ),
        (["concurrency"], ["compatibility", "concurrency"], "neutral"),  # no gain gate: nothing to keep for
        (["latency_gain"], ["compatibility", "latency_gain"], "keep"),
    ],
)
def test_enabled_selects_gates_and_compatibility_always_runs(
    sweep: Path, enabled: list[str], evaluated: list[str], decision: str
) -> None:
    result = evaluate_sweep(sweep, GatesConfig(loaded_profiles=LOADED, enabled=enabled), baseline="baseline")
    assert [g.gate for g in result.verdicts[0].gates] == evaluated
    assert result.verdicts[0].decision == decision


def test_an_unknown_gate_name_is_a_gate_error(sweep: Path) -> None:
    with pytest.raises(GateError, match="unknown gate\\(s\\): latency_gian") as info:
        evaluate_sweep(sweep, GatesConfig(enabled=["latency_gian"]), baseline="baseline")
    assert info.value.hint is not None and "latency_gain" in info.value.hint


def test_a_name_registered_twice_is_refused() -> None:
    class Clash(Gate):
        name = "concurrency"
        requirement = "clash"

        def evaluate(self, ctx: GateContext) -> GateResult:
            raise AssertionError

    with pytest.raises(GateError, match="registered twice"):
        register(Clash)
