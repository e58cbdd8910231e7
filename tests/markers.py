"""Each test folder marks its own tests (``unit``, ``integration``, ``e2e``, ``faults``) in its conftest.py.

``make test-unit`` is ``pytest -m unit``: the pure unit tests only. A conftest hook sees every collected
item of the session, not only its folder's, so it marks the items below its own folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def mark_folder(items: list[pytest.Item], conftest: str, marker: pytest.MarkDecorator) -> None:
    """Add ``marker`` to every item collected below the folder of ``conftest`` (pass ``__file__``)."""
    folder = Path(conftest).resolve().parent
    for item in items:
        if item.path.resolve().is_relative_to(folder):
            item.add_marker(marker)
