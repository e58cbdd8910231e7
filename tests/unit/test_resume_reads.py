"""Resume reads a launch's state once: run.json and each run's files are read once per launch, whatever
the checks that judge them (the record, the runs expected, the capacity search, the confirmation runs)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from contracts.layout import RUN_FILE, block_dir
from orchestrator.app.jobs import node_baseline, run_job
from orchestrator.ledger.nodes import Place
from orchestrator.ledger.opening import write_opening
from orchestrator.measure.begin import begin
from orchestrator.measure.candidate import run_candidate
from orchestrator.measure.interleave import measure_block
from orchestrator.servers.context import SweepContext
from tests.unit.composed import load
from tests.unit.fakes import FakeLoad, FakeSupervisor, fake_seams
from tests.unit.test_lifecycle import OVERRIDES, candidate, make


@contextmanager
def counting_reads(monkeypatch: pytest.MonkeyPatch, under: Path) -> Iterator[Counter[str]]:
    """Every open of a file below ``under`` (``Path.read_text`` opens through ``Path.open``), by its path
    relative to ``under``."""
    opened: Counter[str] = Counter()
    original = Path.open

    def counted(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self.is_relative_to(under):
            opened[self.relative_to(under).as_posix()] += 1
        return original(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(Path, "open", counted)
        yield opened


@pytest.mark.parametrize(
    "extra",
    [
        (),  # fixed repeats, confirmation runs on: their disagreement is judged on the runs read
        ("run.confirm_runs=0",),
        ("run.interleave=true",),
    ],
)
def test_a_complete_candidate_is_read_once_when_resume_skips_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: tuple[str, ...]
) -> None:
    sup, fake = FakeSupervisor(), FakeLoad()
    life, messages = make(tmp_path, sup, fake, *extra)
    begin(life)
    run_candidate(life, life.cfg.baseline, role="baseline")
    first = run_candidate(life, candidate("tp4_dp2", *extra))
    launched = len(fake.calls)
    with counting_reads(monkeypatch, life.candidate_dir("tp4_dp2")) as opened:
        again = run_candidate(life, candidate("tp4_dp2", *extra))
    assert again == first and len(fake.calls) == launched  # skipped: nothing measured
    assert any("complete results found, skipping" in m for m in messages)
    assert opened[RUN_FILE] == 1
    assert opened and set(opened.values()) == {1}, opened


def test_a_complete_block_is_read_once_when_resume_skips_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sup, fake = FakeSupervisor(), FakeLoad()
    life, _ = make(tmp_path, sup, fake, "run.interleave=true")
    begin(life)
    first = measure_block(life, life.cfg.baseline, after="tp4_dp2")
    launched = len(fake.calls)
    block = block_dir(life.dir, life.cfg.baseline.name, "tp4_dp2")
    with counting_reads(monkeypatch, block) as opened:
        again = measure_block(life, life.cfg.baseline, after="tp4_dp2")
    assert again == first and len(fake.calls) == launched
    assert opened and set(opened.values()) == {1}, opened


def test_a_nodes_complete_baseline_is_read_once_when_a_job_reuses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A parallel sweep's second job on a node reuses the node's baseline (complete, recent, the same
    spec, its block after the first candidate agrees): its record, runs and block read once."""
    sweep = tmp_path / "sweep"
    write_opening(sweep, "open", node="head")
    sup, fake = FakeSupervisor(), FakeLoad()
    messages: list[str] = []
    place = Place(node="n1", job="1")
    chosen, _ = load([*OVERRIDES, "candidate=tp4_dp2"])
    run_job(chosen, sweep, place, fake_seams(sup, fake, messages))
    assert sup.started == ["baseline@n1", "tp4_dp2", "baseline@n1"]  # the baseline, then its block
    ctx = replace(SweepContext.open(chosen, sweep, fake_seams(sup, fake, messages), place=place), node="n1")
    with counting_reads(monkeypatch, ctx.candidate_dir("baseline@n1")) as opened:
        assert node_baseline(ctx, "n1") == "baseline@n1"
    assert any("reusing the baseline measured on this node" in m for m in messages), messages
    assert sup.started == ["baseline@n1", "tp4_dp2", "baseline@n1"]  # nothing launched
    assert opened[RUN_FILE] == 1
    assert opened and set(opened.values()) == {1}, opened
