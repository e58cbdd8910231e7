"""``make test``'s e2e and slurm stage on two pytest-xdist workers, one work unit each
(``-p tests.xdist_groups -n 2 --dist loadscope``).

One unit is the real-vLLM sweeps and doctor (:data:`SWEEPS`: each starts, measures and restores its own
servers, one startup after another); the other is everything else: the tests on the shared vLLM servers
(started once per worker, so they stay on one), and the SLURM cluster's, which must not run side by side for
its two nodes. A vLLM startup keeps one core busy for most of its 30-80 s, so the two units overlap instead of
waiting on each other (docs/measurements/e2e-vllm-cpu.md). A scheduler rather than ``xdist_group`` marks:
pytest-xdist 3.8's ``loadgroup`` renames ``item._nodeid``, which pytest 9.2 no longer reads, so its groups
are silently ignored.
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

#: Test modules that run their own vLLM servers, one after another, on one worker.
SWEEPS = frozenset({"test_sweep_vllm_cpu.py", "test_search_vllm_cpu.py", "test_doctor_vllm_cpu.py"})


def work_unit(nodeid: str) -> str:
    """The unit a test runs in: ``sweeps`` for :data:`SWEEPS`' modules, ``shared`` for every other.

    >>> work_unit("tests/e2e/test_sweep_vllm_cpu.py::test_case_study")
    'sweeps'
    >>> work_unit("tests/integration/test_slurm.py::test_demo_slurm[x::y]")
    'shared'
    """
    module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    return "sweeps" if module in SWEEPS else "shared"


class TwoUnits(LoadScopeScheduling):
    """xdist's scope scheduling, with :func:`work_unit` as the scope: two units, one per worker."""

    def _split_scope(self, nodeid: str) -> str:
        return work_unit(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> TwoUnits:
    return TwoUnits(config, log)
