"""Unit tests that run the sweep controller take the service port's lock: keep theirs out of the host's."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.ledger.lock import LOCK_DIR_ENV


@pytest.fixture(autouse=True)
def _private_sweep_locks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
