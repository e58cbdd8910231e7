"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.sweep_helpers import kill_servers
from tests.ports import free_port


@pytest.fixture
def port() -> Iterator[int]:
    """A free port for one sweep; any simulator a test left on it is killed afterwards."""
    value = free_port()
    yield value
    kill_servers(value)
