"""Interleaved baseline blocks (ABA): the drift check within the sweep and per node, the gates' sample.

The blocks are written as a sweep writes them (``candidates/<baseline>/blocks/after-<candidate>/``,
:mod:`orchestrator.measure.interleave`); the gates read them through :func:`contracts.sweepdir.load_baseline`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from contracts.layout import RECOVERY_ROOT, block_root
from contracts.schema import GatesConfig
from contracts.sweepdir import load_baseline, load_results
from gates import SweepVerdict, evaluate_sweep
from report.export import summary_rows
from tests.unit.gates_fixtures import lognormal_quantiles, make_records, write_repeat, write_run

CFG = GatesConfig(
    accepted_profiles=["decode_heavy"],
    loaded_profiles=["short", "decode_heavy"],
    bootstrap_resamples=500,
)
TIGHT = (0.40, 0.41, 0.39)


def _repeats(
    sweep: Path,
    root: str,
    name: str,
    profile: str,
    medians: Sequence[float],
    *,
    first: int = 1,
    ttft_only: bool = False,
) -> None:
    """One repeat per median (32 requests around it); output tokens/s moves with the TTFT (a slower
    host is slower in both) unless ``ttft_only``."""
    for k, median in enumerate(medians):
        records = make_records(lognormal_quantiles(median, 0.4, 32, shift=k), output_tokens=512)
        tps = 4000.0 if ttft_only else 4000.0 * 0.40 / median
        write_repeat(sweep, name, profile, first + k, records, output_tps=tps, prompt_tps=1000.0, root=root)


def _sweep(
    sweep: Path,
    *,
    opening: Sequence[float] = TIGHT,
    blocks: Sequence[Sequence[float]] = (),
    recovery: Sequence[float] | None = None,
    block_starts: bool = True,
    baseline: str = "baseline",
    paired: bool = False,
    ttft_only: bool = False,
) -> SweepVerdict:
    """A sweep of one candidate (as good as the baseline) with the baseline's decode_heavy TTFT medians:
    ``opening`` repeats, one block per entry of ``blocks``, the recovery run(s)."""
    base_root = f"candidates/{baseline}"
    write_run(sweep, baseline, is_baseline=True, root=base_root)
    for profile in ("short", "decode_heavy"):
        _repeats(sweep, base_root, baseline, profile, opening if profile == "decode_heavy" else TIGHT)
    # In a parallel sweep the candidate names the node's baseline it was paired with.
    write_run(sweep, "cand", paired_baseline=baseline if paired else None)
    for profile in ("short", "decode_heavy"):
        _repeats(sweep, "candidates/cand", "cand", profile, TIGHT)
    for k, medians in enumerate(blocks):
        root = block_root(base_root, f"c{k}")
        write_run(
            sweep,
            baseline,
            is_baseline=True,
            root=root,
            ok=block_starts,
            kind=None if block_starts else "oom",
            follows=f"c{k}",
        )
        if block_starts:
            _repeats(sweep, root, baseline, "decode_heavy", medians, ttft_only=ttft_only)
    if recovery is not None:
        write_run(sweep, "baseline", root="recovery", is_baseline=True)
        _repeats(sweep, "recovery", "baseline", "decode_heavy", recovery, first=0, ttft_only=ttft_only)
    return evaluate_sweep(sweep, CFG, baseline="baseline")


DRIFT_CASES = [
    # One slow recovery run alone lies outside the prediction interval of three tight repeats: drift, and
    # every verdict is voided. With a block before it, the later side has two runs and its own spread
    # enters the test: within noise, verdicts stand (the ABA fix for heavy-tailed false alarms).
    pytest.param({"recovery": (0.60,)}, "fail", 0, id="one_slow_recovery_run_alone_is_drift"),
    pytest.param(
        {"blocks": [(0.40,)], "recovery": (0.60,)}, "inconclusive", 1, id="with_a_block_it_is_noise"
    ),
    # The host really slowed: block and recovery both far off.
    pytest.param({"blocks": [(0.60,)], "recovery": (0.61,)}, "fail", 1, id="block_and_recovery_slow"),
    pytest.param({"blocks": [(0.40,), (0.41,)], "recovery": (0.40,)}, "pass", 2, id="two_blocks_no_drift"),
    # Without a recovery (the restore did not measure): the blocks alone.
    pytest.param({"blocks": [(0.60,), (0.62,)]}, "fail", 2, id="blocks_alone_drifted"),
    # TTFT alone moved (throughput unchanged): loaded TTFT depends on what the server did before, which
    # differs between the opening and a block; it says "possible drift" but voids nothing.
    pytest.param(
        {"blocks": [(0.60,), (0.62,)], "ttft_only": True}, "inconclusive", 2, id="ttft_alone_does_not_void"
    ),
]


@pytest.mark.parametrize(("layout", "status", "blocks"), DRIFT_CASES)
def test_drift_compares_the_opening_repeats_with_the_blocks_and_the_recovery(
    tmp_path: Path, layout: dict[str, object], status: str, blocks: int
) -> None:
    sweep = _sweep(tmp_path, **layout)  # type: ignore[arg-type]
    drift = sweep.drift
    assert drift.status == status, drift.message
    assert drift.blocks == blocks and drift.baseline == "baseline"
    ttft = next(c for c in drift.comparisons if c.metric == "ttft_p50")
    later = len(layout.get("blocks", [])) + len(layout.get("recovery", ()))  # type: ignore[arg-type]
    assert ttft.n_candidate == later and ttft.n_baseline == 3
    if blocks:
        assert f"{blocks} interleaved baseline block(s)" in drift.message
    verdict = sweep.verdicts[0]
    if status == "fail":  # voided (or inconclusive already: the blocks are in the baseline's sample)
        assert verdict.decision == "inconclusive", verdict.reason
    else:
        assert verdict.decision_before_drift is None, verdict.reason


def test_a_block_that_does_not_start_is_drift(tmp_path: Path) -> None:
    sweep = _sweep(tmp_path, blocks=[(0.40,)], recovery=(0.40,), block_starts=False)
    assert sweep.drift.status == "fail"
    assert "did not start again after c0 (oom" in sweep.drift.message
    assert sweep.verdicts[0].decision == "inconclusive"
    assert sweep.drift.evidence[0].file == "candidates/baseline/blocks/after-c0/run.json"


def test_the_gates_compare_with_the_opening_repeats_only(tmp_path: Path) -> None:
    _sweep(tmp_path, blocks=[(0.42,), (0.43,)], recovery=(0.40,))
    base = load_baseline(tmp_path, "candidates/baseline", "baseline")
    assert len(base.repeats("decode_heavy")) == 3  # the opening repeats
    assert len(base.block_repeats("decode_heavy")) == 2  # one per block, in measuring order
    assert base.block_repeats("short") == []  # blocks measure the recovery profiles only
    sweep = evaluate_sweep(tmp_path, CFG, baseline="baseline")
    conc = next(g for g in sweep.verdicts[0].gates if g.gate == "concurrency")
    decode = next(c for c in conc.comparisons if c.profile == "decode_heavy" and c.metric == "ttft_p50")
    short = next(c for c in conc.comparisons if c.profile == "short" and c.metric == "ttft_p50")
    # An adaptive look saw the opening repeats only: a block measured after it must not change its verdict.
    assert (decode.n_baseline, short.n_baseline) == (3, 3)


@pytest.mark.parametrize(("blocks", "drifted"), [([(0.40,)], False), ([(0.62,), (0.63,)], True)])
def test_a_nodes_blocks_are_checked_against_its_own_opening(
    tmp_path: Path, blocks: list[tuple[float]], drifted: bool
) -> None:
    """A parallel sweep: the candidate is paired with ``baseline@n1``; the node's blocks decide its drift."""
    sweep = _sweep(tmp_path, baseline="baseline@n1", blocks=blocks, paired=True)
    assert sweep.drift.status == "not_run"  # no baseline on the serving host
    [node] = sweep.node_drift
    assert node.baseline == "baseline@n1" and node.blocks == len(blocks)
    assert node.status == ("fail" if drifted else "pass"), node.message
    verdict = sweep.verdicts[0]
    assert verdict.decision == ("inconclusive" if drifted else "neutral"), verdict.reason


def test_summaries_csv_has_every_run_the_drift_check_read(tmp_path: Path) -> None:
    """Opening repeats as ``profile``, each block as ``block`` (after its candidate), the recovery last."""
    _sweep(tmp_path, blocks=[(0.40,), (0.41,)], recovery=(0.40,))
    base = load_baseline(tmp_path, "candidates/baseline", "baseline")
    recovery = load_results(tmp_path, RECOVERY_ROOT, "baseline")
    rows = list(summary_rows(tmp_path, {"baseline": base}, recovery))
    assert [(r["source"], r["profile"]) for r in rows if r["source"] != "profile"] == [
        ("block", "decode_heavy"),
        ("block", "decode_heavy"),
        ("recovery", "decode_heavy"),
    ]
    blocks = [r["summary_file"] for r in rows if r["source"] == "block"]
    assert blocks == [
        "candidates/baseline/blocks/after-c0/decode_heavy/r1/summary.json",
        "candidates/baseline/blocks/after-c1/decode_heavy/r1/summary.json",
    ]
    assert sum(r["source"] == "profile" for r in rows) == 6  # 3 opening repeats of short and decode_heavy
