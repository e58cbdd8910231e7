"""report.html (self-contained: inline CSS, plots as data URIs, nothing fetched) and the terminal's
summary (the decision table and a few lines, not the whole report.md), from the case study's sweep."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from PIL import Image

from contracts.files import read_model
from contracts.layout import PLOT_PARETO, PLOT_SEARCH, SweepPaths
from contracts.schema import GauntletConfig
from contracts.trials import Confirmation, write_search
from contracts.verdicts import read_verdicts
from gates.judge import judge_sweep
from report import main, write_report
from report.build import Built
from report.html import HTML_FILE, png_data_uri, render_html
from report.markdown import render_terminal
from report.model import ReportModel
from report.search import search_model
from report.slo import GoodputRow, Interval
from tests.unit.gates_fixtures import case_study, sweep_config, write_config
from tests.unit.test_report_search import search_record, search_verdicts, searched

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


# ------------------------------------------------------------------------------------------- the search

HOSTILE_YAML = 'defaults: [baseline, _self_]\nname: tp4_dp2  # <script>alert("&")</script>\n'


@pytest.fixture(scope="module")
def with_search(built: tuple[Path, Built], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The case study's sweep with a search whose winner is tp4_dp2 (REJECT), its report rebuilt."""
    sweep = tmp_path_factory.mktemp("search") / "sweep"
    shutil.copytree(built[0], sweep)
    record = search_record()
    assert record.winner is not None
    winner = record.winner.model_copy(update={"name": "tp4_dp2"})
    write_search(sweep, record.model_copy(update={"winner": winner}))
    SweepPaths(sweep).winner.write_text(HOSTILE_YAML)
    write_report(sweep, sweep_config())
    return sweep


def test_a_sweep_without_a_search_has_no_search_anywhere(built: tuple[Path, Built]) -> None:
    sweep, out = built
    assert json.loads((sweep / "report.json").read_text())["search"] is None
    assert read_model(sweep / "report.json", ReportModel).search is None
    assert 'id="search"' not in (sweep / HTML_FILE).read_text(encoding="utf-8")
    assert "## Search" not in out.markdown


def test_report_json_carries_the_search_and_the_page_shows_it(with_search: Path) -> None:
    report = read_model(with_search / "report.json", ReportModel)
    assert report.search == search_model(with_search, read_verdicts(with_search))
    assert report.search is not None and report.search.winner is not None
    assert (report.search.winner.decision, report.search.winner.recommended) == ("reject", False)
    assert report.search.winner.yaml == HOSTILE_YAML
    assert PLOT_SEARCH in report.plots
    page = (with_search / HTML_FILE).read_text(encoding="utf-8")
    section = page.split('<h2 id="search">Search</h2>', 1)[1].split("<h2", 1)[0]
    trials = section.split('<table id="search-trials">', 1)[1].split("</table>", 1)[0]
    assert re.findall(r'data-trial="(\d+)" data-state="(\w+)"', trials) == [
        ("0", "infeasible"),
        ("1", "complete"),
        ("2", "pruned"),
    ]
    assert "<td>128</td><td>pruned</td><td>9</td><td>-</td>" in trials  # screen 9; not measured in full
    assert "<script>" not in section
    assert "# &lt;script&gt;alert(&quot;&amp;&quot;)&lt;/script&gt;" in section
    assert f'data-plot="{PLOT_SEARCH}"' in page
    md = (with_search / "report.md").read_text()
    assert "## Search" in md and "| confirmation (tp4_dp2 measured again, the gates) |" in md


#: The search's winner (tp4_dp2 is judged REJECT in the case study; s_t009 has no verdict) and
#: trials.json's confirmation (None: the sweep's end, before the search records it), then what
#: search.png's title says.
PLOT_TITLE_ROWS = [
    ("tp4_dp2", None, "winner tp4_dp2: REJECT"),
    ("tp4_dp2", Confirmation(decision="reject"), "winner tp4_dp2: REJECT"),
    ("s_t009", None, "winner s_t009: INCOMPLETE"),
]


@pytest.mark.parametrize(("winner", "recorded", "said"), PLOT_TITLE_ROWS)
def test_search_png_says_the_gates_word_on_the_winner_when_the_report_is_written(
    built: tuple[Path, Built], tmp_path: Path, winner: str, recorded: Confirmation | None, said: str
) -> None:
    sweep = tmp_path / "sweep"
    shutil.copytree(built[0], sweep)
    record = search_record()
    assert record.winner is not None
    update = {"winner": record.winner.model_copy(update={"name": winner}), "confirmation": recorded}
    write_search(sweep, record.model_copy(update=update))
    write_report(sweep, sweep_config())
    with Image.open(sweep / PLOT_SEARCH) as png:
        title = png.text["Title"]  # type: ignore[attr-defined]
    assert said in title and "not confirmed yet" not in title


@pytest.mark.parametrize(
    ("decision", "retained", "badge", "advice"),
    [
        ("keep", "s_t001", "d-keep", "<strong>Recommended</strong>: <code>search/winner.yaml</code>"),
        ("reject", "base", "d-reject", "Not recommended: only a KEEP is; the baseline stays."),
        ("no winner", "base", None, "No trial was measured fully: nothing was confirmed, the baseline"),
    ],
)
def test_the_search_section_of_the_page(
    built: tuple[Path, Built], tmp_path: Path, decision: str, *, retained: str, badge: str | None, advice: str
) -> None:
    report = read_model(built[0] / "report.json", ReportModel)
    if decision == "no winner":
        write_search(tmp_path, search_record(winner=False))
        section = search_model(tmp_path, search_verdicts(None))
    else:
        section = searched(tmp_path, decision, retained)
    page = render_html(report.model_copy(update={"search": section}), {})
    search = page.split('<h2 id="search">Search</h2>', 1)[1].split("<h2", 1)[0]
    assert f"<p>{advice}" in search
    assert "Search <strong>s</strong> (capacity, maximize): launched 3 of 8 configurations" in search
    assert len(re.findall(r"<tr><td data-trial=", search)) == 3
    if badge is None:
        assert 'id="search-winner"' not in search and "<pre" not in search
        return
    table = search.split('<table id="search-winner">', 1)[1].split("</table>", 1)[0]
    estimate, confirmation, baseline = table.split("<tbody>", 1)[1].split("</tr>")[:3]
    assert "search&#x27;s estimate (trial 1, one launch)" in estimate and "badge" not in estimate
    assert f'class="badge {badge}"' in confirmation
    assert ("recommended: s_t001" if decision == "keep" else "retained") in baseline
    assert "<pre" in search and "name: s_t001" in search
