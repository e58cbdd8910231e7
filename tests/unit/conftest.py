"""Unit tests that run the sweep controller take the service port's lock: keep theirs out of the host's."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.ledger.lock import LOCK_DIR_ENV
from tests.markers import mark_folder


@pytest.fixture(autouse=True)
def _private_sweep_locks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test in this folder is marked ``unit`` (pure code, no process or network)."""
    mark_folder(items, __file__, pytest.mark.unit)
