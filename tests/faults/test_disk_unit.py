"""Fault matrix, disk (fake seams): a disk error is not evidence about a candidate; it stops the sweep and
the candidate's server is torn down on the way out."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from contracts.errors import SweepDirError, sweep_dir_error
from orchestrator.measure.candidate import run_candidate
from orchestrator.measure.opening import begin
from tests.unit.fakes import FakeLoad, FakeSupervisor
from tests.unit.test_lifecycle import candidate, make


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EFBIG])
def test_a_disk_error_mid_profile_stops_the_sweep_and_tears_the_server_down(
    tmp_path: Path, code: int
) -> None:
    def full(name: str, profile: str, repeat: int) -> None:
        if name == "tp4_dp2" and profile == "decode_heavy":
            raise OSError(code, "disk says no", str(tmp_path / "records.jsonl"))

    sup = FakeSupervisor()
    life, _ = make(tmp_path, sup, FakeLoad(before=full))
    begin(life)
    with pytest.raises(SweepDirError, match=r"cannot write the sweep directory .*: disk says no"):
        run_candidate(life, candidate("tp4_dp2"))
    assert sup.alive == {}, "the candidate's server was torn down"
    assert life.journal.replay().live == {}


def test_other_os_errors_are_not_disk_errors() -> None:
    assert sweep_dir_error(OSError(errno.ECONNREFUSED, "refused"), "d") is None
    assert sweep_dir_error(ValueError("x"), "d") is None


def test_a_disk_error_in_a_candidates_job_ends_the_sweep_with_its_cause_and_restores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from orchestrator.ledger.journal import Journal
    from tests.unit.test_controller import run_sweep

    def full(name: str, profile: str, repeat: int) -> None:
        if name == "tp4_dp2" and profile == "decode_heavy":
            raise OSError(errno.ENOSPC, "No space left on device")

    sup = FakeSupervisor()
    code, _, sweep = run_sweep(tmp_path, sup, load=FakeLoad(before=full))
    assert code == SweepDirError.exit_code
    assert f"cannot write the sweep directory {sweep}: No space left on device" in capsys.readouterr().err
    assert sup.started == ["baseline", "tp4_dp2", "baseline"]  # measured up to the fault, then restored
    (live,) = Journal(sweep / "journal.jsonl").replay().live.values()
    assert live.role == "retained" and list(sup.alive) == [live.pid]
