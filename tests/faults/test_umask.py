"""Fault matrix, files: everything a sweep writes follows the umask (issue 22): under umask 022 every file
of the sweeps directory is 0644 and every directory 0755 (a demo sweep had 228 of 284 files at 0600, so a
team's shared sweeps directory was unreadable to the team). Row of ``docs/reliability.md``.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.integration.sweep_helpers import ROOT, assert_finished, orchestrator_cmd, sweep_dir

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_every_file_of_a_sweep_is_0644_and_every_directory_0755_under_umask_022(
    tmp_path: Path, port: int
) -> None:
    sweeps = tmp_path / "sweeps"
    args = ["-m", "candidate=tp4_dp2", "run.repeats=1", "run.retained_after_sweep=stop"]
    proc = subprocess.run(
        orchestrator_cmd(args, sweeps=sweeps, port=port),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        preexec_fn=lambda: os.umask(0o022),
    )
    sweep = sweep_dir(sweeps)
    assert_finished(proc.returncode, proc.stdout + proc.stderr, sweep)  # 8 where the client's lag decides
    files, dirs, wrong = 0, 0, []
    for path in [sweeps, *sweeps.rglob("*")]:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            continue  # <sweeps>/latest
        want = 0o755 if stat.S_ISDIR(info.st_mode) else 0o644
        files += stat.S_ISREG(info.st_mode)
        dirs += stat.S_ISDIR(info.st_mode)
        if info.st_mode & 0o777 != want:
            wrong.append(f"{oct(info.st_mode & 0o777)} {path.relative_to(sweeps)}")
    print(f"FIGURE umask: {files} files, {dirs} directories checked")
    for name in ("verdicts.json", "report.json", "journal.jsonl", "config.yaml"):
        assert (sweep / name).is_file(), name
    assert files > 50 and not wrong, wrong
