"""An adaptive loop's look on a GPU host judges the memory reading the launch already took (issue 32,
item 1): the look's run.json carries it, so the memory gate runs there instead of being missing evidence
that would stop the loop at its first look."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from contracts.results import GpuMemory, HostProbe
from gates.judge import judge
from orchestrator.ledger.events import RepeatLooked
from orchestrator.measure.begin import begin
from orchestrator.measure.candidate import run_candidate
from orchestrator.servers.context import SweepContext
from tests.unit.composed import load
from tests.unit.fakes import FakeLoad, FakeSupervisor, fake_seams

GPU = GpuMemory(index=0, name="H100", total_gib=80.0, used_gib=70.0, free_gib=10.0)
OVERRIDES = [
    "host=h100x8",
    "run.repeats=3",
    "run.min_repeats=2",
    "run.max_repeats=4",
    "run.profiles=[serial,decode_heavy]",
    "run.recovery_profiles=[decode_heavy]",
    "gates.loaded_profiles=[decode_heavy]",
    "gates.accepted_profiles=[decode_heavy]",
]


def test_an_adaptive_look_on_a_gpu_host_judges_the_memory_reading_it_took(tmp_path: Path) -> None:
    cfg, _ = load(OVERRIDES)
    seams = dataclasses.replace(
        fake_seams(FakeSupervisor(), FakeLoad()),
        gpu_memory=lambda spec: [GPU],
        host_probe=lambda kind: HostProbe(driver=True, driver_version="550.54", gpus=[GPU]),
    )
    ctx = SweepContext.open(cfg, tmp_path / "sweep", seams)
    begin(ctx)
    run_candidate(ctx, cfg.baseline, role="baseline")
    run_candidate(ctx, load([*OVERRIDES, "candidate=tp4_dp2"])[0].candidate)
    looks = [e for e in ctx.journal.events() if isinstance(e, RepeatLooked) and e.candidate == "tp4_dp2"]
    assert looks and all(e.decision != "incomplete" for e in looks), looks
    verdict = next(v for v in judge(ctx.dir, cfg).verdicts if v.candidate == "tp4_dp2")
    memory = next(g for g in verdict.gates if g.gate == "memory_headroom")
    assert memory.status == "pass" and memory.observed == 10.0, memory
    assert verdict.decision != "incomplete", verdict.reason
