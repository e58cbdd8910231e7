"""judge, report and compare on a sweep that is still running: said first, nothing written into it;
``judge --force`` and ``compare --force`` read what has landed, marked partial. A sweep runs when its
port's lock is held by a sweep of its directory whose pid is alive (ledger.lock.running_sweep)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts.layout import VERDICTS_FILE, journal_file
from contracts.schema import GauntletConfig
from orchestrator.__main__ import main as gauntlet
from orchestrator.cli import running_sweep_of
from orchestrator.ledger.events import Launching
from orchestrator.ledger.journal import Journal
from orchestrator.ledger.lock import SweepLock, running_sweep
from tests.unit.gates_fixtures import case_study, sweep_config, write_config


@pytest.fixture(scope="module")
def cfg() -> GauntletConfig:
    return sweep_config()


@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory, cfg: GauntletConfig) -> Path:
    """What a sweep has written so far: the case study's results and config, no verdicts yet, and the
    journal announcing the launch of the candidate it measures now."""
    sweep = case_study(tmp_path_factory.mktemp("running") / "sweep")
    write_config(sweep, cfg)
    Journal(journal_file(sweep)).append(
        Launching(candidate="tp4_dp2", fingerprint="sha256:x", port=cfg.service.port)
    )
    return sweep


@pytest.fixture
def running(tmp_path: Path, landed: Path, cfg: GauntletConfig) -> Iterator[Path]:
    """A copy of ``landed`` whose sweep runs: this process holds its port's lock as its sweep."""
    sweep = tmp_path / "sweep"
    shutil.copytree(landed, sweep)
    lock = SweepLock.for_port(cfg.service.port)
    lock.acquire(sweep)
    try:
        yield sweep
    finally:
        lock.release()


def _files(sweep: Path) -> dict[str, bytes]:
    return {str(p.relative_to(sweep)): p.read_bytes() for p in sorted(sweep.rglob("*")) if p.is_file()}


def test_a_sweep_runs_while_its_lock_is_held_by_a_live_pid(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    assert running_sweep(sweep, 8300) is None
    lock = SweepLock.for_port(8300)
    lock.acquire(sweep)
    try:
        holder = running_sweep(sweep, 8300)
        assert holder is not None and holder.pid == os.getpid()
        assert running_sweep(tmp_path / "other", 8300) is None  # the port is another sweep's
    finally:
        lock.release()
    assert running_sweep(sweep, 8300) is None


@pytest.mark.parametrize("command", ["judge", "report"])
def test_judge_and_report_on_a_running_sweep_say_so_first_and_write_nothing(
    running: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _files(running)
    assert gauntlet([command, str(running)]) == 4
    out, err = capsys.readouterr()
    first = err.splitlines()[0]
    assert first.startswith(
        f"gauntlet {command}: the sweep of {running} is still running (pid {os.getpid()})"
    )
    assert "measuring tp4_dp2" in first
    assert "never launched" not in out + err and "not launched" not in out + err
    assert _files(running) == before and not (running / VERDICTS_FILE).exists()


def test_judge_force_judges_what_has_landed_marked_partial_and_writes_nothing(
    running: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _files(running)
    assert gauntlet(["judge", "--force", str(running)]) == 8
    out, _ = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith(f"PARTIAL: the sweep of {running} is still running")
    tp4 = next(line for line in lines if line.startswith("tp4_dp2 "))
    assert "being measured now: judged on what has landed so far" in tp4
    assert "never launched" not in out and not any(line.startswith("resume: ") for line in lines)
    assert _files(running) == before


def test_compare_with_a_running_sweep_says_so_first(
    running: Path, landed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert gauntlet(["compare", str(landed), str(running)]) == 4
    _, err = capsys.readouterr()
    assert err.startswith(f"gauntlet compare: the sweep of {running} is still running")
    gauntlet(["compare", str(landed), str(running), "--force"])
    out, _ = capsys.readouterr()
    assert out.startswith(f"PARTIAL: the sweep of {running} is still running")


def test_a_finished_sweep_is_judged_as_before(landed: Path, tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    shutil.copytree(landed, sweep)
    assert running_sweep_of(sweep, role="judge") is None
    gauntlet(["judge", str(sweep)])
    assert (sweep / VERDICTS_FILE).exists()
