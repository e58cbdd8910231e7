"""The judge as a stage of its own: ``python -m orchestrator judge SWEEP_DIR`` writes verdicts.json from the
files on disk (config.yaml included), with the key figures, rankings and reversals the report shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contracts.schema import GauntletConfig
from contracts.verdicts import (
    VERDICTS_SCHEMA_VERSION,
    DriftResult,
    SweepVerdict,
    Verdict,
    read_verdicts,
)
from gates.judge import judge_sweep, main, summary_lines
from orchestrator.__main__ import main as gauntlet
from tests.unit.gates_fixtures import (
    SweepBuilder,
    case_study,
    sweep_config,
    with_faster,
    write_config,
)


@pytest.fixture(scope="module")
def cfg() -> GauntletConfig:
    return sweep_config()


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory, cfg: GauntletConfig) -> Path:
    """The case study's sweep with its config.yaml, judged once from disk by the command line."""
    sweep = case_study(tmp_path_factory.mktemp("judge") / "sweep")
    write_config(sweep, cfg)
    assert main([str(sweep)]) == 0
    return sweep


def test_judge_writes_verdicts_from_the_files_on_disk(study: Path) -> None:
    verdicts = read_verdicts(study)
    assert verdicts.schema_version == VERDICTS_SCHEMA_VERSION
    assert {v.candidate: v.decision for v in verdicts.verdicts} == {
        "eplb": "incompatible",
        "mega_moe": "incompatible",
        "spec_probabilistic": "reject",
        "tp4_dp2": "reject",
    }
    assert verdicts.retained == "baseline"


def test_verdicts_carry_the_figures_the_report_shows(study: Path) -> None:
    verdicts = read_verdicts(study)
    tp4 = next(v for v in verdicts.verdicts if v.candidate == "tp4_dp2")
    figures = {(f.metric, f.profile): f for f in tp4.figures}
    out = figures[("output_tps", "decode_heavy")]
    assert out.source == "gates" and out.interval is not None and out.interval[1] < 1
    assert out.value == pytest.approx(1197, rel=0.02) and out.baseline == pytest.approx(10039, rel=0.02)
    assert figures[("visible_answers", "answer_gate")].count == (4, 5)
    # A candidate that never started has no figures; the baseline's own values have no ratio.
    assert next(v for v in verdicts.verdicts if v.candidate == "mega_moe").figures == []
    assert all(f.ratio is None for f in verdicts.baseline_figures)
    serial = next(f for f in verdicts.baseline_figures if f.metric == "serial_e2e_p50")
    assert serial.value == pytest.approx(5.0, rel=0.02)
    assert [r.label for r in verdicts.rankings][:2] == ["serial e2e p50", "prefill_10k output tok/s"]
    assert next(r for r in verdicts.rankings if r.label == "serial e2e p50").order[0] == "tp4_dp2"


def test_the_reversal_is_decided_once_and_written_down(study: Path) -> None:
    verdicts = read_verdicts(study)
    assert [(r.candidate, r.direction, r.loaded_profile) for r in verdicts.reversals] == [
        ("tp4_dp2", "faster", "decode_heavy")
    ]
    tp4 = next(v for v in verdicts.verdicts if v.candidate == "tp4_dp2")
    assert tp4.reversal is not None
    assert tp4.reversal.startswith("reversal: serial latency ranks tp4_dp2 ahead of baseline (serial e2e p50")
    assert "under load it ranks behind (decode_heavy output tok/s 1,197 tok/s vs 10,039 tok/s" in tp4.reversal
    assert verdicts.reversal is not None and "tp4_dp2" in verdicts.reversal


def test_each_gate_result_says_what_failing_it_means(study: Path) -> None:
    raw = json.loads((study / "verdicts.json").read_text())
    tp4 = next(v for v in raw["verdicts"] if v["candidate"] == "tp4_dp2")
    assert {g["gate"]: g["failure"] for g in tp4["gates"]}["concurrency"] == "concurrency regression"


def test_judging_again_gives_the_same_file(study: Path, cfg: GauntletConfig) -> None:
    before = (study / "verdicts.json").read_bytes()
    judge_sweep(study, cfg)  # the config passed in, as the sweep does
    assert (study / "verdicts.json").read_bytes() == before


def test_the_command_prints_one_line_per_candidate(study: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert gauntlet(["judge", str(study)]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].split() == ["baseline", "baseline", "retained", "configuration"]
    rows = {line.split()[0]: line.split()[1] for line in lines[1:5]}
    assert rows == {
        "eplb": "INCOMPATIBLE",
        "mega_moe": "INCOMPATIBLE",
        "spec_probabilistic": "REJECT",
        "tp4_dp2": "REJECT",
    }
    assert "retained: baseline (no candidate is KEEP: baseline stays)" in out
    assert "drift: pass: no drift beyond noise" in out
    assert "reversal: tp4_dp2 (faster on the empty road)" in out
    assert f"verdicts written to {study / 'verdicts.json'}" in err


def _sweep_without_baseline_start(root: Path, cfg: GauntletConfig) -> Path:
    SweepBuilder(root).run("baseline", ok=False, kind="out-of-memory", matched_line="CUDA out of memory")
    write_config(root, cfg)
    return root


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        ([], 2, "the following arguments are required"),
        (["/nonexistent/sweep"], 6, "/nonexistent/sweep: no such sweep directory"),
        (["{tmp}"], 6, "no config.yaml here"),
        (["{baseline_failed}"], 6, "the baseline 'baseline' failed to start (out-of-memory)"),
    ],
)
def test_judge_errors(
    args: list[str],
    code: int,
    message: str,
    *,
    tmp_path: Path,
    cfg: GauntletConfig,
    capsys: pytest.CaptureFixture[str],
) -> None:
    failed = _sweep_without_baseline_start(tmp_path / "failed", cfg)
    argv = [a.format(tmp=tmp_path / "empty", baseline_failed=failed) for a in args]
    (tmp_path / "empty").mkdir()
    assert main(argv) == code
    err = capsys.readouterr().err
    assert message in err
    assert not (tmp_path / "empty" / "verdicts.json").exists() and not (failed / "verdicts.json").exists()


def test_a_kept_candidate_replaces_the_baseline_in_the_summary(tmp_path: Path, cfg: GauntletConfig) -> None:
    with_faster(tmp_path)
    write_config(tmp_path, cfg)
    lines = summary_lines(judge_sweep(tmp_path))
    assert lines[0].split()[:4] == ["baseline", "baseline", "replaced", "by"]
    assert lines[1].split()[:3] == ["faster", "KEEP", "latency"]
    assert lines[2].startswith("retained: faster (faster is kept")


def _verdict(name: str, decision: str, reason: str) -> Verdict:
    return Verdict.model_validate({"candidate": name, "decision": decision, "reason": reason})


@pytest.mark.parametrize(
    ("verdict", "line"),
    [
        (
            _verdict("a", "reject", "reject: stability: 3 preemptions"),
            "a  REJECT    stability: 3 preemptions",
        ),
        (_verdict("a", "neutral", "neutral: fails nothing"), "a  NEUTRAL   fails nothing"),  # an older file
        (_verdict("a", "keep", "KEEP: a gain"), "a  KEEP      a gain"),
        (
            _verdict("a", "inconclusive", "inconclusive: " + "x " * 80),
            "a  INCONCLUSIVE  " + ("x " * 49).strip() + "...",
        ),
    ],
)
def test_summary_line_per_decision(verdict: Verdict, line: str) -> None:
    sweep = SweepVerdict(
        baseline="b",
        retained="b",
        retained_reason="no candidate is keep",
        drift=DriftResult(status="not_run", message="no recovery"),
        verdicts=[verdict],
    )
    lines = summary_lines(sweep)
    assert lines[1] == line
