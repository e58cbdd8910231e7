"""Fault matrix, disk (fake seams): a disk error is not evidence about a candidate; it stops the sweep and
the candidate's server is torn down on the way out."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from contracts.errors import SweepDirError, sweep_dir_error
from orchestrator.measure.begin import begin
from orchestrator.measure.candidate import run_candidate
from tests.unit.fakes import FakeLoad, FakeSupervisor, fake_seams
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


@pytest.mark.parametrize(
    ("code", "where", "disk", "says"),
    [
        (errno.EACCES, "sweep/candidates/x/summary.json", True, "Permission denied"),
        (errno.EPERM, "sweep/journal.jsonl", True, "Operation not permitted"),
        (errno.EACCES, "/usr/lib/vllm", False, ""),  # not the sweep's file: not the disk's fault
        (errno.EPERM, None, False, ""),  # os.kill of a foreign process: no file named
        (errno.ENOENT, "sweep/candidates/x/records.jsonl", False, ""),  # a file not there yet
        (errno.ENOENT, "sweep/candidates/gone/run.json", True, "No such file or directory"),  # folder gone
        (errno.ENOSPC, None, True, "No space left on device"),
        (errno.EROFS, "sweep/x", True, "Read-only file system"),
        (errno.EDQUOT, "sweep/x", True, "Disk quota exceeded"),
    ],
)
def test_which_os_errors_are_the_sweep_directorys_and_what_they_say(
    tmp_path: Path, code: int, where: str | None, disk: bool, says: str
) -> None:
    (tmp_path / "sweep" / "candidates" / "x").mkdir(parents=True)
    filename = str(tmp_path / where) if where and not where.startswith("/") else where
    error = sweep_dir_error(OSError(code, os.strerror(code), filename), tmp_path / "sweep")
    assert (error is not None) is disk
    if error is not None:
        assert error.exit_code == 6
        assert f"cannot write the sweep directory {tmp_path / 'sweep'}: {says}" in error.message


def test_a_sweep_directory_that_cannot_be_made_is_refused_not_called_deleted(tmp_path: Path) -> None:
    never = tmp_path / "sweep"
    error = sweep_dir_error(PermissionError(errno.EACCES, "Permission denied", str(never)), never)
    assert error is not None and f"{never}: Permission denied ({never})" in error.message


def test_a_deleted_sweep_directory_is_named_as_deleted(tmp_path: Path) -> None:
    gone = tmp_path / "sweep"
    error = sweep_dir_error(OSError(errno.ENOENT, "No such file", str(gone / "journal.jsonl")), gone)
    assert error is not None and "it was deleted" in error.message
    assert error.hint is not None and "recreate it" in error.hint


def test_a_sweep_directory_that_refuses_writes_is_refused_before_any_server_starts(tmp_path: Path) -> None:
    """The opening's write probe: nothing is launched or stopped when the sweep cannot write."""
    from tests.unit.test_controller import run_sweep

    sup = FakeSupervisor()
    real_mkdir = Path.mkdir

    def refusing(self: Path, *args: object, **kwargs: object) -> None:
        if self.name.startswith(".write-probe"):
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        real_mkdir(self, *args, **kwargs)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Path, "mkdir", refusing)
        code, _, _ = run_sweep(tmp_path, sup)
    assert code == SweepDirError.exit_code
    assert sup.started == []


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


def test_a_rollback_on_a_full_disk_says_the_rollback_stops_not_the_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from orchestrator.recovery.rollback import main_rollback
    from tests.unit.test_session import _config_yaml, restored_sweep

    sup = FakeSupervisor()
    ctx = restored_sweep(tmp_path, sup)  # a finished sweep, its retained server running
    (ctx.dir / "config.yaml").write_text(_config_yaml(ctx))
    sup.alive.clear()  # then the server went: the rollback restores and validates into rollbacks/

    def full(name: str, profile: str, repeat: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(ctx.dir / "rollbacks" / "records.jsonl"))

    seams = fake_seams(sup, FakeLoad(before=full), [])
    assert main_rollback([str(ctx.dir)], lambda: seams) == SweepDirError.exit_code
    err = capsys.readouterr().err
    assert f"cannot write the sweep directory {ctx.dir}: No space left on device" in err
    assert "the rollback stops here, its validation unfinished" in err, err
    assert "the sweep stops here" not in err, err
