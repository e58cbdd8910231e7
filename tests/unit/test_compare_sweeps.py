"""``compare OLD NEW``: the same candidates across two sweeps, judged with the gates' intervals; a sweep
against itself changes nothing, a candidate made slower is found; and ``status --json``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from contracts.schema import GauntletConfig
from gates.across import compare_sweeps, main, render
from orchestrator.__main__ import main as cli
from tests.unit.gates_fixtures import SweepBuilder, baseline_like, sweep_config, with_faster, write_config


@pytest.fixture(scope="module")
def cfg() -> GauntletConfig:
    return sweep_config()


def sweep(root: Path, cfg: GauntletConfig, *, ttft_factor: float = 0.8, tps_factor: float = 1.0) -> Path:
    """The baseline and ``faster`` (TTFT x ``ttft_factor``, tokens/s x ``tps_factor``), with a config."""
    b = SweepBuilder(root)
    b.run("baseline", is_baseline=True, free_gib=[1.0] * 8)
    baseline_like(b, "baseline")
    b.run("faster", free_gib=[1.0] * 8)
    baseline_like(b, "faster", ttft_factor=ttft_factor, tps_factor=tps_factor)
    write_config(root, cfg)
    return root


def test_a_sweep_against_itself_changes_nothing(tmp_path: Path, cfg: GauntletConfig) -> None:
    old = sweep(tmp_path / "a", cfg)
    result = compare_sweeps(old, old)
    assert not result.changed
    assert [(p.new, p.status) for p in result.pairs] == [("baseline", "same"), ("faster", "same")]
    assert all(c.ratio == pytest.approx(1.0) for p in result.pairs for c in p.comparisons)
    assert render(result).endswith("result: nothing changed beyond noise\n")


def test_a_candidate_made_slower_is_found(tmp_path: Path, cfg: GauntletConfig) -> None:
    old = sweep(tmp_path / "a", cfg)
    new = sweep(
        tmp_path / "b", cfg, ttft_factor=0.8 * 1.5, tps_factor=0.7
    )  # 50% slower TTFT, 30% fewer tok/s
    result = compare_sweeps(old, new)
    by_name = {p.new: p for p in result.pairs}
    assert by_name["baseline"].status == "same"
    assert by_name["faster"].status == "changed"
    changed = {(c.metric, c.profile) for c in by_name["faster"].comparisons if c.status == "fail"}
    assert {("output_tps", "decode_heavy"), ("ttft_p50", "decode_heavy")} <= changed
    tps = next(
        c for c in by_name["faster"].comparisons if (c.metric, c.profile) == ("output_tps", "decode_heavy")
    )
    assert tps.ratio == pytest.approx(0.7, rel=0.02) and tps.interval is not None and tps.interval[1] < 1
    text = render(result)
    assert "faster: CHANGED beyond noise" in text and "result: something changed beyond noise" in text


def test_a_candidate_against_the_older_sweeps_retained_configuration(
    tmp_path: Path, cfg: GauntletConfig
) -> None:
    old = sweep(tmp_path / "a", cfg)  # not judged: its retained configuration is its baseline
    new = sweep(tmp_path / "b", cfg)
    result = compare_sweeps(old, new, candidate="faster")
    assert [(p.old, p.new, p.status) for p in result.pairs] == [("baseline", "faster", "changed")]
    ttft = {c.profile: c for c in result.pairs[0].comparisons if c.metric == "ttft_p50"}
    assert ttft["decode_heavy"].ratio == pytest.approx(0.8, rel=0.05)
    assert "faster (against baseline, the older retained)" in render(result)


def test_a_candidate_that_no_longer_starts_is_a_change(tmp_path: Path, cfg: GauntletConfig) -> None:
    old = sweep(tmp_path / "a", cfg)
    new = tmp_path / "b"
    shutil.copytree(old, new)
    shutil.rmtree(new / "candidates" / "faster")
    SweepBuilder(new).run("faster", ok=False, kind="out-of-memory", matched_line="CUDA out of memory")
    result = compare_sweeps(old, new)
    faster = next(p for p in result.pairs if p.new == "faster")
    assert faster.status == "changed"
    assert faster.note == "started in the older sweep, did not start (out-of-memory) in the newer"


def test_exit_codes_and_json(tmp_path: Path, cfg: GauntletConfig, capsys: pytest.CaptureFixture[str]) -> None:
    old = sweep(tmp_path / "a", cfg)
    new = sweep(tmp_path / "b", cfg, ttft_factor=0.8 * 1.5, tps_factor=0.7)
    assert cli(["compare", str(old), str(old)]) == 0
    assert "nothing changed beyond noise" in capsys.readouterr().out
    assert main([str(old), str(new), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert {p["new"]: p["status"] for p in data["pairs"]} == {"baseline": "same", "faster": "changed"}
    assert main([str(old)]) == 2
    assert main([str(old), str(tmp_path / "nowhere")]) == 6
    assert "not a sweep directory" in capsys.readouterr().err
    assert main([str(old), str(new), "--candidate", "nope"]) == 6


def test_with_faster_fixture_still_compares_to_itself(tmp_path: Path, cfg: GauntletConfig) -> None:
    """A judged sweep (verdicts.json: faster is kept) compared with itself, name for name and retained."""
    from gates.judge import judge_sweep

    root = tmp_path / "s"
    with_faster(root)
    write_config(root, cfg)
    judge_sweep(root, cfg)
    assert not compare_sweeps(root, root).changed
    retained = compare_sweeps(root, root, candidate="faster")
    assert [(p.old, p.status) for p in retained.pairs] == [("faster", "same")]


def test_status_json_says_the_same_facts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "journal.jsonl").write_text("")
    assert cli(["status", str(tmp_path)]) == 1
    text = capsys.readouterr().out
    assert cli(["status", "--json", str(tmp_path)]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["servers"] == [] and data["settled"] is False
    assert data["sweep"] == str(tmp_path) and f"sweep: {tmp_path}" in text
    assert "nothing gauntlet started is running" in text
