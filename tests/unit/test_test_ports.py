"""The tests' own port picker (tests/ports.py): each pytest-xdist worker picks from its own slice, so two
workers can never start sweeps on overlapping blocks of ports."""

from __future__ import annotations

import itertools

import pytest

from tests.ports import worker_range


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, (20000, 32000)),  # not under xdist: the whole range
        ({"PYTEST_XDIST_WORKER": "gw0", "PYTEST_XDIST_WORKER_COUNT": "1"}, (20000, 32000)),
        ({"PYTEST_XDIST_WORKER": "gw0", "PYTEST_XDIST_WORKER_COUNT": "2"}, (20000, 26000)),
        ({"PYTEST_XDIST_WORKER": "gw1", "PYTEST_XDIST_WORKER_COUNT": "2"}, (26000, 32000)),
        ({"PYTEST_XDIST_WORKER": "gw2", "PYTEST_XDIST_WORKER_COUNT": "4"}, (26000, 29000)),
        ({"PYTEST_XDIST_WORKER": "master", "PYTEST_XDIST_WORKER_COUNT": "2"}, (20000, 32000)),
    ],
)
def test_each_worker_picks_from_its_own_slice(env: dict[str, str], expected: tuple[int, int]) -> None:
    assert worker_range(20000, 32000, env) == expected


def test_the_workers_slices_never_overlap() -> None:
    slices = [
        worker_range(20000, 32755, {"PYTEST_XDIST_WORKER": f"gw{i}", "PYTEST_XDIST_WORKER_COUNT": "3"})
        for i in range(3)
    ]
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(slices))
