"""Energy and cost in the report: the case study's sweep with each run's simulated energy and the host's
prices in run.json shows tokens per joule and $/Mtok (labelled simulated) in the decision table, its own
section, report.json and the terminal, and its verdicts do not change; bench_serve.json gets the keys."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from contracts.benchserve import add_energy
from contracts.energy import not_measured, run_energy
from contracts.files import read_model, write_model
from contracts.results import CandidateRun, Pricing, ProfileSummary
from contracts.schema import GauntletConfig
from report import ReportModel
from report.markdown import render_terminal
from tests.unit.fakes import summary
from tests.unit.gates_fixtures import case_study, sweep_config
from tests.unit.test_report import decisions, finish_sweep, judged_report, section

PRICE = Pricing(gpus=8, gpu_hour_price=2.5, power_price_kwh=0.15)


def _meter(sweep: Path) -> None:
    """Give every launch's runs a simulated energy reading (400 W per GPU) and the host's prices."""
    for run_file in sweep.glob("candidates/*/run.json"):
        run = read_model(run_file, CandidateRun)
        energy = {}
        for summary_file in run_file.parent.glob("*/r*/summary.json"):
            tps = read_model(summary_file, ProfileSummary).output_tps
            name = summary_file.parent.relative_to(run_file.parent).as_posix()
            energy[name] = run_energy("simulated", [800.0] * 8, 2.0, output_tps=tps)
        write_model(run_file, run.model_copy(update={"energy": energy, "pricing": PRICE}))


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, Path]:
    cfg: GauntletConfig = sweep_config()
    plain = finish_sweep(case_study(tmp_path_factory.mktemp("plain") / "sweep"), cfg)
    metered = case_study(tmp_path_factory.mktemp("metered") / "sweep")
    _meter(metered)
    host = dataclasses.replace(cfg.host, gpu_hour_price=2.5, power_price_kwh=0.15)
    metered = finish_sweep(metered, dataclasses.replace(cfg, host=host))
    return judged_report(plain), judged_report(metered), metered


def test_energy_and_cost_are_shown_and_change_no_verdict(reports: tuple[str, str, Path]) -> None:
    plain, metered, _ = reports
    assert decisions(metered) == decisions(plain)
    assert "## Energy and cost" not in plain and "energy, cost" not in plain
    heading = metered.split("## Decision", 1)[1].split("\n\n", 2)[1].splitlines()[0]
    # no capacity search in this sweep: the first loaded profile is the one the table quotes
    assert "energy, cost (prefill_10k, SIMULATED power model)" in heading
    assert "tok/J" in section(metered, "Decision") and "/Mtok" in section(metered, "Decision")
    table = section(metered, "Energy and cost (SIMULATED: the simulator's power model)")
    rows = [" ".join(line.split()) for line in table.splitlines()]
    assert any(r.startswith("| baseline | decode_heavy | simulated (3/3 runs) | ") for r in rows)


def test_report_json_and_terminal_carry_the_figures(reports: tuple[str, str, Path]) -> None:
    _, _, sweep = reports
    model = ReportModel.model_validate_json((sweep / "report.json").read_text())
    base = next(c for c in model.cost if c.candidate == "baseline" and c.profile == "decode_heavy")
    # 3.2 kW for the host: tokens per joule = output tok/s / 3200; $/Mtok = (8 x 2.5 + 3.2 x 0.15) $/h
    tps = base.tokens_per_joule * 3200 if base.tokens_per_joule else None
    assert tps is not None and base.watts_per_gpu == pytest.approx(400.0)
    assert base.usd_per_mtok == pytest.approx((20.0 + 0.48) / (tps * 3600) * 1e6)
    line = next(x for x in render_terminal(model).splitlines() if x.startswith("energy and cost"))
    assert "SIMULATED" in line and "tok/J" in line and "$" in line


def test_bench_serve_gets_the_runs_energy_and_cost(tmp_path: Path) -> None:
    write_model(tmp_path / "summary.json", summary("c", "decode_heavy", 1, "f", output_tps=2000.0))
    (tmp_path / "bench_serve.json").write_text(json.dumps({"completed": 4}))
    add_energy(tmp_path, run_energy("nvml_counter", [800.0] * 8, 2.0, output_tps=2000.0), PRICE)
    got = json.loads((tmp_path / "bench_serve.json").read_text())
    assert got["completed"] == 4 and got["energy_method"] == "nvml_counter"
    assert (got["energy_joules"], got["avg_gpu_power_w"]) == (6400.0, 400.0)
    assert got["usd_per_mtok"] == pytest.approx((20.0 + 0.48) / (2000.0 * 3600) * 1e6)
    add_energy(tmp_path, not_measured("not measured: host.kind is cpu"), None)
    got = json.loads((tmp_path / "bench_serve.json").read_text())
    assert got["energy_joules"] is None and got["usd_per_mtok"] is None  # never zero


def test_report_html_has_the_column_and_the_section(reports: tuple[str, str, Path]) -> None:
    _, _, sweep = reports
    page = (sweep / "report.html").read_text()
    assert "energy, cost (prefill_10k, SIMULATED power model)" in page
    assert 'id="cost"' in page and "Energy and cost (SIMULATED" in page
    assert 'data-cost="baseline"' in page
