"""Fault matrix, disk and files: torn, edited or deleted files are read, reported or refused clearly, and
never fatal to rollback. Rows of ``docs/reliability.md``."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from contracts.schema import GauntletConfig
from gates.judge import judge_sweep
from gates.judge import main as judge_main
from orchestrator.ledger.journal import Journal
from report import main as report_main
from tests.integration.sweep_helpers import assert_one_healthy_retained, run_cli, start_until
from tests.unit.gates_fixtures import sweep_config, with_faster
from tests.unit.test_report import finish_sweep


@pytest.fixture(scope="module")
def cfg() -> GauntletConfig:
    return sweep_config()


@pytest.fixture
def judged(tmp_path: Path, cfg: GauntletConfig) -> Path:
    with_faster(tmp_path)
    finish_sweep(tmp_path, cfg)
    judge_sweep(tmp_path, cfg)
    return tmp_path


def test_an_edited_verdicts_file_is_refused_by_name_and_the_judge_rebuilds_it(
    judged: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    verdicts = judged / "verdicts.json"
    verdicts.write_text(verdicts.read_text()[:200])  # edited by hand, or torn
    assert report_main([str(judged)]) == 6
    assert str(verdicts) in capsys.readouterr().err
    assert judge_main([str(judged)]) == 0
    assert report_main([str(judged)]) == 0
    assert "faster" in capsys.readouterr().out


def test_a_deleted_report_is_rebuilt_byte_identical(judged: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert report_main([str(judged)]) == 0
    first = (judged / "report.md").read_bytes()
    (judged / "report.md").unlink()
    (judged / "report.json").unlink()
    assert report_main([str(judged)]) == 0
    assert (judged / "report.md").read_bytes() == first
    capsys.readouterr()


@pytest.mark.parametrize("name", ["summary.json", "records.jsonl"])
def test_an_edited_result_file_is_refused_naming_it(
    judged: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    target = sorted(judged.rglob(name))[0]
    text = target.read_text()
    target.write_text(text[: len(text) - 40])  # the last line cut short
    assert judge_main([str(judged)]) == 6
    err = capsys.readouterr().err
    assert str(target) in err


@pytest.mark.integration
@pytest.mark.slow
def test_a_crash_that_tears_the_journal_and_a_records_file_still_rolls_back(
    tmp_path: Path, port: int
) -> None:
    proc, sweep = start_until(
        ["-m", "candidate=tp4_dp2"],
        sweeps=tmp_path / "sweeps",
        port=port,
        event="load_started",
        candidate="tp4_dp2",
        timeout=180,
    )
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    journal = sweep / "journal.jsonl"
    with journal.open("a") as handle:
        handle.write('{"at":"2026-01-01T00:00:00.000+00:00","event":"torn_dow')  # killed mid-write
    records = sorted((sweep / "candidates" / "baseline").rglob("records.jsonl"))[0]
    records.write_bytes(records.read_bytes()[:-30])  # and a records file cut short by the disk
    for _ in range(2):
        rollback = run_cli(["rollback", str(sweep)])
        assert rollback.returncode == 0, rollback.stdout + rollback.stderr
        assert_one_healthy_retained(sweep, port)
    assert (sweep / "journal.jsonl.torn").read_text().startswith('{"at":"2026-01-01')
    assert Journal(journal).replay().retained_live, "the restored server is in the journal"
    judged = run_cli(["judge", str(sweep)])
    assert judged.returncode == 6
    assert f"{records}:" in judged.stderr and "not a valid RequestRecord" in judged.stderr
