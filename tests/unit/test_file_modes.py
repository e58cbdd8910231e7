"""Files gauntlet writes follow the umask (issue 22): a team's shared sweeps directory stays readable.

``tempfile.mkstemp`` made every atomically written file 0600; the atomic writer now creates its temp file
with 0666 and lets the umask decide. The whole-sweep check is ``tests/faults/test_umask.py``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts.files import atomic_write_text
from orchestrator.ledger.events import SweepFinished
from orchestrator.ledger.journal import Journal


@pytest.fixture
def umask() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664), (0o077, 0o600)])
def test_an_atomic_write_gets_the_mode_the_umask_gives(
    tmp_path: Path, umask: None, mask: int, mode: int
) -> None:
    os.umask(mask)
    path = tmp_path / "summary.json"
    atomic_write_text(path, "{}\n")
    atomic_write_text(path, "{}\n")  # replacing keeps the mode
    assert path.stat().st_mode & 0o777 == mode
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"], "no temp file is left behind"


def test_the_journal_follows_the_umask(tmp_path: Path, umask: None) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    journal.append(SweepFinished(reason="test", validated=True, retained="kept"))
    assert (tmp_path / "journal.jsonl").stat().st_mode & 0o777 == 0o644
