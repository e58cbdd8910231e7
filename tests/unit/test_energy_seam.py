"""Energy where a run is measured: the seams' meter around each run of a launch, into run.json with the
host's prices; and the simulator's stated power model behind ``GET /sim/energy``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx
import pytest

from contracts.energy import Edge, EnergyMeter, EnergyWindow, run_energy
from contracts.files import read_model
from contracts.results import CandidateRun, Pricing, RunEnergy
from launch.sim.client import SimEnergy
from launch.spec import render_spec
from orchestrator.measure.begin import begin
from orchestrator.measure.candidate import run_candidate
from orchestrator.servers.context import SweepContext
from orchestrator.servers.seams import real_seams
from tests.unit.composed import load
from tests.unit.fakes import FakeLoad, FakeSupervisor, fake_seams
from tests.unit.sim_fixtures import BASE, PROFILE
from tests.unit.test_sim_engine import drive, make_host, submit

OVERRIDES = ["run.repeats=2", "run.profiles=[serial,decode_heavy]", "run.recovery_profiles=[decode_heavy]"]


@dataclass
class CountingMeter:
    """Each window: 2 GPUs at 400 W and 200 W for 2 s (what a counter meter would give)."""

    opened: list[str] = field(default_factory=list)

    def open(self) -> EnergyWindow:
        self.opened.append("open")
        return self

    def edge(self, which: Edge) -> None:
        self.opened.append(which)

    def close(self) -> RunEnergy:
        return run_energy("nvml_counter", [800.0, 400.0], 2.0, output_tps=None)


def _sweep(
    tmp_path: Path, *extra: str, meter: EnergyMeter | None = None
) -> tuple[SweepContext, CandidateRun]:
    cfg, _ = load([*OVERRIDES, *extra])
    seams = fake_seams(FakeSupervisor(), FakeLoad())
    if meter is not None:
        seams = replace(seams, energy=lambda spec: meter)
    life = SweepContext.open(cfg, tmp_path / "sweep", seams)
    begin(life)
    return life, run_candidate(life, cfg.baseline, role="baseline")


def test_each_measured_run_has_its_energy_and_the_launch_its_prices(tmp_path: Path) -> None:
    meter = CountingMeter()
    life, run = _sweep(tmp_path, "host.gpu_hour_price=2.5", "host.power_price_kwh=0.15", meter=meter)
    # the load runner narrows each window to its measured requests (FakeLoad calls on_window as it does)
    assert meter.opened == ["open", "start", "end"] * 4
    on_disk = read_model(life.dir / "candidates" / run.candidate / "run.json", CandidateRun)
    assert (
        list(on_disk.energy)
        == on_disk.profiles
        == ["serial/r1", "decode_heavy/r1", "serial/r2", "decode_heavy/r2"]
    )
    energy = on_disk.energy["decode_heavy/r1"]
    # the fake load's runs make 1000 output tok/s; 1200 J over 2 s is 600 W: 1000 / 600 tokens per joule
    assert energy.output_tokens_per_joule == pytest.approx(1000 / 600)
    assert energy.watts_per_gpu == [400.0, 200.0]
    gpus = life.cfg.baseline.tensor_parallel_size * life.cfg.baseline.data_parallel_size  # the candidate's
    assert on_disk.pricing == Pricing(
        gpus=gpus, gpu_hour_price=2.5, power_price_kwh=0.15, host_gpus=life.cfg.host.gpu_count
    )


def test_without_a_meter_or_a_price_nothing_is_made_up(tmp_path: Path) -> None:
    _, run = _sweep(tmp_path, "host.gpu_hour_price=null", "host.power_price_kwh=null")
    assert run.pricing is None
    assert run.energy and all(
        e.joules is None and e.output_tokens_per_joule is None and e.reason for e in run.energy.values()
    )


# ------------------------------------------------------------------------------- the simulator's model


def test_simulated_energy_is_idle_power_plus_busy_time_at_tdp() -> None:
    host = make_host(replace(BASE, tensor_parallel_size=8, data_parallel_size=1))
    gpu = PROFILE.gpu
    assert host.energy_mj(10.0) == [round(gpu.idle_w * 10.0 * 1000)] * gpu.count  # idle all along
    submit(host, "a", 2000, 64)
    drive(host)
    busy = host.replicas[0].busy_s
    assert 0 < busy <= host.replicas[0].last_end
    expected = round((gpu.idle_w * 100.0 + (gpu.tdp_w - gpu.idle_w) * busy) * 1000)
    assert host.energy_mj(100.0) == [expected] * gpu.count


def _sim_transport(readings: list[dict[str, object]]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/sim/energy"
        return httpx.Response(200, content=json.dumps(readings.pop(0)))

    return httpx.MockTransport(handler)


def test_sim_energy_window_reads_the_counter_on_the_virtual_clock() -> None:
    model = "simulated: 70 W idle + busy fraction x (700 - 70) W per GPU"
    transport = _sim_transport(
        [
            {"virtual_s": 10.0, "gpus_mj": [1_000_000, 1_000_000], "model": model},
            {"virtual_s": 14.0, "gpus_mj": [2_600_000, 1_280_000], "model": model},
        ]
    )
    energy = SimEnergy("http://sim", transport).open().close()
    assert (energy.method, energy.joules, energy.duration_s) == ("simulated", 1880.0, 4.0)
    assert energy.watts_per_gpu == [400.0, 70.0] and energy.reason == model


def test_sim_energy_unreachable_is_not_measured() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    energy = SimEnergy("http://sim", httpx.MockTransport(refuse)).open().close()
    assert not energy.measured and (energy.reason or "").startswith("not measured: /sim/energy failed")


@pytest.mark.parametrize(
    ("host_kind", "kind"), [("cpu", "Unmeasured"), ("sim", "SimEnergy"), ("gpu", "NvmlEnergy")]
)
def test_the_real_seams_pick_the_meter_by_host_kind(host_kind: str, kind: str) -> None:
    cfg, _ = load([])
    spec = replace(render_spec(cfg.service, cfg.candidate, cfg.host), host_kind=host_kind)
    meter = real_seams().energy(spec)
    assert type(meter).__name__ == kind
    if host_kind == "cpu":  # a CPU host: not measured, never zero, and why
        energy = meter.open().close()
        assert energy.joules is None and "host.kind is cpu" in (energy.reason or "")
