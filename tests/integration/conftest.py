"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.sweep_helpers import kill_servers
from tests.markers import mark_folder
from tests.ports import free_port


@pytest.fixture
def port() -> Iterator[int]:
    """A free port for one sweep; any simulator a test left on it is killed afterwards."""
    value = free_port()
    yield value
    kill_servers(value)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test in this folder is marked ``integration`` (real subprocesses)."""
    mark_folder(items, __file__, pytest.mark.integration)
