"""The gates judge the profiles the sweep was asked to run (issue 32, item 18). With
``run.profiles=[serial,decode_heavy]`` every candidate that was not rejected was INCONCLUSIVE: the
stability gate waited for ``prefill_10k`` (in the default ``gates.accepted_profiles``), which the sweep
was told not to run. The judge reads the sweep's own config.yaml, as ``python -m orchestrator judge`` does.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gates.judge import judge
from tests.unit.gates_fixtures import BASELINE, SweepBuilder, sweep_config, write_config


def measured(
    b: SweepBuilder, name: str, profiles: list[str], *, ttft_factor: float, failed: tuple[int, ...]
) -> None:
    """``name``'s serial runs and its loaded ``profiles`` (the case study's baseline, TTFT scaled)."""
    b.serial(name, ttft=0.20 * ttft_factor, e2e=5.0 * ttft_factor)
    for profile in profiles:
        fig = BASELINE[profile]
        b.loaded(
            name,
            profile,
            output_tps=fig["output_tps"],
            prompt_tps=fig["prompt_tps"],
            ttft=fig["ttft"] * ttft_factor,
            failed=failed,
        )


@pytest.mark.parametrize(
    ("failed", "decision", "words"),
    [
        ((), "keep", "decode_heavy: 0/192 failed, 0 preemptions (prefill_10k: not measured in this sweep"),
        ((3,), "reject", "decode_heavy: 3/192 requests failed (http_5xx 3)"),
    ],
    ids=["faster", "failing"],
)
def test_the_stability_gate_judges_the_accepted_profiles_the_sweep_ran(
    tmp_path: Path, failed: tuple[int, ...], decision: str, words: str
) -> None:
    base = sweep_config()
    cfg = dataclasses.replace(base, run=dataclasses.replace(base.run, profiles=["serial", "decode_heavy"]))
    assert "prefill_10k" in cfg.gates.accepted_profiles  # the default the issue ran into
    write_config(tmp_path, cfg)
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True, free_gib=[1.0] * 8)
    measured(b, "baseline", ["decode_heavy"], ttft_factor=1.0, failed=())
    b.run("cand", free_gib=[1.0] * 8)
    measured(b, "cand", ["decode_heavy"], ttft_factor=0.8, failed=failed)
    verdict = judge(tmp_path, cfg).verdicts[0]
    assert verdict.decision == decision, verdict.reason
    stability = next(g for g in verdict.gates if g.gate == "stability")
    assert [c.profile for c in stability.comparisons] == ["decode_heavy"]
    assert words in stability.message
    assert "prefill_10k: not measured for the candidate" not in verdict.reason


def test_no_accepted_profile_run_says_which_and_where(tmp_path: Path) -> None:
    base = sweep_config()
    cfg = dataclasses.replace(base, run=dataclasses.replace(base.run, profiles=["serial"]))
    write_config(tmp_path, cfg)
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True, free_gib=[1.0] * 8)
    b.serial("baseline", ttft=0.20, e2e=5.0)
    b.run("cand", free_gib=[1.0] * 8)
    b.serial("cand", ttft=0.20, e2e=5.0)
    verdict = judge(tmp_path, cfg).verdicts[0]
    stability = next(g for g in verdict.gates if g.gate == "stability")
    assert (stability.status, stability.comparisons) == ("not_run", [])
    assert stability.message == (
        "none of the accepted profiles (prefill_10k, decode_heavy) was measured in this sweep (run.profiles)"
    )
