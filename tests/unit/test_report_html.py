"""report.html (self-contained: inline CSS, plots as data URIs, nothing fetched) and the terminal's
summary (the decision table and a few lines, not the whole report.md), from the case study's sweep."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from contracts.layout import PLOT_PARETO
from contracts.schema import GauntletConfig
from gates.judge import judge_sweep
from report import main, write_report
from report.build import Built
from report.html import HTML_FILE, png_data_uri, render_html
from report.markdown import render_terminal
from report.model import ReportModel
from report.slo import GoodputRow, Interval
from tests.unit.gates_fixtures import case_study, sweep_config, write_config

CANDIDATES = ("baseline", "tp4_dp2", "spec_probabilistic", "mega_moe", "eplb")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Built]:
    cfg: GauntletConfig = sweep_config()
    sweep = case_study(tmp_path_factory.mktemp("html") / "sweep")
    write_config(sweep, cfg)
    judge_sweep(sweep, cfg)
    return sweep, write_report(sweep, cfg)


def test_report_html_is_written_beside_report_md(built: tuple[Path, Built]) -> None:
    sweep, _ = built
    assert (sweep / "report.md").is_file()
    assert (sweep / HTML_FILE).stat().st_size > 10_000


def test_nothing_is_fetched_when_it_opens(built: tuple[Path, Built]) -> None:
    page = (built[0] / HTML_FILE).read_text(encoding="utf-8")
    sources = re.findall(r'\b(?:src|href)="([^"]*)"', page)
    assert sources, "the plots are embedded"
    assert all(s.startswith("data:image/png;base64,") for s in sources)
    assert "<link" not in page and "<script" not in page and "@import" not in page and "url(" not in page
    assert "<style>" in page


def test_the_decision_table_has_a_row_per_candidate(built: tuple[Path, Built]) -> None:
    page = (built[0] / HTML_FILE).read_text(encoding="utf-8")
    table = page.split('<table id="decision">', 1)[1].split("</table>", 1)[0]
    rows = dict(re.findall(r'data-candidate="([^"]+)".*?data-decision="([^"]+)"', table))
    assert set(rows) == set(CANDIDATES)
    assert rows["baseline"] == "baseline"
    assert rows["tp4_dp2"] == "reject"
    assert rows["mega_moe"] == "incompatible"
    assert "DeepGEMM MegaMoE requires SM100" in table


def test_every_plot_written_is_embedded(built: tuple[Path, Built]) -> None:
    sweep, _ = built
    page = (sweep / HTML_FILE).read_text(encoding="utf-8")
    for png in sorted(p.name for p in sweep.glob("*.png")):
        assert f'data-plot="{png}"' in page


def test_text_is_escaped(built: tuple[Path, Built]) -> None:
    report = ReportModel.model_validate_json((built[0] / "report.json").read_text())
    hostile = report.model_copy(update={"model": "<script>alert(1)</script>"})
    page = render_html(hostile, {PLOT_PARETO: b"\x89PNG"})
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert png_data_uri(b"\x89PNG") in page


def test_the_terminal_gets_the_decision_table_and_a_short_summary(built: tuple[Path, Built]) -> None:
    sweep, out = built
    terminal = out.terminal
    assert len(terminal.splitlines()) < len(out.markdown.splitlines()) / 2
    assert max(len(line) for line in terminal.splitlines() if not line.startswith("full report")) <= 120
    for name in CANDIDATES:
        assert re.search(rf"^\| {name} +\| ", terminal, re.MULTILINE)
    assert "retained: baseline" in terminal and "recovery validation" not in terminal.split("retained")[0]
    assert (
        "incompatible: RuntimeError: DeepGEMM MegaMoE requires" in terminal
    )  # the error, not the log prefix
    assert f"full report: {sweep / HTML_FILE}" in terminal
    assert "## Key figures" not in terminal


def test_the_terminal_gets_goodput_per_profile_measured_with_the_slo(built: tuple[Path, Built]) -> None:
    report = ReportModel.model_validate_json((built[0] / "report.json").read_text())
    rows = [
        GoodputRow(
            candidate=name,
            profile=profile,
            goodput_tps=Interval(mean=tps, low=tps * 0.9, high=tps * 1.1, n=3),
            goodput_rps=Interval(mean=1.0),
            attainment=Interval(mean=0.9),
            held=held,
            repeats=3,
        )
        for profile, name, tps, held in [
            ("decode_heavy", "baseline", 2217.0, 3),
            ("decode_heavy", "tp4_dp2", 0.0, 0),
            ("serial", "baseline", 139.0, 3),
        ]
    ]
    lines = render_terminal(report.model_copy(update={"goodput": rows})).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("goodput at the SLO"))
    assert lines[at] == ("goodput at the SLO (output tok/s, mean [95% interval] over repeats; repeats held):")
    assert lines[at + 1 : at + 3] == [
        "  decode_heavy: baseline 2,217 [1,995-2,439] (3/3), tp4_dp2 0 [0-0] (0/3)",
        "  serial: baseline 139 [125-153] (3/3)",
    ]
    assert not any(line.startswith("goodput") for line in render_terminal(report).splitlines())


def test_the_report_command_prints_the_summary(
    built: tuple[Path, Built], capsys: pytest.CaptureFixture[str]
) -> None:
    sweep, out = built
    assert main([str(sweep)]) == 0
    captured = capsys.readouterr()
    assert captured.out == out.terminal
    assert "report.html" in captured.err
