"""Energy per run and $ per million output tokens: the pure arithmetic as tables, the meters against fakes
with pynvml's names and signatures (counter, NotSupported fallback, no driver), and the cost gate."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from typing import Any

import pynvml
import pytest

from contracts.cost import capacity_output_tps, pricing_of, run_usd_per_mtok, slo_usd_per_mtok, usd_per_mtok
from contracts.energy import counter_joules, integrate_power, not_measured, run_energy, with_throughput
from contracts.results import (
    CandidateRun,
    CapacityPoint,
    CapacityResult,
    Pricing,
    StartupRecord,
)
from contracts.schema import CostGateConfig, GatesConfig, HostConfig
from contracts.sweepdir import Repeat, Results
from gates.cost import Cost
from gates.registry import GateContext
from gates.run_ratio import bound_ratio
from launch.nvml import NvmlEnergy, NvmlProbe, _PowerWindow
from orchestrator import catalog
from tests.unit.fakes import summary

MAX64 = 2**64

# ------------------------------------------------------------------------------------------ counters


@pytest.mark.parametrize(
    ("start", "end", "duration", "joules"),
    [
        pytest.param(1_000, 901_000, 2.0, 900.0, id="plain step"),
        pytest.param(5_000, 5_000, 1.0, 0.0, id="idle-free zero step is zero joules"),
        pytest.param(MAX64 - 500, 1_500, 1.0, 2.0, id="wrapped past 64 bits"),
        pytest.param(10_000_000, 3_000, 1.0, None, id="reset: went back (driver reload)"),
        pytest.param(0, 5_000_000, 1.0, None, id="implausible: 5 kW on one GPU"),
        pytest.param(0, 1_000, 0.0, None, id="empty interval"),
    ],
)
def test_counter_joules(start: int, end: int, duration: float, joules: float | None) -> None:
    assert counter_joules(start, end, duration_s=duration) == joules


@pytest.mark.parametrize(
    ("samples", "joules"),
    [
        pytest.param([(0.0, 300.0), (2.0, 500.0)], 800.0, id="trapezoid"),
        pytest.param([(0.0, 100.0), (1.0, 100.0), (3.0, 300.0)], 500.0, id="uneven steps"),
        pytest.param([(0.0, 300.0)], None, id="one reading: no interval"),
        pytest.param([(1.0, 300.0), (1.0, 300.0)], None, id="time did not advance"),
        pytest.param([(0.0, 300.0), (1.0, math.nan)], None, id="not a power"),
    ],
)
def test_integrate_power(samples: list[tuple[float, float]], joules: float | None) -> None:
    assert integrate_power(samples) == joules


@pytest.mark.parametrize(
    ("per_gpu", "duration", "tps", "watts", "per_joule", "measured"),
    [
        pytest.param([900.0, 700.0], 2.0, 1600.0, [450.0, 350.0], 2.0, True, id="two GPUs"),
        pytest.param([900.0, None], 2.0, 1600.0, None, None, False, id="one GPU reset: not measured"),
        pytest.param([900.0], 0.0, 1600.0, None, None, False, id="empty interval: not measured"),
        pytest.param([], 1.0, 1600.0, None, None, False, id="no GPU read"),
        pytest.param([900.0], 2.0, None, [450.0], None, True, id="no throughput yet"),
    ],
)
def test_run_energy(
    *,
    per_gpu: list[float | None],
    duration: float,
    tps: float | None,
    watts: list[float] | None,
    per_joule: float | None,
    measured: bool,
) -> None:
    energy = run_energy("nvml_counter", per_gpu, duration, output_tps=tps)
    assert energy.measured is measured
    assert energy.watts_per_gpu == watts
    assert energy.output_tokens_per_joule == per_joule
    if not measured:  # "not measured" is None with a reason, never zero
        assert energy.joules is None and energy.method is None and energy.reason


def test_with_throughput_fills_tokens_per_joule_only_when_measured() -> None:
    energy = run_energy("simulated", [400.0, 400.0], 2.0, output_tps=None)
    assert with_throughput(energy, 1200.0).output_tokens_per_joule == 3.0
    gone = not_measured("no driver")
    assert with_throughput(gone, 1200.0) == gone


# -------------------------------------------------------------------------------------------- cost


@pytest.mark.parametrize(
    ("tps", "gpus", "price", "watts", "kwh", "expected"),
    [
        pytest.param(2000.0, 8, 2.5, None, None, 20.0 / 7.2, id="GPU-hours only"),
        pytest.param(2000.0, 8, 2.5, 4000.0, 0.15, (20.0 + 0.6) / 7.2, id="with energy priced"),
        pytest.param(2000.0, 8, 2.5, 4000.0, None, 20.0 / 7.2, id="energy known, not priced"),
        pytest.param(2000.0, 8, 2.5, None, 0.15, None, id="priced power, energy not measured"),
        pytest.param(0.0, 8, 2.5, None, None, None, id="no throughput"),
        pytest.param(math.nan, 8, 2.5, None, None, None, id="not a throughput"),
    ],
)
def test_usd_per_mtok(
    *, tps: float, gpus: int, price: float, watts: float | None, kwh: float | None, expected: float | None
) -> None:
    got = usd_per_mtok(tps, gpus=gpus, gpu_hour_price=price, watts=watts, power_price_kwh=kwh)
    assert got == (None if expected is None else pytest.approx(expected))


def test_pricing_of_the_host() -> None:
    host = HostConfig(name="h", gpu_count=8)
    assert pricing_of(host) is None
    host.gpu_hour_price, host.power_price_kwh = 2.5, 0.15
    assert pricing_of(host) == Pricing(gpus=8, gpu_hour_price=2.5, power_price_kwh=0.15, host_gpus=8)


def _point(level: float, met: bool, tps: float) -> CapacityPoint:
    return CapacityPoint(
        level=level,
        attempt=1,
        summary_file="",
        met=met,
        margin=1.2 if met else 0.8,
        attainment=1.0,
        goodput_rps=0.0,
        goodput_tps=tps,
        output_tps=tps,
        tps_per_user=None,
    )


def _capacity(capacity: float | None, points: list[CapacityPoint]) -> CapacityResult:
    return CapacityResult(
        candidate="c",
        profile="decode_heavy",
        mode="concurrency",
        unit="concurrent",
        slo="interactive",
        slo_text="",
        capacity=capacity,
        low=capacity,
        high=None,
        resolution=0.25,
        gpus=8,
        points=points,
    )


@pytest.mark.parametrize(
    ("capacity", "points", "tps"),
    [
        pytest.param(
            64.0, [_point(32, True, 900), _point(64, True, 1500), _point(64, True, 1700)], 1600, id="median"
        ),
        pytest.param(64.0, [_point(64, True, 1500), _point(64, False, 5000)], 1500, id="held runs only"),
        pytest.param(None, [_point(8, False, 300)], None, id="even the smallest level failed"),
    ],
)
def test_cost_at_the_capacity_the_slo_allows(
    capacity: float | None, points: list[CapacityPoint], tps: float | None
) -> None:
    result = _capacity(capacity, points)
    assert capacity_output_tps(result) == tps
    cost = slo_usd_per_mtok(Pricing(gpus=8, gpu_hour_price=2.5), result, [])
    assert cost == (None if tps is None else pytest.approx(20.0 / (tps * 3600) * 1e6))


# ------------------------------------------------------------------------------------- NVML meters


@dataclass
class FakeEnergyNvml:
    """pynvml's energy and power calls (names, argument types, units: mJ as int, mW as int)."""

    counters_mj: list[int]
    power_mw: list[int] = field(default_factory=list)
    counter_supported: bool = True
    driver: bool = True
    NVMLError: type[Exception] = pynvml.NVMLError
    NVMLError_NotSupported: type[Exception] = pynvml.NVMLError_NotSupported

    def nvmlInit(self) -> None:
        if not self.driver:
            raise pynvml.NVMLError_LibraryNotFound(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    def nvmlShutdown(self) -> None:
        return None

    def nvmlDeviceGetCount(self) -> int:
        return len(self.counters_mj)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        return ("handle", index)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:
        if not self.counter_supported:
            raise pynvml.NVMLError_NotSupported(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return int(self.counters_mj[handle[1]])

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        return int(self.power_mw[handle[1]])


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_nvml_counter_at_start_and_end() -> None:
    fake, clock = FakeEnergyNvml([5_000_000, 7_000_000]), Clock()
    window = NvmlEnergy(NvmlProbe(nvml_module=fake), clock=clock, interval_s=None).open()
    fake.counters_mj = [5_000_000 + 1_200_000, 7_000_000 + 800_000]
    clock.now += 4.0
    energy = window.close()
    assert (energy.method, energy.joules, energy.duration_s) == ("nvml_counter", 2000.0, 4.0)
    assert energy.watts_per_gpu == [300.0, 200.0] and energy.gpus == 2


def test_nvml_counter_reset_during_the_run_is_not_measured() -> None:
    fake, clock = FakeEnergyNvml([5_000_000]), Clock()
    window = NvmlEnergy(NvmlProbe(nvml_module=fake), clock=clock, interval_s=None).open()
    fake.counters_mj = [1_000]
    clock.now += 4.0
    energy = window.close()
    assert not energy.measured and energy.joules is None and "GPU 0" in (energy.reason or "")


def test_nvml_without_the_counter_integrates_power_readings() -> None:
    fake = FakeEnergyNvml([0, 0], power_mw=[100_000, 200_000], counter_supported=False)
    clock = Clock()
    window = NvmlEnergy(NvmlProbe(nvml_module=fake), clock=clock, interval_s=None).open()
    clock.now += 2.0
    fake.power_mw = [300_000, 200_000]
    assert isinstance(window, _PowerWindow)
    window.sample()  # what the sampling thread calls every interval
    clock.now += 2.0
    energy = window.close()
    # GPU 0: (100+300)/2*2 + (300+300)/2*2 = 1000 J; GPU 1: 200 W for 4 s = 800 J
    assert (energy.method, energy.joules, energy.samples) == ("nvml_power", 1800.0, 3)
    assert energy.watts_per_gpu == [250.0, 200.0]


def test_nvml_power_thread_samples_until_closed() -> None:
    fake = FakeEnergyNvml([0], power_mw=[250_000], counter_supported=False)
    window = NvmlEnergy(NvmlProbe(nvml_module=fake), interval_s=0.001).open()
    assert isinstance(window, _PowerWindow)
    deadline = 200
    while len(window._readings[0]) < 3 and deadline:  # wait on the condition, a bounded number of polls
        window._stop.wait(0.01)
        deadline -= 1
    energy = window.close()
    assert energy.method == "nvml_power" and energy.samples is not None and energy.samples >= 3
    assert energy.watts_per_gpu is not None and energy.watts_per_gpu[0] == pytest.approx(250.0)
    assert window._thread is not None and not window._thread.is_alive()


def test_no_driver_is_not_measured_never_zero() -> None:
    energy = NvmlEnergy(NvmlProbe(nvml_module=FakeEnergyNvml([0], driver=False))).open().close()
    assert energy.joules is None and energy.output_tokens_per_joule is None
    assert energy.reason is not None and energy.reason.startswith("not measured: no NVIDIA driver")


def test_real_pynvml_without_a_driver_is_not_measured() -> None:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        energy = NvmlEnergy(NvmlProbe()).open().close()
        assert not energy.measured and (energy.reason or "").startswith("not measured: no NVIDIA driver")
        return
    pynvml.nvmlShutdown()
    pytest.skip("this machine has an NVIDIA driver")


# ----------------------------------------------------------------------------------------- the gate


def _results(name: str, tps: list[float], *, priced: bool = True, kwh: float | None = None) -> Results:
    energy = {
        f"decode_heavy/r{k}": run_energy("simulated", [1000.0] * 8, 1.0, output_tps=t)
        for k, t in enumerate(tps, start=1)
    }
    run = CandidateRun(
        candidate=name,
        fingerprint="f",
        backend="sim",
        host="sim",
        is_baseline=name == "baseline",
        startup=StartupRecord(ok=True),
        energy=energy,
        pricing=Pricing(gpus=8, gpu_hour_price=2.5, power_price_kwh=kwh) if priced else None,
    )
    repeats = [
        Repeat(
            summary=summary(name, "decode_heavy", k, "f", output_tps=t),
            records=[],
            summary_file=f"candidates/{name}/decode_heavy/r{k}/summary.json",
            records_file="",
        )
        for k, t in enumerate(tps, start=1)
    ]
    return Results(name, f"candidates/{name}", run, {"decode_heavy": repeats})


BASE = [2000.0, 2040.0, 1960.0]


@pytest.mark.parametrize(
    ("cand", "bounds", "priced", "status", "applicable"),
    [
        pytest.param(BASE, CostGateConfig(), True, "not_run", False, id="no bound: off by design"),
        pytest.param(BASE, CostGateConfig(tolerance=0.05), False, "not_run", False, id="no price"),
        pytest.param(
            [1500.0, 1530.0, 1470.0], CostGateConfig(tolerance=0.05), True, "fail", True, id="25% dearer"
        ),
        pytest.param([1990.0, 2030.0, 1970.0], CostGateConfig(tolerance=0.05), True, "pass", True, id="same"),
        pytest.param(
            [1500.0, 2600.0, 1500.0], CostGateConfig(tolerance=0.05), True, "inconclusive", True, id="noisy"
        ),
        pytest.param(BASE, CostGateConfig(max_usd_per_mtok=2.0), True, "fail", True, id="over budget"),
        pytest.param(BASE, CostGateConfig(max_usd_per_mtok=5.0), True, "pass", True, id="within budget"),
        pytest.param(
            [2000.0], CostGateConfig(max_usd_per_mtok=2.0), True, "inconclusive", True, id="1 run over"
        ),
    ],
)
def test_cost_gate(
    *, cand: list[float], bounds: CostGateConfig, priced: bool, status: str, applicable: bool
) -> None:
    cfg = GatesConfig(loaded_profiles=["decode_heavy"], cost=bounds)
    ctx = GateContext(cfg, _results("baseline", BASE), _results("c", cand, priced=priced))
    result = Cost().evaluate(ctx)
    assert result.status == status
    assert bool(result.not_applicable) is not applicable
    if applicable:
        assert "$/Mtok" in result.message


def test_cost_gate_without_energy_when_power_is_priced_is_missing_evidence() -> None:
    """The rule's table: tests/unit/test_cost_gate_rules.py (a not_run gap naming the host)."""
    cand = _results("c", BASE, kwh=0.15)
    assert cand.run is not None
    bare = cand.run.model_copy(update={"energy": {}})
    cand = Results("c", cand.root, bare, cand.profiles)
    ctx = GateContext(GatesConfig(loaded_profiles=["decode_heavy"], cost=CostGateConfig(tolerance=0.05)),
                      _results("baseline", BASE, kwh=0.15), cand)  # fmt: skip
    result = Cost().evaluate(ctx)
    assert result.status == "not_run" and not result.not_applicable
    assert "host 'sim' prices power" in result.message and "no energy record in run.json" in result.message


def test_budget_interval_widens_with_run_noise() -> None:
    tight = bound_ratio([2.0, 2.01, 1.99], 1.0, confidence=0.95, statistic="$/Mtok")
    loose = bound_ratio([1.0, 3.0, 2.0], 1.0, confidence=0.95, statistic="$/Mtok")
    assert tight.low > 1.9 and loose.low < tight.low
    one = bound_ratio([2.0], 1.0, confidence=0.95, statistic="$/Mtok")  # one run: the single-run rule
    assert (one.low, one.high, one.p_value) == (0.5, 8.0, 1.0)


def test_run_cost_prices_the_runs_energy() -> None:
    energy = run_energy("nvml_counter", [3600.0], 1.0, output_tps=1000.0)  # 3.6 kW for one second
    gpu_only = run_usd_per_mtok(Pricing(gpus=1, gpu_hour_price=1.0), 1000.0, energy)
    priced = run_usd_per_mtok(Pricing(gpus=1, gpu_hour_price=1.0, power_price_kwh=1.0), 1000.0, energy)
    assert gpu_only is not None and priced is not None
    assert priced == pytest.approx(gpu_only * 4.6)
    assert run_usd_per_mtok(Pricing(gpus=1, gpu_hour_price=1.0, power_price_kwh=1.0), 1000.0, None) is None


def test_list_gates_names_the_cost_gate() -> None:
    out = io.StringIO()
    assert catalog.main(["gates"], out) == 0
    listed = out.getvalue()
    assert "registered gates (" in listed
    assert any(line.split()[:1] == ["cost"] for line in listed.splitlines())


def test_the_measured_window_narrows_the_counter_reading() -> None:
    fake, clock = FakeEnergyNvml([1_000_000]), Clock()
    window = NvmlEnergy(NvmlProbe(nvml_module=fake), clock=clock, interval_s=None).open()
    fake.counters_mj, clock.now = [1_500_000], clock.now + 5.0  # calibration and warmup: left out
    window.edge("start")
    fake.counters_mj, clock.now = [3_500_000], clock.now + 4.0  # the measured window: 2000 J in 4 s
    window.edge("end")
    fake.counters_mj, clock.now = [3_600_000], clock.now + 1.0  # the run's tail: left out
    energy = window.close()
    assert (energy.joules, energy.duration_s, energy.watts_per_gpu) == (2000.0, 4.0, [500.0])


def test_the_measured_window_narrows_the_power_readings() -> None:
    fake = FakeEnergyNvml([0], power_mw=[50_000], counter_supported=False)
    clock = Clock()
    window = NvmlEnergy(NvmlProbe(nvml_module=fake), clock=clock, interval_s=None).open()
    clock.now += 10.0
    fake.power_mw = [400_000]
    window.edge("start")  # the idle readings before it are dropped
    clock.now += 2.0
    window.edge("end")
    clock.now += 3.0
    fake.power_mw = [50_000]
    energy = window.close()  # the reading after the window's end is left out
    assert (energy.joules, energy.duration_s, energy.samples) == (800.0, 2.0, 2)
