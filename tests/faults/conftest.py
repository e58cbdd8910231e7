"""Fixtures of the fault matrix: one simulator for the module, a profile runner through a fault proxy."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contracts.files import read_jsonl
from contracts.results import ProfileSummary, RequestRecord
from contracts.schema import LengthConfig, WorkloadConfig
from load import run_profile
from orchestrator.ledger.lock import LOCK_DIR_ENV
from tests.integration.conftest import (
    port,  # noqa: F401  (the fixture: a free port, cleaned after)
    reap_sweeps,  # noqa: F401  (autouse: a sweep left running is killed)
)
from tests.integration.test_sim_server import Server, candidate_argv, start
from tests.markers import mark_folder

SIM_TIME_SCALE = 50.0


@pytest.fixture(autouse=True)
def _private_sweep_locks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fault tests that run the sweep controller on the default port take that port's lock: keep theirs
    out of the host's, so a sweep running on this machine (port 8000) cannot refuse them (exit 4)."""
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))


SERVED_MODEL = "deepseek-v4-flash"


@pytest.fixture(scope="module")
def sim() -> Iterator[Server]:
    """A simulated vLLM server on a free port, fast (50 simulated seconds per wall second)."""
    with start(candidate_argv("baseline", "--sim-time-scale", str(SIM_TIME_SCALE))) as server:
        yield server


def workload(**overrides: Any) -> WorkloadConfig:
    base: dict[str, Any] = dict(
        name="faults",
        concurrency=4,
        num_requests=8,
        warmup_requests=0,
        prompt_tokens=LengthConfig(kind="fixed", mean=64),
        output_tokens=LengthConfig(kind="fixed", mean=24),
        ignore_eos=True,
        seed=3,
        time_limit_s=60,
        request_timeout_s=2.0,
    )
    base.update(overrides)
    return WorkloadConfig(**base)


def profile(
    base_url: str, out_dir: Path, wl: WorkloadConfig, **kw: Any
) -> tuple[ProfileSummary, list[RequestRecord]]:
    """Run one profile against ``base_url``; its summary and the records read back from disk."""
    summary = run_profile(
        base_url,
        SERVED_MODEL,
        wl,
        candidate="baseline",
        fingerprint="sha256:" + "0" * 64,
        repeat=0,
        out_dir=out_dir,
        backend="sim",
        host="sim",
        time_scale=SIM_TIME_SCALE,
        progress=False,
        **kw,
    )
    return summary, read_jsonl(out_dir / "records.jsonl", RequestRecord)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test in this folder is marked ``faults`` (injected faults)."""
    mark_folder(items, __file__, pytest.mark.faults)
